"""Reductions: reduce (sum / mean / max / min / prod over any set of axes) and softmax.

Upstream's CPU kernels only reduce a contiguous run of axes and softmax the last axis;
rlx implements the general NumPy semantics: any axes, any softmax axis, negative axes
normalized (and stored non-negative by builders).
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops import rows
from rlx.ops.common import axis_of, require_float
from rlx.ops.facts import SPLIT_AXES
from rlx.ops.kinds import NUMPY
from rlx.ops.rows import reduce_axes, reduce_identity

__all__ = ["REDUCE_OPS", "reduce_axes", "reduce_identity"]

REDUCE_OPS = ("sum", "mean", "max", "min", "prod", "fmax", "fmin")
_SELECTING = ("max", "min", "fmax", "fmin")


def _reduce_canon(ins, attrs):
    try:
        return {**attrs, "axes": reduce_axes(attrs["axes"], len(ins[0].shape))}
    except ShapeError:
        return attrs


def _reduce_type(ins, attrs):
    t, op = ins[0], attrs["op"]
    if t.dtype.is_bool and op not in _SELECTING:
        raise ShapeError(f"{op!r} is not defined on bool (max/min act as any/all)")
    if op == "mean":
        require_float(t, "mean input")
    if t.dtype.is_complex and op in _SELECTING:
        raise ShapeError(f"{op!r} is not defined on c64")
    axes = reduce_axes(attrs["axes"], len(t.shape))
    if attrs["keep_dim"]:
        dims = [1 if i in axes else d for i, d in enumerate(t.shape)]
    else:
        dims = [d for i, d in enumerate(t.shape) if i not in axes]
    return TensorType(Shape(dims), t.dtype)


def _reduce_kernel(args, attrs, out):
    """sum / prod / mean: the reduce row on NumPy (never aliasing its operand); max / min / fmax / fmin:
    NumPy's ufunc.reduce with the identity as ``initial``, the override of rows.minmax_reduce."""
    x, op, keep = args[0], attrs["op"], attrs["keep_dim"]
    if op in ("sum", "prod", "mean"):
        y = rows.reduce(NUMPY, args, attrs, out)
        return np.array(y) if y is x else y
    axes = reduce_axes(attrs["axes"], x.ndim)
    ufunc = {"max": np.maximum, "min": np.minimum, "fmax": np.fmax, "fmin": np.fmin}[op]
    if all(x.shape[a] for a in axes):
        return ufunc.reduce(x, axis=axes, keepdims=keep)
    return ufunc.reduce(x, axis=axes, keepdims=keep, initial=reduce_identity(op, x.dtype))


def _reduce_vjp(ctx, node, ct):
    """sum: broadcast; mean: broadcast / N; max / min: split evenly between ties (torch's amax);
    prod: ct·y / x (not defined where x == 0). Rule contract: rlx.autodiff.rules."""
    g, x = ctx.graph, ctx.operand(node, 0)
    op, axes = node.attrs["op"], node.attrs["axes"]
    kshape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    ct_k = ctx.reshape(ct, kshape)
    if op == "sum":
        return [ctx.broadcast_like(ct_k, x)]
    if op == "mean":
        return [ctx.broadcast_like(ct_k / ctx.count(x, axes), x)]
    y_k = ctx.reshape(ctx.output(node), kshape)
    if op == "prod":
        return [ctx.broadcast_like(ct_k * y_k, x) / x]
    mask = g.cast(g.eq(x, y_k), to=x.dtype)
    count = g.maximum(g.reduce(mask, op="sum", axes=list(axes), keep_dim=True), g.scalar(1.0, x.dtype))
    return [mask * (ct_k / count)]


def _reduce_jvp(ctx, node, tangents):
    g, x, t = ctx.graph, ctx.operand(node, 0), tangents[0]
    op, axes, keep = node.attrs["op"], list(node.attrs["axes"]), node.attrs["keep_dim"]
    if op in ("sum", "mean"):
        return g.reduce(t, op=op, axes=axes, keep_dim=keep)
    y = ctx.output(node)
    if op == "prod":
        return y * g.reduce(t / x, op="sum", axes=axes, keep_dim=keep)
    y_k = ctx.reshape(y, [1 if i in axes else d for i, d in enumerate(x.shape)])
    mask = g.cast(g.eq(x, y_k), to=x.dtype)
    count = g.maximum(g.reduce(mask, op="sum", axes=axes, keep_dim=True), g.scalar(1.0, x.dtype))
    return g.reduce(t * mask / count, op="sum", axes=axes, keep_dim=keep)


