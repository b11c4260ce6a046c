"""ONNX converters of the ai.onnx.ml domain that are plain tensor ops (Binarizer, ArrayFeatureExtractor)."""

from __future__ import annotations

import math

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.onnx_format import OnnxFormatError


@converter("ai.onnx.ml.Binarizer")
def _binarizer(cx, node, ins, attrs):
    x = ins[0]
    return _cast(cx, cx.g.gt(x, cx.scalar(attrs.get("threshold", 0.0), x)), x.dtype)


@converter("ai.onnx.ml.ArrayFeatureExtractor")
def _array_feature_extractor(cx, node, ins, attrs):
    """The columns ``indices`` (flattened) of the last axis; a 1-D input gives one row [1, k] (as onnxruntime)."""
    x, idx = ins
    if not idx.dtype.is_int:
        raise OnnxFormatError(f"ArrayFeatureExtractor indices must be integers, got {idx.dtype}")
    shape = _static_shape(x)
    flat = _reshape(cx, idx, [math.prod(_static_shape(idx))])
    flat = cx.g.where(cx.g.lt(flat, cx.scalar(0, flat)), flat + cx.scalar(shape[-1], flat), flat)
    y = cx.g.gather(x, flat, axis=len(shape) - 1)
    return _reshape(cx, y, [1, *y.shape]) if len(shape) == 1 else y


