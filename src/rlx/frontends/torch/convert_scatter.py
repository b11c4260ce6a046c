"""torch converters for the scatter / reduce-by-index family and static-size selections: ``scatter_reduce``
(every reduction, ``include_self`` both ways), ``index_reduce``, ``segment_reduce``, ``embedding_bag``,
``put``, ``masked_scatter``, ``diagonal_scatter``, ``as_strided_scatter``, ``mode``, ``nonzero_static``,
``histogram``, ``histogramdd``, ``hash_tensor``, ``item`` and ``resize``. The rules live in :mod:`rlx.ops.scatter_reduce`,
:mod:`rlx.ops.index_writes` and :mod:`rlx.ops.selection`; these functions only read torch's arguments.

Ops whose output *size* depends on input values (``nonzero``, ``masked_select``, ``unique``, ``bincount``:
torch.export gives them an unbacked dim ``u0``) are refused here with that reason: an rlx graph's sizes
depend on its input sizes only (docs/shapes.md).

Registered into :data:`rlx.frontends.torch.context._CONVERTERS` when imported; every
``aten.scatter*`` overload has its one converter here.
"""

from __future__ import annotations

import math
from typing import Any

from rlx.frontends.torch.context import _axis, _conv, _Ctx, _reshape, _target_name
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ops import index_writes, scatter_reduce, selection


def _index_dim(cx, x: Value, dim: int) -> int:
    return _axis(dim, len(x.shape))


def _scatter_src(cx: _Ctx, x: Value, index: Value, src: Any) -> Value:
    """The updates shaped like ``index``: a scalar expanded, or src narrowed (torch reads src[:index.shape])."""
    if not isinstance(src, Value):
        return cx.g.expand(cx.scalar(src, x.dtype), target_shape=list(index.shape))
    src = cx.cast(src, x.dtype)
    for axis, (n, m) in enumerate(zip(src.shape, index.shape)):
        if n != m:
            src = cx.g.narrow(src, axis, 0, cx.static(m, "scatter index size"))
    return src


@_conv("aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default", "aten.scatter.reduce",
       "aten.scatter.value_reduce", "aten.scatter_reduce.two")
def _scatter(cx, node, x, dim, index, src, reduce=None, include_self=True):
    """scatter / scatter_add / scatter_reduce. Without a reduction torch leaves the winner among duplicate
    indices unspecified (rlx: the last)."""
    name = _target_name(node.target)
    if name == "aten.scatter_add.default":
        reduce = "sum"
    reduce = {"add": "sum", "multiply": "prod"}.get(reduce, reduce)
    if len(x.shape) == 0:  # a 0-d x acts as a one-element vector (index and src are then 0-d or [1])
        one = _scatter(cx, node, _reshape(cx, x, [1]), 0, _reshape(cx, index, [1]),
                       _reshape(cx, src, [1]) if isinstance(src, Value) else src, reduce, include_self)
        return _reshape(cx, one, [])
    index = cx.cast(index, DType.I64)
    axis = _index_dim(cx, x, dim)
    upd = _scatter_src(cx, x, index, src)
    if reduce is None:
        return cx.g.scatter_elements(x, index, upd, axis=axis, reduction="none")
    return scatter_reduce.scatter_reduce(cx.g, x, axis, index, upd, reduce, bool(include_self))


@_conv("aten.index_reduce.default")
def _index_reduce(cx, node, x, dim, index, source, reduce, include_self=True):
    axis = _index_dim(cx, x, dim)
    return scatter_reduce.index_reduce(cx.g, x, axis, index, cx.cast(source, x.dtype), reduce, bool(include_self))


@_conv("aten.segment_reduce.default")
def _segment_reduce(cx, node, data, reduce, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                    initial=None):
    """segment_reduce with lengths or offsets (offsets become lengths by a difference along their last axis)."""
    if indices is not None:
        raise cx.fail("segment_reduce with indices is not supported (torch implements lengths and offsets only)")
    if lengths is None:
        if offsets is None:
            raise cx.fail("segment_reduce needs lengths or offsets")
        last = len(offsets.shape) - 1
        count = cx.static(offsets.shape[last], "segment_reduce offsets size") - 1
        lengths = cx.g.narrow(offsets, axis=last, start=1, length=count) - cx.g.narrow(offsets, axis=last, start=0,
                                                                                        length=count)
    return scatter_reduce.segment_reduce(cx.g, data, reduce, lengths, _axis(axis, len(data.shape)), initial)


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


@_conv("aten._embedding_bag_forward_only.default", "aten._embedding_bag.default", "aten.embedding_bag.padding_idx",
       "aten.embedding_bag.default")
