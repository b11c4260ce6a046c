"""torch converters: views, permutes, expands, slices, splits, concatenation, embedding lookups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.frontends.torch.context import (
    _axis,
    _conv,
    _Ctx,
    _reshape,
)
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


# ------------------------------------------------------------------------------- shape
@_conv("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.flatten.using_ints",
       "aten.unflatten.int", "aten.view_copy.default", "aten.squeeze.dim", "aten.squeeze.dims",
       "aten.squeeze.default", "aten.unsqueeze.default", "aten.view_as.default", "aten.reshape_as.default",
       "aten._reshape_alias.default", "aten.unsqueeze_copy.default", "aten.squeeze_copy.dim")
def _view(cx, node, x, *args, **kwargs):
    return _reshape(cx, x, cx.out_shape())


@_conv("aten.permute.default", "aten.permute_copy.default")
def _permute(cx, node, x, dims):
    rank = len(x.shape)
    return cx.g.transpose(x, perm=[_axis(d, rank) for d in dims])


@_conv("aten.transpose.int", "aten.swapaxes.default", "aten.transpose_copy.int")
def _transpose(cx, node, x, d0, d1):
    rank = len(x.shape)
    perm = list(range(rank))
    a, b = _axis(d0, rank), _axis(d1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return x if a == b else cx.g.transpose(x, perm=perm)


@_conv("aten.t.default", "aten.numpy_T.default")
def _t(cx, node, x):
    rank = len(x.shape)
    return x if rank < 2 else cx.g.transpose(x, perm=list(range(rank))[::-1])


@_conv("aten.expand.default", "aten.expand_copy.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(cx, node, x, *args, **kwargs):
    out = cx.out_shape()
    if tuple(x.shape) == out:
        return x
    lead = len(out) - len(x.shape)
    target = []
    for i, d in enumerate(out):
        target.append(-1 if isinstance(d, str) and i >= lead and x.shape[i - lead] == d else d)
    return cx.g.expand(x, target_shape=target)


@_conv("aten.repeat.default")
def _repeat(cx, node, x, repeats):
    reps = [cx.static(r, "repeat count") for r in repeats]
    shape = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    if not all(isinstance(d, int) for d in shape):
        raise cx.fail("repeat needs a static input shape")
    y = _reshape(cx, x, [v for d in shape for v in (1, d)])
    y = cx.g.expand(y, target_shape=[v for r, d in zip(reps, shape) for v in (r, d)])
    return _reshape(cx, y, cx.out_shape())


def _slice_bounds(cx: _Ctx, size: Any, start: Any, end: Any) -> tuple[int, int]:
    if isinstance(size, str):
        if (start in (None, 0)) and (end is None or (isinstance(end, int) and end >= 2**62)):
            return 0, -1  # full symbolic axis
        raise cx.fail(f"slicing a symbolic axis ({size!r}) is not supported")
    start = 0 if start is None else cx.static(start, "slice start")
    end = size if end is None else cx.static(end, "slice end")
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return start, end


def _symbolic_slice(cx: _Ctx, x: Value, axis: int, start: Any, end: Any, step: Any) -> Value:
    """A unit-step slice where the axis or a bound is symbolic: the length is the size torch
    recorded; the start is the given one (int >= 0 or symbolic) or, for a slice that runs to
    the end from a negative start, size - length."""
    if cx.static(step, "slice step") != 1:
        raise cx.fail("a strided slice of a symbolic axis is not supported")
    size, length = x.shape[axis], cx.out_shape()[axis]
    to_end = end is None or (isinstance(end, int) and end >= 2**62)
    if start is None or isinstance(start, str) or start >= 0:
        lo = start or 0
    elif to_end:
        lo = size - length
    else:
        raise cx.fail(f"slice [{start}:{end}] of a symbolic axis ({size}) is not supported")
    if lo == 0 and length == size:
        return x
    return cx.g.narrow(x, axis, lo, length)


@_conv("aten.slice.Tensor", "aten.slice_copy.Tensor")
def _slice(cx, node, x, dim=0, start=None, end=None, step=1):
    axis = _axis(dim, len(x.shape))
    if any(isinstance(v, str) for v in (x.shape[axis], start, end)):
        return _symbolic_slice(cx, x, axis, start, end, step)
    lo, hi = _slice_bounds(cx, x.shape[axis], start, end)
    if hi == -1:
        return x
    step = cx.static(step, "slice step")
    if step == 1:
        if lo == 0 and hi == x.shape[axis]:
            return x
        return cx.g.narrow(x, axis, lo, hi - lo)
    idx = np.arange(lo, hi, step, dtype=np.int64)
    return cx.g.gather(x, cx.g.constant(idx), axis=axis)


@_conv("aten.flip.default")
def _flip(cx, node, x, dims):
    for d in dims:
        axis = _axis(d, len(x.shape))
        n = cx.static(x.shape[axis], "flipped axis size")
        x = cx.g.gather(x, cx.g.constant(np.arange(n - 1, -1, -1, dtype=np.int64)), axis=axis)
    return x


def _position(cx: _Ctx, x: Value, dim: int, index: Any, what: str) -> tuple[int, int]:
    """(axis, static non-negative position) of a torch (dim, index) pair; negative indices count from the end."""
    axis = _axis(dim, len(x.shape))
    index = cx.static(index, what)
    if index < 0:
        index += cx.static(x.shape[axis], "axis size")
    return axis, index


@_conv("aten.narrow.default")
def _narrow(cx, node, x, dim, start, length):
    axis, start = _position(cx, x, dim, start, "narrow start")
    return cx.g.narrow(x, axis, start, cx.static(length, "narrow length"))


@_conv("aten.select.int", "aten.select_copy.int")
def _select(cx, node, x, dim, index):
    axis, index = _position(cx, x, dim, index, "select index")
    return _reshape(cx, cx.g.narrow(x, axis, index, 1), cx.out_shape())


def _split_parts(cx: _Ctx, x: Value, sizes: Sequence[int], dim: int) -> list[Value]:
    axis = _axis(dim, len(x.shape))
    parts, start = [], 0
    for size in sizes:
        parts.append(cx.g.narrow(x, axis, start, size))
        start += size
    return parts


@_conv("aten.split.Tensor", "aten.split_with_sizes.default", "aten.split_copy.Tensor", "aten.split_with_sizes_copy.default",
       "aten.chunk.default", "aten.tensor_split.sections", "aten.unsafe_split.Tensor")
def _split(cx, node, x, size_or_sizes, dim=0):
    sizes = [int(cx.dim(t.shape[_axis(dim, len(x.shape))])) for t in cx.meta()]
    return _split_parts(cx, x, sizes, dim)


@_conv("aten.unbind.int", "aten.unbind_copy.int")
def _unbind(cx, node, x, dim=0):
    axis = _axis(dim, len(x.shape))
    n = cx.static(x.shape[axis], "unbind axis size")
    out_shapes = [cx.shape(t) for t in cx.meta()]
    return [_reshape(cx, p, s) for p, s in zip(_split_parts(cx, x, [1] * n, axis), out_shapes)]


@_conv("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(cx, node, tensors, dim=0):
    dtype = cx.out_dtype()
    parts = [cx.cast(t, dtype) for t in tensors if not (t.shape == (0,) and len(cx.out_shape()) != 1)]
    return cx.g.concat(parts, axis=_axis(dim, len(parts[0].shape)))


@_conv("aten.stack.default")
def _stack(cx, node, tensors, dim=0):
    rank = len(tensors[0].shape) + 1
    axis = _axis(dim, rank)
    parts = []
    for t in tensors:
        shape = list(t.shape)
        shape.insert(axis, 1)
        parts.append(_reshape(cx, cx.cast(t, cx.out_dtype()), shape))
    return cx.g.concat(parts, axis=axis)


def _no_grad(cx: _Ctx, v: Value) -> Value:
    """``v`` with no gradient: a round trip through its bit pattern (bitcast is not differentiated)."""
    bits = {2: DType.I16, 4: DType.I32, 8: DType.I64}[v.dtype.bits // 8]
    return cx.g.bitcast(cx.g.bitcast(v, to=bits), to=v.dtype)


@_conv("aten.embedding.default")
def _embedding(cx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """A row gather, with torch's gradient rules in either module mode (torch applies them in eval mode
    too): the ``padding_idx`` row gets no gradient, and with ``scale_grad_by_freq`` each row's gradient is
    divided by how often its index occurs in ``indices``. Both are forward-exact (only the derivative
    changes). ``sparse`` only picks torch's gradient layout."""
    g = cx.g
    rows = g.gather(weight, indices, axis=0)
    if not weight.dtype.is_float or (padding_idx < 0 and not scale_grad_by_freq):
        return rows
    trailing = [*indices.shape, *([1] * (len(weight.shape) - 1))]
    fixed = _no_grad(cx, rows)
    if scale_grad_by_freq:
        flat = _reshape(cx, cx.cast(indices, DType.I64), [-1])
        ones = g.where(cx.scalar(True, DType.BOOL), cx.scalar(1, weight.dtype), cx.cast(flat, weight.dtype))
        zeros = g.expand(cx.scalar(0, weight.dtype), target_shape=[weight.shape[0]])
        counts = g.scatter_elements(zeros, flat, ones, axis=0, reduction="add")
        freq = _reshape(cx, g.gather(counts, cx.cast(indices, DType.I64), axis=0), trailing)
        rows = fixed + g.binary(rows - fixed, freq, op="div")  # value: rows + 0; derivative: 1 / freq
    if padding_idx >= 0:
        pad = _reshape(cx, g.eq(indices, cx.scalar(padding_idx, indices.dtype)), trailing)
        rows = g.where(pad, fixed, rows)
    return rows


