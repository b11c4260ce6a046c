"""Cases for the Gaussian-splatting ops. The oracle is ``splat_oracle`` (a per-pixel Python loop
written from docs/splatting.md with Σ⁻¹ instead of the kernel's whitened frame); the packed
prepare buffer is assembled here from its pieces, and render_backward / render_jvp are checked
against central differences of the oracle image (plus the documented training options)."""

from __future__ import annotations

import math

import numpy as np

from opcases import OpCase, ShapeErrorCase
from ops import splat_oracle as so

SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs")
RASTER = dict(width=12, height=10, tile_size=8, alpha_cutoff=1 / 255, max_splat_steps=32, transmittance_threshold=0.01,
              max_list_entries=64)
RENDER = dict(RASTER, radius_scale=1.6)


def _feed(n: int, k: int, seed: int, dtype=np.float64, attrs=RENDER) -> dict[str, np.ndarray]:
    scene = so.random_scene(np.random.default_rng(seed), n, k)
    meta = so.meta_vector(**{key: attrs[key] for key in RENDER}, eye=(0.4, 0.3, 3.5))
    return {key: v.astype(dtype) for key, v in {**scene, "meta": meta}.items()}


def _oracle_render(attrs=RENDER):
    return lambda **f: so.render(**{k: f[k].astype(np.float64) for k in (*SCENE, "meta")}, **attrs)


def _build_render(attrs=RENDER, **extra):
    return lambda g, **v: g.gaussian_splat_render(*(v[k] for k in (*SCENE, "meta")), **attrs, **extra)


