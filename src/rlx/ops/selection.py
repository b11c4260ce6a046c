"""Selections and summaries with a static answer, composed from existing ops (no new MIR op): torch's
``mode``, ``nonzero_static``, ``histogram`` (bin count or given edges) and ``hash_tensor``.

Their rules, as torch's CPU kernels define them (checked against torch in tests/ops):

* ``mode``: the most frequent value along the axis, the smallest of tied ones, and the index of its
  last occurrence. Counted by an n x n comparison along the axis (n^2 work per row). torch's index is its
  sort's pick on long rows (any occurrence) and its NaN handling follows its sort's order; here NaN never
  counts as equal, so it is the mode only of an all-NaN row.
* ``nonzero_static``: the coordinates of the first ``size`` nonzero elements (C order), rows past the
  count filled with ``fill_value``. The k-th nonzero element lands in row k by a scatter of its flat
  position to its exclusive running count.
* ``histogram`` / ``histogramdd``: bins over [min, max] of the data (widened by 0.5 on each side when they are equal) or
  over given edges; the last bin is closed; values outside (and NaN) are dropped; ``weight`` and
  ``density`` as numpy.histogram.
* ``hash_tensor``: the XOR of the elements' 64-bit patterns (floats widened to f64, integers as
  two's-complement u64), over all or some dims; XOR-folded in halves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ops.scatter_reduce import full


def mode(g: Graph, x: Value, axis: int = -1, keep_dim: bool = False) -> tuple[Value, Value]:
    """(values, indices) of torch.mode(x, axis, keep_dim)."""
    rank = len(x.shape)
    if rank == 0:
        return x, g.constant(np.zeros((), np.int64))
    axis %= rank
    n = x.shape[axis]
    if n == 0:
        raise ShapeError("mode of an empty axis")
    work = g.cast(x, to=DType.I64) if x.dtype.is_bool else x
    lay_a = [*x.shape[:axis + 1], 1, *x.shape[axis + 1:]]
    lay_b = [*x.shape[:axis], 1, *x.shape[axis:]]
    same = g.eq(g.reshape(work, new_shape=lay_a), g.reshape(work, new_shape=lay_b))  # [.., n, n, ..]
    count = g.reduce(g.cast(same, to=DType.I64), op="sum", axes=[axis + 1], keep_dim=False)
    best = g.eq(count, g.reduce(count, op="max", axes=[axis], keep_dim=True))
    big = full(g, (), np.inf if work.dtype.is_float else np.iinfo(work.dtype.numpy).max, work.dtype)
    value = g.reduce(g.where(best, work, big), op="min", axes=[axis], keep_dim=True)
    index = g.arg_reduce(g.cast(g.eq(work, value), to=DType.I64), op="argmax", axis=axis, keep_dim=True,
                         select_last=True)
    if work.dtype.is_float:  # NaN equals nothing: it is the mode only of an all-NaN row, where torch gives index 0
        index = g.where(g.ne(value, value), full(g, (), 0, DType.I64), index)
    value = g.cast(value, to=x.dtype) if value.dtype != x.dtype else value
    if not keep_dim:
        kept = [d for i, d in enumerate(x.shape) if i != axis]
        value, index = g.reshape(value, new_shape=kept), g.reshape(index, new_shape=kept)
    return value, index


def nonzero_static(g: Graph, x: Value, size: int, fill_value: int = -1) -> Value:
    """torch.nonzero_static(x, size=size, fill_value=fill_value): [size, rank] int64 coordinates."""
    shape = tuple(x.shape)
    if not x.shape.is_static:
        raise ShapeError(f"nonzero_static needs a static shape, got {x.shape!r}")
    rank, n = len(shape), math.prod(shape)
    if size == 0 or rank == 0:  # no coordinates to compute
        return g.constant(np.zeros((size, rank), np.int64))
    flat = g.reshape(x, new_shape=[n])
    hit = flat if x.dtype.is_bool else g.ne(flat, full(g, (), 0, x.dtype))
    order = g.cumulative(g.cast(hit, to=DType.I64), op="sum", axis=0, exclusive=True)
    keep = g.binary(hit, g.lt(order, full(g, (), size, DType.I64)), op="mul")
    slot = g.where(keep, order, full(g, (), size, DType.I64))  # the rest go to a spare slot that is dropped
    spots = g.scatter_elements(full(g, [size + 1], -1, DType.I64), slot, g.constant(np.arange(n, dtype=np.int64)),
                               axis=0, reduction="none")
    pos = g.narrow(spots, axis=0, start=0, length=size)
    empty = g.reshape(g.lt(pos, full(g, (), 0, DType.I64)), new_shape=[size, 1])
    fill = full(g, (), fill_value, DType.I64)
    strides = np.array([math.prod(shape[i + 1:]) for i in range(rank)], np.int64)
    coords = g.binary_ext(g.binary(g.reshape(pos, new_shape=[size, 1]), g.constant(strides.reshape(1, rank)), op="div"),
                          g.constant(np.array(shape, np.int64).reshape(1, rank)), op="mod")
    return g.where(empty, fill, coords)


def _bin_of(g: Graph, flat: Value, edges: Value, bins: int) -> Value:
    """The bin (i64) of each value given ascending edges [bins + 1]: the number of edges at or below it,
    minus one, the last edge counted in the last bin; -1 outside [edges[0], edges[-1]] and for NaN."""
    below = g.cast(g.ge(g.reshape(flat, new_shape=[-1, 1]), g.reshape(edges, new_shape=[1, bins + 1])), to=DType.I64)
    pos = g.reduce(below, op="sum", axes=[1], keep_dim=False) - full(g, (), 1, DType.I64)
    pos = g.binary(pos, full(g, (), bins - 1, DType.I64), op="min")
    last = g.narrow(edges, axis=0, start=bins, length=1)
    inside = g.le(flat, g.reshape(last, new_shape=[]))
    return g.where(inside, pos, full(g, (), -1, DType.I64))


def _equal_edges(g: Graph, column: Value, count: int, value_range: Sequence[float] | None) -> Value:
    """``count`` + 1 equally spaced edges over value_range or the column's [min, max] (widened by 0.5 each side
    when equal), as torch's linspace computes them (the first half up from lo, the rest down from hi)."""
    dtype = column.dtype
    if count < 1:
        raise ShapeError(f"histogram needs at least one bin, got {count}")
    if value_range is not None:
        lo, hi = full(g, (), value_range[0], dtype), full(g, (), value_range[1], dtype)
    else:
        lo = g.reduce(column, op="min", axes=[0], keep_dim=False)
        hi = g.reduce(column, op="max", axes=[0], keep_dim=False)
    same = g.eq(lo, hi)
    half = full(g, (), 0.5, dtype)
    lo, hi = g.where(same, lo - half, lo), g.where(same, hi + half, hi)
    steps = np.arange(count + 1, dtype=dtype.numpy)
    step = g.binary(hi - lo, full(g, (), count, dtype), op="div")
    up = lo + g.constant(steps) * step
    down = hi - g.constant(steps[::-1].copy()) * step
    return g.where(g.constant(steps < (count + 1) // 2), up, down)


def histogramdd(g: Graph, x: Value, bins: Sequence[int | Value], ranges: Sequence[float] | None = None,
                weight: Value | None = None, density: bool = False) -> tuple[Value, list[Value]]:
    """(hist, per-dim bin edges) of torch.histogramdd: x [..., D] holds points; ``bins`` per dim is a bin count
    (equal bins over ``ranges[2d:2d+2]`` or the data's range) or a 1-D edges tensor. A point outside any dim's
    edges (or NaN) is dropped; weight and density as numpy.histogramdd."""
    dtype = x.dtype
    if not dtype.is_float:
        raise ShapeError(f"histogram is defined on floating tensors, got {dtype}")
    dims = x.shape[-1] if len(x.shape) else 1
    if len(bins) != dims:
        raise ShapeError(f"histogramdd: {len(bins)} bin specs for points of {dims} dims")
    points = g.reshape(x, new_shape=[-1, dims])
    edges: list[Value] = []
    counts: list[int] = []
    flat = valid = full(g, (), 0, DType.I64)  # the running flat bin; valid: every dim inside so far
    for d, spec in enumerate(bins):
        column = g.reshape(g.narrow(points, axis=1, start=d, length=1), new_shape=[-1])
        if isinstance(spec, Value):
            e = g.cast(spec, to=dtype) if spec.dtype != dtype else spec
            count = e.shape[0] - 1
        else:
            count = int(spec)
            e = _equal_edges(g, column, count, None if ranges is None else ranges[2 * d:2 * d + 2])
        pos = _bin_of(g, column, e, count)
        edges.append(e)
        counts.append(count)
        inside = g.ge(pos, full(g, (), 0, DType.I64))
        flat = pos if d == 0 else flat * full(g, (), count, DType.I64) + pos
        valid = inside if d == 0 else g.binary(valid, inside, op="mul")
    flat = g.where(valid, flat, full(g, (), -1, DType.I64))
    total_bins = math.prod(counts)
    onehot = g.cast(g.eq(g.reshape(flat, new_shape=[-1, 1]), g.constant(np.arange(total_bins, dtype=np.int64))), to=dtype)
    if weight is not None:
        onehot = onehot * g.reshape(g.cast(weight, to=dtype), new_shape=[-1, 1])
    hist = g.reshape(g.reduce(onehot, op="sum", axes=[0], keep_dim=False), new_shape=counts)
    if density:
        volume = None
        for d, (e, count) in enumerate(zip(edges, counts)):
            width = g.narrow(e, axis=0, start=1, length=count) - g.narrow(e, axis=0, start=0, length=count)
            lay = [1] * len(counts)
            lay[d] = count
            width = g.reshape(width, new_shape=lay)
            volume = width if volume is None else volume * width
        total = g.reduce(hist, op="sum", axes=list(range(len(counts))), keep_dim=True)
        hist = g.binary(hist, total * volume, op="div")
    return hist, edges


def histogram(g: Graph, x: Value, bins: int | Value, value_range: Sequence[float] | None = None,
              weight: Value | None = None, density: bool = False) -> tuple[Value, Value]:
    """(hist, bin_edges) of torch.histogram: ``bins`` equal bins (an int) or the given edges (a 1-D tensor)."""
    hist, edges = histogramdd(g, g.reshape(x, new_shape=[-1, 1]), [bins], value_range,
                              None if weight is None else g.reshape(weight, new_shape=[-1]), density)
    return hist, edges[0]


def _xor_fold(g: Graph, v: Value) -> Value:
    """XOR over the last axis of a u64 tensor: padded with zeros to a power of two, folded in halves."""
    n = v.shape[-1]
    width = 1 << max(n - 1, 0).bit_length()
    if width != n:
        pad = g.constant(np.zeros((*v.shape[:-1], width - n), np.uint64))
        v = g.concat([v, pad], axis=-1)
    while width > 1:
        width //= 2
        v = g.binary_ext(g.narrow(v, axis=-1, start=0, length=width), g.narrow(v, axis=-1, start=width, length=width),
                         op="bitwise_xor")
    return g.reshape(v, new_shape=list(v.shape[:-1]))


def hash_tensor(g: Graph, x: Value, dims: Sequence[int] = (), keep_dim: bool = False) -> Value:
    """torch.hash_tensor (mode 0): the XOR of the elements' u64 patterns over ``dims`` (all when empty)."""
    if not x.shape.is_static:
        raise ShapeError(f"hash_tensor needs a static shape, got {x.shape!r}")
    if x.dtype.is_float:
        bits = g.bitcast(g.cast(x, to=DType.F64) if x.dtype != DType.F64 else x, to=DType.U64)
    elif x.dtype.is_bool:
        bits = g.cast(x, to=DType.U64)
    elif x.dtype.is_int:
        bits = g.bitcast(g.cast(x, to=DType.I64) if x.dtype != DType.I64 else x, to=DType.U64)
    else:
        raise ShapeError(f"hash_tensor is not defined on {x.dtype}")
    rank = len(x.shape)
    axes = sorted({d % rank for d in dims}) if dims and rank else list(range(rank))
    rest = [a for a in range(rank) if a not in axes]
    moved = g.transpose(bits, perm=rest + axes) if rest + axes != list(range(rank)) else bits
    kept = [x.shape[a] for a in rest]
    folded = _xor_fold(g, g.reshape(moved, new_shape=[*kept, math.prod(x.shape[a] for a in axes)]))
    if keep_dim:
        folded = g.reshape(folded, new_shape=[1 if a in axes else x.shape[a] for a in range(rank)])
    return folded
