"""ONNX converters whose result comes from shapes and attributes: Shape, Size, Constant, ConstantOfShape, Range, EyeLike, OneHot."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.onnx.import_context import FOLD_LIMIT, converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _first, _reshape, _static_shape
from rlx.frontends.onnx.import_symbolic import shape_value
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
    rlx_dtype,
)
from rlx.ir.symbolic import dim_max, floordiv


@converter("Shape")
def _shape(cx, node, ins, attrs):
    """The dims of x: a constant when static, else a runtime value whose symbolic entries are kept (import_symbolic)."""
    shape = list(ins[0].shape)
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return shape_value(cx, shape[start:end])


@converter("Size")
def _size(cx, node, ins, attrs):
    n = math.prod(ins[0].shape)
    if isinstance(n, int):
        return cx.const(np.array(n, dtype=np.int64))
    return _reshape(cx, shape_value(cx, [n]), [])


@converter("Constant")
def _constant(cx, node, ins, attrs):
    if "value" in attrs:
        return cx.const(cx.tensor(attrs["value"]))
    if "value_float" in attrs:
        return cx.const(np.array(attrs["value_float"], np.float32))
    if "value_floats" in attrs:
        return cx.const(np.array(attrs["value_floats"], np.float32))
    if "value_int" in attrs:
        return cx.const(np.array(attrs["value_int"], np.int64))
    if "value_ints" in attrs:
        return cx.const(np.array(attrs["value_ints"], np.int64))
    raise OnnxUnsupported(f"Constant with attributes {sorted(attrs)}")


@converter("ConstantOfShape")
def _constant_of_shape(cx, node, ins, attrs):
    shape = cx.sizes(node.input[0], "shape")
    value = cx.tensor(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    if any(isinstance(d, str) for d in shape) or math.prod(shape) > FOLD_LIMIT:  # a large / symbolic splat stays a broadcast
        return cx.g.expand(cx.const(value[:1].reshape(())), target_shape=shape)
    return cx.const(np.full(shape, value[0], dtype=value.dtype))


@converter("Range")
def _range(cx, node, ins, attrs):
    if any(v.id in cx.dims for v in ins[:2]) and ins[0].dtype.is_int:
        return _symbolic_range(cx, node, ins)
    start, limit, delta = (_first(cx.static(n, "Range operand"), "Range operand") for n in node.input[:3])
    span = (float(limit) - float(start)) / float(delta) if float(delta) else math.nan
    if not math.isfinite(span):
        raise OnnxFormatError(f"Range({start}, {limit}, {delta}) has no finite length")
    n = max(math.ceil(span), 0)
    cx.check_elements(n, "the Range")
    return cx.const((start + np.arange(n) * delta).astype(start.dtype))


def _symbolic_range(cx, node, ins):
    """An integer Range whose start or limit is a symbolic size: its length is a dim expression
    (``limit - start`` for a unit step), its values ``start + delta * (running count of ones)``."""
    delta = int(_first(cx.static(node.input[2], "Range delta"), "Range delta"))
    if delta == 0:
        raise OnnxFormatError("Range delta 0")
    start, limit = (_first(np.array(cx.sizes(n, "Range operand"), dtype=object), "Range operand") for n in node.input[:2])
    length = dim_max(floordiv(limit - start + delta - 1, delta) if delta > 0 else floordiv(start - limit - delta - 1, -delta), 0)
    dtype = ins[0].dtype
    ones = cx.g.expand(cx.const(np.ones(1, dtype.numpy)), target_shape=[length])
    count = cx.g.cumulative(ones, op="sum", axis=0, exclusive=True)
    return _reshape(cx, ins[0], []) + count * _reshape(cx, ins[2], [])


@converter("EyeLike")
def _eyelike(cx, node, ins, attrs):
    x = ins[0]
    shape = _static_shape(x)
    if len(shape) != 2:
        raise OnnxFormatError(f"EyeLike needs a rank-2 input, got {shape}")
    cx.check_elements(math.prod(shape), "the EyeLike matrix")
    dtype = rlx_dtype(attrs["dtype"]) if "dtype" in attrs else x.dtype
    return cx.const(np.eye(shape[0], shape[1], k=attrs.get("k", 0), dtype=dtype.numpy))


@converter("OneHot")
def _onehot(cx, node, ins, attrs):
    idx, values = ins[0], ins[2]
    depth = int(_first(cx.static(node.input[1], "depth"), "depth"))
    if depth < 1:
        raise OnnxFormatError(f"OneHot depth {depth} must be positive")
    cx.check_elements(depth, "the OneHot iota")
    axis = attrs.get("axis", -1)
    rank = len(idx.shape) + 1
    axis = _axis(axis, rank)
    idx = _cast(cx, idx, DType.I64)
    idx = cx.g.where(cx.g.lt(idx, cx.scalar(0, idx)), idx + cx.scalar(depth, idx), idx)
    shape = [1] * rank
    shape[axis] = depth
    iota = cx.const(np.arange(depth, dtype=np.int64).reshape(shape))
    idx_shape = list(idx.shape)
    idx_shape.insert(axis, 1)
    hit = cx.g.eq(_reshape(cx, idx, idx_shape), iota)
    off = cx.g.narrow(values, axis=0, start=0, length=1)
    on = cx.g.narrow(values, axis=0, start=1, length=1)
    return cx.g.where(hit, _reshape(cx, on, []), _reshape(cx, off, []))
