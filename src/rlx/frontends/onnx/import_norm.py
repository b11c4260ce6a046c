"""ONNX normalization converters: Batch / Instance / Layer / RMS / Group / Lp normalization and LRN."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _reshape
from rlx.frontends.onnx.import_shape import pad_value
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
)


def _moments(cx, x: Value, axes: list[int]):
    mu = cx.g.reduce(x, op="mean", axes=axes, keep_dim=True)
    d = x - mu
    var = cx.g.reduce(d * d, op="mean", axes=axes, keep_dim=True)
    return mu, d, var


@converter("BatchNormalization")
def _batchnorm(cx, node, ins, attrs):
    x, scale, bias, mean, var = ins[:5]
    eps = attrs.get("epsilon", 1e-5)
    rank = len(x.shape)
    shape = [1] * rank
    if rank > 1:
        shape[1] = x.shape[1]
    stats_wanted = len(node.output) > 1 and any(node.output[1:])
    training = attrs.get("training_mode", 0) or (cx.opset < 7 and not attrs.get("is_test", 1)) or stats_wanted
    if training:
        axes = [i for i in range(rank) if i != 1]
        mu, d, v = _moments(cx, x, axes)
        y = d / cx.g.sqrt(v + cx.scalar(eps, v)) * _reshape(cx, scale, shape) + _reshape(cx, bias, shape)
        mom = attrs.get("momentum", 0.9)
        bm = _reshape(cx, mu, [x.shape[1]])
        bv = _reshape(cx, v, [x.shape[1]])
        run_mean = mean * cx.scalar(mom, mean) + bm * cx.scalar(1 - mom, bm)
        run_var = var * cx.scalar(mom, var) + bv * cx.scalar(1 - mom, bv)
        return [y, run_mean, run_var]
    inv = cx.g.rsqrt(_reshape(cx, var, shape) + cx.scalar(eps, var))
    return (x - _reshape(cx, mean, shape)) * (inv * _reshape(cx, scale, shape)) + _reshape(cx, bias, shape)


@converter("InstanceNormalization")
def _instancenorm(cx, node, ins, attrs):
    x, scale, bias = ins
    rank = len(x.shape)
    shape = [1, x.shape[1]] + [1] * (rank - 2)
    _mu, d, var = _moments(cx, x, list(range(2, rank)))
    y = d / cx.g.sqrt(var + cx.scalar(attrs.get("epsilon", 1e-5), var))
    return y * _reshape(cx, scale, shape) + _reshape(cx, bias, shape)


@converter("LayerNormalization")
def _layernorm(cx, node, ins, attrs):
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    rank = len(x.shape)
    axis = _axis(attrs.get("axis", -1), rank)
    eps = attrs.get("epsilon", 1e-5)
    axes = list(range(axis, rank))
    stash = DType.F32 if attrs.get("stash_type", 1) == 1 and x.dtype != DType.F64 else x.dtype
    xs = _cast(cx, x, stash)
    want_stats = len(node.output) > 1 and any(node.output[1:])
    if (axis == rank - 1 and len(scale.shape) == 1 and (bias is None or len(bias.shape) == 1) and not want_stats
            and stash == x.dtype):
        b = bias if bias is not None else cx.const(np.zeros(scale.shape, scale.dtype.numpy))
        return cx.g.layer_norm(x, scale, b, axis=-1, eps=eps)
    mu, d, var = _moments(cx, xs, axes)
    inv = cx.g.rsqrt(var + cx.scalar(eps, var))
    y = _cast(cx, d * inv, x.dtype) * scale
    if bias is not None:
        y = y + bias
    return [y, mu, inv]


@converter("RMSNormalization")
def _rmsnorm(cx, node, ins, attrs):
    x, scale = ins
    rank = len(x.shape)
    axis = _axis(attrs.get("axis", -1), rank)
    stash = DType.F32 if attrs.get("stash_type", 1) == 1 and x.dtype != DType.F64 else x.dtype
    xs = _cast(cx, x, stash)
    ms = cx.g.reduce(xs * xs, op="mean", axes=list(range(axis, rank)), keep_dim=True)
    y = xs * cx.g.rsqrt(ms + cx.scalar(attrs.get("epsilon", 1e-5), ms))
    return _cast(cx, y, x.dtype) * scale


@converter("GroupNormalization")
def _groupnorm(cx, node, ins, attrs):
    x, scale, bias = ins
    g_ = attrs["num_groups"]
    shape = list(x.shape)
    n, c = shape[:2]
    eps = attrs.get("epsilon", 1e-5)
    if cx.opset < 21:
        raise OnnxUnsupported("GroupNormalization-18 (per-group scale) is deprecated; use opset 21")
    if len(shape) == 4 and scale.shape == (c,) and c % g_ == 0 and x.dtype == scale.dtype:
        return cx.g.group_norm(x, scale, bias, num_groups=g_, eps=eps)
    grouped = _reshape(cx, x, [n, g_, math.prod(shape[1:]) // g_])
    _mu, d, var = _moments(cx, grouped, [2])
    y = _reshape(cx, d / cx.g.sqrt(var + cx.scalar(eps, var)), shape)
    cs = [1, c] + [1] * (len(shape) - 2)
    return y * _reshape(cx, scale, cs) + _reshape(cx, bias, cs)


@converter("LpNormalization")
def _lpnorm(cx, node, ins, attrs):
    x = ins[0]
    if not x.shape:  # there is no axis to normalise along (the reduce would fail only at run time)
        raise OnnxFormatError("the input is a scalar (rank 0): there is no axis to normalise along")
    axis = _axis(attrs.get("axis", -1), len(x.shape))
    p = attrs.get("p", 2)
    if p == 1:
        norm = cx.g.reduce(cx.g.abs(x), op="sum", axes=[axis], keep_dim=True)
    else:
        norm = cx.g.sqrt(cx.g.reduce(x * x, op="sum", axes=[axis], keep_dim=True))
    return x / cx.g.where(cx.g.eq(norm, cx.scalar(0, norm)), cx.scalar(1, norm), norm)  # a zero vector stays zero


@converter("LRN")
def _lrn(cx, node, ins, attrs):
    x = ins[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    c = x.shape[1]
    if not isinstance(c, int):
        raise NeedsShapes(f"LRN needs a static channel count, got {list(x.shape)}")
    if size < 1:
        raise OnnxFormatError(f"LRN size {size} must be positive")
    cx.unroll(size, "the LRN window")
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = pad_value(cx, x * x, {1: (lo, hi)})
    acc = None
    for i in range(size):
        part = cx.g.narrow(sq, axis=1, start=i, length=c)
        acc = part if acc is None else acc + part
    return x / (cx.scalar(bias, x) + acc * cx.scalar(alpha / size, x)) ** cx.scalar(beta, x)
