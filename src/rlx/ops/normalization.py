"""Normalization ops: layer_norm, layer_norm2d, group_norm, rms_norm.

Common rules: every operand is a float tensor; the result has x's shape and the promoted
dtype of all operands (x, gamma, beta); the variance is the biased (population) variance
computed in two passes (``mean((x - mu)**2)``); ``eps`` is added inside the square root.
Upstream's CPU kernels ignore ``axis`` (always the last axis) and compute the forward
variance in one pass (``E[x²] - mu²``); rlx honours ``axis`` and uses two passes.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import TensorType
from rlx.ops.common import axis_of, promote_args, require_dim, require_float, require_rank

_EPS = AttrSpec("float", default=1e-5, doc="added to the variance inside the square root")
_AXIS = AttrSpec("int", default=-1, doc="the normalized axis (negative counts from the end)")


def _affine_type(ins: list[TensorType], axis: int) -> TensorType:
    """x's shape; gamma and beta must be rank 1 with x.shape[axis] entries; all floats."""
    x, gamma, beta = ins
    for t, what in zip(ins, ("x", "gamma", "beta")):
        require_float(t, what)
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        require_rank(t, 1, what)
        require_dim(t.shape[0], x.shape[axis], f"{what} length (x axis {axis} of {x.shape!r})")
    return TensorType(x.shape, promote_all([t.dtype for t in ins]))


def _affine(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int) -> np.ndarray:
    """y * gamma + beta with the rank-1 gamma/beta laid along ``axis``."""
    shape = [1] * y.ndim
    shape[axis] = -1
    return y * gamma.reshape(shape) + beta.reshape(shape)


def _standardize(x: np.ndarray, axes: int | tuple[int, ...], eps: float) -> np.ndarray:
    mu = x.mean(axis=axes, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=axes, keepdims=True)
    return d / np.sqrt(var + eps)


# ------------------------------------------------------------------------- layer_norm


def _layer_norm_type(ins, attrs):
    return _affine_type(ins, axis_of(attrs["axis"], ins[0]))


def _layer_norm_kernel(args, attrs, out):
    x, gamma, beta = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    return _affine(_standardize(x, axis, attrs["eps"]), gamma, beta, axis)


defop(
    name="layer_norm", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"axis": _AXIS, "eps": _EPS},
    infer=_layer_norm_type, kernel=_layer_norm_kernel,
    doc="Layer normalization over one axis: mu = mean(x, axis), var = mean((x-mu)**2, axis) "
    "(biased, two-pass), y = (x-mu)/sqrt(var+eps)*gamma + beta, gamma/beta of shape "
    "[x.shape[axis]]. Any axis, negative allowed (upstream's kernel always uses the last "
    "axis and a one-pass variance). Result dtype: promotion of x, gamma, beta.",
)


# ----------------------------------------------------------------------- layer_norm2d


def _layer_norm2d_type(ins, attrs):
    require_rank(ins[0], 4, "x (N, C, H, W)")
    return _affine_type(ins, 1)


def _layer_norm2d_kernel(args, attrs, out):
    x, gamma, beta = promote_args(args, out.dtype)
    return _affine(_standardize(x, 1, attrs["eps"]), gamma, beta, 1)


defop(
    name="layer_norm2d", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"eps": _EPS},
    infer=_layer_norm2d_type, kernel=_layer_norm2d_kernel,
    doc="Channel layer norm of an NCHW tensor (SAM / candle LayerNorm2d): statistics over C "
    "at every (n, h, w) (not PyTorch's LayerNorm over H x W); gamma/beta [C]. Biased "
    "two-pass variance, eps inside the square root. Equals layer_norm(x, axis=1).",
)


# ------------------------------------------------------------------------- group_norm


def _group_norm_type(ins, attrs):
    x = ins[0]
    if len(x.shape) < 2:
        raise ShapeError(f"x must have rank >= 2 (N, C, *spatial), got {x.shape!r}")
    groups, channels = attrs["num_groups"], x.shape[1]
    if groups < 1:
        raise ShapeError(f"num_groups must be >= 1, got {groups}")
    if isinstance(channels, int) and channels % groups:
        raise ShapeError(f"channels C={channels} are not divisible by num_groups={groups}")
    return _affine_type(ins, 1)


def _group_norm_kernel(args, attrs, out):
    x, gamma, beta = promote_args(args, out.dtype)
    n, c = x.shape[:2]
    groups = attrs["num_groups"]
    if c % groups:
        raise ShapeError(f"group_norm: channels C={c} are not divisible by num_groups={groups}")
    grouped = x.reshape(n, groups, -1)  # contiguous channel groups with their spatial extent
    y = _standardize(grouped, 2, attrs["eps"]).reshape(x.shape)
    return _affine(y, gamma, beta, 1)


defop(
    name="group_norm", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"num_groups": AttrSpec("int", doc="number of contiguous channel groups; divides C"), "eps": _EPS},
    infer=_group_norm_type, kernel=_group_norm_kernel,
    doc="Group normalization of x [N, C, *spatial] (upstream: rank 4 NCHW only; rlx accepts "
    "any spatial rank, as torch does). Channels split into num_groups contiguous groups of "
    "C/G; mean and biased variance over (C/G) x spatial per sample and group; per-channel "
    "affine with gamma/beta [C]. Equals torch.nn.functional.group_norm.",
)


# --------------------------------------------------------------------------- rms_norm


def _rms_norm_kernel(args, attrs, out):
    x, gamma, beta = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    y = x / np.sqrt((x * x).mean(axis=axis, keepdims=True) + attrs["eps"])
    return _affine(y, gamma, beta, axis)


defop(
    name="rms_norm", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"axis": _AXIS, "eps": _EPS},
    infer=_layer_norm_type, kernel=_rms_norm_kernel,
    doc="RMS normalization over one axis: y = x / sqrt(mean(x**2, axis) + eps) * gamma + beta. "
    "beta is a mandatory operand, as upstream (pass zeros for LLaMA-style RMSNorm). Any "
    "axis, negative allowed (upstream's kernel uses the last axis). The result has x's "
    "shape (upstream also accepts a declared [prod(leading), H] output; rlx does not).",
)
