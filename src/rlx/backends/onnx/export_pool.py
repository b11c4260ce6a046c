"""Max / min pooling over a tensor padded by concatenation, exported as the pool's own (asymmetric) pads.

torch's ``ceil_mode=True`` max pooling (GoogLeNet, SqueezeNet, ...) reaches rlx as ``pool2d`` over
``concat(x, fill)`` on the height and width axes, ``fill`` a constant block of ``-inf`` (``+inf`` for min)
that gives the last, partial window its missing rows / columns. Exported as written, each ``Concat``
materialises the padded tensor and, on onnxruntime, takes the tensor out of the blocked (NCHWc) conv
layout and back (GoogLeNet at the zoo's size: 6 Concat, 3 ReorderInput / ReorderOutput pairs). ONNX
``MaxPool`` pads by ignoring the padded cells, which is what a ``-inf`` (max) block does, so the fill
becomes the pool's begin / end pads and the Concat goes (swept as unread by the exporter). The NaN term
(:func:`rlx.backends.onnx.exporter._window_nan`) takes the same pads: its zero padding adds 0, as
``0 * tanh(-inf)`` does. ONNX pads must stay below the kernel: larger fills keep the Concat.
GoogLeNet (zoo size, 1 thread, onnxruntime, load ~3): 3.76-3.80 -> 3.44-3.54 ms a call (docs/backends.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.backends.onnx.exporter import EXPORTERS, constant_of, exporter, pool_window
from rlx.ir.graph import Node

_PLAIN_POOL = EXPORTERS["pool2d"]


def _fill_pad(ex: Any, vid: int, fill: float) -> tuple[int, int, int, int] | None:
    """(operand id, axis, begin, end) when node ``vid`` is a 2-operand concat on axis 2 or 3 of a rank-4
    tensor with a constant block all equal to ``fill`` on one side; else None."""
    node = ex.g.node(vid)
    if node.op != "concat" or len(node.inputs) != 2 or len(node.shape) != 4:
        return None
    axis = node.attrs["axis"] % 4
    if axis not in (2, 3):
        return None
    for side, (other, block) in enumerate((node.inputs, node.inputs[::-1])):
        value = _constant_fill(ex, block)
        size = ex.g.node(block).shape[axis]
        if value is not None and isinstance(size, int) and value.size and np.all(value == fill):
            return (other, axis, 0, size) if side == 0 else (other, axis, size, 0)
    return None


def _constant_fill(ex: Any, vid: int) -> np.ndarray | None:
    """The value of a constant, or of an ``expand`` of one (the unfolded graph's fill block); else None."""
    node = ex.g.node(vid)
    return constant_of(ex, node.inputs[0]) if node.op == "expand" else constant_of(ex, vid)


def _unpadded(ex: Any, node: Node) -> tuple[int, list[int]]:
    """(operand id, ONNX pads) of max / min pool2d ``node``: its operand, or the tensor under the
    ``-inf`` (max) / ``+inf`` (min) concat pads it reads, the pads then grown by the fill while they stay
    below the kernel (so every window still holds a cell of the tensor)."""
    a = node.attrs
    fill = -np.inf if a["kind"] == "max" else np.inf
    k, p = list(a["kernel_size"]), list(a["padding"])
    pads = [p[0], p[1], p[0], p[1]]
    vid = node.inputs[0]
    while (hit := _fill_pad(ex, vid, fill)) is not None:
        other, axis, begin, end = hit
        i = axis - 2
        if pads[i] + begin >= k[i] or pads[i + 2] + end >= k[i]:
            break
        pads[i] += begin
        pads[i + 2] += end
        vid = other
    return vid, pads


def nonneg(ex: Any, vid: int) -> bool:
    """Whether node ``vid`` is never negative nor -inf (NaN allowed) on any input: a relu (max(x, 0)),
    alone or fused after a conv, a concat of such (the fire / inception modules before a max pool), a max
    or mean pool of one (a ceil-mode max pool's ``-inf`` fill never wins a window), or a float cast of one
    (rounding keeps the sign; an overflow gives +inf). The max pool NaN term reads it
    (:func:`rlx.backends.onnx.exporter._window_nan`)."""
    node = ex.g.node(vid)
    if node.op == "cast":
        return node.dtype.is_float and ex.g.node(node.inputs[0]).dtype.is_float and nonneg(ex, node.inputs[0])
    if node.op == "activation":
        return node.attrs["kind"] == "relu"
    if node.op == "fused_conv2d_bias_act":
        return node.attrs["activation"] == "relu"
    if node.op == "pool2d" and node.attrs["kind"] in ("max", "mean"):
        return nonneg(ex, _unpadded(ex, node)[0] if node.attrs["kind"] == "max" else node.inputs[0])
    return node.op == "concat" and all(nonneg(ex, i) for i in node.inputs)


@exporter("pool2d")
def _pool2d_padded(ex: Any, node: Node, ins: list[str]) -> str:
    a = node.attrs
    if a["kind"] not in ("max", "min") or not node.dtype.is_float:
        return _PLAIN_POOL(ex, node, ins)
    vid, pads = _unpadded(ex, node)
    geo = {"kernel_shape": list(a["kernel_size"]), "strides": list(a["stride"]), "pads": pads}
    return pool_window(ex, node, ex.names[vid], geo, a["kind"] == "max" and nonneg(ex, vid))
