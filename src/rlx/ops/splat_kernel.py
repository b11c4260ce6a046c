"""NumPy reference kernels of the Gaussian-splatting ops (the contract is docs/splatting.md).

Stage 1 (:func:`prepare`) turns the scene and camera into per-splat ray-evaluation data and
depth-sorted per-tile lists; stage 2 (:func:`composite`) blends each tile's pixels against its
list, vectorised over (pixels of the tile) × (entries of its list). :func:`backward` replays
stage 2 per tile and returns the exact gradient of the image with respect to the scene.
Everything runs in one float dtype (f64 for f64 scenes, else f32).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from rlx.ir.errors import RlxError

ALPHA_MAX = 0.99
PARAM_FLOATS = 11
META_FLOATS = 23

# Real SH basis in 3DGS order, as polynomials in the unit direction (x, y, z): per basis
# function a list of (coefficient, (power of x, power of y, power of z)).
_C1 = 0.4886025119029199
_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
       1.445305721320277, -0.5900435899266435)
SH_BASIS: tuple[tuple[tuple[float, tuple[int, int, int]], ...], ...] = (
    ((0.28209479177387814, (0, 0, 0)),),
    ((-_C1, (0, 1, 0)),), ((_C1, (0, 0, 1)),), ((-_C1, (1, 0, 0)),),
    ((_C2[0], (1, 1, 0)),), ((_C2[1], (0, 1, 1)),),
    ((2 * _C2[2], (0, 0, 2)), (-_C2[2], (2, 0, 0)), (-_C2[2], (0, 2, 0))),
    ((_C2[3], (1, 0, 1)),), ((_C2[4], (2, 0, 0)), (-_C2[4], (0, 2, 0))),
    ((3 * _C3[0], (2, 1, 0)), (-_C3[0], (0, 3, 0))),
    ((_C3[1], (1, 1, 1)),),
    ((4 * _C3[2], (0, 1, 2)), (-_C3[2], (2, 1, 0)), (-_C3[2], (0, 3, 0))),
    ((2 * _C3[3], (0, 0, 3)), (-3 * _C3[3], (2, 0, 1)), (-3 * _C3[3], (0, 2, 1))),
    ((4 * _C3[4], (1, 0, 2)), (-_C3[4], (3, 0, 0)), (-_C3[4], (1, 2, 0))),
    ((_C3[5], (2, 0, 1)), (-_C3[5], (0, 2, 1))),
    ((_C3[6], (3, 0, 0)), (-3 * _C3[6], (1, 2, 0))),
)
SH_COUNTS = (0, 1, 4, 9, 16)


def sh_band(k: int) -> int:
    """The SH band of coefficient ``k`` (0 for the DC term, 3 for k = 9..15)."""
    return math.isqrt(k)


def tile_grid(width: int, height: int, tile_size: int) -> tuple[int, int]:
    return -(-width // tile_size), -(-height // tile_size)


def prep_length(n_splats: int, attrs: Mapping[str, Any]) -> int:
    """Length of the packed prepare buffer (upstream's ``gaussian_splat_prep_packed_len``)."""
    n = max(n_splats, 1)
    tx, ty = tile_grid(attrs["width"], attrs["height"], attrs["tile_size"])
    return 15 * n + attrs["max_list_entries"] + 2 * tx * ty + 3 * max(attrs["width"] * attrs["height"], 1) + PARAM_FLOATS


def grad_length(n_splats: int, k: int) -> int:
    """Length of render_backward's packed gradient."""
    return n_splats * 14 + n_splats * max(k, 1) * 3


# ------------------------------------------------------------------------------ geometry
@dataclass
class Camera:
    eye: np.ndarray
    forward: np.ndarray
    right: np.ndarray
    up: np.ndarray
    tan_half: float
    aspect: float
    near: float
    far: float
    background: np.ndarray


def normalize(v, xp=np):
    """``v / |v|`` along the last axis (zero vectors stay zero; safe to differentiate in jax.numpy)."""
    n2 = xp.sum(v * v, axis=-1, keepdims=True)
    return v / xp.sqrt(xp.where(n2 > 0, n2, 1))


def camera(meta: np.ndarray, width: int, height: int) -> Camera:
    eye, target, up = meta[0:3], meta[3:6], meta[6:9]
    forward = normalize(target - eye)
    right = normalize(np.cross(forward, up))
    if not np.all(np.isfinite(meta[:15])) or not right.any():
        raise RlxError("gaussian splat: the camera in meta is degenerate (non-finite, or up parallel to the view direction)")
    if not 0 < meta[9] < 180:
        raise RlxError(f"gaussian splat: meta[9] (fov_y in degrees) must lie in (0, 180), got {float(meta[9])}")
    tan_half = math.tan(math.radians(float(meta[9])) / 2)
    return Camera(eye, forward, right, np.cross(right, forward), tan_half, width / height, float(meta[10]), float(meta[11]), meta[12:15])


def pixel_rays(cam: Camera, width: int, height: int) -> np.ndarray:
    """[H·W, 3] unit ray directions, row-major pixels."""
    dt = cam.eye.dtype
    sx = ((2 * (np.arange(width, dtype=dt) + 0.5) / width - 1) * (cam.tan_half * cam.aspect)).astype(dt)
    sy = ((1 - 2 * (np.arange(height, dtype=dt) + 0.5) / height) * cam.tan_half).astype(dt)
    d = cam.forward + sx[None, :, None] * cam.right + sy[:, None, None] * cam.up
    return normalize(d.reshape(-1, 3))


def quat_matrix(q, xp=np):
    """[n, 3, 3] rotation matrices of unit quaternions (x, y, z, w); ``xp`` is numpy or jax.numpy."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return xp.stack([
        xp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        xp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        xp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def quat_matrix_partials(q: np.ndarray) -> np.ndarray:
    """[n, 4, 3, 3]: ∂R/∂x, ∂R/∂y, ∂R/∂z, ∂R/∂w of :func:`quat_matrix` (q not renormalised)."""
    x, y, z, w = (2 * q[:, i] for i in range(4))
    o = np.zeros_like(x)
    return np.stack([
        np.stack([np.stack([o, y, z], -1), np.stack([y, -2 * x, -w], -1), np.stack([z, w, -2 * x], -1)], -2),
        np.stack([np.stack([-2 * y, x, w], -1), np.stack([x, o, z], -1), np.stack([-w, z, -2 * y], -1)], -2),
        np.stack([np.stack([-2 * z, -w, x], -1), np.stack([w, -2 * z, y], -1), np.stack([x, y, o], -1)], -2),
        np.stack([np.stack([o, -z, y], -1), np.stack([z, o, -x], -1), np.stack([-y, x, o], -1)], -2),
    ], 1)


def unit_quaternions(q, xp=np):
    """(q / |q|, |q|); a zero quaternion becomes the identity (0, 0, 0, 1) (safe to differentiate in jax.numpy)."""
    n2 = xp.sum(q * q, axis=1, keepdims=True)
    unit = xp.where(n2 > 0, q / xp.sqrt(xp.where(n2 > 0, n2, 1)), xp.asarray([0, 0, 0, 1], q.dtype))
    return unit, xp.sqrt(n2[:, 0])


# The basis as one matrix over the monomials of (x, y, z) it uses: Y_k = Σ_m SH_MATRIX[m, k]·monomial_m.
SH_MONOMIALS = sorted({powers for terms in SH_BASIS for _, powers in terms})


def _sh_matrix() -> np.ndarray:
    out = np.zeros((len(SH_MONOMIALS), len(SH_BASIS)))
    for k, terms in enumerate(SH_BASIS):
        for c, powers in terms:
            out[SH_MONOMIALS.index(powers), k] += c
    return out


SH_MATRIX = _sh_matrix()


def _monomials(v, xp, axis: int | None = None):
    """[n, M] the monomials at directions v, or with ``axis`` their derivatives along it."""
    cols = []
    for powers in SH_MONOMIALS:
        p = list(powers)
        scale = 1
        if axis is not None:
            scale = p[axis]
            p[axis] = max(p[axis] - 1, 0)
        cols.append(scale * v[:, 0] ** p[0] * v[:, 1] ** p[1] * v[:, 2] ** p[2])
    return xp.stack(cols, 1)


def sh_eval(v, k: int, xp=np):
    """The first ``k`` SH basis functions at unit directions v [n, 3] -> [n, k]."""
    return _monomials(v, xp) @ xp.asarray(SH_MATRIX[:, :k], v.dtype)


def sh_eval_grad(v: np.ndarray, k: int) -> np.ndarray:
    """Their partial derivatives in (x, y, z), treated as independent -> [n, k, 3]."""
    return np.stack([_monomials(v, np, axis) @ SH_MATRIX[:, :k].astype(v.dtype) for axis in range(3)], -1)


# ------------------------------------------------------------------------------ scene
@dataclass
class Scene:
    mu: np.ndarray  # [N, 3]
    log_scale: np.ndarray  # [N, 3]
    quat: np.ndarray  # [N, 4] as given
    logit: np.ndarray  # [N]
    color: np.ndarray  # [N, 3]
    sh: np.ndarray  # [N, K, 3]

    @property
    def count(self) -> int:
        return len(self.logit)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def scene_from(args: list[np.ndarray]) -> tuple[Scene, np.ndarray]:
    """The scene and meta from the seven flat operands, in the compute dtype."""
    dt = compute_dtype(args[0].dtype)
    pos, scl, rot, opa, col, sh, meta = (np.asarray(a, dtype=dt).reshape(-1) for a in args[:7])
    n = len(opa)
    k = len(sh) // (3 * n) if n else 0
    return Scene(pos.reshape(n, 3), scl.reshape(n, 3), rot.reshape(n, 4), opa, col.reshape(n, 3), sh.reshape(n, k, 3)), meta


@dataclass
class Prepared:
    """Stage-1 result: per-splat arrays (n = max(N, 1) rows), tile lists and pixel rays."""

    quat: np.ndarray  # [n, 4] unit
    opacity: np.ndarray  # [n], 0 for culled splats
    cam_local: np.ndarray  # [n, 3] diag(1/σ) Rᵀ (e − μ)
    inv_scale: np.ndarray  # [n, 3]
    color: np.ndarray  # [n, 3]
    depth: np.ndarray  # [n]
    entries: np.ndarray  # [stored] splat ids, tile-major
    ranges: np.ndarray  # [tiles, 2]
    rays: np.ndarray  # [pixels, 3]
    generated: int
    count: int

    @cached_property
    def whitening(self) -> np.ndarray:
        """[n, 3, 3] M = diag(1/σ) Rᵀ: world offsets to the splat's whitened frame."""
        return quat_matrix(self.quat).transpose(0, 2, 1) * self.inv_scale[:, :, None]


def splat_colors(scene: Scene, eye: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(colour before the clamp, view directions v): colors + Σ_k Y_k(v)·sh_k."""
    v = normalize(scene.mu - eye)
    k = scene.sh.shape[1]
    raw = scene.color + np.einsum("nk,nkc->nc", sh_eval(v, k), scene.sh)
    return raw, v


def _bin(x, y, radius, depth, valid, attrs) -> tuple[np.ndarray, np.ndarray, int]:
    """Entries (splat ids sorted by tile, depth, id, truncated) and each entry's tile; the count generated."""
    ts, w, h = attrs["tile_size"], attrs["width"], attrs["height"]
    tiles_x, tiles_y = tile_grid(w, h, ts)
    lo_x, hi_x, lo_y, hi_y = x - radius, x + radius, y - radius, y + radius
    hit = valid & (hi_x >= 0) & (lo_x < w) & (hi_y >= 0) & (lo_y < h)
    ids = np.nonzero(hit)[0]

    def span(lo, hi, count):
        a = np.clip(np.floor(lo[ids] / ts), 0, count - 1).astype(np.int64)
        b = np.clip(np.floor(hi[ids] / ts), 0, count - 1).astype(np.int64)
        return a, b - a + 1

    tx0, nx = span(lo_x, hi_x, tiles_x)
    ty0, ny = span(lo_y, hi_y, tiles_y)
    per = nx * ny
    owner = np.repeat(np.arange(len(ids)), per)
    local = np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per)
    tile = (ty0[owner] + local // nx[owner]) * tiles_x + tx0[owner] + local % nx[owner]
    splat = ids[owner]
    order = np.lexsort((splat, depth[splat], tile))
    keep = order[: attrs["max_list_entries"]]
    return splat[keep], tile[keep], len(order)


def prepare(scene: Scene, meta: np.ndarray, attrs: Mapping[str, Any]) -> Prepared:
    w, h = attrs["width"], attrs["height"]
    cam = camera(meta, w, h)
    dt = meta.dtype
    qhat, _ = unit_quaternions(scene.quat)
    rot = quat_matrix(qhat)
    sigma = np.exp(scene.log_scale)
    inv_scale = 1 / sigma
    rel = scene.mu - cam.eye
    depth = rel @ cam.forward
    a = 1 / (1 + np.exp(-scene.logit))
    valid = (depth > cam.near) & (depth < cam.far) & (a >= attrs["alpha_cutoff"])
    safe_depth = np.where(valid, depth, 1)
    x = (rel @ cam.right / (safe_depth * cam.tan_half * cam.aspect) + 1) * (w / 2)
    y = (1 - rel @ cam.up / (safe_depth * cam.tan_half)) * (h / 2)
    support = np.sqrt(2 * np.log(np.maximum(a, attrs["alpha_cutoff"]) / attrs["alpha_cutoff"]))
    radius = attrs["radius_scale"] * support * sigma.max(axis=1, initial=0) * (h / (2 * cam.tan_half)) / safe_depth
    entries, tile, generated = _bin(x, y, radius, depth, valid, attrs)
    tiles_x, tiles_y = tile_grid(w, h, attrs["tile_size"])
    bounds = np.arange(tiles_x * tiles_y)
    ranges = np.stack([np.searchsorted(tile, bounds, "left"), np.searchsorted(tile, bounds, "right")], -1)
    cam_local = np.einsum("nk,nkj->nj", -rel, rot) * inv_scale  # diag(1/σ) Rᵀ (e − μ)
    color, _ = splat_colors(scene, cam.eye)
    n = scene.count
    per_splat = [qhat, np.where(valid, a, 0), cam_local, inv_scale, np.maximum(color, 0), depth]
    if n == 0:  # one invalid dummy splat keeps upstream's n = max(N, 1) layout
        per_splat = [np.array([[0, 0, 0, 1]], dt), *(np.zeros(shape, dt) for shape in (1, (1, 3), (1, 3), (1, 3), 1))]
    quat, opacity, cam_local, inv_scale, color, depth = (p.astype(dt) for p in per_splat)
    return Prepared(quat, opacity, cam_local, inv_scale, color, depth, entries, ranges, pixel_rays(cam, w, h).astype(dt),
                    generated, n)


# ------------------------------------------------------------------------------ packing
def pack(prep: Prepared, attrs: Mapping[str, Any]) -> np.ndarray:
    w, h, ts, cap = attrs["width"], attrs["height"], attrs["tile_size"], attrs["max_list_entries"]
    tiles_x, tiles_y = tile_grid(w, h, ts)
    dt = prep.rays.dtype
    lst = np.full(cap, -1, dt)
    lst[: len(prep.entries)] = prep.entries
    params = [w, h, ts, tiles_x, tiles_y, prep.count, prep.generated, len(prep.entries), cap, attrs["radius_scale"], attrs["alpha_cutoff"]]
    rays = prep.rays.reshape(-1) if w * h else np.zeros(3, dt)
    parts = [prep.quat, prep.opacity, prep.cam_local, prep.inv_scale, np.concatenate([prep.color, prep.depth[:, None]], 1),
             lst, prep.ranges, rays, np.array(params, dt)]
    return np.concatenate([np.asarray(p, dt).reshape(-1) for p in parts])


def unpack(buf: np.ndarray, attrs: Mapping[str, Any]) -> Prepared:
    """Read a packed prepare buffer back; RlxError when it was built for another framebuffer."""
    buf = np.asarray(buf, dtype=compute_dtype(buf.dtype))
    params = buf[-PARAM_FLOATS:]
    if not np.all(np.isfinite(params)):
        raise RlxError("gaussian_splat_rasterize: the prepare buffer's trailing parameters are not finite")
    tiles_x, tiles_y = tile_grid(attrs["width"], attrs["height"], attrs["tile_size"])
    want = [attrs["width"], attrs["height"], attrs["tile_size"], tiles_x, tiles_y, attrs["max_list_entries"]]
    built = [int(v) for v in (*params[:5], params[8])]
    if built != want:
        raise RlxError(f"gaussian_splat_rasterize: the prepare buffer was built for (width, height, tile_size, tiles_x, "
                       f"tiles_y, max_list_entries) = {built}, not {want}")
    count, generated, stored = int(params[5]), int(params[6]), int(params[7])
    n = max(count, 1)
    cap, tiles, pixels = attrs["max_list_entries"], tiles_x * tiles_y, max(attrs["width"] * attrs["height"], 1)
    offsets = np.cumsum([0, 4 * n, n, 3 * n, 3 * n, 4 * n, cap, 2 * tiles, 3 * pixels])
    if count < 0 or offsets[-1] + PARAM_FLOATS != len(buf) or not 0 <= stored <= min(cap, generated):
        raise RlxError(f"gaussian_splat_rasterize: the prepare buffer's counts (N = {count}, {stored} of {generated} "
                       f"entries stored) do not fit its length {len(buf)} and max_list_entries {cap}")
    seg = [buf[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    entries, ranges = seg[5][:stored], seg[6].reshape(tiles, 2)
    ids_ok = np.all((entries >= 0) & (entries < n) & (entries == np.trunc(entries)))
    start, end = ranges[:, 0], ranges[:, 1]
    spans_ok = np.all((start >= 0) & (start <= end) & (end <= stored)) and np.all(ranges == np.trunc(ranges))
    if not (ids_ok and spans_ok):
        raise RlxError("gaussian_splat_rasterize: the prepare buffer's tile lists are corrupt "
                       "(entries must be splat ids < N, tile ranges within the stored entries)")
    color_depth = seg[4].reshape(n, 4)
    return Prepared(seg[0].reshape(n, 4), seg[1], seg[2].reshape(n, 3), seg[3].reshape(n, 3), color_depth[:, :3], color_depth[:, 3],
                    entries.astype(np.int64), ranges.astype(np.int64),
                    seg[7].reshape(pixels, 3)[: attrs["width"] * attrs["height"]], generated, count)


# ------------------------------------------------------------------------------ stage 2
@dataclass
class TileHits:
    """One tile's (pixel × entry) evaluation: everything the forward and backward share."""

    pixels: np.ndarray  # [P] flat pixel ids
    ids: np.ndarray  # [L] splat ids
    alpha: np.ndarray  # [P, L], 0 where not blended
    blended: np.ndarray  # [P, L] bool
    clamped: np.ndarray  # [P, L] bool: α hit ALPHA_MAX
    trans_before: np.ndarray  # [P, L]
    trans_final: np.ndarray  # [P]
    closest: np.ndarray  # [P, L, 3] o + t*·d' (splat frame)
    t_star: np.ndarray  # [P, L]


def _tile_pixels(t: int, attrs: Mapping[str, Any]) -> np.ndarray:
    ts, w, h = attrs["tile_size"], attrs["width"], attrs["height"]
    tiles_x, _ = tile_grid(w, h, ts)
    ty, tx = divmod(t, tiles_x)
    ys = np.arange(ty * ts, min((ty + 1) * ts, h))
    xs = np.arange(tx * ts, min((tx + 1) * ts, w))
    return (ys[:, None] * w + xs[None, :]).reshape(-1)


def tile_hits(prep: Prepared, t: int, attrs: Mapping[str, Any]) -> TileHits | None:
    start, end = prep.ranges[t]
    if end <= start:
        return None
    pixels = _tile_pixels(t, attrs)
    ids = prep.entries[start:end]
    m, o, rays = prep.whitening[ids], prep.cam_local[ids], prep.rays[pixels]
    d_loc = (rays @ m.reshape(-1, 3).T).reshape(len(pixels), len(ids), 3)  # M·d for every (pixel, splat): one GEMM
    dd = np.einsum("pi,pj,lij->pl", rays, rays, np.einsum("lki,lkj->lij", m, m), optimize=True)  # dᵀ(MᵀM)d
    t_star = -(rays @ np.einsum("lij,li->jl", m, o)) / np.where(dd > 0, dd, 1)  # −d·(Mᵀo) / dᵀMᵀMd
    closest = o + t_star[..., None] * d_loc
    rho2 = np.square(closest).sum(-1)
    raw = prep.opacity[ids] * np.exp(-0.5 * rho2)
    alpha = np.minimum(raw, ALPHA_MAX)
    contrib = (t_star > 0) & (dd > 0) & (alpha >= attrs["alpha_cutoff"])
    a_eff = np.where(contrib, alpha, 0)
    one_minus = 1 - a_eff
    trans_before = np.cumprod(np.concatenate([np.ones_like(one_minus[:, :1]), one_minus[:, :-1]], 1), axis=1)
    rank = np.cumsum(contrib, axis=1) - contrib
    blended = contrib & (rank < attrs["max_splat_steps"]) & (trans_before >= attrs["transmittance_threshold"])
    a_eff = np.where(blended, a_eff, 0)
    trans_final = np.prod(np.where(blended, one_minus, 1), axis=1) if ids.size else np.ones(len(pixels), a_eff.dtype)
    return TileHits(pixels, ids, a_eff, blended, raw >= ALPHA_MAX, trans_before, trans_final, closest, t_star)


def all_tile_hits(prep: Prepared, attrs: Mapping[str, Any]) -> Iterator[TileHits]:
    """:func:`tile_hits` of every tile whose list is not empty."""
    for t in range(len(prep.ranges)):
        hits = tile_hits(prep, t, attrs)
        if hits is not None:
            yield hits


def composite(prep: Prepared, background: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """The RGBA image [H·W·4] (background with alpha 0 where no splat is blended)."""
    w, h = attrs["width"], attrs["height"]
    dt = prep.rays.dtype
    out = np.empty((w * h, 4), dt)
    out[:, :3] = background
    out[:, 3] = 0
    for hits in all_tile_hits(prep, attrs):
        weight = hits.alpha * hits.trans_before
        out[hits.pixels, :3] = weight @ prep.color[hits.ids] + hits.trans_final[:, None] * background
        out[hits.pixels, 3] = 1 - hits.trans_final
    return out.reshape(-1)


def render(args: list[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    scene, meta = scene_from(args)
    return composite(prepare(scene, meta, attrs), meta[12:15], attrs)


# ------------------------------------------------------------------------------ backward
def backward(args: list[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """Packed scene gradient [pos | log-scale | quat | logit | colour | sh] of Σ d_rgba · render."""
    scene, meta = scene_from(args)
    d_rgba = np.asarray(args[7], dtype=meta.dtype).reshape(-1, 4)
    clip = attrs["loss_grad_clip"]
    if clip > 0:
        d_rgba = np.clip(d_rgba, -clip, clip)
    prep = prepare(scene, meta, attrs)
    cam = camera(meta, attrs["width"], attrs["height"])
    n = scene.count
    g_mu, g_m, g_logit, g_color = (np.zeros(s, meta.dtype) for s in ((n, 3), (n, 3, 3), n, (n, 3)))
    for hits in all_tile_hits(prep, attrs):
        _tile_backward(hits, prep, cam, d_rgba[hits.pixels], g_mu, g_m, g_logit, g_color)
    return _scene_grads(scene, cam, attrs, g_mu, g_m, g_logit, g_color).astype(meta.dtype)


def _alpha_sensitivity(hits: TileHits, color: np.ndarray, background: np.ndarray) -> np.ndarray:
    """[P, L, 4]: ∂(r, g, b, a)/∂α_j of every blended entry (0 elsewhere and where α is clamped).

    With S_j = Σ_{i>j} w_i c_i + T_final·bg (what lies behind j), ∂C/∂α_j = T_j c_j − S_j / (1 − α_j)
    and ∂A/∂α_j = T_final / (1 − α_j); α ≤ 0.99 keeps the division safe."""
    weight = hits.alpha * hits.trans_before
    contrib = weight[..., None] * color[None]
    behind = contrib.sum(1, keepdims=True) - np.cumsum(contrib, axis=1) + (hits.trans_final[:, None] * background)[:, None, :]
    inv_keep = 1 / (1 - hits.alpha)
    sens = np.concatenate([hits.trans_before[..., None] * color[None] - behind * inv_keep[..., None],
                           (hits.trans_final[:, None] * inv_keep)[..., None]], -1)
    return np.where((hits.blended & ~hits.clamped)[..., None], sens, 0)


def _world_offset(hits: TileHits, prep: Prepared) -> np.ndarray:
    """[P, L, 3] w = e + t*·d − μ, the ray's closest point relative to μ: M⁻¹p = Mᵀ diag(σ²) p."""
    ids = hits.ids
    return np.einsum("lji,plj->pli", prep.whitening[ids], hits.closest / np.square(prep.inv_scale[ids]))


def _tile_backward(hits: TileHits, prep: Prepared, cam: Camera, up: np.ndarray, g_mu, g_m, g_logit, g_color) -> None:
    """Accumulate one tile's gradients into the per-splat buffers (μ, M = diag(1/σ)Rᵀ, logit, colour)."""
    ids, alpha = hits.ids, hits.alpha
    np.add.at(g_color, ids, (alpha * hits.trans_before).T @ up[:, :3])
    g_alpha = np.einsum("plc,pc->pl", _alpha_sensitivity(hits, prep.color[ids], cam.background), up)
    np.add.at(g_logit, ids, (g_alpha * alpha).sum(0) * (1 - prep.opacity[ids]))
    # α = a·exp(−ρ²/2), ρ² = min_t |M(e + t·d − μ)|²: ∂ρ²/∂μ = −2 Mᵀp, ∂ρ²/∂M = 2 p wᵀ (p = closest).
    gp = -g_alpha[..., None] * alpha[..., None] * hits.closest  # 2·∂L/∂ρ²·p
    np.add.at(g_mu, ids, -np.einsum("lji,lj->li", prep.whitening[ids], gp.sum(0)))
    np.add.at(g_m, ids, np.einsum("pli,plj->lij", gp, _world_offset(hits, prep)))


def _scene_grads(scene: Scene, cam: Camera, attrs, g_mu, g_m, g_logit, g_color) -> np.ndarray:
    """Chain the per-splat gradients (μ, M, logit, clamped colour) to the scene operands and pack them."""
    n, k = scene.count, scene.sh.shape[1]
    qhat, qnorm = unit_quaternions(scene.quat)
    rot = quat_matrix(qhat)
    inv_s = np.exp(-scene.log_scale)
    # M_jk = R_kj / σ_j: ∂/∂s_j = −Σ_k G_jk M_jk, ∂/∂R_kj = G_jk / σ_j.
    m = rot.transpose(0, 2, 1) * inv_s[:, :, None]
    g_scale = -np.einsum("njk,njk->nj", g_m, m)
    g_rot = (g_m * inv_s[:, :, None]).transpose(0, 2, 1)
    g_qhat = np.einsum("nkij,nij->nk", quat_matrix_partials(qhat), g_rot)
    safe = np.where(qnorm > 0, qnorm, 1)
    g_quat = np.where((qnorm > 0)[:, None], (g_qhat - qhat * np.einsum("nk,nk->n", qhat, g_qhat)[:, None]) / safe[:, None], 0)
    raw, v = splat_colors(scene, cam.eye)
    g_raw = np.where(raw > 0, g_color, 0)
    g_sh = np.zeros((n, max(k, 1), 3), g_raw.dtype)
    if k:
        g_sh[:, :k] = sh_eval(v, k)[:, :, None] * g_raw[:, None, :]
        g_sh[:, [j for j in range(k) if sh_band(j) > attrs["sh_band"]]] = 0
        g_v = np.einsum("nkc,nc,nkd->nd", scene.sh, g_raw, sh_eval_grad(v, k))
        dist = np.linalg.norm(scene.mu - cam.eye, axis=1)
        g_mu = g_mu + (g_v - v * np.einsum("nd,nd->n", v, g_v)[:, None]) / np.where(dist > 0, dist, 1)[:, None]
    limit = attrs["max_anisotropy"]
    if limit > 0 and n:
        hi, lo = scene.log_scale.argmax(1), scene.log_scale.argmin(1)
        ratio = np.exp(scene.log_scale.max(1) - scene.log_scale.min(1))
        over = np.where(ratio > limit, ratio, 0)
        np.add.at(g_scale, (np.arange(n), hi), over)
        np.add.at(g_scale, (np.arange(n), lo), -over)
    return np.concatenate([g_mu.reshape(-1), g_scale.reshape(-1), g_quat.reshape(-1), g_logit, g_raw.reshape(-1), g_sh.reshape(-1)])


# ------------------------------------------------------------------------------ forward mode
def _scene_tangent(scene: Scene, cam: Camera, tangents: list[np.ndarray]):
    """Tangents of the per-splat quantities (μ, M, logit, clamped colour) for scene tangents
    (positions, log-scales, quaternions, logits, colours, sh): the transpose of :func:`_scene_grads`."""
    n, k = scene.count, scene.sh.shape[1]
    d_mu, d_s, d_q, d_logit, d_col, d_sh = (np.asarray(t, scene.mu.dtype).reshape(n, -1) for t in tangents)
    qhat, qnorm = unit_quaternions(scene.quat)
    safe = np.where(qnorm > 0, qnorm, 1)
    d_qhat = np.where((qnorm > 0)[:, None], (d_q - qhat * np.einsum("nk,nk->n", qhat, d_q)[:, None]) / safe[:, None], 0)
    d_rot = np.einsum("nkij,nk->nij", quat_matrix_partials(qhat), d_qhat)
    inv_s = np.exp(-scene.log_scale)
    m = quat_matrix(qhat).transpose(0, 2, 1) * inv_s[:, :, None]
    d_m = -d_s[:, :, None] * m + d_rot.transpose(0, 2, 1) * inv_s[:, :, None]
    raw, v = splat_colors(scene, cam.eye)
    d_raw = d_col.copy()
    if k:
        d_sh_rgb = d_sh.reshape(n, k, 3)
        dist = np.linalg.norm(scene.mu - cam.eye, axis=1)
        d_v = (d_mu - v * np.einsum("nd,nd->n", v, d_mu)[:, None]) / np.where(dist > 0, dist, 1)[:, None]
        d_raw += np.einsum("nk,nkc->nc", sh_eval(v, k), d_sh_rgb) + np.einsum("nkc,nkd,nd->nc", scene.sh, sh_eval_grad(v, k), d_v)
    return d_mu, d_m, d_logit[:, 0], np.where(raw > 0, d_raw, 0)


def jvp(args: list[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The image tangent [H·W·4] of render at the seven operands ``args[:7]`` along the six scene tangents ``args[7:]``."""
    scene, meta = scene_from(args[:7])
    prep = prepare(scene, meta, attrs)
    cam = camera(meta, attrs["width"], attrs["height"])
    d_mu, d_m, d_logit, d_color = _scene_tangent(scene, cam, args[7:13])
    out = np.zeros((attrs["width"] * attrs["height"], 4), meta.dtype)
    for hits in all_tile_hits(prep, attrs):
        ids, alpha = hits.ids, hits.alpha
        moved = np.einsum("lij,plj->pli", d_m[ids], _world_offset(hits, prep)) - np.einsum("lij,lj->li", prep.whitening[ids], d_mu[ids])
        d_rho2 = 2 * np.einsum("pli,pli->pl", hits.closest, moved)  # 2 pᵀ(dM·w − M·dμ)
        d_alpha = alpha * (d_logit[ids] * (1 - prep.opacity[ids]) - 0.5 * d_rho2)
        out[hits.pixels] = np.einsum("plc,pl->pc", _alpha_sensitivity(hits, prep.color[ids], cam.background), d_alpha)
        out[hits.pixels, :3] += (alpha * hits.trans_before) @ d_color[ids]
    return out.reshape(-1)
