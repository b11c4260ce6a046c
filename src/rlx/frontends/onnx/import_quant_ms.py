"""onnxruntime's com.microsoft QLinear* element-wise / pooling ops and MatMulIntegerToFloat (quantized models).

Each is DequantizeLinear of its operands, the float op, and QuantizeLinear to the output's scale and zero
point: the same converters as the standard ops, so the rounding (half to even) and saturation are theirs.
A missing zero point is 0 of the quantized operand's type.
"""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_conv import _pool
from rlx.frontends.onnx.import_helpers import _cast, _reshape
from rlx.frontends.onnx.import_quant import _dequantize, _matmul_integer, _quantize
from rlx.frontends.onnx.loading import onnx_module
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import OnnxFormatError

MS = "com.microsoft"


def _zp(cx, zp: Value | None, like: Value) -> Value:
    return zp if zp is not None else cx.const(np.zeros((), like.dtype.numpy))


def _dq(cx, node, x: Value, scale: Value, zp: Value | None) -> Value:
    return _dequantize(cx, node, [x, _reshape(cx, scale, []), _reshape(cx, _zp(cx, zp, x), [])], {})


def _q(cx, node, y: Value, scale: Value, zp: Value | None, like: Value) -> Value:
    return _quantize(cx, node, [y, _reshape(cx, scale, []), _reshape(cx, _zp(cx, zp, like), [])], {})


def _operand(ins, i: int) -> Value | None:
    return ins[i] if len(ins) > i else None


@converter(f"{MS}.QLinearAdd", f"{MS}.QLinearMul")
def _qlinear_binary(cx, node, ins, attrs):
    a, b = _dq(cx, node, ins[0], ins[1], ins[2]), _dq(cx, node, ins[3], ins[4], _operand(ins, 5))
    y = a + b if node.op_type == "QLinearAdd" else a * b
    return _q(cx, node, y, ins[6], _operand(ins, 7), ins[0])


@converter(f"{MS}.QLinearSigmoid", f"{MS}.QLinearLeakyRelu")
def _qlinear_unary(cx, node, ins, attrs):
    x = _dq(cx, node, ins[0], ins[1], ins[2])
    if node.op_type == "QLinearSigmoid":
        y = cx.g.sigmoid(x)
    else:
        y = cx.g.where(cx.g.ge(x, cx.scalar(0.0, x)), x, x * cx.scalar(attrs.get("alpha", 0.01), x))
    return _q(cx, node, y, ins[3], _operand(ins, 4), ins[0])


@converter(f"{MS}.QLinearGlobalAveragePool")
def _qlinear_global_average_pool(cx, node, ins, attrs):
    x = _dq(cx, node, ins[0], ins[1], ins[2])
    rank = len(x.shape)
    if rank < 3:
        raise OnnxFormatError(f"QLinearGlobalAveragePool input must have spatial dims, got {list(x.shape)}")
    axes = list(range(1, rank - 1)) if attrs.get("channels_last", 0) else list(range(2, rank))
    return _q(cx, node, cx.g.mean(x, axes=axes, keep_dim=True), ins[3], _operand(ins, 4), ins[0])


@converter(f"{MS}.QLinearConcat")
def _qlinear_concat(cx, node, ins, attrs):
    """Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor."""
    if len(ins) < 5 or (len(ins) - 2) % 3:
        raise OnnxFormatError(f"QLinearConcat takes Y_scale, Y_zero_point and triples, got {len(ins)} inputs")
    parts = [_dq(cx, node, ins[i], ins[i + 1], ins[i + 2]) for i in range(2, len(ins), 3)]
    axis = attrs["axis"] % len(parts[0].shape)
    return _q(cx, node, cx.g.concat(parts, axis=axis), ins[0], ins[1], ins[2])


def _to_channels_first(cx, x: Value) -> Value:
    rank = len(x.shape)
    return cx.g.transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])


@converter(f"{MS}.QLinearAveragePool")
def _qlinear_average_pool(cx, node, ins, attrs):
    """AveragePool (the standard converter, on a stand-in AveragePool node) between DQ and Q; NHWC by
    transposes when channels_last."""
    x = _dq(cx, node, ins[0], ins[1], ins[2])
    last = attrs.pop("channels_last", 0)
    if last:
        x = _to_channels_first(cx, x)
    avg = onnx_module().helper.make_node("AveragePool", node.input[:1], node.output[:1], name=node.name)
    y = _pool(cx, avg, [x], attrs)
    if last:
        rank = len(y.shape)
        y = cx.g.transpose(y, perm=[0, *range(2, rank), 1])
    return _q(cx, node, y, ins[3], _operand(ins, 4), ins[0])


@converter(f"{MS}.MatMulIntegerToFloat")
def _matmul_integer_to_float(cx, node, ins, attrs):
    """(A - a_zp) @ (B - b_zp) exactly in int32 (MatMulInteger), times a_scale * b_scale (b's per column),
    plus the optional bias: inputs A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias."""
    a, b, a_s, b_s = ins[:4]
    acc = _matmul_integer(cx, node, [a, b, _operand(ins, 4), _operand(ins, 5)], {})
    y = _cast(cx, acc, DType.F32) * (_cast(cx, a_s, DType.F32) * _cast(cx, b_s, DType.F32))
    bias = _operand(ins, 6)
    return _cast(cx, y + _cast(cx, bias, DType.F32) if bias is not None else y, a_s.dtype)
