"""ONNX elementwise converters: unary math, activations, binary / variadic arithmetic, comparisons, logic, casts."""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _in_f32, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxUnsupported,
    rlx_dtype,
)
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, UNARY_MATH_KINDS
from rlx.ops.powers import multiplied_power

_ACT = {row.onnx: k for k, row in ACTIVATION_KINDS.items() if row.onnx}


_MATH = {row.onnx: k for k, row in UNARY_MATH_KINDS.items() if row.onnx}


def _act(cx, node, ins, attrs):
    x = ins[0]
    if node.op_type == "Relu" and x.dtype.is_int:
        return cx.g.maximum(x, cx.scalar(0, x))
    return cx.g.activation(x, kind=_ACT[node.op_type])


def _math(cx, node, ins, attrs):
    return cx.g.unary_math(ins[0], kind=_MATH[node.op_type])


@converter("Reciprocal")
def _reciprocal(cx, node, ins, attrs):
    return cx.scalar(1.0, ins[0]) / ins[0]


@converter("Identity")
def _identity(cx, node, ins, attrs):
    return ins[0]


#: n-ary in ONNX: a chain of binary ops (rlx's max / min propagate NaN, as ONNX Max / Min)
_VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}


_BIN = {row.onnx: k for k, row in BINARY_KINDS.items() if row.onnx and row.onnx not in _VARIADIC}


@converter(*_BIN)
def _binary(cx, node, ins, attrs):
    a, b = ins
    op = _BIN[node.op_type]
    exponent = cx.maybe_static(b) if op == "pow" else None
    if (exponent is not None and exponent.dtype.kind in "fiu" and exponent.size == 1
            and exponent.ndim <= len(a.shape)):  # a real scalar; the result keeps a's shape
        product = multiplied_power(cx.g, a, float(exponent.reshape(-1)[0]))  # onnxruntime multiplies for 2 and 3
        if product is not None:
            return product
    if op == "pow" and a.dtype != b.dtype:
        b = _cast(cx, b, a.dtype) if a.dtype.is_float else b
    if a.dtype.is_int and b.dtype.is_int and a.dtype != b.dtype:
        b = _cast(cx, b, a.dtype)
    out = cx.g.binary(a, b, op=op)
    return _cast(cx, out, a.dtype)


@converter(*_VARIADIC)
def _variadic(cx, node, ins, attrs):
    op = _VARIADIC[node.op_type]
    acc = ins[0]
    for v in ins[1:]:
        acc = cx.g.binary(acc, v, op=op)
    if node.op_type == "Mean":
        acc = acc / cx.scalar(float(len(ins)), acc)
    return acc


_CMP = {row.onnx: k for k, row in COMPARE_KINDS.items() if row.onnx}


@converter(*_CMP)
def _compare(cx, node, ins, attrs):
    return cx.g.compare(ins[0], ins[1], op=_CMP[node.op_type])


@converter("And", "Or", "Xor")
def _logical(cx, node, ins, attrs):
    a, b = ins
    if node.op_type == "Xor":
        return cx.g.ne(a, b)
    return cx.g.binary(a, b, op="mul" if node.op_type == "And" else "add")


@converter("Not")
def _not(cx, node, ins, attrs):
    return cx.g.eq(ins[0], cx.const(np.array(False)))


@converter("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _bitwise(cx, node, ins, attrs):
    ops = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}
    return cx.g.binary_ext(ins[0], ins[1], op=ops[node.op_type])


@converter("BitwiseNot")
def _bitwise_not(cx, node, ins, attrs):
    x = ins[0]
    ones = np.array(-1).astype(x.dtype.numpy) if x.dtype.numpy.kind == "i" else np.array(np.iinfo(x.dtype.numpy).max, x.dtype.numpy)
    return cx.g.binary_ext(x, cx.const(ones), op="bitwise_xor")


@converter("BitShift")
def _bitshift(cx, node, ins, attrs):
    return cx.g.binary_ext(ins[0], ins[1], op="shift_left" if attrs["direction"] == "LEFT" else "shift_right")


@converter("Mod")
def _mod(cx, node, ins, attrs):
    a, b = ins
    fmod = attrs.get("fmod", 0)
    return cx.g.binary_ext(a, b, op="fmod" if fmod else "mod")


@converter("IsNaN")
def _isnan(cx, node, ins, attrs):
    return cx.g.ne(ins[0], ins[0])


@converter("IsInf")
def _isinf(cx, node, ins, attrs):
    x = ins[0]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    parts = []
    if pos:
        parts.append(cx.g.eq(x, cx.scalar(np.inf, x)))
    if neg:
        parts.append(cx.g.eq(x, cx.scalar(-np.inf, x)))
    if not parts:
        return cx.g.lt(x, x)  # nothing detected: all False
    return parts[0] if len(parts) == 1 else cx.g.add(parts[0], parts[1])


