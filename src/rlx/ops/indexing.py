"""Index-producing and index-consuming ops: arg_reduce, cumulative (running sum / product; upstream's
cumsum and cumsum_backward, docs/semantics.md#backward-ops), gather_elements, scatter_elements. top_k lives in :mod:`rlx.ops.numerics`.

Indices are integer tensors (i64 results). Every axis attribute accepts negative values and
is stored non-negative. Semantics follow NumPy (``np.argmax``, ``np.take_along_axis``,
``np.cumsum``); the ONNX operators ArgMax / ArgMin, TopK, CumSum, GatherElements and
ScatterElements map onto them one to one.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops import rows
from rlx.ops.common import along_axis, axis_of
from rlx.ops.kinds import NUMPY


def _canon_axis(ins, attrs):
    try:
        return {**attrs, "axis": axis_of(attrs["axis"], ins[0])}
    except ShapeError:
        return attrs


def _shifted(ctx, node, operands, batched, **extra):
    """Batch rule for ops that act along one axis: batch every operand, shift the axis."""
    ins = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    attrs = {**dict(node.attrs), "axis": ctx.shift_axis(node.attrs["axis"]), **extra}
    return ctx.graph.append(node.op, ins, attrs)


# -------------------------------------------------------------------------- arg_reduce
def _arg_type(ins, attrs):
    t = ins[0]
    if t.dtype.is_complex:
        raise ShapeError(f"arg_reduce is not defined on {t.dtype}")
    axis = along_axis(t, attrs, "arg_reduce")
    if t.shape[axis] == 0:
        raise ShapeError(f"arg_reduce over the empty axis {axis}")
    dims = [1 if i == axis else d for i, d in enumerate(t.shape)] if attrs["keep_dim"] else \
        [d for i, d in enumerate(t.shape) if i != axis]
    return TensorType(Shape(dims), DType.I64)


def _arg_kernel(args, attrs, out):
    x, axis = args[0], attrs["axis"] % args[0].ndim
    fn = np.argmax if attrs["op"] == "argmax" else np.argmin
    if attrs["select_last"]:
        n = x.shape[axis]
        r = n - 1 - fn(np.flip(x, axis), axis=axis)
    else:
        r = fn(x, axis=axis)
    r = r.astype(np.int64)
    return np.expand_dims(r, axis) if attrs["keep_dim"] else r


defop(
    name="arg_reduce", work="input", precision="data_movement", family="indexing", arity=1, operands=("x",),
    attrs={"op": AttrSpec("str", choices=("argmax", "argmin")), "axis": AttrSpec("int", default=0),
           "keep_dim": AttrSpec("bool", default=True), "select_last": AttrSpec("bool", default=False)},
    canonicalize=_canon_axis, infer=_arg_type, kernel=_arg_kernel, flags={"no_grad", "reduction"},
    batch=_shifted,
    doc="Index (i64) of the largest (argmax) or smallest (argmin) element along `axis` (np.argmax): the first "
    "one on ties, or the last with select_last. NaN counts as the extreme (NumPy). keep_dim keeps the axis "
    "as size 1 (ONNX default). Not differentiable.",
)


# -------------------------------------------------------------------------- cumulative
# The one running-sum / running-product op. Upstream's ``cumsum(axis, exclusive)`` (docs/semantics.md#numerics) is
# ``cumulative(op="sum")`` (builder ``g.cumsum``) and upstream's ``cumsum_backward`` is the same op with
# ``reverse`` flipped (its own transpose), so neither is a separate op. The name follows the
# op-attribute families (reduce, arg_reduce): a "cumsum" node with op="prod" would misread.
def _cum_type(ins, attrs):
    t = ins[0]
    if t.dtype.is_bool:
        raise ShapeError(f"cumulative is not defined on {t.dtype}")
    along_axis(t, attrs, "cumulative")
    return t


def cumulative_reference(x: np.ndarray, axis: int, op: str = "sum", exclusive: bool = False, reverse: bool = False) -> np.ndarray:
    """np.cumsum / np.cumprod along ``axis`` in x's dtype; exclusive shifts in the identity; reverse from the end."""
    axis %= x.ndim
    if reverse:
        x = np.flip(x, axis)
    fn = np.cumsum if op == "sum" else np.cumprod
    r = fn(x, axis=axis, dtype=x.dtype)
    if exclusive:
        ident = np.zeros_like if op == "sum" else np.ones_like
        first = ident(np.take(r, [0], axis=axis)) if x.shape[axis] else np.take(r, [], axis=axis)
        r = np.concatenate([first, np.take(r, np.arange(max(x.shape[axis] - 1, 0)), axis=axis)], axis=axis)
    return np.flip(r, axis) if reverse else r