# --------------------------------------------------------------------------- prepare buffer
def _oracle_prepare(attrs=RENDER):
    def oracle(**f):
        f = {k: v.astype(np.float64) for k, v in f.items()}
        w, h, ts, cap = attrs["width"], attrs["height"], attrs["tile_size"], attrs["max_list_entries"]
        sp = so.splats(**f, width=w, height=h, radius_scale=attrs["radius_scale"], alpha_cutoff=attrs["alpha_cutoff"])
        lists, generated = so.tile_lists(**f, width=w, height=h, tile_size=ts, radius_scale=attrs["radius_scale"],
                                         alpha_cutoff=attrs["alpha_cutoff"], max_list_entries=cap)
        e = so.camera(f["meta"], w, h)[0]
        per = [np.concatenate([s["q"], [s["a"] if s["valid"] else 0.0], np.diag(1 / s["sigma"]) @ s["R"].T @ (e - s["mu"]),
                               1 / s["sigma"], s["color"], [s["z"]]]) for s in sp]
        fields = np.array(per).T if per else np.zeros((15, 0))
        blocks = [fields[0:4].T, fields[4], fields[5:8].T, fields[8:11].T, fields[11:15].T]
        flat = [entry for lst in lists for entry in lst]
        ranges, start = [], 0
        for lst in lists:
            ranges += [start, start + len(lst)]
            start += len(lst)
        rays = [so.pixel_ray(px, py, f["meta"], w, h) for py in range(h) for px in range(w)]
        tiles_x, tiles_y = -(-w // ts), -(-h // ts)
        params = [w, h, ts, tiles_x, tiles_y, len(sp), generated, len(flat), cap, attrs["radius_scale"], attrs["alpha_cutoff"]]
        return np.concatenate([*(b.reshape(-1) for b in blocks), flat + [-1] * (cap - len(flat)), ranges, np.reshape(rays, -1), params])
    return oracle


# --------------------------------------------------------------------------- backward
def _oracle_backward(attrs, k: int, clip: float, band: int, aniso: float):
    """Central differences of Σ clip(d)·oracle_image, with SH bands above ``band`` zeroed and the anisotropy penalty added."""
    def oracle(d_rgba, **f):
        f = {key: v.astype(np.float64) for key, v in f.items()}
        d = np.clip(d_rgba, -clip, clip) if clip > 0 else d_rgba
        n, eps = len(f["opacities"]), 1e-6
        grads = []
        for name in SCENE:
            g = np.zeros(max(f[name].size, 3 * n if name == "sh_coeffs" else 0))
            for j in range(f[name].size):
                hi, lo = dict(f), dict(f)
                hi[name], lo[name] = f[name].copy(), f[name].copy()
                hi[name][j] += eps
                lo[name][j] -= eps
                g[j] = (so.render(**hi, **attrs) - so.render(**lo, **attrs)) @ d / (2 * eps)
            if name == "sh_coeffs" and k:
                coeff = np.arange(f[name].size) // 3 % k
                g[np.floor(np.sqrt(coeff)) > band] = 0
            if name == "scales" and aniso > 0:
                s = f["scales"].reshape(n, 3)
                for i in range(n):
                    ratio = math.exp(s[i].max() - s[i].min())
                    if ratio > aniso:
                        g[3 * i + int(s[i].argmax())] += ratio
                        g[3 * i + int(s[i].argmin())] -= ratio
            grads.append(g)
        return np.concatenate(grads)
    return oracle


def _backward_case(name: str, n: int, k: int, clip: float, band: int, aniso: float, seed: int) -> OpCase:
    attrs = dict(RENDER, width=8, height=6, tile_size=4)
    feed = _feed(n, k, seed, attrs=attrs)
    feed["d_rgba"] = np.random.default_rng(seed + 1).uniform(-1, 1, 8 * 6 * 4)
    if aniso > 0:  # stretch every splat (σ ratio e^1.8 ≈ 6) so the penalty is active
        feed["scales"] = feed["scales"] + np.tile([0.0, 1.2, -0.6], n)
    return OpCase(
        "gaussian_splat_render_backward", name,
        lambda g, **v: g.gaussian_splat_render_backward(*(v[key] for key in (*SCENE, "meta", "d_rgba")), **attrs,
                                                        loss_grad_clip=clip, sh_band=band, max_anisotropy=aniso),
        feed, _oracle_backward(attrs, k, clip, band, aniso), rtol=1e-5, atol=1e-7)


def _oracle_jvp(**f):
    """Central differences of the oracle image along the tangents."""
    eps = 1e-6
    hi = {k: f[k] + eps * f[f"t_{k}"] for k in SCENE}
    lo = {k: f[k] - eps * f[f"t_{k}"] for k in SCENE}
    return (so.render(**hi, meta=f["meta"], **RENDER) - so.render(**lo, meta=f["meta"], **RENDER)) / (2 * eps)


def _jvp_feed(n: int, k: int, seed: int) -> dict[str, np.ndarray]:
    feed = _feed(n, k, seed)
    rng = np.random.default_rng(seed + 1)
    return {**feed, **{f"t_{key}": rng.standard_normal(feed[key].shape) for key in SCENE}}


def _batched_feed(n: int, k: int) -> dict[str, np.ndarray]:
    a, b = _feed(n, k, 21), _feed(n, k, 22)
    return {key: np.stack([a[key], b[key]]) for key in a}


def _batched_oracle(**f):
    return np.stack([_oracle_render()(**{key: v[i] for key, v in f.items()}) for i in range(2)])


CASES = [
    OpCase("gaussian_splat_render", "sh4_f64", _build_render(), _feed(5, 4, 0), _oracle_render(), rtol=1e-9, atol=1e-10,
           differentiable=SCENE),
    OpCase("gaussian_splat_render", "no_sh_f32", _build_render(), _feed(6, 0, 1, np.float32), _oracle_render(), rtol=1e-4, atol=2e-5),
    OpCase("gaussian_splat_render", "batch_dims", _build_render(batch_dims=1), _batched_feed(4, 1), _batched_oracle,
           rtol=1e-9, atol=1e-10, differentiable=SCENE),
    OpCase("gaussian_splat_prepare", "sh1_f64", lambda g, **v: g.gaussian_splat_prepare(*(v[k] for k in (*SCENE, "meta")), **RENDER),
           _feed(5, 1, 2), _oracle_prepare(), rtol=1e-9, atol=1e-10),
    OpCase("gaussian_splat_rasterize", "of_prepare", lambda g, **v: g.gaussian_splat_rasterize(
        g.gaussian_splat_prepare(*(v[k] for k in (*SCENE, "meta")), **RENDER), v["meta"], **RASTER),
        _feed(5, 4, 3), _oracle_render(), rtol=1e-9, atol=1e-10, differentiable=SCENE),
    OpCase("gaussian_splat_render_jvp", "sh4_f64", lambda g, **v: g.gaussian_splat_render_jvp(
        *(v[k] for k in (*SCENE, "meta")), *(v[f"t_{k}"] for k in SCENE), **RENDER),
        _jvp_feed(4, 4, 6), _oracle_jvp, rtol=1e-5, atol=1e-7, differentiable=tuple(f"t_{k}" for k in SCENE)),
    _backward_case("exact", 3, 4, clip=0.0, band=3, aniso=0.0, seed=4),
    _backward_case("training_options", 3, 9, clip=0.5, band=1, aniso=1.5, seed=5),
]


def _scene(g, n=2, k=0, dtype="f32", **lengths):
    sizes = {"positions": 3 * n, "scales": 3 * n, "rotations": 4 * n, "opacities": n, "colors": 3 * n, "sh_coeffs": 3 * n * k, "meta": 23}
    sizes.update(lengths)
    return [g.input(key, [size], dtype) for key, size in sizes.items()]


SHAPE_ERRORS = [
    ShapeErrorCase("gaussian_splat_render", "positions_not_triples", lambda g: g.gaussian_splat_render(*_scene(g, positions=7)), "3·N"),
    ShapeErrorCase("gaussian_splat_render", "rotations_length", lambda g: g.gaussian_splat_render(*_scene(g, rotations=6)), "rotations"),
    ShapeErrorCase("gaussian_splat_render", "sh_not_a_band", lambda g: g.gaussian_splat_render(*_scene(g, sh_coeffs=12)), "sh_coeffs"),
    ShapeErrorCase("gaussian_splat_render", "meta_length", lambda g: g.gaussian_splat_render(*_scene(g, meta=15)), "meta"),
    ShapeErrorCase("gaussian_splat_render", "int_operand", lambda g: g.gaussian_splat_render(*_scene(g, dtype="i32")), "float"),
    ShapeErrorCase("gaussian_splat_render", "zero_width", lambda g: g.gaussian_splat_render(*_scene(g), width=0), "width"),
    ShapeErrorCase("gaussian_splat_render", "alpha_cutoff_zero",
                   lambda g: g.gaussian_splat_render(*_scene(g), alpha_cutoff=0.0), "alpha_cutoff"),
    ShapeErrorCase("gaussian_splat_prepare", "list_beyond_f32_indices",
                   lambda g: g.gaussian_splat_prepare(*_scene(g), max_list_entries=(1 << 24) + 1), "2\\^24"),
    ShapeErrorCase("gaussian_splat_rasterize", "not_a_prepare_buffer",
                   lambda g: g.gaussian_splat_rasterize(g.input("p", [100], "f32"), g.input("m", [23], "f32")), "prepare buffer"),
    ShapeErrorCase("gaussian_splat_render_backward", "d_rgba_length",
                   lambda g: g.gaussian_splat_render_backward(*_scene(g), g.input("d", [10], "f32")), "d_rgba"),
    ShapeErrorCase("gaussian_splat_render_jvp", "tangent_shape",
                   lambda g: g.gaussian_splat_render_jvp(*_scene(g), *(g.input(f"t{i}", [5], "f32") for i in range(6))),
                   "t_positions"),
    ShapeErrorCase("gaussian_splat_render", "symbolic_count",
                   lambda g: g.gaussian_splat_render(g.input("p", ["n"], "f32"), *_scene(g)[1:]), "static"),
]
