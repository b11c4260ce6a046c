"""ONNX sequence ops whose lengths and positions are known at import time.

A sequence is a :class:`~rlx.frontends.onnx.import_context.SeqValue` (a tuple of rlx values)
while importing: SequenceConstruct / Empty / Insert / Erase / At / Length, SplitToSequence and
ConcatFromSequence only rearrange items, so the rlx graph holds ordinary tensor ops (narrow,
concat). Positions and split sizes fed by graph inputs are value-specialised
(:mod:`rlx.frontends.onnx.runnable`).
"""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import SeqValue, converter
from rlx.frontends.onnx.import_helpers import _axis, _reshape
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported, rlx_dtype


def _seq(v, what: str = "input 0") -> SeqValue:
    if not isinstance(v, SeqValue):
        raise OnnxFormatError(f"{what} must be a sequence")
    return v


def _position(cx, node, idx: int, n: int, default: int, inclusive_end: bool) -> int:
    """A static position operand in [-n, n) ([-n, n] where ``inclusive_end``), negative from the end."""
    if len(node.input) <= idx or not node.input[idx]:
        return default
    pos = int(np.asarray(cx.static(node.input[idx], "position")).reshape(-1)[0])
    hi = n if inclusive_end else n - 1
    if not -n <= pos <= hi:
        raise OnnxFormatError(f"position {pos} is out of range for a sequence of {n}")
    return pos + n if pos < 0 else pos


@converter("SequenceEmpty")
def _sequence_empty(cx, node, ins, attrs):
    return SeqValue((), rlx_dtype(attrs["dtype"]) if "dtype" in attrs else DType.F32)


@converter("SequenceConstruct")
def _sequence_construct(cx, node, ins, attrs):
    if len({v.dtype for v in ins}) > 1:
        raise OnnxFormatError("SequenceConstruct: the tensors have different element types")
    return SeqValue(ins)


@converter("SequenceInsert")
def _sequence_insert(cx, node, ins, attrs):
    seq, x = _seq(ins[0]), ins[1]
    items = list(seq.items)
    if seq.dtype is not None and x.dtype != seq.dtype:
        raise OnnxFormatError(f"SequenceInsert: a {x.dtype} tensor into a sequence of {seq.dtype}")
    items.insert(_position(cx, node, 2, len(items), len(items), inclusive_end=True), x)
    return SeqValue(items)


@converter("SequenceErase")
def _sequence_erase(cx, node, ins, attrs):
    items = list(_seq(ins[0]).items)
    if not items:
        raise OnnxFormatError("SequenceErase on an empty sequence")
    del items[_position(cx, node, 1, len(items), len(items) - 1, inclusive_end=False)]
    return SeqValue(items, ins[0].dtype)


@converter("SequenceAt")
def _sequence_at(cx, node, ins, attrs):
    items = _seq(ins[0]).items
    if not items:
        raise OnnxFormatError("SequenceAt on an empty sequence")
    return items[_position(cx, node, 1, len(items), 0, inclusive_end=False)]


@converter("SequenceLength")
def _sequence_length(cx, node, ins, attrs):
    return cx.const(np.array(len(_seq(ins[0]).items), np.int64))


@converter("ConcatFromSequence")
def _concat_from_sequence(cx, node, ins, attrs):
    items = _seq(ins[0]).items
    if not items:
        raise OnnxUnsupported("ConcatFromSequence of an empty sequence (no element shape)")
    rank = len(items[0].shape)
    if attrs.get("new_axis", 0):
        axis = _axis(attrs["axis"], rank + 1)
        items = [_reshape(cx, v, [*v.shape[:axis], 1, *v.shape[axis:]]) for v in items]
    else:
        axis = _axis(attrs["axis"], rank)
    return cx.g.concat(list(items), axis=axis) if len(items) > 1 else items[0]


@converter("SplitToSequence")
def _split_to_sequence(cx, node, ins, attrs):
    x = ins[0]
    axis = _axis(attrs.get("axis", 0), len(x.shape))
    n = x.shape[axis]
    given = len(node.input) > 1 and node.input[1]
    if not isinstance(n, int) and not given:
        raise OnnxUnsupported(f"SplitToSequence along a symbolic axis ({n}) with no split sizes")
    if given:
        split = np.asarray(cx.static(node.input[1], "split")).astype(np.int64)
        if split.ndim == 0:
            if split <= 0:
                raise OnnxFormatError(f"SplitToSequence: split {int(split)} must be positive")
            if not isinstance(n, int):
                raise OnnxUnsupported(f"SplitToSequence of a symbolic axis ({n}) into chunks of {int(split)}")
            sizes = [min(int(split), n - s) for s in range(0, n, int(split))]
        else:
            sizes = [int(s) for s in split]
        if any(s < 0 for s in sizes) or (isinstance(n, int) and sum(sizes) != n):
            raise OnnxFormatError(f"SplitToSequence: split {sizes} does not add up to the axis size {n}")
        keep = True
    else:
        sizes, keep = [1] * n, bool(attrs.get("keepdims", 1))
    parts, start = [], 0
    for size in sizes:
        part = cx.g.narrow(x, axis=axis, start=start, length=size)
        if not keep:
            part = _reshape(cx, part, [*x.shape[:axis], *x.shape[axis + 1:]])
        parts.append(part)
        start += size
    return SeqValue(parts, x.dtype)
