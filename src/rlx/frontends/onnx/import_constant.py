"""ONNX converters whose result comes from shapes and attributes: Shape, Size, Constant, ConstantOfShape, Range, EyeLike, OneHot."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.onnx.common import (
    OnnxFormatError,
    OnnxUnsupported,
    rlx_dtype,
)
from rlx.frontends.onnx.import_context import FOLD_LIMIT, NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _first, _reshape, _static_shape
from rlx.ir.dtype import DType


@converter("Shape")
def _shape(cx, node, ins, attrs):
    shape = ins[0].shape
    if not shape.is_static:
        raise NeedsShapes(f"Shape of a symbolic shape {shape!r}")
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return cx.const(np.array(list(shape)[start:end], dtype=np.int64))


@converter("Size")
def _size(cx, node, ins, attrs):
    return cx.const(np.array(math.prod(_static_shape(ins[0])), dtype=np.int64))


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
    shape = [int(d) for d in cx.static(node.input[0], "shape").reshape(-1)]
    value = cx.tensor(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    if math.prod(shape) > FOLD_LIMIT:  # a large splat stays a broadcast, not a materialized constant
        return cx.g.expand(cx.const(value[:1].reshape(())), target_shape=shape)
    return cx.const(np.full(shape, value[0], dtype=value.dtype))


@converter("Range")
def _range(cx, node, ins, attrs):
    start, limit, delta = (_first(cx.static(n, "Range operand"), "Range operand") for n in node.input[:3])
    span = (float(limit) - float(start)) / float(delta) if float(delta) else math.nan
    if not math.isfinite(span):
        raise OnnxFormatError(f"Range({start}, {limit}, {delta}) has no finite length")
    n = max(math.ceil(span), 0)
    cx.check_elements(n, "the Range")
    return cx.const((start + np.arange(n) * delta).astype(start.dtype))


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