@_conv("aten.index_select.default")
def _index_select(cx, node, x, dim, index):
    if len(x.shape) == 0:  # a 0-d x is a one-element vector; the result stays 0-d (torch)
        return _reshape(cx, cx.g.gather(_reshape(cx, x, [1]), _reshape(cx, index, [1]), axis=0), [])
    return cx.g.gather(x, index, axis=_axis(dim, len(x.shape)))


@_conv("aten.unfold.default")
def _unfold(cx, node, x, dimension, size, step):
    """Tensor.unfold: windows of ``size`` every ``step`` along ``dimension`` (one gather with an [n, size]
    index), the window axis moved last."""
    rank = len(x.shape)
    if rank == 0:
        return _reshape(cx, x, [1])
    axis = _axis(dimension, rank)
    length = cx.static(x.shape[axis], "unfolded axis size")
    n = (length - size) // step + 1
    index = np.arange(n)[:, None] * step + np.arange(size)[None, :]
    y = cx.g.gather(x, cx.g.constant(index.astype(np.int64)), axis=axis)  # [..., n, size, ...]
    if axis == rank - 1:
        return y
    perm = [a for a in range(rank + 1) if a != axis + 1] + [axis + 1]
    return cx.g.transpose(y, perm=perm)


@_conv("aten.as_strided.default", "aten.as_strided_copy.default")
def _as_strided(cx, node, x, size, stride, storage_offset=None):
    """A strided view of x's contiguous storage as one gather of the flat elements it reads (static sizes);
    an input that is itself a strided view (its storage order is not its element order) is refused."""
    source = getattr(node.args[0], "meta", {}).get("val")
    if source is not None and not source.is_contiguous():
        raise cx.fail("as_strided of a non-contiguous tensor (a view of other storage) is not supported")
    flat = _reshape(cx, x, [-1])
    sizes = [cx.static(s, "as_strided size") for s in size]
    index = np.full(sizes, int(storage_offset or 0), np.int64)
    for axis, (n, step) in enumerate(zip(sizes, stride)):
        shape = [1] * len(sizes)
        shape[axis] = n
        index = index + (np.arange(n, dtype=np.int64) * int(step)).reshape(shape)
    return cx.g.gather(flat, cx.g.constant(index), axis=0)


@_conv("aten.column_stack.default")
def _column_stack(cx, node, tensors):
    """Columns side by side: 0-d and 1-D tensors become [n, 1] columns, then one concat on axis 1."""
    dtype = cx.out_dtype()
    cols = [_reshape(cx, cx.cast(t, dtype), [-1, 1]) if len(t.shape) <= 1 else cx.cast(t, dtype) for t in tensors]
    return cols[0] if len(cols) == 1 else cx.g.concat(cols, axis=1)