def _cum_kernel(args, attrs, out):
    return cumulative_reference(args[0], attrs["axis"], attrs["op"], attrs["exclusive"], attrs["reverse"])


def _cum_vjp(ctx, node, ct):
    # the transpose of a prefix sum is the prefix sum taken the other way (docs/semantics.md#backward-ops cumsum_backward)
    if node.attrs["op"] != "sum":
        raise AutodiffError("cumulative 'prod' has no gradient rule (not defined at zeros)")
    return [ctx.graph.append("cumulative", [ct], {**dict(node.attrs), "reverse": not node.attrs["reverse"]})]


def _cum_jvp(ctx, node, tangents):
    if node.attrs["op"] != "sum":
        raise AutodiffError("cumulative 'prod' has no tangent rule")
    return ctx.graph.append("cumulative", [tangents[0]], dict(node.attrs))


defop(
    name="cumulative", work="input", precision="reduction", family="indexing", arity=1, operands=("x",),
    attrs={"op": AttrSpec("str", default="sum", choices=("sum", "prod")), "axis": AttrSpec("int", default=-1),
           "exclusive": AttrSpec("bool", default=False), "reverse": AttrSpec("bool", default=False)},
    methods={"cumsum": {"op": "sum"}, "cumprod": {"op": "prod"}},
    canonicalize=_canon_axis, infer=_cum_type, kernel=_cum_kernel,
    vjp=_cum_vjp, jvp=_cum_jvp, batch=_shifted,
    doc="Running sum or product along `axis` (any axis, default the last): np.cumsum / np.cumprod in the input "
    "dtype (integers wrap; c64 allowed; bool not). exclusive shifts by one (out[0] is 0 or 1, out[i] combines "
    "x[j] for j < i); reverse accumulates from the end (ONNX CumSum / CumProd). upstream's cumsum "
    "(docs/semantics.md#backward-ops) is op='sum' "
    "(builders g.cumsum / g.cumprod preset op); its cumsum_backward is op='sum' with reverse flipped. Linear for "
    "'sum': the gradient is the same op with reverse flipped, the tangent the same op; 'prod' has no rule.",
)


# --------------------------------------------------------------------- gather_elements
def _elements_check(data: TensorType, idx: TensorType, attrs, what: str) -> int:
    if not idx.dtype.is_int:
        raise ShapeError(f"indices must be an integer tensor, got {idx.dtype}")
    if len(idx.shape) != len(data.shape) or len(data.shape) == 0:
        raise ShapeError(f"indices {idx.shape!r} must have the rank of {what} {data.shape!r} (>= 1)")
    return axis_of(attrs["axis"], data)


def _gather_elements_type(ins, attrs):
    data, idx = ins
    axis = _elements_check(data, idx, attrs, "data")
    for i, (a, b) in enumerate(zip(data.shape, idx.shape)):
        if i != axis and isinstance(a, int) and isinstance(b, int) and b > a:
            raise ShapeError(f"indices dim {b} exceeds data dim {a} on axis {i}")
    return TensorType(idx.shape, data.dtype)


def _checked_index(idx: np.ndarray, n: int, op: str) -> np.ndarray:
    return rows.checked_index(NUMPY, idx.astype(np.int64), n, op)


def _gather_elements_kernel(args, attrs, out):
    data, idx = args
    axis = attrs["axis"] % data.ndim
    idx = _checked_index(idx, data.shape[axis], "gather_elements")
    sub = tuple(slice(0, s) if i != axis else slice(None) for i, s in enumerate(idx.shape))
    return np.take_along_axis(data[sub], idx, axis=axis)


def _gather_elements_vjp(ctx, node, ct):
    data, idx = ctx.operands(node)
    zeros = ctx.zeros_like(data)
    return [ctx.graph.scatter_elements(zeros, idx, ct, axis=node.attrs["axis"], reduction="add"), None]


