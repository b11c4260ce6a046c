"""ONNX gather / scatter converters (Gather*, Scatter*, GatherND / ScatterND as flat-index decompositions) and index masks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _axis, _broadcast_to, _cast, _reshape, _static_shape
from rlx.frontends.onnx.import_symbolic import iota
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
)


@converter("Gather")
def _gather(cx, node, ins, attrs):
    x, idx = ins
    axis = _axis(attrs.get("axis", 0), len(x.shape))
    if not idx.dtype.is_int:
        raise OnnxUnsupported("Gather with non-integer indices")
    return cx.g.gather(x, idx, axis=axis)


@converter("GatherElements")
def _gather_elements(cx, node, ins, attrs):
    return cx.g.gather_elements(ins[0], ins[1], axis=attrs.get("axis", 0))


@converter("ScatterElements", "Scatter")
def _scatter_elements(cx, node, ins, attrs):
    return cx.g.scatter_elements(ins[0], ins[1], ins[2], axis=attrs.get("axis", 0), reduction=attrs.get("reduction", "none"))


@converter("Trilu")
def _trilu(cx, node, ins, attrs):
    x = ins[0]
    k = 0
    if len(node.input) > 1 and node.input[1]:
        k = int(cx.static(node.input[1], "k").reshape(-1)[0])
    n, m = x.shape[-2:]
    if isinstance(n, int) and isinstance(m, int):
        rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
        keep = cx.const((cols - rows >= k) if attrs.get("upper", 1) else (cols - rows <= k))
    else:  # symbolic rows / columns: the band compared on runtime iotas
        diff = _reshape(cx, iota(cx, m), [1, m]) - _reshape(cx, iota(cx, n), [n, 1])
        keep = (cx.g.ge if attrs.get("upper", 1) else cx.g.le)(diff, cx.const(np.array(k, np.int64)))
    return cx.g.where(keep, x, cx.const(np.zeros((), x.dtype.numpy)))


@converter("Compress")
def _compress(cx, node, ins, attrs):
    x = ins[0]
    cond = np.asarray(cx.static(node.input[1], "condition")).reshape(-1).astype(bool)
    axis = attrs.get("axis")
    if axis is None:
        x = _reshape(cx, x, [math.prod(_static_shape(x))])
        axis = 0
    axis = _axis(axis, len(x.shape))
    return cx.g.gather(x, cx.const(np.nonzero(cond)[0].astype(np.int64)), axis=axis)


def _flat_index(cx, idx: Value, dims: Sequence[int]) -> Value:
    """Row-major flat position of the index tuples in ``idx[..., k]`` over ``dims`` (negative entries wrap)."""
    idx = _cast(cx, idx, DType.I64)
    k = len(dims)
    sizes = cx.const(np.array(dims, np.int64))
    idx = cx.g.where(cx.g.lt(idx, cx.scalar(0, idx)), idx + sizes, idx)
    strides = np.array([math.prod(dims[j + 1:]) for j in range(k)], np.int64)
    return cx.g.reduce(idx * cx.const(strides), op="sum", axes=[len(idx.shape) - 1], keep_dim=False)


@converter("GatherND")
def _gather_nd(cx, node, ins, attrs):
    data, idx = ins
    b = attrs.get("batch_dims", 0)
    dshape, ishape = _static_shape(data), _static_shape(idx)
    if not ishape or not 0 <= b < min(len(dshape), len(ishape)) or not 1 <= ishape[-1] <= len(dshape) - b:
        raise OnnxFormatError(f"GatherND batch_dims {b} / index depth {ishape[-1:]} do not fit data {dshape}, indices {ishape}")
    if not idx.dtype.is_int:
        raise OnnxFormatError("GatherND indices must be integers")
    k = ishape[-1]
    cx.check_elements(math.prod(dshape[:b]), "the GatherND batch offsets")
    nb = math.prod(dshape[:b])
    inner = math.prod(dshape[b:b + k])
    flat = _flat_index(cx, idx, dshape[b:b + k])
    if b:
        offs = np.arange(nb, dtype=np.int64).reshape(list(dshape[:b]) + [1] * (len(ishape) - 1 - b)) * inner
        flat = flat + cx.const(offs)
    table = _reshape(cx, data, [nb * inner, *dshape[b + k:]])
    out = cx.g.gather(table, flat, axis=0)
    return _reshape(cx, out, [*ishape[:-1], *dshape[b + k:]])


@converter("ScatterND")
def _scatter_nd(cx, node, ins, attrs):
    data, idx, upd = ins
    dshape, ishape = _static_shape(data), _static_shape(idx)
    if not ishape or not 1 <= ishape[-1] <= len(dshape) or not idx.dtype.is_int:
        raise OnnxFormatError(f"ScatterND indices {ishape} {idx.dtype} do not fit data {dshape}")
    k = ishape[-1]
    n, rest = math.prod(dshape[:k]), math.prod(dshape[k:])
    m = math.prod(ishape[:-1])
    flat = _reshape(cx, _flat_index(cx, idx, dshape[:k]), [m, 1])
    table = _reshape(cx, data, [n, rest])
    rows = _broadcast_to(cx, flat, [m, rest])
    out = cx.g.scatter_elements(table, rows, _reshape(cx, upd, [m, rest]), axis=0, reduction=attrs.get("reduction", "none"))
    return _reshape(cx, out, dshape)


@converter("ReverseSequence")
def _reverse_sequence(cx, node, ins, attrs):
    x = ins[0]
    lens = np.asarray(cx.static(node.input[1], "sequence_lens")).reshape(-1).astype(np.int64)
    shape = _static_shape(x)
    b_ax, t_ax = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    grid = np.indices(shape)
    t, b = grid[t_ax], grid[b_ax]
    n = lens[b]
    idx = np.where(t < n, n - 1 - t, t)
    return cx.g.gather_elements(x, cx.const(idx), axis=t_ax)


@converter("TensorScatter")
def _tensor_scatter(cx, node, ins, attrs):
    """A KV-cache write: cache position p of batch b along ``axis`` reads update[p - w_b] (``circular``:
    modulo the cache length) where that is in range, else keeps the cache: a gather plus a where."""
    cache, update = ins[0], ins[1]
    shape, ushape = _static_shape(cache), _static_shape(update)
    rank = len(shape)
    axis = _axis(attrs.get("axis", -2), rank)
    mode = attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise OnnxUnsupported(f"TensorScatter mode {mode!r}")
    if axis == 0 or len(ushape) != rank or any(u != c for i, (u, c) in enumerate(zip(ushape, shape)) if i != axis) \
            or ushape[axis] > shape[axis]:
        raise OnnxFormatError(f"TensorScatter update {ushape} does not fit the cache {shape} along axis {axis}")
    length, s = shape[axis], ushape[axis]
    lead = [shape[0]] + [1] * (rank - 1)
    if len(ins) > 2 and len(node.input) > 2 and node.input[2]:
        w = _reshape(cx, _cast(cx, ins[2], DType.I64), lead)
    else:
        w = cx.const(np.zeros(lead, np.int64))
    pos = cx.const(np.arange(length, dtype=np.int64).reshape([length if i == axis else 1 for i in range(rank)]))
    j = pos - w
    if mode == "circular":
        j = cx.g.binary_ext(j, cx.scalar(length, j), op="mod")
    take = cx.g.binary_ext(cx.g.ge(j, cx.scalar(0, j)), cx.g.lt(j, cx.scalar(s, j)), op="bitwise_and")
    idx = cx.g.minimum(cx.g.maximum(j, cx.scalar(0, j)), cx.scalar(s - 1, j))
    read = cx.g.gather_elements(update, _broadcast_to(cx, idx, shape), axis=axis)
    return cx.g.where(take, read, cache)

