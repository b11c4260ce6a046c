"""JAX lowerings of ``gaussian_splat_render`` and its derivatives (docs/splatting.md), on device.

The reference kernel builds variable-length tile lists; XLA needs static shapes, so this is the
same algorithm in dense form. Splats are sorted once by (depth, index); a [tiles, N] membership
matrix in that order replaces the lists (an entry's place in upstream's tile-major list is the
tile's offset plus its rank, which reproduces the ``max_list_entries`` truncation exactly); each
tile then composites its tile_size² pixels against all N splats, masked, under ``lax.map``.
Binning and sorting are held out of differentiation (``stop_gradient``), as in the reference.

``gaussian_splat_render_backward`` is ``jax.vjp`` of this function (plus the documented training
options) and ``gaussian_splat_render_jvp`` is ``jax.jvp``, so the three agree by construction;
tests compare all three with the NumPy kernels. Memory: one [tile_size², N] block per step,
in the backward too (each tile is recomputed there rather than stored).
The reference kernel's run-time checks (degenerate camera, field of view) are not repeated:
a bad camera gives NaN here. Dense work grows with N per tile where the tile lists only hold the
splats that touch the tile, so on CPU the executable keeps calling the NumPy kernels on the host
(measured: 7x faster at 10k splats, 256²); GPUs and TPUs get the dense form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from rlx.backends.jax.lowering_ext import host_lowering
from rlx.backends.jax.table import compute_dtype, lowering, target_platform
from rlx.ops.splat_kernel import ALPHA_MAX, normalize, quat_matrix, sh_band, sh_eval, tile_grid, unit_quaternions


def render(scene: tuple, meta, attrs: Mapping[str, Any]):
    """The image [H·W·4] of the six scene operands and meta (one example, flat operands)."""
    w, h, ts = attrs["width"], attrs["height"], attrs["tile_size"]
    cutoff = attrs["alpha_cutoff"]
    mu, log_s, quat, logit, col, sh = scene
    n = logit.shape[0]
    mu, log_s, quat, col = mu.reshape(n, 3), log_s.reshape(n, 3), quat.reshape(n, 4), col.reshape(n, 3)
    k = sh.shape[0] // (3 * n) if n else 0
    eye, forward = meta[0:3], normalize(meta[3:6] - meta[0:3], jnp)
    right = normalize(jnp.cross(forward, meta[6:9]), jnp)
    up = jnp.cross(right, forward)
    tan_half = jnp.tan(jnp.deg2rad(meta[9]) / 2)
    aspect = w / h
    background = meta[12:15]

    rot = quat_matrix(unit_quaternions(quat, jnp)[0], jnp)
    inv_s = jnp.exp(-log_s)
    m = jnp.swapaxes(rot, 1, 2) * inv_s[:, :, None]  # diag(1/σ) Rᵀ
    rel = mu - eye
    cam_local = jnp.einsum("nk,nkj->nj", -rel, rot) * inv_s
    a = jax.nn.sigmoid(logit)
    color = col + jnp.einsum("nk,nkc->nc", sh_eval(normalize(rel, jnp), k, jnp), sh.reshape(n, k, 3))
    color = jnp.maximum(color, 0)

    # binning and ordering: piecewise constant, never differentiated
    depth = lax.stop_gradient(rel @ forward)
    a_b, s_b, x_rel = lax.stop_gradient(a), lax.stop_gradient(jnp.exp(log_s)), lax.stop_gradient(rel)
    valid = (depth > meta[10]) & (depth < meta[11]) & (a_b >= cutoff)
    safe_depth = jnp.where(valid, depth, 1)
    th, asp = lax.stop_gradient(tan_half), aspect
    sx = (x_rel @ lax.stop_gradient(right) / (safe_depth * th * asp) + 1) * (w / 2)
    sy = (1 - x_rel @ lax.stop_gradient(up) / (safe_depth * th)) * (h / 2)
    support = jnp.sqrt(2 * jnp.log(jnp.maximum(a_b, cutoff) / cutoff))
    radius = attrs["radius_scale"] * support * jnp.max(s_b, axis=1) * (h / (2 * th)) / safe_depth
    hit = valid & (sx + radius >= 0) & (sx - radius < w) & (sy + radius >= 0) & (sy - radius < h)
    tiles_x, tiles_y = tile_grid(w, h, ts)

    def span(lo, hi, count):
        return jnp.clip(jnp.floor(lo / ts), 0, count - 1), jnp.clip(jnp.floor(hi / ts), 0, count - 1)

    x0, x1 = span(sx - radius, sx + radius, tiles_x)
    y0, y1 = span(sy - radius, sy + radius, tiles_y)
    order = jnp.lexsort((jnp.arange(n), jnp.where(valid, depth, jnp.inf)))
    tx = jnp.tile(jnp.arange(tiles_x), tiles_y)[:, None]
    ty = jnp.repeat(jnp.arange(tiles_y), tiles_x)[:, None]
    member = (hit & (x0 <= tx) & (tx <= x1) & (y0 <= ty) & (ty <= y1))[:, order]  # [tiles, N], depth order
    rank = jnp.cumsum(member, axis=1) - member
    count = jnp.sum(member, axis=1)
    kept = member & ((jnp.cumsum(count) - count)[:, None] + rank < attrs["max_list_entries"])

    m_o, loc_o, a_o, color_o = m[order], cam_local[order], a[order], color[order]
    local = jnp.arange(ts)

    def tile(args):
        t, keep = args
        px = (t % tiles_x) * ts + local
        py = (t // tiles_x) * ts + local
        ndc_x = (2 * (px + 0.5) / w - 1) * (tan_half * aspect)
        ndc_y = (1 - 2 * (py + 0.5) / h) * tan_half
        rays = normalize(forward + ndc_x[None, :, None] * right + ndc_y[:, None, None] * up, jnp).reshape(-1, 3)
        d_loc = jnp.einsum("lij,pj->pli", m_o, rays)
        dd = jnp.sum(d_loc * d_loc, -1)
        t_star = -jnp.sum(d_loc * loc_o[None], -1) / jnp.where(dd > 0, dd, 1)
        closest = loc_o[None] + t_star[..., None] * d_loc
        alpha = jnp.minimum(a_o * jnp.exp(-0.5 * jnp.sum(closest * closest, -1)), ALPHA_MAX)
        contrib = keep[None] & (t_star > 0) & (dd > 0) & (alpha >= cutoff)
        a_eff = jnp.where(contrib, alpha, 0)
        keep_t = 1 - a_eff
        t_before = jnp.cumprod(jnp.concatenate([jnp.ones_like(keep_t[:, :1]), keep_t[:, :-1]], 1), axis=1)
        steps = jnp.cumsum(contrib, axis=1) - contrib
        blended = contrib & (steps < attrs["max_splat_steps"]) & (lax.stop_gradient(t_before) >= attrs["transmittance_threshold"])
        weight = jnp.where(blended, a_eff * t_before, 0)
        t_final = jnp.prod(jnp.where(blended, keep_t, 1), axis=1)
        rgb = weight @ color_o + t_final[:, None] * background
        return jnp.concatenate([rgb, (1 - t_final)[:, None]], 1)

    # rematerialised per tile, so a backward keeps no [ts², N] residuals for every tile
    blocks = lax.map(jax.checkpoint(tile), (jnp.arange(tiles_x * tiles_y), kept))  # [tiles, ts², 4]
    image = blocks.reshape(tiles_y, tiles_x, ts, ts, 4).transpose(0, 2, 1, 3, 4).reshape(tiles_y * ts, tiles_x * ts, 4)
    return image[:h, :w].reshape(-1)


#: run the dense formulation on CPU too (tests and benchmarks set it; see the module doc)
DENSE_ON_CPU = False


def _on_device(name: str):
    """Register a dense lowering for ``name``, used off CPU (or with DENSE_ON_CPU); on CPU the NumPy kernel
    runs on the host, where its tile lists beat evaluating every splat for every tile."""
    host = host_lowering(name)

    def register(dense):
        @lowering(name)
        def lower(args, attrs, out):
            return dense(args, attrs, out) if DENSE_ON_CPU or target_platform() != "cpu" else host(args, attrs, out)
        return dense
    return register


def _mapped(fn, args, attrs, out):
    """``fn(args)`` in the node's compute dtype, mapped over ``batch_dims`` leading axes."""
    dt = compute_dtype(out.dtype)
    f = fn
    for _ in range(attrs["batch_dims"]):
        f = jax.vmap(f)
    return f(*(x.astype(dt) for x in args)).astype(out.dtype.numpy)


