"""Brute-force float64 reference for the Gaussian-splatting ops, written from docs/splatting.md alone.

Deliberately a different formulation from the kernels: the ray/Gaussian evaluation minimises the
Mahalanobis distance ``(X − μ)ᵀ Σ⁻¹ (X − μ)`` along the ray with an explicit inverse covariance
instead of working in the splat's whitened frame, and everything is plain per-pixel loops.
"""

from __future__ import annotations

import math

import numpy as np

EYE = (0.0, 0.0, 4.0)
TARGET = (0.0, 0.0, 0.0)
UP = (0.0, 1.0, 0.0)
FOV_Y = 50.0
NEAR = 0.1
FAR = 20.0
BACKGROUND = (0.1, 0.2, 0.3)

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
      -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def camera(meta, width: int, height: int):
    """Look-at camera from ``meta[0:10]``: eye e, forward f, right r, up u, tan(fov_y/2), W/H."""
    meta = np.asarray(meta, np.float64)
    e, target, up = meta[0:3], meta[3:6], meta[6:9]
    f = _unit(target - e)
    r = _unit(np.cross(f, up))
    u = np.cross(r, f)
    return e, f, r, u, math.tan(math.radians(meta[9]) / 2), width / height


def pixel_ray(px: int, py: int, meta, width: int, height: int) -> np.ndarray:
    """Unit ray direction through the centre of pixel (px, py); row 0 is the top."""
    _, f, r, u, t, aspect = camera(meta, width, height)
    sx = (2 * (px + 0.5) / width - 1) * t * aspect
    sy = (1 - 2 * (py + 0.5) / height) * t
    return _unit(f + sx * r + sy * u)


def project(X, meta, width: int, height: int) -> tuple[float, float, float]:
    """View depth z and continuous screen position (x, y) of the point X."""
    e, f, r, u, t, aspect = camera(meta, width, height)
    rel = np.asarray(X, np.float64) - e
    z = float(rel @ f)
    x = (float(rel @ r) / (z * t * aspect) + 1) * width / 2
    y = (1 - float(rel @ u) / (z * t)) * height / 2
    return z, x, y


def unit_quaternion(q) -> np.ndarray:
    """(x, y, z, w) normalised; the zero quaternion is the identity."""
    q = np.asarray(q, np.float64)
    n = np.linalg.norm(q)
    return np.array([0.0, 0.0, 0.0, 1.0]) if n == 0 else q / n


