"""Normalization ops: layer_norm, layer_norm2d, group_norm, rms_norm.

Common rules: every operand is a float tensor; the result has x's shape and the promoted
dtype of all operands (x, gamma, beta); the variance is the biased (population) variance
computed in two passes (``mean((x - mu)**2)``); ``eps`` is added inside the square root.
Upstream's CPU kernels ignore ``axis`` (always the last axis) and compute the forward
variance in one pass (``E[x²] - mu²``); rlx honours ``axis`` and uses two passes.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import TensorType
from rlx.ops import rows
from rlx.ops.common import NORM_EPS, axis_of, dot_mean, fresh_into, promote_args, require_dim, require_float, require_rank
from rlx.ops.kinds import NUMPY, GraphNamespace

_EPS = AttrSpec("float", default=NORM_EPS, doc="added to the variance inside the square root")
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


# ----------------------------------------------------------------------- autodiff rules
# Design (contract: rlx.autodiff.rules): every derivative is written with primitive ops
# (reduce mean/sum, binary, sqrt, reshape, cast) instead of the fused *_backward kernels, so a
# derivative graph is itself differentiable by existing rules (hvp and higher orders work
# through the norms). All four norms share one engine: x is viewed (group_norm: reshaped to
# [*lead, N, G, C/G*spatial]) so that the statistics are a keep_dim reduction over `axes`,
# xhat = (x - mu) / sqrt(var + eps) (rms_norm: x / sqrt(mean(x²) + eps)), y = xhat*gamma + beta
# with gamma/beta laid along the channel axis. Work happens in the result dtype.


class _NormView:
    """How a norm node (per-example rank ``rank``, ``lead`` extra leading axes) sees x."""

    def __init__(self, node, rank: int, lead: int = 0):
        self.op, self.eps, self.lead, self.rank = node.op, node.attrs["eps"], lead, rank + lead
        self.center = node.op != "rms_norm"
        self.groups = node.attrs["num_groups"] if node.op == "group_norm" else None
        per = node.attrs["axis"] % rank if node.op in ("layer_norm", "rms_norm") else 1
        self.axis = per + lead  # the channel axis of gamma / beta in x

    def view(self, ctx, x):
        if self.groups is None:
            return x
        c = self.lead + 1
        rest = list(x.shape[c:])
        if any(not isinstance(d, int) for d in rest):
            raise AutodiffError(f"group_norm rules need static channel and spatial dims, got {x.shape!r}")
        return ctx.reshape(x, [*x.shape[:c], self.groups, math.prod(rest) // self.groups])

    def axes(self, xv) -> list[int]:
        return [len(xv.shape) - 1] if self.groups is not None else [self.axis]

    def along(self, ctx, v, batched: bool = False):
        """A rank-1 gamma / beta ([B, C] when ``batched``) shaped to broadcast along the channel axis."""
        tail = [1] * (self.rank - self.axis - 1)
        if batched:
            return ctx.reshape(v, [v.shape[0], *([1] * (self.axis - 1)), v.shape[-1], *tail])
        return ctx.reshape(v, [v.shape[-1], *tail])


def _standardize_v(ctx, nv: _NormView, xv):
    """(xhat, 1/sqrt(var + eps)) in the view, statistics keep_dim over the view's axes."""
    return rows.norm_stats(GraphNamespace(ctx.graph), xv, nv.axes(xv), nv.eps, center=nv.center)


def _sum_except(g, v, axis: int):
    others = [i for i in range(len(v.shape)) if i != axis]
    return g.reduce(v, op="sum", axes=others, keep_dim=False) if others else v


def _norm_vjp(ctx, node, ct):
    g, dt = ctx.graph, node.dtype
    x, gamma, beta = ctx.operands(node)
    xc, ct = ctx.cast(x, dt), ctx.cast(ct, dt)
    nv = _NormView(node, len(x.shape))
    xv = nv.view(ctx, xc)
    xhat_v, r = _standardize_v(ctx, nv, xv)
    grads = [None, None, None]
    if ctx.wants(node, 0):
        gv = nv.view(ctx, ct * nv.along(ctx, ctx.cast(gamma, dt)))
        dx = rows.norm_input_grad(GraphNamespace(g), xhat_v, r, gv, nv.axes(xv), nv.center)
        grads[0] = ctx.cast(ctx.reshape(dx, x.shape), x.dtype)
    if ctx.wants(node, 1):
        grads[1] = ctx.cast(_sum_except(g, ct * ctx.reshape(xhat_v, x.shape), nv.axis), gamma.dtype)
    if ctx.wants(node, 2):
        grads[2] = ctx.cast(_sum_except(g, ct, nv.axis), beta.dtype)
    return grads


