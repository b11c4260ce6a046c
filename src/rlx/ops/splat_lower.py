"""The common-IR body of ``gaussian_splat_render`` (upstream's splat logical kernel): primitives only.

The reference kernel (:mod:`rlx.ops.splat_kernel`) bins splats into per-tile lists sorted by
(depth, id), truncated at ``max_list_entries``, then blends each pixel front to back. Here the
same image is one dense (pixel × splat) computation of matmuls, elementwise ops, compares and
reductions, which any backend claiming those runs:

* the camera, pixel rays, whitening ``diag(1/σ) Rᵀ``, culling, projection and binning radius
  as the kernel computes them, from the operands at run time;
* list membership: splat n is in tile t's list when its clipped tile span covers t and its
  global rank in (tile, depth, id) order, ``Σ_{t' < t} count(t') + #{m in t before n}``, is
  under the capacity; "before" is a constant-free [N, N] comparison of (depth, id);
* per pixel, the kernel's front-to-back loop in closed form: the transmittance before splat n
  is ``exp(Σ_{m before n} log(1 − α_m))`` over contributing splats, its step rank the count of
  contributing splats before it; a splat blends when both are within the limits.

Work is O(pixels · splats); it is the lowering for claim sets without the op, not a fast path.
Batch dims (static) are unrolled, one body per scene; an empty scene is the background.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ops import splat_kernel as K


def _norm(g: Any, v: Any, axis: int) -> Any:
    """``v / |v|`` along ``axis`` (zero vectors stay zero), as :func:`rlx.ops.splat_kernel.normalize`."""
    n2 = g.sum(v * v, axes=[axis], keep_dim=True)
    return v / g.sqrt(g.where(g.gt(n2, 0.0), n2, g.scalar(1.0, n2.dtype)))


def _cross(g: Any, a: Any, b: Any) -> Any:
    """a × b of two [3] vectors: rot1(a)·rot2(b) − rot2(a)·rot1(b) with rot1 = (1, 2, 0), rot2 = (2, 0, 1)."""
    def rot(v: Any, k: int) -> Any:
        return g.concat([g.narrow(v, axis=0, start=k, length=3 - k), g.narrow(v, axis=0, start=0, length=k)], axis=0)

    return rot(a, 1) * rot(b, 2) - rot(a, 2) * rot(b, 1)


def _and(g: Any, *masks: Any) -> Any:
    out = masks[0]
    for m in masks[1:]:
        out = g.where(out, m, out)
    return out


def _col(g: Any, x: Any, j: int) -> Any:
    return g.narrow(x, axis=1, start=j, length=1)


def _rotation(g: Any, q: Any) -> Any:
    """[N, 3, 3] rotations of unit quaternions (x, y, z, w) (:func:`rlx.ops.splat_kernel.quat_matrix`)."""
    x, y, z, w = (_col(g, q, j) for j in range(4))
    rows = [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
            2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
            2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)]
    return g.reshape(g.concat(rows, axis=1), (-1, 3, 3))


def _sh_colour(g: Any, v: Any, sh: Any, k: int, dt: DType) -> Any:
    """Σ_k Y_k(v)·sh_k [N, 3] from the monomials of v (:func:`rlx.ops.splat_kernel.sh_eval`)."""
    comps = [_col(g, v, j) for j in range(3)]
    cols = []
    for powers in K.SH_MONOMIALS:
        term = g.constant(np.ones((v.shape[0], 1), dt.numpy))
        for c, p in zip(comps, powers):
            for _ in range(p):
                term = term * c
        cols.append(term)
    basis = g.matmul(g.concat(cols, axis=1), g.constant(K.SH_MATRIX[:, :k].astype(dt.numpy)))  # [N, K]
    return g.sum(g.reshape(basis, (-1, k, 1)) * sh, axes=[1])


def render_body(g: Any, operands: list[Any], attrs: dict[str, Any]) -> Any:
    """RGBA [H·W·4] of ``gaussian_splat_render`` as a primitive graph (see the module doc)."""
    vals = list(operands)
    out_dtype = vals[0].dtype
    dt = DType.F64 if out_dtype is DType.F64 else DType.F32
    pos, log_scale, quat, logit, col, sh, meta = (v if v.dtype is dt else g.cast(v, dt) for v in vals)
    n = logit.shape[0]
    k = sh.shape[0] // (3 * n)
    w, h, ts, cutoff = attrs["width"], attrs["height"], attrs["tile_size"], attrs["alpha_cutoff"]
    tiles_x, tiles_y = K.tile_grid(w, h, ts)
    npx = w * h
    f = dt.numpy

    def c(arr: Any) -> Any:
        return g.constant(np.asarray(arr, f))

    def part(start: int, length: int) -> Any:
        return g.narrow(meta, axis=0, start=start, length=length)

    # camera and pixel rays
    eye, target, up_hint, bg = part(0, 3), part(3, 3), part(6, 3), part(12, 3)
    near, far = part(10, 1), part(11, 1)
    tan_half = g.tan(part(9, 1) * (math.pi / 360.0))
    forward = _norm(g, target - eye, 0)
    right = _norm(g, _cross(g, forward, up_hint), 0)
    cam_up = _cross(g, right, forward)
    aspect = w / h
    sx = c((2 * (np.arange(w) + 0.5) / w - 1).reshape(1, w, 1)) * (tan_half * aspect)
    sy = c((1 - 2 * (np.arange(h) + 0.5) / h).reshape(h, 1, 1)) * tan_half
    rays = _norm(g, g.reshape(forward + sx * right + sy * cam_up, (npx, 3)), 1)  # [P, 3]

    # splats: whitening, culling, projection, binning radius
    mu, log_s = g.reshape(pos, (n, 3)), g.reshape(log_scale, (n, 3))
    q = g.reshape(quat, (n, 4))
    n2 = g.sum(q * q, axes=[1], keep_dim=True)
    qhat = g.where(g.gt(n2, 0.0), q / g.sqrt(g.where(g.gt(n2, 0.0), n2, c(1.0))), c([[0, 0, 0, 1]]))
    sigma = g.exp(log_s)
    inv_scale = 1.0 / sigma
    whiten = g.transpose(_rotation(g, qhat), (0, 2, 1)) * g.reshape(inv_scale, (n, 3, 1))  # M = diag(1/σ) Rᵀ
    rel = mu - eye
    depth = g.sum(rel * forward, axes=[1])
    a = g.sigmoid(logit)
    valid = _and(g, g.gt(depth, near), g.lt(depth, far), g.ge(a, cutoff))
    safe_depth = g.where(valid, depth, c(1.0))
    x = (g.sum(rel * right, axes=[1]) / (safe_depth * tan_half * aspect) + 1.0) * (w / 2)
    y = (1.0 - g.sum(rel * cam_up, axes=[1]) / (safe_depth * tan_half)) * (h / 2)
    support = g.sqrt(2.0 * g.log(g.maximum(a, c(cutoff)) / cutoff))
    radius = attrs["radius_scale"] * support * g.max(sigma, axes=[1]) * (h / 2.0) / tan_half / safe_depth

    # tile lists: span, (tile, depth, id) rank, capacity
    hit = _and(g, valid, g.ge(x + radius, 0.0), g.lt(x - radius, float(w)), g.ge(y + radius, 0.0), g.lt(y - radius, float(h)))

    def tile_of(v: Any, count: int) -> Any:
        return g.minimum(g.maximum(g.unary_math(v / float(ts), "floor"), c(0.0)), c(count - 1.0))

    tx0, tx1 = tile_of(x - radius, tiles_x), tile_of(x + radius, tiles_x)
    ty0, ty1 = tile_of(y - radius, tiles_y), tile_of(y + radius, tiles_y)
    tiles = np.arange(tiles_x * tiles_y)
    tcol, trow = c((tiles % tiles_x).reshape(-1, 1)), c((tiles // tiles_x).reshape(-1, 1))
    member = _and(g, hit, g.le(tx0, tcol), g.le(tcol, tx1), g.le(ty0, trow), g.le(trow, ty1))  # [T, N]
    d_col, d_row = g.reshape(depth, (n, 1)), g.reshape(depth, (1, n))
    ids = np.arange(n)
    earlier = c((ids[None, :] < ids[:, None]).astype(f))  # [n, m]: m < n
    before = g.cast(g.where(g.eq(d_row, d_col), g.gt(earlier, 0.5), g.lt(d_row, d_col)), dt)  # [n, m]: m ahead of n
    member_f = g.cast(member, dt)
    within = g.matmul(member_f, g.transpose(before, (1, 0)))  # [T, N]: entries of the tile ahead of (t, n)
    count = g.sum(member_f, axes=[1], keep_dim=True)
    ahead = g.cumsum(count, axis=0, exclusive=True)
    kept = _and(g, member, g.lt(ahead + within, float(attrs["max_list_entries"])))
    pixel_tile = (np.arange(h)[:, None] // ts * tiles_x + np.arange(w)[None, :] // ts).reshape(-1)
    onehot = c(pixel_tile[:, None] == tiles[None, :])  # [P, T]
    listed = g.matmul(onehot, g.cast(kept, dt))  # [P, N]: 1 where n is in the pixel's tile list

    # each (pixel, splat): closest Mahalanobis approach and alpha
    cam_local = g.sum(whiten * g.reshape(-rel, (n, 1, 3)), axes=[2])  # o = M (e − μ)
    d_loc = g.reshape(g.matmul(rays, g.transpose(g.reshape(whiten, (n * 3, 3)), (1, 0))), (npx, n, 3))  # M d
    dd = g.sum(d_loc * d_loc, axes=[2])
    mto = g.sum(whiten * g.reshape(cam_local, (n, 3, 1)), axes=[1])  # Mᵀ o
    t_star = -g.matmul(rays, g.transpose(mto, (1, 0))) / g.where(g.gt(dd, 0.0), dd, c(1.0))
    closest = g.reshape(cam_local, (1, n, 3)) + g.reshape(t_star, (npx, n, 1)) * d_loc
    rho2 = g.sum(closest * closest, axes=[2])
    opacity = g.where(valid, a, c(0.0))
    alpha = g.minimum(opacity * g.exp(-0.5 * rho2), c(K.ALPHA_MAX))
    contrib = _and(g, g.gt(listed, 0.5), g.gt(t_star, 0.0), g.gt(dd, 0.0), g.ge(alpha, cutoff))
    a_eff = g.where(contrib, alpha, c(0.0))

    # front to back in (depth, id) order, closed form
    before_t = g.transpose(before, (1, 0))
    trans_before = g.exp(g.matmul(g.log(1.0 - a_eff), before_t))
    rank = g.matmul(g.cast(contrib, dt), before_t)
    blended = _and(g, contrib, g.lt(rank, float(attrs["max_splat_steps"])),
                   g.ge(trans_before, float(attrs["transmittance_threshold"])))
    weight = g.where(blended, alpha, c(0.0)) * trans_before
    trans_final = g.exp(g.sum(g.where(blended, g.log(1.0 - alpha), c(0.0)), axes=[1], keep_dim=True))

    colour = g.reshape(col, (n, 3))
    if k:
        colour = colour + _sh_colour(g, _norm(g, mu - eye, 1), g.reshape(sh, (n, k, 3)), k, dt)
    colour = g.maximum(colour, c(0.0))
    rgb = g.matmul(weight, colour) + trans_final * g.reshape(bg, (1, 3))
    image = g.reshape(g.concat([rgb, 1.0 - trans_final], axis=1), (npx * 4,))
    return image if out_dtype is dt else g.cast(image, out_dtype)


def _empty(g: Any, meta: Any, attrs: dict[str, Any], out_dtype: DType) -> Any:
    """No splats: the background with alpha 0 at every pixel."""
    bg = g.concat([g.narrow(meta, axis=0, start=12, length=3), g.constant(np.zeros(1, meta.dtype.numpy))], axis=0)
    image = g.reshape(g.constant(np.ones((attrs["width"] * attrs["height"], 1), meta.dtype.numpy)) * g.reshape(bg, (1, 4)), (-1,))
    return image if image.dtype is out_dtype else g.cast(image, out_dtype)


def render_decompose(g: Any, operands: list[Any], attrs: dict[str, Any]) -> Any:
    """The decompose hook of ``gaussian_splat_render``: :func:`render_body` per batch element (static batch dims)."""
    vals = [g.value(o) for o in operands]
    nb = attrs["batch_dims"]
    one = {**attrs, "batch_dims": 0}
    if nb == 0:
        return render_body(g, vals, one) if vals[3].shape[0] else _empty(g, vals[6], one, vals[0].dtype)
    lead = tuple(vals[0].shape[:nb])
    count = math.prod(lead)
    flat = [g.reshape(v, (count, v.shape[nb])) for v in vals]
    images = [g.reshape(render_decompose(g, [g.reshape(g.narrow(f, axis=0, start=b, length=1), (f.shape[1],)) for f in flat],
                                         one), (1, -1)) for b in range(count)]
    return g.reshape(images[0] if count == 1 else g.concat(images, axis=0), (*lead, -1))