def _reduce_batch(ctx, node, operands, batched):
    return ctx.graph.reduce(operands[0], op=node.attrs["op"], axes=[ctx.shift_axis(a) for a in node.attrs["axes"]],
                            keep_dim=node.attrs["keep_dim"])


defop(
    name="reduce", work="input", precision="reduction", family="reduction", arity=1, operands=("x",),
    attrs={
        "op": AttrSpec("str", choices=REDUCE_OPS),
        "axes": AttrSpec("ints", default=None, doc="axes to reduce; None = all (stored explicit, sorted, >= 0)"),
        "keep_dim": AttrSpec("bool", default=False),
    },
    methods={op: {"op": op} for op in ("sum", "mean", "max", "min", "prod")},  # g.fmax is the binary op
    canonicalize=_reduce_canon, infer=_reduce_type, kernel=_reduce_kernel, flags={"reduction", "complex_ad", SPLIT_AXES},
    vjp=_reduce_vjp, jvp=_reduce_jvp, batch=_reduce_batch,
    doc="Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, "
    "g.prod). Any set of axes (upstream's kernel: contiguous runs only); negative axes are normalized; "
    "duplicates and out-of-range axes are ShapeErrors (upstream ignores them); axes=None means every axis, "
    "[] is the identity. keep_dim keeps reduced axes as size 1. The dtype is kept: integer sum / prod wrap "
    "in the input type; mean needs a float (or c64) input; bool allows only max / min (any / all). "
    "max / min propagate NaN (np.max, torch.amax, the ONNX reference's ReduceMax); fmax / fmin ignore it "
    "(np.fmax.reduce, upstream's f32::max folds): NaN only when every element is NaN. An empty reduction "
    "gives -inf / +inf (int limits; False / True for bool).",
)


def _softmax_type(ins, attrs):
    require_float(ins[0], "softmax input")
    axis_of(attrs["axis"], ins[0])
    return ins[0]


def _softmax_canon(ins, attrs):
    try:
        return {**attrs, "axis": axis_of(attrs["axis"], ins[0])}
    except ShapeError:
        return attrs


def softmax(s: np.ndarray, out: np.ndarray | None = None, axis: int = -1) -> np.ndarray:
    """The softmax row along ``axis`` in NumPy, in place: the row's operations in its order (the same bits; the
    softmax op's and attention's arena kernels, tests/ops/test_rows.py), written into ``out`` (which may be ``s``
    itself) when given. ``s`` has rank >= 1 and a non-empty ``axis``."""
    e = np.subtract(s, s.max(axis=axis, keepdims=True), out=out)
    np.exp(e, out=e)
    return np.divide(e, e.sum(axis=axis, keepdims=True), out=e)


def _softmax_into(args, attrs, out_type, out):
    x = args[0]
    axis = int(attrs["axis"]) % max(x.ndim, 1)
    if x.ndim == 0 or x.shape[axis] == 0:  # the row's edge cases
        np.copyto(out, rows.softmax_of(NUMPY, x, axis))
        return out
    return softmax(x, out=out, axis=axis)


def _softmax_linearized(ctx, node, v):
    """y·(v − sum(y·v, axis, keep)): the VJP of ct = v and the JVP of t = v (the Jacobian is
    symmetric). Emits mul / sub / reduce and the recomputed softmax, so it is differentiable
    again. Rule contract: rlx.autodiff.rules."""
    y = ctx.output(node)
    return y * (v - ctx.graph.reduce(y * v, op="sum", axes=[node.attrs["axis"]], keep_dim=True))


defop(
    name="softmax", work="input", precision="reduction", family="reduction", arity=1, operands=("x",),
    attrs={"axis": AttrSpec("int", default=-1)},
    canonicalize=_softmax_canon, infer=_softmax_type, kernel=rows.bind(rows.softmax, NUMPY), kernel_into=_softmax_into,
    flags={"reduction"},
    vjp=lambda ctx, node, ct: [_softmax_linearized(ctx, node, ct)],
    jvp=lambda ctx, node, tangents: _softmax_linearized(ctx, node, tangents[0]),
    batch=lambda ctx, node, operands, batched: ctx.graph.softmax(operands[0], axis=ctx.shift_axis(node.attrs["axis"])),
    doc="Numerically stable softmax exp(x - max) / sum along `axis` (default -1; any axis, upstream's kernel "
    "is right only for the last one; stored non-negative). Needs a float input. A row holding NaN or +inf, "
    "or only -inf, is all NaN (torch, JAX and ONNX's Softmax in onnxruntime agree).",
)


# new composite ops go here
