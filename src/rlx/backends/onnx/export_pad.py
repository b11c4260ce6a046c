"""A constant pad leaves the exporter as one ``Pad``, not as a Gather and a Where per padded axis.

The torch frontend writes a constant pad per axis as a gather with a clamped constant index and a
``where`` that masks the outside positions to the fill (:mod:`rlx.frontends.torch.convert_pad`). Exported
node for node that is a Gather and a Where per axis, which no engine folds into the next convolution:
HF MobileNetV2's TF-style padding before 18 of its 52 convolutions. Recognised here, the whole chain over
several axes (same fill) is one ``Pad``, and onnxruntime / OpenVINO merge a Pad into the Conv after it.
HF MobileNetV2 at the zoo's size, 1 thread (2026-12-06, load ~3): onnxruntime 1024 -> 108 us a call, OpenVINO
587 -> 213 us (torch's file: 107 and 208).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.backends.onnx.exporter import EXPORTERS, constant_of, exporter
from rlx.ir.dtype import DType
from rlx.ir.graph import Node

_PLAIN_WHERE = EXPORTERS["where"]
_PAD_DTYPES = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64})  # ONNX Pad's float types at opset 18


def pad_step(ex: Any, node: Node) -> tuple[int, int, int, int, float] | None:
    """(source id, axis, before, after, fill) of a ``where`` that is one axis of a constant pad; else None."""
    if node.op != "where" or node.dtype not in _PAD_DTYPES:
        return None
    cond, gather, fill = (ex.g.node(i) for i in node.inputs)
    if gather.op != "gather" or gather.shape != node.shape or gather.dtype != node.dtype:
        return None
    src_shape = ex.g.node(gather.inputs[0]).shape
    rank = len(src_shape)
    axis = gather.attrs["axis"] % rank
    n, m = src_shape[axis], node.shape[axis]
    mask, idx, value = constant_of(ex, cond.id), constant_of(ex, gather.inputs[1]), constant_of(ex, fill.id)
    if mask is None or idx is None or value is None or value.size != 1 or not isinstance(n, int) or n < 1:
        return None
    if mask.dtype != np.bool_ or mask.shape != tuple(m if i == axis else 1 for i in range(rank)):
        return None
    inside = mask.reshape(-1)
    if idx.shape != (m,) or idx.dtype.kind not in "iu" or not inside.any() or idx.min() < -n or idx.max() >= n:
        return None
    before = int(np.argmax(inside))
    after = m - before - n
    pos = np.arange(-before, n + after)
    if after < 0 or not np.array_equal(inside, (pos >= 0) & (pos < n)):
        return None
    if not np.array_equal(idx.astype(np.int64)[inside], pos[inside]):
        return None
    return gather.inputs[0], axis, before, after, float(value.reshape(()))


@exporter("where")
def _where(ex, node, ins):
    step = pad_step(ex, node)
    if step is None:
        return _PLAIN_WHERE(ex, node, ins)
    src, axis, before, after, fill = step
    rank = len(node.shape)
    pads = [0] * (2 * rank)
    pads[axis], pads[rank + axis] = before, after
    inner = pad_step(ex, ex.g.node(src))
    while inner is not None and inner[4] == fill and pads[inner[1]] == pads[rank + inner[1]] == 0:
        src, axis, before, after, _ = inner  # the chain's earlier axes join this Pad (the inner one is left unread)
        pads[axis], pads[rank + axis] = before, after
        inner = pad_step(ex, ex.g.node(src))
    return ex.node("Pad", [ex.names[src], ex.ints(pads), ex.const(np.asarray(fill, node.dtype.numpy))], mode="constant")