def rotation(q) -> np.ndarray:
    """Rotation matrix of the quaternion (x, y, z, w), after normalisation."""
    x, y, z, w = unit_quaternion(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def sh_basis(v) -> list[float]:
    """The 16 real SH basis values Y_0..Y_15 (3DGS order) at the unit direction v."""
    x, y, z = v
    xx, yy, zz = x * x, y * y, z * z
    return [
        C0,
        -C1 * y,
        C1 * z,
        -C1 * x,
        C2[0] * x * y,
        C2[1] * y * z,
        C2[2] * (2 * zz - xx - yy),
        C2[3] * x * z,
        C2[4] * (xx - yy),
        C3[0] * y * (3 * xx - yy),
        C3[1] * x * y * z,
        C3[2] * y * (4 * zz - xx - yy),
        C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
        C3[4] * x * (4 * zz - xx - yy),
        C3[5] * z * (xx - yy),
        C3[6] * x * (xx - 3 * yy),
    ]


def splats(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, radius_scale, alpha_cutoff):
    """Per-splat dicts: mu, sigma, q (unit), R, sigma_inv (Σ⁻¹), a, color, z, x, y, valid, radius."""
    meta = np.asarray(meta, np.float64)
    e, _, _, _, t, _ = camera(meta, width, height)
    near, far = meta[10], meta[11]
    n = len(opacities)
    k = len(sh_coeffs) // (3 * n) if n else 0
    sh = np.asarray(sh_coeffs, np.float64).reshape(n, k, 3)
    out = []
    for i in range(n):
        mu = np.asarray(positions[3 * i : 3 * i + 3], np.float64)
        sigma = np.exp(np.asarray(scales[3 * i : 3 * i + 3], np.float64))
        R = rotation(rotations[4 * i : 4 * i + 4])
        a = 1 / (1 + math.exp(-float(opacities[i])))
        Y = sh_basis(_unit(mu - e))
        color = np.asarray(colors[3 * i : 3 * i + 3], np.float64) + sum(Y[j] * sh[i, j] for j in range(k))
        z, x, y = project(mu, meta, width, height)
        valid = near < z < far and a >= alpha_cutoff
        radius = radius_scale * math.sqrt(2 * math.log(a / alpha_cutoff)) * sigma.max() * (height / (2 * t)) / z if valid else 0.0
        out.append({
            "mu": mu,
            "sigma": sigma,
            "q": unit_quaternion(rotations[4 * i : 4 * i + 4]),
            "R": R,
            "sigma_inv": np.linalg.inv(R @ np.diag(sigma**2) @ R.T),
            "a": a,
            "color": np.maximum(color, 0.0),
            "z": z,
            "x": x,
            "y": y,
            "valid": valid,
            "radius": radius,
        })
    return out


def _bin(sp: list[dict], width: int, height: int, tile_size: int) -> list[tuple[int, float, int]]:
    """All (tile, depth, splat) entries: a valid splat goes to every tile whose pixel rectangle
    (clipped to the image) meets its square [x − r, x + r] × [y − r, y + r]."""
    tiles_x, tiles_y = -(-width // tile_size), -(-height // tile_size)
    entries = []
    for i, s in enumerate(sp):
        if not s["valid"]:
            continue
        x, y, r = s["x"], s["y"], s["radius"]
        for ty in range(tiles_y):
            y0, y1 = ty * tile_size, min((ty + 1) * tile_size, height)
            for tx in range(tiles_x):
                x0, x1 = tx * tile_size, min((tx + 1) * tile_size, width)
                if x - r < x1 and x + r >= x0 and y - r < y1 and y + r >= y0:
                    entries.append((ty * tiles_x + tx, s["z"], i))
    return sorted(entries)


def tile_lists(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, tile_size, radius_scale, alpha_cutoff,
               max_list_entries):
    """Per tile (row-major) the ordered splat indices kept after truncation, and the number generated."""
    sp = splats(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, radius_scale, alpha_cutoff)
    entries = _bin(sp, width, height, tile_size)
    lists: list[list[int]] = [[] for _ in range(-(-width // tile_size) * -(-height // tile_size))]
    for tile, _, i in entries[:max_list_entries]:
        lists[tile].append(i)
    return lists, len(entries)


def ray_gaussian(s: dict, e: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """(t*, ρ²): the ray parameter minimising the Mahalanobis distance to μ, and that squared distance."""
    A = s["sigma_inv"]
    t_star = float(d @ A @ (s["mu"] - e)) / float(d @ A @ d)
    p = e + t_star * d - s["mu"]
    return t_star, float(p @ A @ p)


def composite(order: list[int], sp: list[dict], e, d, background, alpha_cutoff, max_splat_steps, transmittance_threshold) -> np.ndarray:
    """Front-to-back compositing of the splats ``order`` along the ray (e, d): RGBA."""
    T, C, blended = 1.0, np.zeros(3), 0
    for i in order:
        t_star, rho2 = ray_gaussian(sp[i], e, d)
        if t_star <= 0:
            continue
        alpha = min(sp[i]["a"] * math.exp(-rho2 / 2), 0.99)
        if alpha < alpha_cutoff:
            continue
        if blended == max_splat_steps:
            break
        C = C + T * alpha * sp[i]["color"]
        T *= 1 - alpha
        blended += 1
        if T < transmittance_threshold:
            break
    return np.append(C + T * background, 1 - T)


def render(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, tile_size, radius_scale, alpha_cutoff,
           max_splat_steps, transmittance_threshold, max_list_entries, use_tiles=True) -> np.ndarray:
    """The image [H·W·4]. ``use_tiles=False`` composites every valid splat at every pixel in
    (depth, index) order: no binning and no list truncation."""
    meta = np.asarray(meta, np.float64)
    sp = splats(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, radius_scale, alpha_cutoff)
    e = camera(meta, width, height)[0]
    if use_tiles:
        lists, _ = tile_lists(positions, scales, rotations, opacities, colors, sh_coeffs, meta, width, height, tile_size, radius_scale,
                              alpha_cutoff, max_list_entries)
    else:
        everything = [i for _, i in sorted((s["z"], i) for i, s in enumerate(sp) if s["valid"])]
    tiles_x = -(-width // tile_size)
    img = np.zeros((height, width, 4))
    for py in range(height):
        for px in range(width):
            order = lists[(py // tile_size) * tiles_x + px // tile_size] if use_tiles else everything
            d = pixel_ray(px, py, meta, width, height)
            img[py, px] = composite(order, sp, e, d, meta[12:15], alpha_cutoff, max_splat_steps, transmittance_threshold)
    return img.reshape(-1)


def random_scene(rng: np.random.Generator, n: int, k_sh: int = 0) -> dict[str, np.ndarray]:
    """``n`` random splats in the [-1, 1]³ box before the default camera, with ``k_sh`` SH coefficients."""
    q = rng.normal(size=(n, 4))
    return {
        "positions": rng.uniform(-1, 1, 3 * n),
        "scales": math.log(0.15) + rng.normal(0, 0.4, 3 * n),
        "rotations": (q / np.linalg.norm(q, axis=1, keepdims=True) * rng.uniform(0.5, 2, (n, 1))).reshape(-1),
        "opacities": rng.uniform(0, 2, n),
        "colors": rng.uniform(0, 1, 3 * n),
        "sh_coeffs": rng.normal(0, 0.15, n * k_sh * 3),
    }


def meta_vector(width, height, tile_size, radius_scale, alpha_cutoff, max_splat_steps, transmittance_threshold, max_list_entries,
                eye=EYE, target=TARGET, up=UP, fov_y=FOV_Y, near=NEAR, far=FAR, background=BACKGROUND) -> np.ndarray:
    """The 23-float meta: camera, fov, near/far, background, then the attributes as floats."""
    return np.array([*eye, *target, *up, fov_y, near, far, *background, width, height, tile_size, radius_scale, alpha_cutoff,
                     max_splat_steps, transmittance_threshold, max_list_entries], np.float64)