def _norm_jvp(ctx, node, tangents):
    g, dt = ctx.graph, node.dtype
    x, gamma, _ = ctx.operands(node)
    tx, tg, tb = tangents
    nv = _NormView(node, len(x.shape))
    xv = nv.view(ctx, ctx.cast(x, dt))
    xhat_v, r = _standardize_v(ctx, nv, xv)
    parts = []
    if tx is not None:
        tv = nv.view(ctx, ctx.cast(tx, dt))
        txh = rows.norm_input_grad(GraphNamespace(g), xhat_v, r, tv, nv.axes(xv), nv.center)  # the Jacobian is symmetric
        parts.append(ctx.reshape(txh, x.shape) * nv.along(ctx, ctx.cast(gamma, dt)))
    if tg is not None:
        parts.append(ctx.reshape(xhat_v, x.shape) * nv.along(ctx, ctx.cast(tg, dt)))
    if tb is not None:
        parts.append(nv.along(ctx, ctx.cast(tb, dt)))
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def _filled(ctx, like, value: float, dtype):
    """A rank-1 constant of ``like``'s last dim (symbolic allowed) filled with ``value``."""
    n = like.shape[-1]
    if isinstance(n, int):
        return ctx.graph.constant(np.full(n, value, dtype=np.float32 if dtype.is_low_precision_float else dtype.numpy), dtype=dtype)
    if len(like.shape) > 1:
        like = ctx.graph.reduce(like, op="max", axes=list(range(len(like.shape) - 1)), keep_dim=False)
    return ctx.broadcast_like(ctx.const(value, dtype), like)


def _norm_batch(ctx, node, operands, batched):
    """Standardize with the op itself (extra leading axes are fine for layer_norm / rms_norm over
    a shifted axis; group_norm standardizes its grouped view with layer_norm over the last axis),
    then apply gamma / beta with broadcasting when they are batched."""
    g, dt = ctx.graph, node.dtype
    x, gamma, beta = operands
    xb, gb, bb = batched
    eps = node.attrs["eps"]
    nv = _NormView(node, len(node.shape), lead=1 if xb else 0)
    x = ctx.cast(x, dt)
    if node.op == "group_norm" and not xb:
        xhat = g.group_norm(x, _filled(ctx, gamma, 1.0, dt), _filled(ctx, gamma, 0.0, dt),
                            num_groups=node.attrs["num_groups"], eps=eps)
    elif node.op == "group_norm":
        xv = nv.view(ctx, x)
        xhat = ctx.reshape(g.layer_norm(xv, _filled(ctx, xv, 1.0, dt), _filled(ctx, xv, 0.0, dt), axis=-1, eps=eps), x.shape)
    else:
        op = "rms_norm" if node.op == "rms_norm" else "layer_norm"
        if not gb and not bb:
            return g.append(op, [x, gamma, beta], {"axis": nv.axis, "eps": eps})
        xhat = g.append(op, [x, _filled(ctx, gamma, 1.0, dt), _filled(ctx, gamma, 0.0, dt)], {"axis": nv.axis, "eps": eps})
    full = _NormView(node, len(node.shape), lead=1)
    gv = full.along(ctx, gamma, True) if gb else nv.along(ctx, gamma)
    bv = full.along(ctx, beta, True) if bb else nv.along(ctx, beta)
    return xhat * ctx.cast(gv, dt) + ctx.cast(bv, dt)


_NORM_RULES = {"vjp": _norm_vjp, "jvp": _norm_jvp, "batch": _norm_batch}


# ------------------------------------------------------------------------- layer_norm


def _layer_norm_type(ins, attrs):
    return _affine_type(ins, axis_of(attrs["axis"], ins[0]))