@converter("Where")
def _where(cx, node, ins, attrs):
    return cx.g.where(ins[0], ins[1], ins[2])


@converter("Cast")
def _cast_op(cx, node, ins, attrs):
    to = rlx_dtype(attrs["to"], "Cast: ")
    return _onnx_cast(cx, ins[0], to, attrs)


@converter("CastLike")
def _castlike(cx, node, ins, attrs):
    return _onnx_cast(cx, ins[0], ins[1].dtype, attrs)


def _onnx_cast(cx, x: Value, to: DType, attrs) -> Value:
    mode = attrs.get("round_mode", b"up")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if to is DType.F8E8M0 and x.dtype.is_float and x.dtype is not DType.F8E8M0:
        if mode not in ("up", "down", "nearest"):
            raise OnnxUnsupported(f"Cast: round_mode {mode!r} (expected up, down or nearest)")
        return _cast_e8m0(cx, x, attrs.get("saturate", 1), mode)
    return _cast_saturating(cx, x, to, attrs.get("saturate", 1))


def _cast_e8m0(cx, x: Value, saturate: int, mode: str) -> Value:
    """A float to f8e8m0 on its f32 bits (docs/semantics.md#element-types): the exponent field, one more
    when it rounds up (up: any mantissa bit; nearest: the half bit, and for an f32 subnormal a bit below
    it too), held at 254 (2**127) when saturating; NaN / inf (and overflow without saturate) give NaN."""
    g = cx.g
    bits = g.bitcast(_cast(cx, x, DType.F32), to=DType.U32)

    def u32(v: int) -> Value:
        return cx.const(np.array(v, np.uint32))

    exp = g.binary_ext(g.binary_ext(bits, u32(23), op="shift_right"), u32(0xFF), op="bitwise_and")
    mant = g.binary_ext(bits, u32(0x7FFFFF), op="bitwise_and")
    if mode == "up":
        inc = g.ne(mant, u32(0))
    elif mode == "nearest":
        half = g.ne(g.binary_ext(bits, u32(0x400000), op="bitwise_and"), u32(0))
        below = g.ne(g.binary_ext(bits, u32(0x3FFFFF), op="bitwise_and"), u32(0))
        inc = g.binary_ext(half, g.binary_ext(below, g.gt(exp, u32(0)), op="bitwise_or"), op="bitwise_and")
    else:
        inc = g.ne(exp, exp)  # all False
    if saturate:
        inc = g.binary_ext(inc, g.ne(exp, u32(254)), op="bitwise_and")
    special = g.eq(exp, u32(255))
    top = u32(255)
    if saturate:  # inf gives the largest value, NaN stays NaN
        top = g.where(g.eq(mant, u32(0)), u32(254), top)
    rounded = g.where(special, top, g.where(inc, exp + u32(1), exp))
    return g.bitcast(_cast(cx, rounded, DType.U8), to=DType.F8E8M0)


@converter("BitCast")
def _bitcast_op(cx, node, ins, attrs):
    return cx.g.bitcast(ins[0], to=rlx_dtype(attrs["to"], "BitCast: "))


_FP8 = (DType.F8E4M3, DType.F8E5M2, DType.F8E4M3FNUZ, DType.F8E5M2FNUZ)


def _cast_saturating(cx, x: Value, to: DType, saturate: int) -> Value:
    if to in _FP8 and saturate and x.dtype != to and (x.dtype.is_float or x.dtype.is_int):
        import ml_dtypes  # only fp8 targets need it; rlx.onnx imports without it

        if x.dtype not in (DType.F32, DType.F64):  # narrow floats widen exactly; ints past 2**24 are far past fp8's max
            x = _cast(cx, x, DType.F32)
        big = float(ml_dtypes.finfo(to.numpy).max)
        hi, lo = cx.scalar(big, x), cx.scalar(-big, x)
        x = cx.g.where(cx.g.gt(x, hi), hi, cx.g.where(cx.g.lt(x, lo), lo, x))  # NaN stays NaN
    # saturate=0: rlx's cast is the IEEE-style conversion, overflow to NaN (e4m3fn, the fnuz kinds) / inf (e5m2)
    return _cast(cx, x, to)


# activations with parameters
@converter("Elu")
def _elu(cx, node, ins, attrs):
    alpha = attrs.get("alpha", 1.0)

    def body(x):
        return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, (cx.g.exp(x) - cx.scalar(1.0, x)) * cx.scalar(alpha, x))
    return _in_f32(cx, ins[0], body)


