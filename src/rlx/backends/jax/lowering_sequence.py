"""JAX lowerings of the sequence ops (:mod:`rlx.ops.sequence`): ``selective_scan`` and
``gated_delta_net`` → ``lax.scan`` over the sequence axis (the state-independent factors
``exp(delta·A)``, ``delta·B·x``, ``exp(g)`` are computed vectorised before the scan), and
``axial_rope2d`` → elementwise rotation with the same f32 angle tables as the reference kernel.
Operands are computed in the node's compute dtype (f32 for the narrow floats).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from rlx.backends.jax.table import compute_dtype, lowering, matmul_precision
from rlx.ops.sequence import axial_rope2d_tables


def _cast(args, out):
    dt = compute_dtype(out.dtype)
    return [a.astype(dt) for a in args]


@lowering("selective_scan")
def selective_scan(args, attrs, out):
    x, delta, a, b, c = _cast(args, out)
    bs, _, h = x.shape
    da = jnp.exp(delta[..., None] * a)  # [b, s, h, n]
    dbx = (delta * x)[..., None] * b[:, :, None, :]

    def step(hs, xs):
        da_t, dbx_t, c_t = xs
        hs = da_t * hs + dbx_t
        return hs, jnp.sum(hs * c_t[:, None, :], axis=-1)

    init = jnp.zeros((bs, h, a.shape[1]), dtype=x.dtype)
    seq = (jnp.moveaxis(da, 1, 0), jnp.moveaxis(dbx, 1, 0), jnp.moveaxis(c, 1, 0))
    _, ys = lax.scan(step, init, seq)  # [s, b, h]
    return jnp.moveaxis(ys, 0, 1)


@lowering("gated_delta_net")
def gated_delta_net(args, attrs, out):
    q, k, v, gg, beta = _cast(args[:5], out)
    bs, _, h, n = q.shape
    init = _cast(args[5:6], out)[0] if attrs["carry_state"] else jnp.zeros((bs, h, n, n), dtype=q.dtype)
    scale = jnp.asarray(1.0 / math.sqrt(n), dtype=q.dtype)
    prec = matmul_precision()

    def step(st, xs):
        q_t, k_t, v_t, eg_t, b_t = xs
        st = st * eg_t[..., None, None]
        sk = jnp.einsum("bhij,bhi->bhj", st, k_t, precision=prec)
        d = (v_t - sk) * b_t[..., None]
        st = st + k_t[..., :, None] * d[..., None, :]
        return st, jnp.einsum("bhij,bhi->bhj", st, q_t, precision=prec) * scale

    seq = tuple(jnp.moveaxis(t, 1, 0) for t in (q, k, v, jnp.exp(gg), beta))
    final, o = lax.scan(step, init, seq)
    return final if attrs["output"] == "state" else jnp.moveaxis(o, 0, 1)


@lowering("axial_rope2d")
def axial_rope2d(args, attrs, out):
    (x,) = _cast(args, out)
    bs, s, width = x.shape
    cos, sin = (jnp.asarray(t).astype(x.dtype)[:, None, :] for t in axial_rope2d_tables(attrs))  # [S, 1, D/2]
    xp = x.reshape(bs, s, attrs["num_heads"], attrs["head_dim"] // 2, 2)
    a, b = xp[..., 0], xp[..., 1]
    return jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(bs, s, width)