def _norm_into(args, attrs, out_type, out, center: bool):
    """The layer-norm (``center``) and RMS-norm rows in NumPy, into ``out``: the statistics as dot products
    (:func:`dot_mean`: no (x-mu)**2 temporary, 0.74x the time of mean / square / mean on [8,128,768]),
    then (x-mu) / sqrt(var+eps) * gamma + beta in place. tests/ops/test_rows.py proves it equal to the row."""
    x, gamma, beta = promote_args(args, out_type.dtype)
    axis = attrs["axis"] % x.ndim
    shape = [1] * x.ndim
    shape[axis] = -1
    d = np.subtract(x, dot_mean(x, np.ones(x.shape[axis], x.dtype), axis), out=out) if center else x
    var = dot_mean(d, d, axis)
    np.add(var, attrs["eps"], out=var)
    np.divide(d, np.sqrt(var, out=var), out=out)
    np.multiply(out, gamma.reshape(shape), out=out)
    return np.add(out, beta.reshape(shape), out=out)


def _layer_norm_into(args, attrs, out_type, out):
    return _norm_into(args, attrs, out_type, out, center=True)


def _rms_norm_into(args, attrs, out_type, out):
    return _norm_into(args, attrs, out_type, out, center=False)


defop(
    name="layer_norm", work="input", precision="reduction", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"axis": _AXIS, "eps": _EPS},
    infer=_layer_norm_type, kernel=fresh_into(_layer_norm_into), kernel_into=_layer_norm_into, **_NORM_RULES,
    doc="Layer normalization over one axis: mu = mean(x, axis), var = mean((x-mu)**2, axis) "
    "(biased, two-pass), y = (x-mu)/sqrt(var+eps)*gamma + beta, gamma/beta of shape "
    "[x.shape[axis]]. Any axis, negative allowed (upstream's kernel always uses the last "
    "axis and a one-pass variance). Result dtype: promotion of x, gamma, beta.",
)


# ----------------------------------------------------------------------- layer_norm2d


def _layer_norm2d_type(ins, attrs):
    require_rank(ins[0], 4, "x (N, C, H, W)")
    return _affine_type(ins, 1)


defop(
    name="layer_norm2d", work="input", precision="reduction", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"eps": _EPS},
    infer=_layer_norm2d_type, kernel=rows.bind(rows.layer_norm2d, NUMPY), **_NORM_RULES,
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


def _group_norm_decompose(g, operands, attrs):
    """The common-IR body (upstream's LowerGroupNorm): reshape into groups, mean and biased
    variance over each group, rsqrt, reshape back, per-channel affine."""
    x, gamma, beta = (g.value(o) for o in operands)
    n, c, *spatial = x.shape
    groups = attrs["num_groups"]
    grouped = g.reshape(x, (n, groups, -1))
    centred = grouped - g.mean(grouped, axes=[2], keep_dim=True)
    var = g.mean(centred * centred, axes=[2], keep_dim=True)
    y = g.reshape(centred * g.rsqrt(var + attrs["eps"]), tuple(x.shape))
    channel = (c, *([1] * len(spatial)))
    return y * g.reshape(gamma, channel) + g.reshape(beta, channel)


defop(
    name="group_norm", work="input", precision="reduction", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"num_groups": AttrSpec("int", doc="number of contiguous channel groups; divides C"), "eps": _EPS},
    infer=_group_norm_type, kernel=rows.bind(rows.group_norm, NUMPY), decompose=_group_norm_decompose, **_NORM_RULES,
    doc="Group normalization of x [N, C, *spatial] (upstream: rank 4 NCHW only; rlx accepts "
    "any spatial rank, as torch does). Channels split into num_groups contiguous groups of "
    "C/G; mean and biased variance over (C/G) x spatial per sample and group; per-channel "
    "affine with gamma/beta [C]. Equals torch.nn.functional.group_norm. Decomposes (for backends that do not "
    "claim it) to reshape, mean, rsqrt and mul / add.",
)


# --------------------------------------------------------------------------- rms_norm


defop(
    name="rms_norm", work="input", precision="reduction", family="normalization", arity=3, operands=("x", "gamma", "beta"),
    attrs={"axis": _AXIS, "eps": _EPS},
    infer=_layer_norm_type, kernel=fresh_into(_rms_norm_into), kernel_into=_rms_norm_into, **_NORM_RULES,
    doc="RMS normalization over one axis: y = x / sqrt(mean(x**2, axis) + eps) * gamma + beta. "
    "beta is a mandatory operand, as upstream (pass zeros for LLaMA-style RMSNorm). Any "
    "axis, negative allowed (upstream's kernel uses the last axis). The result has x's "
    "shape (upstream also accepts a declared [prod(leading), H] output; rlx does not).",
)