@converter("Selu")
def _selu(cx, node, ins, attrs):
    alpha, gamma = attrs.get("alpha", 1.67326319217681884765625), attrs.get("gamma", 1.05070102214813232421875)

    def body(x):
        neg = cx.g.exp(x) * cx.scalar(alpha, x) - cx.scalar(alpha, x)
        return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, neg) * cx.scalar(gamma, x)
    return _in_f32(cx, ins[0], body)


@converter("LeakyRelu")
def _leaky(cx, node, ins, attrs):
    x = ins[0]
    return cx.g.where(cx.g.lt(x, cx.scalar(0.0, x)), x * cx.scalar(attrs.get("alpha", 0.01), x), x)


@converter("PRelu")
def _prelu(cx, node, ins, attrs):
    x, slope = ins
    per_channel = len(x.shape) > 2 and len(slope.shape) == 1 and slope.shape[0] == x.shape[1]
    if cx.opset < 7 and per_channel:  # PRelu-6: a 1-D slope holds one value per channel (axis 1)
        slope = _reshape(cx, slope, [slope.shape[0], *[1] * (len(x.shape) - 2)])
    return cx.g.where(cx.g.lt(x, cx.scalar(0, x)), x * slope, x)


@converter("ThresholdedRelu")
def _thresholded(cx, node, ins, attrs):
    x = ins[0]
    return cx.g.where(cx.g.gt(x, cx.scalar(attrs.get("alpha", 1.0), x)), x, cx.scalar(0.0, x))


@converter("HardSigmoid")
def _hard_sigmoid(cx, node, ins, attrs):
    def body(x):
        y = x * cx.scalar(attrs.get("alpha", 0.2), x) + cx.scalar(attrs.get("beta", 0.5), x)
        return cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))
    return _in_f32(cx, ins[0], body)


@converter("HardSwish")
def _hard_swish(cx, node, ins, attrs):
    def body(x):
        y = x * cx.scalar(1.0 / 6.0, x) + cx.scalar(0.5, x)
        return x * cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))
    return _in_f32(cx, ins[0], body)


@converter("Softplus")
def _softplus(cx, node, ins, attrs):
    return _in_f32(cx, ins[0], lambda x: cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x)))


@converter("Softsign")
def _softsign(cx, node, ins, attrs):
    return _in_f32(cx, ins[0], lambda x: x / (cx.g.abs(x) + cx.scalar(1.0, x)))


@converter("Mish")
def _mish(cx, node, ins, attrs):
    return _in_f32(cx, ins[0], lambda x: x * cx.g.tanh(cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x))))


@converter("Gelu")
def _gelu(cx, node, ins, attrs):
    return cx.g.activation(ins[0], kind="gelu_approx" if attrs.get("approximate", "none") == "tanh" else "gelu")


@converter("Swish")
def _swish(cx, node, ins, attrs):
    alpha = attrs.get("alpha", 1.0)
    if alpha == 1.0:
        return cx.g.silu(ins[0])
    return _in_f32(cx, ins[0], lambda x: x * cx.g.sigmoid(x * cx.scalar(alpha, x)))


@converter("Shrink")
def _shrink(cx, node, ins, attrs):
    x = ins[0]
    lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    zero = cx.scalar(0, x)
    hi = cx.g.where(cx.g.gt(x, cx.scalar(lambd, x)), x - cx.scalar(bias, x), zero)
    return cx.g.where(cx.g.lt(x, cx.scalar(-lambd, x)), x + cx.scalar(bias, x), hi)


@converter("Clip")
def _clip(cx, node, ins, attrs):
    x = ins[0]
    if cx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
        lo = cx.scalar(lo, x) if lo is not None else None
        hi = cx.scalar(hi, x) if hi is not None else None
    else:
        lo = ins[1] if len(ins) > 1 else None
        hi = ins[2] if len(ins) > 2 else None
    if lo is not None:
        x = cx.g.where(cx.g.lt(x, lo), lo, x)
    if hi is not None:
        x = cx.g.where(cx.g.gt(x, hi), hi, x)
    return x


@converter("Dropout")
def _dropout(cx, node, ins, attrs):
    x = ins[0]
    training = False
    if len(node.input) > 2 and node.input[2]:
        training = bool(cx.static(node.input[2], "training_mode").reshape(-1)[0])
    ratio = 0.0
    if len(node.input) > 1 and node.input[1]:
        ratio = float(cx.static(node.input[1], "ratio").reshape(-1)[0])
    if training and ratio != 0.0:
        raise OnnxUnsupported("Dropout in training mode (random) is not modelled")
    mask = cx.const(np.ones(_static_shape(x), dtype=bool)) if x.shape.is_static else \
        cx.g.expand(cx.const(np.ones((), dtype=bool)), target_shape=list(x.shape))
    return [x, mask]