defop(
    name="gather_elements", flags={"eager_unsafe"}, precision="data_movement", family="indexing", arity=2, operands=("data", "indices"),
    work="none",
    attrs={"axis": AttrSpec("int", default=0)},
    canonicalize=_canon_axis, infer=_gather_elements_type, kernel=_gather_elements_kernel,
    vjp=_gather_elements_vjp,
    jvp=lambda ctx, node, tangents: ctx.graph.gather_elements(tangents[0], ctx.operand(node, 1), axis=node.attrs["axis"]),
    batch=_shifted,
    doc="np.take_along_axis(data, indices, axis) (ONNX GatherElements): out[i][j][k] = data[idx[i][j][k]][j][k] "
    "for axis 0. indices has data's rank; off the axis its dims may be smaller than data's (a leading "
    "sub-block is read). Negative indices wrap; out-of-range ones raise RlxError at run time. "
    "Gradient: scatter_elements(zeros, indices, dy, reduction='add').",
)


# -------------------------------------------------------------------- scatter_elements
def _scatter_elements_type(ins, attrs):
    data, idx, upd = ins
    _elements_check(data, idx, attrs, "data")
    if tuple(upd.shape) != tuple(idx.shape):
        raise ShapeError(f"updates {upd.shape!r} must have the shape of indices {idx.shape!r}")
    if upd.dtype != data.dtype:
        raise ShapeError(f"updates dtype {upd.dtype} differs from data dtype {data.dtype}")
    return data


def _scatter_elements_kernel(args, attrs, out):
    data, idx, upd = args
    axis = attrs["axis"] % data.ndim
    idx = _checked_index(idx, data.shape[axis], "scatter_elements")
    result = data.copy()
    grid = np.indices(idx.shape)
    where = tuple(idx if i == axis else grid[i] for i in range(data.ndim))
    red = attrs["reduction"]
    if red == "none":
        result[where] = upd
    elif red == "add":
        np.add.at(result, where, upd)
    elif red == "mul":
        np.multiply.at(result, where, upd)
    elif red == "max":
        np.maximum.at(result, where, upd)
    else:
        np.minimum.at(result, where, upd)
    return result


def _scatter_elements_vjp(ctx, node, ct):
    red = node.attrs["reduction"]
    if red not in ("none", "add"):
        raise AutodiffError(f"scatter_elements reduction {red!r} has no gradient rule")
    _data, idx, upd = ctx.operands(node)
    g, axis = ctx.graph, node.attrs["axis"]
    d_upd = g.gather_elements(ct, idx, axis=axis) if ctx.wants(node, 2) else None
    d_data = ct if red == "add" else g.scatter_elements(ct, idx, ctx.zeros_like(upd), axis=axis, reduction="none")
    return [d_data, None, d_upd]


def _scatter_elements_jvp(ctx, node, tangents):
    red = node.attrs["reduction"]
    if red not in ("none", "add"):
        raise AutodiffError(f"scatter_elements reduction {red!r} has no tangent rule")
    data, idx, upd = ctx.operands(node)
    td = tangents[0] if tangents[0] is not None else ctx.zeros_like(data)
    tu = tangents[2] if tangents[2] is not None else ctx.zeros_like(upd)
    return ctx.graph.append("scatter_elements", [td, idx, tu], dict(node.attrs))


defop(
    name="scatter_elements", work="none", flags={"eager_unsafe"}, precision="data_movement", family="indexing", arity=3,
    operands=("data", "indices", "updates"),
    attrs={"axis": AttrSpec("int", default=0),
           "reduction": AttrSpec("str", default="none", choices=("none", "add", "mul", "max", "min"))},
    canonicalize=_canon_axis, infer=_scatter_elements_type, kernel=_scatter_elements_kernel,
    vjp=_scatter_elements_vjp, jvp=_scatter_elements_jvp, batch=_shifted,
    doc="A copy of data with updates written at the positions indices names along `axis` (ONNX "
    "ScatterElements): out[idx[i][j]][j] = upd[i][j] for axis 0. reduction none overwrites (with duplicate "
    "indices the last update wins, as NumPy assignment), add / mul / max / min combine with the existing "
    "value (np.add.at …). Negative indices wrap. Gradients for none and add only.",
)
