"""A per-channel scale on a matmul's result leaves the exporter as ``Mul``, not as a 1x1 depthwise ``Conv``.

The engine backends' export writes a per-channel scale and shift after anything but a conv as a 1x1
depthwise ``conv2d`` plus a bias add (:func:`rlx.opt.fold_affine.fold_conv_affine` with ``depthwise=True``):
after a Concat of feature maps (DenseNet) onnxruntime runs it as one Conv in its blocked layout. On a
matmul's result (SwinV2's per-head logit scale on the [windows, heads, N, N] attention scores) there is no
conv layout to keep: both engines reorder into one and back. Such a conv (constant weights [C, 1, 1, 1],
C groups, stride 1, no padding) is written as ``Mul`` by the weights as [1, C, 1, 1]: the same products.
SwinV2 at the zoo's size, 1 thread (2026-12-06, load ~3.3): OpenVINO 687 -> 567 us a call, onnxruntime
906 -> 838 us.

On a Concat's result (DenseNet's pre-activation BatchNorm) the depthwise conv and its bias add leave the
onnxruntime export as one ``BatchNormalization`` (the scale and the shift; mean 0, variance 1, epsilon 0:
the same products and sums) when that engine runs on more than one thread: its Conv form is the faster one
alone (DenseNet at the zoo's size, 1 thread: 107-125 us a call vs 110-129 as BatchNormalization) but not
with a second thread (168-195 vs 149-182 us; torch's own file, which keeps the BatchNorms, 146-177 us). On a
residual sum or a product (FastViT) the Conv form stays faster at 2 threads too (1354 vs 1404 us), and a
BatchNormalization followed by a separate Add is slower than either (2026-12-07, docs/backends.md).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rlx.backends.onnx.exporter import EXPORTERS, constant_of, exporter
from rlx.ir.dtype import DType
from rlx.ir.graph import Node
from rlx.opt.fold_affine import is_channel_scale

_PLAIN_CONV = EXPORTERS["conv2d"]
_PLAIN_BINARY = EXPORTERS["binary"]
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


def _multi_threaded(ex: Any) -> bool:
    return (ex.threads or os.cpu_count() or 1) > 1


def _batch_norm_terms(ex: Any, node: Node) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(the scaled activation, the [C] scale, the [C] shift) of ``add(channel scale conv, [C] constant)`` where
    that conv scales a concat's result and is read by this add alone; else None."""
    if node.attrs["op"] != "add" or node.dtype != DType.F32:
        return None
    for conv_id, shift_id in (node.inputs, node.inputs[::-1]):
        conv = ex.g.node(conv_id)
        if conv.op != "conv2d" or ex.users[conv_id] != [node.id] or conv_id in ex.g.output_ids:
            continue
        scale = channel_scale(ex, conv)
        shift = constant_of(ex, shift_id)
        c = conv.shape[1]
        if scale is None or shift is None or shift.shape not in ((c, 1, 1), (1, c, 1, 1)) \
                or ex.g.node(conv.inputs[0]).op != "concat":
            continue
        return conv.inputs[0], scale.reshape(c), shift.reshape(c).astype(np.float32)
    return None


@exporter("binary")
def _binary(ex, node, ins):
    terms = _batch_norm_terms(ex, node) if ex.engine == "onnxruntime" and _multi_threaded(ex) else None
    if terms is None:
        return _PLAIN_BINARY(ex, node, ins)
    x, scale, shift = terms  # the conv is left unread (drop_unread removes it)
    zeros, ones = np.zeros_like(scale), np.ones_like(scale)
    return ex.node("BatchNormalization", [ex.names[x], *(ex.const(v) for v in (scale, shift, zeros, ones))], epsilon=0.0)
