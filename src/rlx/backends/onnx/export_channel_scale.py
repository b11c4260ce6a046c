"""A per-channel scale on a matmul's result leaves the exporter as ``Mul``, not as a 1x1 depthwise ``Conv``.

The engine backends' export writes a per-channel scale and shift after anything but a conv as a 1x1
depthwise ``conv2d`` plus a bias add (:func:`rlx.opt.fold_affine.fold_conv_affine` with ``depthwise=True``):
after a Concat of feature maps (DenseNet) onnxruntime runs it as one Conv in its blocked layout. On a
matmul's result (SwinV2's per-head logit scale on the [windows, heads, N, N] attention scores) there is no
conv layout to keep: both engines reorder into one and back. Such a conv (constant weights [C, 1, 1, 1],
C groups, stride 1, no padding) is written as ``Mul`` by the weights as [1, C, 1, 1]: the same products.
SwinV2 at the zoo's size, 1 thread (2026-12-06, load ~3.3): OpenVINO 687 -> 567 us a call, onnxruntime
906 -> 838 us.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.backends.onnx.export_resample import constant_of
from rlx.backends.onnx.exporter import EXPORTERS, exporter
from rlx.ir.graph import Node
from rlx.opt.fold_affine import is_channel_scale

_PLAIN_CONV = EXPORTERS["conv2d"]
_MATMUL_RESULTS = frozenset({"matmul", "dot_general", "fused_matmul_bias_act"})  # producers with no conv layout


def channel_scale(ex: Any, node: Node) -> np.ndarray | None:
    """The [1, C, 1, 1] scale of a float 1x1 depthwise conv2d with constant weights, stride 1, no padding."""
    x = ex.g.node(node.inputs[0])
    if not is_channel_scale(node, x):
        return None
    c = x.shape[1]
    w = constant_of(ex, node.inputs[1])
    if w is None or w.shape != (c, 1, 1, 1):
        return None
    return w.reshape(1, c, 1, 1).astype(node.dtype.numpy)


_THROUGH = frozenset({"narrow", "activation", "reduce", "reshape", "binary", "transpose"})  # keep no conv layout
_LOOK_BACK = 8


def from_matmul(ex: Any, vid: int) -> bool:
    """Whether value ``vid`` is a matmul's result, directly or through a few views, elementwise ops and
    reductions (first operands): WavLM's gated relative-position bias scales a sigmoid of a narrow of a
    linear layer's sum per head."""
    for _ in range(_LOOK_BACK):
        node = ex.g.node(vid)
        if node.op in _MATMUL_RESULTS:
            return True
        if node.op not in _THROUGH or not node.inputs:
            return False
        vid = node.inputs[0]
    return False


@exporter("conv2d")
def _conv2d(ex, node, ins):
    scale = channel_scale(ex, node) if from_matmul(ex, node.inputs[0]) else None
    if scale is None:
        return _PLAIN_CONV(ex, node, ins)
    return ex.node("Mul", [ins[0], ex.const(scale)])