def _embedding_bag(cx, node, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """The bag sums / means / maxima (output 0); torch's bookkeeping outputs (offset2bag, bag sizes, argmax
    rows) are not produced. padding_idx: the public op wraps a negative one (None: no padding row), the
    internal ``_embedding_bag`` ops take -1 as none."""
    if any(u.target is not _getitem_target() or u.args[1] != 0 for u in node.users):
        raise cx.fail("only the first output (the bags) of embedding_bag is supported")
    if padding_idx is not None and _target_name(node.target).startswith("aten.embedding_bag"):
        padding_idx = int(padding_idx) % cx.static(weight.shape[0], "embedding rows")  # public op: -1 is the last row
    elif padding_idx is not None and padding_idx < 0:  # the internal _embedding_bag ops: -1 is none
        padding_idx = None
    out = scatter_reduce.embedding_bag(cx.g, weight, indices, offsets, _BAG_MODES[int(mode)], per_sample_weights,
                                       bool(include_last_offset), padding_idx)
    return (out,)


@_conv("aten.embedding_renorm.default")
def _embedding_renorm(cx, node, weight, indices, max_norm, norm_type):
    """embedding(max_norm=...)'s in-place renorm of the named rows, as a new tensor."""
    return scatter_reduce.embedding_renorm(cx.g, weight, indices, float(max_norm), float(norm_type))


def _getitem_target():
    import operator

    return operator.getitem


@_conv("aten.put.default")
def _put(cx, node, x, index, source, accumulate=False):
    return index_writes.put(cx.g, x, index, source, bool(accumulate))


@_conv("aten.masked_scatter.default")
def _masked_scatter(cx, node, x, mask, source):
    return index_writes.masked_scatter(cx.g, x, mask, source)


@_conv("aten.diagonal_scatter.default")
def _diagonal_scatter(cx, node, x, src, offset=0, dim1=0, dim2=1):
    rank = len(x.shape)
    return index_writes.diagonal_scatter(cx.g, x, src, int(offset), _axis(dim1, rank), _axis(dim2, rank))


@_conv("aten.as_strided_scatter.default")
def _as_strided_scatter(cx, node, x, src, size, stride, storage_offset=None):
    size = [cx.static(s, "as_strided_scatter size") for s in size]
    stride = [cx.static(s, "as_strided_scatter stride") for s in stride]
    return index_writes.as_strided_scatter(cx.g, x, src, size, stride, cx.static(storage_offset or 0, "storage offset"))


@_conv("aten.mode.default")
def _mode(cx, node, x, dim=-1, keepdim=False):
    return selection.mode(cx.g, x, int(dim), bool(keepdim))


@_conv("aten.nonzero_static.default")
def _nonzero_static(cx, node, x, size, fill_value=-1):
    return selection.nonzero_static(cx.g, x, cx.static(size, "nonzero_static size"), int(fill_value))


@_conv("aten.histogram.bin_ct", "aten.histogram.bins_tensor")
def _histogram(cx, node, x, bins=100, range=None, weight=None, density=False):
    if not isinstance(bins, Value):
        bins = cx.static(bins, "histogram bins")
    return selection.histogram(cx.g, x, bins, range, weight, bool(density))


@_conv("aten._histogramdd_bin_edges.default")
def _histogramdd_bin_edges(cx, node, x, bins, range=None, weight=None, density=False):
    counts = [cx.static(b, "histogramdd bins") for b in bins]
    return selection.histogramdd(cx.g, x, counts, range)[1]


@_conv("aten._histogramdd_from_bin_cts.default", "aten._histogramdd_from_bin_tensors.default")
def _histogramdd(cx, node, x, bins, range=None, weight=None, density=False):
    specs = [b if isinstance(b, Value) else cx.static(b, "histogramdd bins") for b in bins]
    return selection.histogramdd(cx.g, x, specs, range, weight, bool(density))[0]


@_conv("aten.hash_tensor.default")
def _hash_tensor(cx, node, x, dim=(), keepdim=False, mode=0):
    if int(mode) != 0:
        raise cx.fail(f"hash_tensor mode {mode} is not supported (mode 0, XOR of the bit patterns, is)")
    return selection.hash_tensor(cx.g, x, list(dim or ()), bool(keepdim))


@_conv("aten._local_scalar_dense.default", "aten.item.default")
def _item(cx, node, x):
    """Tensor.item(): the one element as a 0-d tensor in Python's type (float -> f64, int -> i64, bool)."""
    if math.prod(cx.static(d, "item operand size") for d in x.shape) != 1:
        raise cx.fail(f"item() needs a one-element tensor, got shape {list(x.shape)}")
    x = _reshape(cx, x, [])
    if x.dtype.is_bool:
        return x
    return cx.cast(x, DType.F64 if x.dtype.is_float else DType.I64)


@_conv("torch.sym_ite")
def _sym_ite(cx, node, cond, a, b):
    """torch.sym_ite(cond, a, b) (what a bool item() becomes): a where on a traced condition."""
    if not isinstance(cond, Value):
        return a if cond else b
    dtype = DType.I64 if all(isinstance(v, int) for v in (a, b)) else DType.F64
    return cx.g.where(cond, *(v if isinstance(v, Value) else cx.scalar(v, dtype) for v in (a, b)))


@_conv("aten.resize.default")
def _resize(cx, node, x, size):
    """resize_ functionalised: the same elements in a new shape (C order); growing is refused (torch's new
    elements are uninitialised memory), shrinking keeps the leading elements."""
    size = [cx.static(s, "resize size") for s in size]
    have = math.prod(cx.static(d, "resized tensor size") for d in x.shape)
    want = math.prod(size)
    if want > have:
        raise cx.fail(f"resize to {size} grows {have} elements to {want}; torch's new elements are uninitialised")
    if tuple(size) == tuple(x.shape):
        return x
    flat = _reshape(cx, x, [have])
    if want < have:
        flat = cx.g.narrow(flat, axis=0, start=0, length=want)
    return _reshape(cx, flat, size)


_DATA_DEPENDENT = ("aten.nonzero.default", "aten.masked_select.default", "aten._unique2.default", "aten.unique_dim.default",
                   "aten.unique_consecutive.default", "aten.bincount.default", "aten.argwhere.default")


@_conv(*_DATA_DEPENDENT)
def _data_dependent(cx, node, *args, **kwargs):
    name = _target_name(node.target).removeprefix("aten.").split(".")[0]
    hint = " (torch.nonzero_static(x, size=...) or a mask keep a fixed size)" if name in ("nonzero", "argwhere",
                                                                                        "masked_select") else ""
    raise cx.fail(f"{name}: its output size depends on the input's values (torch.export's unbacked dim); rlx graphs "
                  f"have sizes that depend only on input sizes{hint}")
