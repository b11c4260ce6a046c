"""torch converters: reductions, unary math, scans, arg / top-k selection, variance, softmax."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.frontends.torch.context import (
    Converter,
    _axis,
    _conv,
    _Ctx,
    _reshape,
    _target_name,
)
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


# -------------------------------------------------------------------------- reductions
def _reduce(op: str) -> Converter:
    def convert(cx, node, x, dims=None, keepdim=False, **kwargs):
        rank = len(x.shape)
        if rank == 0:  # torch reduces a 0-d tensor over dim 0 / -1 to itself
            return cx.cast(x, cx.out_dtype())
        axes = list(range(rank)) if dims is None or (isinstance(dims, Sequence) and len(dims) == 0) else dims
        axes = [axes] if isinstance(axes, int) else axes
        dtype = cx.out_dtype()
        x = cx.cast(x, dtype)
        return cx.g.reduce(x, op=op, axes=sorted({_axis(a, rank) for a in axes}), keep_dim=bool(keepdim))

    return convert


_conv("aten.sum.dim_IntList", "aten.sum.default")(_reduce("sum"))
_conv("aten.mean.dim", "aten.mean.default")(_reduce("mean"))
_conv("aten.amax.default")(_reduce("max"))
_conv("aten.amin.default")(_reduce("min"))
_conv("aten.prod.dim_int", "aten.prod.default")(_reduce("prod"))


@_conv("aten.max.default", "aten.min.default")
def _max_all(cx, node, x):
    op = "max" if _target_name(node.target).startswith("aten.max") else "min"
    return cx.g.reduce(x, op=op, axes=list(range(len(x.shape))), keep_dim=False)


@_conv("aten.max.dim", "aten.min.dim")
def _max_dim(cx, node, x, dim, keepdim=False):
    """(values, indices): torch's index is the first extreme, NaN counting as the extreme (as arg_reduce)."""
    op = "max" if _target_name(node.target).startswith("aten.max") else "min"
    if len(x.shape) == 0:
        return x, cx.g.constant(np.asarray(0, np.int64))
    axis = _axis(dim, len(x.shape))
    values = cx.g.reduce(x, op=op, axes=[axis], keep_dim=bool(keepdim))
    index = cx.g.arg_reduce(x if x.dtype is not DType.BOOL else cx.cast(x, DType.U8), op=f"arg{op}", axis=axis,
                            keep_dim=bool(keepdim))
    return values, index


# ------------------------------------------------------- unary math, scans, selection
def _unary_math(kind: str) -> Converter:
    def convert(cx, node, x):
        return cx.g.unary_math(cx.cast(x, cx.out_dtype()), kind=kind)  # erf of an int promotes first (torch)

    return convert




@_conv("aten.cumsum.default", "aten.cumprod.default")
def _cumulative(cx, node, x, dim, dtype=None):
    """torch.cumsum / cumprod: the one scan op, in torch's result dtype (ints accumulate in i64)."""
    op = "sum" if _target_name(node.target) == "aten.cumsum.default" else "prod"
    if len(x.shape) == 0:  # torch scans a scalar as itself
        return cx.cast(x, cx.out_dtype())
    return cx.g.cumulative(cx.cast(x, cx.out_dtype()), op=op, axis=_axis(dim, len(x.shape)))


@_conv("aten.argmax.default", "aten.argmin.default")
def _argmax(cx, node, x, dim=None, keepdim=False):
    """First index of the extreme (torch and np.argmax agree, NaN included); dim=None: over the flattened x."""
    op = "argmax" if _target_name(node.target) == "aten.argmax.default" else "argmin"
    rank = len(x.shape)
    if dim is None or rank == 0:
        r = cx.g.arg_reduce(_reshape(cx, x, [-1]) if rank != 1 else x, op=op, axis=0, keep_dim=False)
        return _reshape(cx, r, cx.out_shape())
    return cx.g.arg_reduce(x, op=op, axis=_axis(dim, rank), keep_dim=bool(keepdim))


