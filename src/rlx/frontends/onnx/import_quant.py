"""ONNX quantization converters: Quantize / DequantizeLinear and the integer / quantized MatMul and Conv."""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_conv import _conv
from rlx.frontends.onnx.import_elementwise import _cast_saturating
from rlx.frontends.onnx.import_helpers import _axis, _cast, _reshape, _static_shape
from rlx.frontends.onnx.import_linalg import _matmul
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
    rlx_dtype,
)

_QUANT_INTS = (DType.U8, DType.I8, DType.U16, DType.I16, DType.U4, DType.I4, DType.U2, DType.I2)
_QUANT_FLOATS = (DType.F8E4M3, DType.F8E5M2, DType.F8E4M3FNUZ, DType.F8E5M2FNUZ, DType.F4E2M1)


def _linear_quant_operands(cx, node, ins, attrs):
    """``x, scale, zero point (or None)`` of Quantize/DequantizeLinear and ``lay``, which shapes a
    per-tensor, per-axis or blocked scale / zero point to broadcast against ``x``."""
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    if attrs.get("block_size", 0):
        return x, scale, zp, _blocked_layout(cx, node, x, scale, attrs)
    if len(scale.shape) > 1:
        raise OnnxFormatError(f"{node.op_type}: a scale of rank {len(scale.shape)} needs block_size")
    per_axis = len(scale.shape) == 1 and scale.shape[0] != 1
    axis = _axis(attrs.get("axis", 1), max(len(x.shape), 1)) if per_axis else 0

    def lay(v):
        return _zero_point(cx, v, len(x.shape), axis)

    return x, scale, zp, lay


