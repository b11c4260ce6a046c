"""Writes whose positions come from a mask, a flat index or a view, composed from existing ops so that
every backend runs them (no new MIR op): torch's ``masked_scatter`` and ``x[mask] = v`` with one value per
selected row, ``put`` (flat indices), ``diagonal_scatter`` and ``as_strided_scatter``.

The mask writes keep static shapes although the number of selected positions depends on the data: the
k-th selected position reads row k of the source, and k is an exclusive running count of the mask
(``cumulative``), gathered and merged with ``where``. A source with too few rows fails the gather's
range check at run time, as torch fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.shape import broadcast_shapes


def _flat(g: Graph, v: Value) -> Value:
    return g.reshape(v, new_shape=[-1])


def masked_rows(g: Graph, x: Value, mask: Value, rows: Value, accumulate: bool = False, broadcast: bool = False) -> Value:
    """x [M, R] with row m replaced by (or, accumulate, increased by) rows[k] where mask[m] is the k-th True of
    the 1-D mask [M]; rows is [K, R] (with ``broadcast`` and K = 1 every selected row gets the same one)."""
    m = mask if mask.dtype.is_bool else g.ne(mask, g.constant(np.zeros((), mask.dtype.numpy)))
    k = rows.shape[0]
    if k == 0:  # nothing to read: only an all-False mask is valid
        return x
    if k == 1 and broadcast:
        picked = rows
    else:
        rank = g.cumulative(g.cast(m, to=DType.I64), op="sum", axis=0, exclusive=True)
        rank = g.where(m, rank, g.constant(np.zeros((), np.int64)))
        picked = g.gather(rows, rank, axis=0)
    new = x + picked if accumulate else picked
    return g.where(g.reshape(m, new_shape=[-1, 1]), new, x)


def masked_scatter(g: Graph, x: Value, mask: Value, source: Value) -> Value:
    """torch.masked_scatter: x and mask broadcast together; the True positions (C order) take source's
    elements in order (source read flat)."""
    shape = list(broadcast_shapes(x.shape, mask.shape))
    if source.dtype != x.dtype:
        source = g.cast(source, to=x.dtype)
    x, mask = (v if list(v.shape) == shape else g.expand(v, target_shape=shape) for v in (x, mask))
    out = masked_rows(g, g.reshape(x, new_shape=[-1, 1]), _flat(g, mask), g.reshape(source, new_shape=[-1, 1]))
    return g.reshape(out, new_shape=shape)


def masked_put(g: Graph, x: Value, mask: Value, values: Value, accumulate: bool = False, at: int = 0) -> Value:
    """torch's x[mask] = values (index_put with one bool mask over x's dims from ``at`` on, full slices before):
    values broadcast to x.shape[:at] + [number of True] + the dims after the mask, one row per selected position
    or one row for all. A mask not at the front is moved there (a transpose each way)."""
    if at:
        m = len(mask.shape)
        perm = [*range(at, at + m), *range(at), *range(at + m, len(x.shape))]
        vrank = len(x.shape) - m + 1
        if len(values.shape) > vrank:
            raise ShapeError(f"index_put: values {values.shape!r} have more dims than the indexed shape ({vrank})")
        v = g.reshape(values, new_shape=[1] * (vrank - len(values.shape)) + list(values.shape)) \
            if len(values.shape) < vrank else values
        v = g.transpose(v, perm=[at, *range(at), *range(at + 1, vrank)])
        out = masked_put(g, g.transpose(x, perm=perm), mask, v, accumulate)
        return g.transpose(out, perm=[perm.index(i) for i in range(len(perm))])
    lead, rest = len(mask.shape), list(x.shape[len(mask.shape):])
    if tuple(x.shape[:lead]) != tuple(mask.shape):
        raise ShapeError(f"index_put: mask {mask.shape!r} must match x's leading dims {x.shape!r}")
    if values.dtype != x.dtype:
        values = g.cast(values, to=x.dtype)
    vshape = [1] * (len(rest) + 1 - len(values.shape)) + list(values.shape)
    if len(vshape) != len(rest) + 1:
        raise ShapeError(f"index_put: values {values.shape!r} do not broadcast to the selected rows {[-1, *rest]}")
    k = vshape[0]
    values = g.reshape(values, new_shape=vshape) if vshape != list(values.shape) else values
    width = math.prod(rest)
    rows = g.reshape(g.expand(values, target_shape=[k, *rest]) if vshape[1:] != rest else values, new_shape=[k, width])
    out = masked_rows(g, g.reshape(x, new_shape=[-1, width]), _flat(g, mask), rows, accumulate, broadcast=True)
    return g.reshape(out, new_shape=list(x.shape))


def put(g: Graph, x: Value, index: Value, source: Value, accumulate: bool = False) -> Value:
    """torch.put: x read as flat, x.flat[index] = source (accumulate: +=, duplicates adding up). Negative
    indices wrap; out-of-range ones raise at run time."""
    if tuple(index.shape) != tuple(source.shape) and math.prod(index.shape) != math.prod(source.shape):
        raise ShapeError(f"put: index {index.shape!r} and source {source.shape!r} differ in size")
    idx = _flat(g, g.cast(index, to=DType.I64) if index.dtype != DType.I64 else index)
    src = _flat(g, g.cast(source, to=x.dtype) if source.dtype != x.dtype else source)
    out = g.scatter_elements(_flat(g, x), idx, src, axis=0, reduction="add" if accumulate else "none")
    return g.reshape(out, new_shape=list(x.shape))


def _write_positions(g: Graph, x: Value, positions: np.ndarray, src: Value) -> Value:
    """x with its flat (C order) elements at ``positions`` (same shape as src) replaced by src."""
    n = math.prod(x.shape)
    if positions.size and (positions.min() < 0 or positions.max() >= n):
        raise ShapeError(f"the written view reaches element {int(positions.max())} of a tensor of {n}")
    if positions.size == 0:
        return x
    out = g.scatter_elements(_flat(g, x), g.constant(positions.reshape(-1).astype(np.int64)), _flat(g, src), axis=0,
                             reduction="none")
    return g.reshape(out, new_shape=list(x.shape))


def diagonal_positions(shape: Sequence[int], offset: int, dim1: int, dim2: int) -> np.ndarray:
    """Flat positions of torch.diagonal(x, offset, dim1, dim2) for a contiguous x of ``shape``, laid out as the
    diagonal is (the other dims in order, the diagonal last)."""
    flat = np.arange(math.prod(shape), dtype=np.int64).reshape(tuple(shape))
    return np.diagonal(flat, offset, dim1, dim2)


def diagonal_scatter(g: Graph, x: Value, src: Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
    """torch.diagonal_scatter: x with its diagonal (``offset``, dims ``dim1`` / ``dim2``) replaced by src."""
    if not x.shape.is_static:
        raise ShapeError(f"diagonal_scatter needs a static shape, got {x.shape!r}")
    pos = diagonal_positions(tuple(x.shape), offset, dim1, dim2)
    if tuple(pos.shape) != tuple(src.shape):
        raise ShapeError(f"diagonal_scatter: src {src.shape!r} must have the diagonal's shape {list(pos.shape)}")
    return _write_positions(g, x, pos, g.cast(src, to=x.dtype) if src.dtype != x.dtype else src)


def as_strided_scatter(g: Graph, x: Value, src: Value, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int = 0) -> Value:
    """torch.as_strided_scatter on a contiguous x: the view as_strided(size, stride, offset) replaced by src.
    Overlapping views keep the last write (C order)."""
    if not x.shape.is_static or len(size) != len(stride):
        raise ShapeError(f"as_strided_scatter needs a static x and one stride per size, got {x.shape!r}, {size}, {stride}")
    pos = np.full(tuple(size), storage_offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride)):
        lay = [1] * len(size)
        lay[axis] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(lay) * s
    if tuple(pos.shape) != tuple(src.shape):
        raise ShapeError(f"as_strided_scatter: src {src.shape!r} must have the view's shape {list(size)}")
    return _write_positions(g, x, pos, g.cast(src, to=x.dtype) if src.dtype != x.dtype else src)