@_conv("aten.topk.default")
def _topk(cx, node, x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) as one two-result top_k node. rlx always sorts (ties: lower index first),
    which is one valid order for sorted=False."""
    if len(x.shape) == 0:
        raise cx.fail("topk of a 0-d tensor is not supported")
    return cx.g.top_k(x, k=cx.static(k, "topk k"), axis=_axis(dim, len(x.shape)), largest=bool(largest), output="both")


@_conv("aten.var.correction", "aten.var.dim", "aten.var_mean.correction")
def _var(cx, node, x, dims=None, *args, correction=None, keepdim=False, **kwargs):
    name = _target_name(node.target)
    unbiased = True
    if name == "aten.var.dim" and args:
        unbiased, keepdim = bool(args[0]), bool(args[1]) if len(args) > 1 else keepdim
    rank = len(x.shape)
    axes = list(range(rank)) if not dims else sorted({_axis(a, rank) for a in ([dims] if isinstance(dims, int) else dims)})
    n = math.prod(cx.static(x.shape[a], "var axis size") for a in axes)
    corr = (1 if unbiased else 0) if correction is None else correction
    mean = cx.g.reduce(x, op="mean", axes=axes, keep_dim=True)
    d = x - mean
    var = cx.g.reduce(d * d, op="sum", axes=axes, keep_dim=bool(keepdim)) * cx.scalar(1.0 / max(n - corr, 0), x.dtype)
    if name == "aten.var_mean.correction":
        return (var, mean if keepdim else _reshape(cx, mean, [x.shape[i] for i in range(rank) if i not in axes]))
    return var


@_conv("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default")
def _softmax(cx, node, x, dim, *args, **kwargs):
    """softmax; the _safe_ variant (attention masks) gives 0, not NaN, on a row that is -inf throughout."""
    if len(x.shape) == 0:
        return cx.g.exp(cx.cast(x, cx.out_dtype()) * cx.scalar(0, cx.out_dtype()))  # one element: 1 (NaN stays NaN)
    axis = _axis(dim, len(x.shape))
    x = cx.cast(x, cx.out_dtype())
    y = cx.g.softmax(x, axis=axis)
    if _target_name(node.target) != "aten._safe_softmax.default":
        return y
    masked = cx.g.eq(cx.g.reduce(x, op="max", axes=[axis], keep_dim=True), cx.scalar(-np.inf, x.dtype))
    return cx.g.where(masked, cx.scalar(0, x.dtype), y)


@_conv("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(cx, node, x, dim, *args, **kwargs):
    x = cx.cast(x, cx.out_dtype())
    axis = _axis(dim, len(x.shape))
    shifted = x - cx.g.reduce(x, op="max", axes=[axis], keep_dim=True)
    return shifted - cx.g.log(cx.g.reduce(cx.g.exp(shifted), op="sum", axes=[axis], keep_dim=True))


# ------------------------------------------------------------------------------ distances
def _p_norm_last(cx: _Ctx, diff: Value, p: float) -> Value:
    from rlx.frontends.torch.convert_pad import _norm  # one p-norm (0, 1, 2, inf special cases)

    return _norm(cx, diff, p, [len(diff.shape) - 1], False)


def _euclid_mm(cx: _Ctx, x1: Value, x2: Value) -> Value:
    """torch's matrix-product Euclidean distance: [-2·x1, |x1|², 1] @ [x2, 1, |x2|²]ᵀ, clamped at 0, square root
    (what ``cdist`` computes for p=2 in its ``use_mm`` modes; it differs from the direct form near 0)."""
    g = cx.g
    n1, n2 = (g.reduce(x * x, op="sum", axes=[len(x.shape) - 1], keep_dim=True) for x in (x1, x2))
    one1, one2 = (g.expand(cx.scalar(1, n.dtype), target_shape=list(n.shape)) for n in (n1, n2))
    a = g.concat([x1 * cx.scalar(-2, x1.dtype), n1, one1], axis=len(x1.shape) - 1)
    b = g.concat([x2, one2, n2], axis=len(x2.shape) - 1)
    rank = len(b.shape)
    prod = g.matmul(a, g.transpose(b, perm=[*range(rank - 2), rank - 1, rank - 2]))
    return g.sqrt(g.binary(prod, cx.scalar(0, prod.dtype), op="max"))


@_conv("aten._cdist_forward.default")
def _cdist(cx, node, x1, x2, p, compute_mode=None):
    """torch.cdist: the p-norm of every row difference; for p=2 the matrix-product form where torch uses it
    (compute_mode 1, or the default mode with more than 25 rows on either side)."""
    p = float(p)
    rows = [cx.static(x.shape[-2], "cdist rows") for x in (x1, x2)]
    if p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and max(rows) > 25)):
        return _euclid_mm(cx, x1, x2)
    a = _reshape(cx, x1, [*x1.shape[:-1], 1, x1.shape[-1]])
    b = _reshape(cx, x2, [*x2.shape[:-2], 1, *x2.shape[-2:]])
    return _p_norm_last(cx, a - b, p)


@_conv("aten._pdist_forward.default")
def _pdist(cx, node, x, p=2.0):
    """torch.pdist: the p-norm of x[i] - x[j] for every row pair i < j, in row-major pair order."""
    n = cx.static(x.shape[0], "pdist rows")
    i, j = np.triu_indices(n, 1)
    rows = [cx.g.gather(x, cx.g.constant(idx.astype(np.int64)), axis=0) for idx in (i, j)]
    return _p_norm_last(cx, rows[0] - rows[1], float(p))