def _blocked_layout(cx, node, x: Value, scale: Value, attrs):
    """Blocked scales: parameter block ``i // block_size`` along ``axis`` (the scale has x's rank, that
    axis ceil(n / block_size) long, the others x's), repeated to x's shape by a gather."""
    block, rank = attrs["block_size"], len(x.shape)
    axis = _axis(attrs.get("axis", 1), max(rank, 1))
    n = x.shape[axis]
    if not isinstance(n, int):
        raise NeedsShapes(f"{node.op_type}: blocked scales need a static axis {axis}, got {n}")
    if block < 0:
        raise OnnxUnsupported(f"{node.op_type}: blocked scales need a static axis {axis} and block_size >= 1")
    want = [-(-n // block) if d == axis else x.shape[d] for d in range(rank)]
    if list(scale.shape) != want:
        raise OnnxFormatError(f"{node.op_type}: blocked scale has shape {list(scale.shape)}, x {list(x.shape)} with "
                              f"block_size {block} on axis {axis} needs {want}")
    rows = cx.const(np.arange(n, dtype=np.int64) // block)

    def lay(v):
        return None if v is None else cx.g.gather(v, rows, axis=axis)

    return lay


@converter("DequantizeLinear")
def _dequantize(cx, node, ins, attrs):
    x, scale, zp, lay = _linear_quant_operands(cx, node, ins, attrs)
    out_dtype = rlx_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else scale.dtype
    xf = _cast(cx, x, DType.F32)
    if zp is not None:
        xf = xf - _cast(cx, lay(zp), DType.F32)
    return _cast(cx, xf * _cast(cx, lay(scale), DType.F32), out_dtype)


@converter("QuantizeLinear")
def _quantize(cx, node, ins, attrs):
    x, scale, zp, lay = _linear_quant_operands(cx, node, ins, attrs)
    out = zp.dtype if zp is not None else (rlx_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else DType.U8)
    if out not in _QUANT_INTS + _QUANT_FLOATS:
        raise OnnxUnsupported(f"QuantizeLinear to {out}")
    if out in _QUANT_FLOATS:  # float8 / float4: x / scale (+ zero point), then the saturating cast
        xs = _cast(cx, x, DType.F32) / _cast(cx, lay(scale), DType.F32)
        if zp is not None:
            xs = xs + _cast(cx, lay(zp), DType.F32)
        return _cast_saturating(cx, xs, out, attrs.get("saturate", 1))  # f4e2m1 has no inf / NaN: it saturates

    xf = _cast(cx, x, DType.F32)
    y = cx.g.unary_math(xf / _cast(cx, lay(scale), DType.F32), kind="round_even")
    if zp is not None:
        y = y + _cast(cx, lay(zp), DType.F32)
    import ml_dtypes  # its iinfo also knows the sub-byte integers (which need ml_dtypes anyway)

    info = ml_dtypes.iinfo(out.numpy)
    y = cx.g.minimum(cx.g.maximum(y, cx.scalar(float(info.min), y)), cx.scalar(float(info.max), y))
    return _cast(cx, y, out)


def _zero_point(cx, v: Value | None, rank: int, axis: int | None) -> Value | None:
    """A zero point / scale laid out to broadcast: scalars as they are, a vector along ``axis``."""
    if v is None:
        return None
    if len(v.shape) == 1 and v.shape[0] != 1 and axis is not None:
        shape = [1] * rank
        shape[axis] = v.shape[0]
        return _reshape(cx, v, shape)
    return _reshape(cx, v, []) if v.shape.numel == 1 else v


def _centred(cx, v: Value, zp: Value | None, axis: int, dtype: DType) -> Value:
    """``v - zp`` in ``dtype`` (the zero point broadcast along ``axis`` of ``v``), or ``v`` without one."""
    v = _cast(cx, v, dtype)
    return v if zp is None else v - _cast(cx, _zero_point(cx, zp, len(v.shape), axis), dtype)


@converter("MatMulInteger")
def _matmul_integer(cx, node, ins, attrs):
    azp = ins[2] if len(ins) > 2 else None
    bzp = ins[3] if len(ins) > 3 else None
    a = _centred(cx, ins[0], azp, len(ins[0].shape) - 2, DType.I32)
    b = _centred(cx, ins[1], bzp, len(ins[1].shape) - 1, DType.I32)
    return _matmul(cx, node, [a, b], {})


@converter("ConvInteger")
def _conv_integer(cx, node, ins, attrs):
    x = _centred(cx, ins[0], ins[2] if len(ins) > 2 else None, 1, DType.F64)
    w = _centred(cx, ins[1], ins[3] if len(ins) > 3 else None, 0, DType.F64)
    return _cast(cx, _conv(cx, node, [x, w], attrs), DType.I32)  # exact: integer sums far below 2**53


@converter("QLinearMatMul")
def _qlinear_matmul(cx, node, ins, attrs):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins
    out = y_zp.dtype
    if out not in (DType.U8, DType.I8):
        raise OnnxUnsupported(f"QLinearMatMul to {out}")
    af = _centred(cx, a, a_zp, len(a.shape) - 2, DType.F64)
    bf = _centred(cx, b, b_zp, len(b.shape) - 1, DType.F64)
    acc = _matmul(cx, node, [af, bf], {})
    scale = _cast(cx, (_reshape(cx, a_s, []) * _reshape(cx, b_s, [])) / _reshape(cx, y_s, []), DType.F64)
    y = cx.g.unary_math(acc * scale, kind="round_even") + _cast(cx, _reshape(cx, y_zp, []), DType.F64)
    info = np.iinfo(out.numpy)
    y = cx.g.minimum(cx.g.maximum(y, cx.scalar(float(info.min), y)), cx.scalar(float(info.max), y))
    return _cast(cx, y, out)


@converter("QLinearConv")
def _qlinear_conv(cx, node, ins, attrs):
    """round_even((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp, saturated; w_scale and
    w_zp per tensor or per output channel. The integer accumulation runs in f64 (exact far below 2**53)."""
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = ins[:8]
    b = ins[8] if len(ins) > 8 else None
    out = y_zp.dtype
    if out not in (DType.U8, DType.I8):
        raise OnnxUnsupported(f"QLinearConv to {out}")
    m, rank = _static_shape(w)[0], len(x.shape)
    for what, v in (("w_scale", w_s), ("w_zero_point", w_zp)):
        if v.shape.numel not in (1, m):
            raise OnnxFormatError(f"QLinearConv: {what} has shape {list(v.shape)}, W has {m} output channels")
    xf = _centred(cx, x, x_zp, 1, DType.F64)
    wf = _centred(cx, w, w_zp, 0, DType.F64)
    acc = _conv(cx, node, [xf, wf], attrs)
    if b is not None:
        acc = acc + _cast(cx, _reshape(cx, b, [1, m, *[1] * (rank - 2)]), DType.F64)
    w_scale = _cast(cx, _zero_point(cx, w_s, rank, 1), DType.F64)  # per channel: [1, M, 1, ...]
    scale = _cast(cx, _reshape(cx, x_s, []), DType.F64) * w_scale / _cast(cx, _reshape(cx, y_s, []), DType.F64)
    y = cx.g.unary_math(acc * scale, kind="round_even") + _cast(cx, _reshape(cx, y_zp, []), DType.F64)
    info = np.iinfo(out.numpy)
    y = cx.g.minimum(cx.g.maximum(y, cx.scalar(float(info.min), y)), cx.scalar(float(info.max), y))
    return _cast(cx, y, out)
