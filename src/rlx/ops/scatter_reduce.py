"""Grouped reductions written as compositions of ``scatter_elements``: torch's ``scatter_reduce`` (every
reduction, ``include_self`` both ways), ``index_reduce``, ``segment_reduce`` and ``embedding_bag``.

One statement of each rule, used by the torch reader (and by anyone building graphs). No new MIR op:
every backend that runs ``scatter_elements``, ``cumulative`` and elementwise ops runs these, and the ONNX
exporter writes them as ScatterElements. The rules (torch's, checked against it in tests/ops):

* ``include_self=False``: every position some index names starts from the reduction's identity (0, 1,
  -inf / the integer minimum, +inf / the integer maximum) instead of ``x``; untouched positions keep ``x``.
* ``mean`` is the sum divided by the number of contributions (plus one when ``x`` is included); a position
  with none keeps ``x``; integer results divide with floor (torch's ``div(..., rounding_mode="floor")``).
* duplicate indices combine exactly for sum / prod / amax / amin (``np.add.at`` ...); float sums may
  differ from torch's order in the last bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_Kind = Literal["none", "add", "mul", "max", "min"]
_SCATTER_KIND: dict[str, _Kind] = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}


def identity(reduce: str, dtype: DType) -> np.ndarray:
    """The value a reduction starts from (0-d, ``dtype``): what an empty group reduces to."""
    np_dtype = dtype.numpy
    if reduce in ("sum", "mean"):
        return np.zeros((), np_dtype)
    if reduce == "prod":
        return np.ones((), np_dtype)
    if dtype.is_bool:
        return np.array(reduce == "amin")
    if dtype.is_float:
        return np.array(-np.inf if reduce == "amax" else np.inf, np.float32 if dtype.is_low_precision_float else np_dtype)
    info = np.iinfo(np_dtype)
    return np.array(info.min if reduce == "amax" else info.max, np_dtype)


def full(g: Graph, shape: Sequence, value: np.ndarray | float, dtype: DType) -> Value:
    """A tensor of ``shape`` filled with ``value``."""
    scalar = g.constant(np.asarray(value).astype(np.float32 if dtype.is_low_precision_float else dtype.numpy))
    if scalar.dtype != dtype:
        scalar = g.cast(scalar, to=dtype)
    return scalar if not len(shape) else g.expand(scalar, target_shape=list(shape))


def floor_div(g: Graph, a: Value, count: Value) -> Value:
    """a // count for integer a and a positive integer count (the MIR's integer div truncates)."""
    q = g.binary(a, count, op="div")
    inexact = g.binary(g.ne(q * count, a), g.lt(a, full(g, (), 0, a.dtype)), op="mul")
    return g.where(inexact, q - full(g, (), 1, a.dtype), q)