@_on_device("gaussian_splat_render")
def _render(args, attrs, out):
    return _mapped(lambda *a: render(a[:6], a[6], attrs), args, attrs, out)


@_on_device("gaussian_splat_render_jvp")
def _render_jvp(args, attrs, out):
    def one(*a):
        return jax.jvp(lambda *s: render(s, a[6], attrs), tuple(a[:6]), tuple(a[7:13]))[1]
    return _mapped(one, args, attrs, out)


def _penalty(log_s, limit: float):
    """Σ max(0, max(σ)/min(σ) − limit) over splats (the anisotropy regulariser)."""
    s = log_s.reshape(-1, 3)
    return jnp.sum(jnp.maximum(jnp.exp(jnp.max(s, 1) - jnp.min(s, 1)) - limit, 0))


@_on_device("gaussian_splat_render_backward")
def _render_backward(args, attrs, out):
    def one(*a):
        d_rgba = a[7]
        if attrs["loss_grad_clip"] > 0:
            d_rgba = jnp.clip(d_rgba, -attrs["loss_grad_clip"], attrs["loss_grad_clip"])
        _, pull = jax.vjp(lambda *s: render(s, a[6], attrs), *a[:6])
        grads = list(pull(d_rgba))
        if attrs["max_anisotropy"] > 0:
            grads[1] = grads[1] + jax.grad(_penalty)(a[1], attrs["max_anisotropy"])
        n = a[3].shape[0]
        k = a[5].shape[0] // (3 * n) if n else 0
        if k:
            bands = jnp.array([sh_band(j) for j in range(k)])
            grads[5] = jnp.where(jnp.repeat(jnp.tile(bands, n), 3) <= attrs["sh_band"], grads[5], 0)
        else:
            grads[5] = jnp.zeros(3 * n, a[0].dtype)
        return jnp.concatenate(grads)
    return _mapped(one, args, attrs, out)

