"""torch converters for indexing and functionalised in-place writes: ``aten.index`` (any number of
index tensors, NumPy layout) and ``index_put`` onto :mod:`rlx.ops.advanced_index`; ``gather``;
``take``; ``slice_scatter`` / ``select_scatter`` (what ``x[a:b] = y`` / ``x[i] = y`` become) and ``copy``.

Registered into :data:`rlx.frontends.torch.context._CONVERTERS` when that module is imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.frontends.torch.context import _axis, _conv, _Ctx, _reshape
from rlx.frontends.torch.convert_shape import _position, _slice_bounds
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ops import index_writes


def _key(cx: _Ctx, indices: list[Any]) -> tuple[str, list[Value]]:
    """(pattern, index tensors) of an aten index list (None = full slice); bool masks are refused."""
    pattern, tensors = [], []
    for t in indices:
        if t is None:
            pattern.append(":")
            continue
        if not isinstance(t, Value) or not t.dtype.is_int:
            what = "a boolean mask" if isinstance(t, Value) and t.dtype.is_bool else repr(t)
            raise cx.fail(f"indexing with {what} is not supported (its result size depends on the data); use integer indices")
        pattern.append("i")
        tensors.append(t)
    return "".join(pattern).rstrip(":"), tensors


@_conv("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(cx, node, x, indices):
    """x[i, j, ...] with NumPy advanced indexing (one op, however many index tensors)."""
    pattern, tensors = _key(cx, list(indices))
    return cx.g.advanced_index([x, *tensors], pattern=pattern)


@_conv("aten.index_put.default", "aten._unsafe_index_put.default")
def _index_put(cx, node, x, indices, values, accumulate=False):
    values = cx.cast(values, x.dtype) if isinstance(values, Value) else cx.scalar(values, x.dtype)
    given = [t for t in indices if t is not None]
    if len(given) == 1 and isinstance(given[0], Value) and given[0].dtype.is_bool:  # x[..., mask] = v
        at = next(i for i, t in enumerate(indices) if t is not None)
        return index_writes.masked_put(cx.g, x, given[0], values, bool(accumulate), at)
    pattern, tensors = _key(cx, list(indices))
    return cx.g.advanced_index_put([x, values, *tensors], pattern=pattern, accumulate=bool(accumulate))


@_conv("aten.gather.default")
def _gather(cx, node, x, dim, index, sparse_grad=False):
    """torch.gather is np.take_along_axis (index may be smaller than x off the axis); an empty index gives an
    empty result of its shape (torch accepts any rank then), a 0-d x reads its one element."""
    if any(d == 0 for d in index.shape):
        return cx.g.constant(np.zeros(tuple(index.shape), x.dtype.numpy))
    if len(x.shape) == 0:
        flat = cx.g.gather_elements(_reshape(cx, x, [1]), _reshape(cx, index, [-1]), axis=0)
        return _reshape(cx, flat, list(index.shape))
    return cx.g.gather_elements(x, index, axis=_axis(dim, len(x.shape)))


@_conv("aten.take.default")
def _take(cx, node, x, index):
    """torch.take: x read as flat at index (negative indices wrap); the result has index's shape."""
    flat = _reshape(cx, x, [-1]) if len(x.shape) != 1 else x
    return cx.g.gather(flat, cx.cast(index, DType.I64), axis=0)


def _splice(cx: _Ctx, x: Value, src: Value, axis: int, lo: int, hi: int) -> Value:
    """x with [lo, hi) along ``axis`` replaced by ``src``: concat of the kept parts and src."""
    n = cx.static(x.shape[axis], "scattered axis size")
    parts = ([cx.g.narrow(x, axis, 0, lo)] if lo > 0 else []) + [src] + ([cx.g.narrow(x, axis, hi, n - hi)] if hi < n else [])
    return parts[0] if len(parts) == 1 else cx.g.concat(parts, axis=axis)


@_conv("aten.slice_scatter.default")
def _slice_scatter(cx, node, x, src, dim=0, start=None, end=None, step=1):
    """x[..., start:end:step, ...] = src, functionally: a concat for step 1, an indexed write otherwise."""
    axis = _axis(dim, len(x.shape))
    src = cx.cast(src, x.dtype)
    lo, hi = _slice_bounds(cx, x.shape[axis], start, end)
    if hi == -1:  # the full symbolic axis
        return src
    step = cx.static(step, "slice_scatter step")
    if step == 1:
        return _splice(cx, x, src, axis, lo, hi)
    idx = cx.g.constant(np.arange(lo, hi, step, dtype=np.int64))
    return cx.g.advanced_index_put([x, src, idx], pattern=":" * axis + "i")


@_conv("aten.select_scatter.default")
def _select_scatter(cx, node, x, src, dim, index):
    """x[..., index, ...] = src (src lacks the axis)."""
    axis, index = _position(cx, x, dim, index, "select_scatter index")
    shape = list(x.shape)
    shape[axis] = 1
    return _splice(cx, x, _reshape(cx, cx.cast(src, x.dtype), shape), axis, index, index + 1)


@_conv("aten.copy.default")
def _copy(cx, node, x, src, non_blocking=False):
    """x.copy_(src) functionalised: src broadcast to x's shape, in x's dtype."""
    src = cx.cast(src, x.dtype) if isinstance(src, Value) else cx.scalar(src, x.dtype)
    if tuple(src.shape) == tuple(x.shape):
        return src
    return cx.g.where(cx.scalar(True, DType.BOOL), src, x)