def _check(reduce: str, x: Value, index: Value, src: Value) -> None:
    if reduce not in REDUCTIONS:
        raise ShapeError(f"scatter_reduce: reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if tuple(index.shape) != tuple(src.shape):
        raise ShapeError(f"scatter_reduce: src {src.shape!r} must have the shape of index {index.shape!r}")
    if reduce == "mean" and x.dtype.is_bool:
        raise ShapeError("scatter_reduce: 'mean' is not defined on bool")


def scatter_reduce(g: Graph, x: Value, axis: int, index: Value, src: Value, reduce: str,
                   include_self: bool = True) -> Value:
    """torch.scatter_reduce(x, axis, index, src, reduce, include_self): src[i][j] combined into
    out[index[i][j]][j] (axis 0). ``index`` and ``src`` have one shape (torch's reads of a larger src are
    narrowed by the caller). Out-of-range indices raise at run time (``scatter_elements``)."""
    _check(reduce, x, index, src)
    index = index if index.dtype == DType.I64 else g.cast(index, to=DType.I64)
    kind = _SCATTER_KIND[reduce]
    base = x
    if not include_self:  # the touched positions restart from the identity
        base = g.scatter_elements(x, index, full(g, index.shape, identity(reduce, x.dtype), x.dtype), axis=axis,
                                  reduction="none")
    out = g.scatter_elements(base, index, src, axis=axis, reduction=kind)
    if reduce != "mean":
        return out
    start = full(g, x.shape, 1 if include_self else 0, x.dtype)
    count = g.scatter_elements(start, index, full(g, index.shape, 1, x.dtype), axis=axis, reduction="add")
    zero = g.eq(count, full(g, (), 0, x.dtype))
    count = g.where(zero, full(g, (), 1, x.dtype), count)
    return g.binary(out, count, op="div") if x.dtype.is_float else floor_div(g, out, count)


def along(g: Graph, index: Value, shape: Sequence, axis: int) -> Value:
    """A 1-D index laid along ``axis`` and broadcast to ``shape`` (index_add / index_reduce's pairing)."""
    lay = [1] * len(shape)
    lay[axis] = -1
    return g.expand(g.reshape(index, new_shape=lay), target_shape=list(shape))


def index_reduce(g: Graph, x: Value, axis: int, index: Value, source: Value, reduce: str,
                 include_self: bool = True) -> Value:
    """torch.index_reduce: slice i of ``source`` along ``axis`` reduced into slice index[i] of x.
    0-d x and source act as one-element vectors."""
    if len(x.shape) == 0:
        one = index_reduce(g, g.reshape(x, new_shape=[1]), 0, index, g.reshape(source, new_shape=[1]), reduce,
                           include_self)
        return g.reshape(one, new_shape=[])
    if len(index.shape) != 1 or source.shape[axis] != index.shape[0]:
        raise ShapeError(f"index_reduce: index {index.shape!r} must be 1-D with source's size along axis {axis} "
                         f"(source {source.shape!r})")
    idx = along(g, g.cast(index, to=DType.I64) if index.dtype != DType.I64 else index, source.shape, axis)
    return scatter_reduce(g, x, axis, idx, source, reduce, include_self)


def group_ids(g: Graph, starts: Value, n: int) -> Value:
    """For positions 0..n-1 the number of ``starts`` (ascending along the last axis) at or below each position,
    minus one: the group each position falls in when group k begins at starts[..., k]. [..., S] -> [..., n]
    (n x S compares per row)."""
    lead = list(starts.shape[:-1])
    pos = g.constant(np.arange(n, dtype=np.int64).reshape(n, 1))
    starts = g.cast(starts, to=DType.I64) if starts.dtype != DType.I64 else starts
    hits = g.cast(g.ge(pos, g.reshape(starts, new_shape=[*lead, 1, -1])), to=DType.I64)
    return g.reduce(hits, op="sum", axes=[len(lead) + 1], keep_dim=False) - full(g, (), 1, DType.I64)


def segment_reduce(g: Graph, data: Value, reduce: str, lengths: Value, axis: int = 0,
                   initial: float | None = None) -> Value:
    """torch.segment_reduce: consecutive runs of data along ``axis`` reduced (sum / prod / mean / max / min);
    ``lengths`` is [*data.shape[:axis], S] (one set of runs per leading index). ``initial`` takes part in
    every segment (torch) and is what an empty one gives; without it an empty segment gives the identity
    (mean: NaN)."""
    red = {"max": "amax", "min": "amin"}.get(reduce, reduce)
    if red not in REDUCTIONS:
        raise ShapeError(f"segment_reduce: reduce must be sum, prod, mean, max or min, got {reduce!r}")
    if len(lengths.shape) != axis + 1 or tuple(lengths.shape[:axis]) != tuple(data.shape[:axis]):
        raise ShapeError(f"segment_reduce: lengths {lengths.shape!r} must be data's dims before axis {axis} "
                         f"(data {data.shape!r}) and the segment count")
    n, s = data.shape[axis], lengths.shape[-1]
    if not isinstance(n, int) or not isinstance(s, int):
        raise ShapeError("segment_reduce needs a static data length and segment count")
    lengths = g.cast(lengths, to=DType.I64) if lengths.dtype != DType.I64 else lengths
    starts = g.cumulative(lengths, op="sum", axis=axis, exclusive=True)
    trailing = [1] * (len(data.shape) - axis - 1)
    ids = g.expand(g.reshape(group_ids(g, starts, n), new_shape=[*data.shape[:axis], n, *trailing]),
                   target_shape=list(data.shape))
    out_shape = [s if i == axis else d for i, d in enumerate(data.shape)]
    start = identity("sum" if red == "mean" else red, data.dtype) if initial is None else initial
    out = g.scatter_elements(full(g, out_shape, start, data.dtype), ids, data, axis=axis, reduction=_SCATTER_KIND[red])
    if red != "mean":
        return out
    count = g.reshape(g.cast(lengths, to=data.dtype), new_shape=[*lengths.shape, *trailing])
    empty = g.eq(count, full(g, (), 0, data.dtype))
    mean = g.binary(out, g.where(empty, full(g, (), 1, data.dtype), count), op="div")
    return g.where(empty, full(g, (), np.nan if initial is None else initial, data.dtype), mean)


def embedding_bag(g: Graph, weight: Value, indices: Value, offsets: Value, mode: str = "sum",
                  per_sample_weights: Value | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Value:
    """torch.nn.functional.embedding_bag on 1-D indices: bag b holds indices[offsets[b]:offsets[b+1]]; its
    rows (times per_sample_weights, sum mode) are summed, averaged or max-ed. Rows equal to padding_idx
    are left out; an empty bag gives zeros; with include_last_offset the last offset ends the last bag."""
    if mode not in ("sum", "mean", "max"):
        raise ShapeError(f"embedding_bag: mode must be sum, mean or max, got {mode!r}")
    if len(indices.shape) != 1 or len(offsets.shape) != 1 or len(weight.shape) != 2:
        raise ShapeError(f"embedding_bag: needs 2-D weight, 1-D indices and offsets, got {weight.shape!r}, "
                         f"{indices.shape!r}, {offsets.shape!r}")
    n, bags = indices.shape[0], offsets.shape[0] - (1 if include_last_offset else 0)
    dim, dtype = weight.shape[1], weight.dtype
    if not isinstance(n, int) or not isinstance(bags, int):
        raise ShapeError("embedding_bag needs static index and offset counts")
    indices = g.cast(indices, to=DType.I64) if indices.dtype != DType.I64 else indices
    rows = g.gather(weight, indices, axis=0)  # [n, dim]
    if per_sample_weights is not None:
        if mode != "sum":
            raise ShapeError("embedding_bag: per_sample_weights only with mode 'sum'")
        rows = rows * g.reshape(g.cast(per_sample_weights, to=dtype), new_shape=[-1, 1])
    ids = group_ids(g, offsets, n)  # bag of each index; past the last offset (include_last_offset): the spare bag
    keep = g.ne(indices, full(g, (), padding_idx, DType.I64)) if padding_idx is not None and padding_idx >= 0 else None
    if keep is not None:  # padding rows go to a spare bag that is dropped
        ids = g.where(keep, ids, full(g, (), bags, DType.I64))
    target = along(g, ids, [n, dim], 0)
    red = "amax" if mode == "max" else "sum"
    out = g.scatter_elements(full(g, [bags + 1, dim], identity(red, dtype), dtype), target, rows, axis=0,
                             reduction=_SCATTER_KIND[red])
    out = g.narrow(out, axis=0, start=0, length=bags)
    if mode == "sum":
        return out
    count = g.scatter_elements(full(g, [bags + 1], 0, dtype), ids, full(g, [n], 1, dtype), axis=0, reduction="add")
    count = g.reshape(g.narrow(count, axis=0, start=0, length=bags), new_shape=[bags, 1])
    empty = g.eq(count, full(g, (), 0, dtype))
    if mode == "max":
        return g.where(empty, full(g, (), 0, dtype), out)
    return g.binary(out, g.where(empty, full(g, (), 1, dtype), count), op="div")


def embedding_renorm(g: Graph, weight: Value, indices: Value, max_norm: float, norm_type: float = 2.0) -> Value:
    """torch.embedding_renorm_ functionally: the rows of weight that indices name and whose p-norm exceeds
    max_norm, scaled by max_norm / (norm + 1e-7) (torch's epsilon); other rows unchanged."""
    rows, dtype = weight.shape[0], weight.dtype
    flat = g.reshape(g.cast(indices, to=DType.I64) if indices.dtype != DType.I64 else indices, new_shape=[-1])
    used = g.scatter_elements(full(g, [rows], 0, dtype), flat, full(g, flat.shape, 1, dtype), axis=0, reduction="none")
    if norm_type == 2.0:
        norm = g.activation(g.reduce(weight * weight, op="sum", axes=[1], keep_dim=True), kind="sqrt")
    else:
        p = full(g, (), norm_type, dtype)
        total = g.reduce(g.binary(g.activation(weight, kind="abs"), p, op="pow"), op="sum", axes=[1], keep_dim=True)
        norm = g.binary(total, full(g, (), 1.0 / norm_type, dtype), op="pow")
    limit = full(g, (), max_norm, dtype)
    over = g.binary(g.gt(norm, limit), g.gt(g.reshape(used, new_shape=[rows, 1]), full(g, (), 0, dtype)), op="mul")
    scale = g.binary(limit, norm + full(g, (), 1e-7, dtype), op="div")
    return weight * g.where(over, scale, full(g, (), 1, dtype))
