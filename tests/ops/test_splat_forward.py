"""Gaussian-splatting forward ops (render, prepare, rasterize) against the brute-force oracle in
ops/splat_oracle.py, which follows docs/splatting.md with a different ray/Gaussian formulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rlx
from ops.splat_oracle import EYE, camera, meta_vector, pixel_ray, random_scene, rotation, splats, tile_lists
from ops.splat_oracle import render as oracle_render

NAMES = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs")
ATTRS = {"tile_size": 8, "radius_scale": 1.6, "alpha_cutoff": 1 / 255, "max_splat_steps": 32, "transmittance_threshold": 0.01,
         "max_list_entries": 576}
RASTER_ATTRS = ("tile_size", "alpha_cutoff", "max_splat_steps", "transmittance_threshold", "max_list_entries")
LIST_ATTRS = ("tile_size", "radius_scale", "alpha_cutoff", "max_list_entries")


def _build(g, scene, dtype):
    return [g.input(k, [len(scene[k])], dtype) for k in NAMES] + [g.input("meta", [23], dtype)]


def _feed(scene, meta, dtype):
    np_dtype = np.float32 if dtype == "f32" else np.float64
    return {**{k: np.asarray(scene[k], np_dtype) for k in NAMES}, "meta": np.asarray(meta, np_dtype)}


def run_ops(scene, width, height, dtype="f64", **overrides):
    """rlx's render, prepare and rasterize(prepare(...)) outputs for one scene."""
    attrs = {**ATTRS, **overrides}
    g = rlx.Graph("splat")
    operands = _build(g, scene, dtype)
    render = g.gaussian_splat_render(*operands, width=width, height=height, **attrs)
    prep = g.gaussian_splat_prepare(*operands, width=width, height=height, **attrs)
    image = g.gaussian_splat_rasterize(prep, operands[-1], width=width, height=height, **{k: attrs[k] for k in RASTER_ATTRS})
    g.set_outputs([render, prep, image])
    return rlx.run(g, _feed(scene, meta_vector(width, height, **attrs), dtype))


def rlx_render(scene, width, height, dtype="f64", **overrides):
    return run_ops(scene, width, height, dtype, **overrides)[0]


def oracle(scene, width, height, use_tiles=True, **overrides):
    """The oracle's image with the default attributes updated by ``overrides``."""
    attrs = {**ATTRS, **overrides}
    return oracle_render(**scene, meta=meta_vector(width, height, **attrs), width=width, height=height, use_tiles=use_tiles, **attrs)


def culled_splats() -> dict[str, np.ndarray]:
    """Three large splats that must all be culled: one just behind the camera, long and tilted so that
    many rays meet it in front of the eye (t* > 0), one beyond far, and one with opacity below the cutoff."""
    half = math.radians(15) / 2
    return {
        "positions": np.array([0.0, 0.0, 4.3, 0.0, 0.0, -17.0, 0.0, 0.0, 0.0]),
        "scales": np.log([0.3, 0.3, 4.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0]),
        "rotations": np.array([0.0, math.sin(half), 0.0, math.cos(half), 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
        "opacities": np.array([5.0, 5.0, -7.0]),
        "colors": np.ones(9),
    }


def near_splat() -> dict[str, np.ndarray]:
    """A valid opaque splat just in front of the eye, long and tilted so that for many rays its
    closest point lies behind the eye (t* ≤ 0, skipped) although it is close to the ray."""
    half = math.radians(15) / 2
    return {
        "positions": np.array([0.0, 0.0, 3.8]),
        "scales": np.log([0.3, 0.3, 4.0]),
        "rotations": np.array([0.0, math.sin(half), 0.0, math.cos(half)]),
        "opacities": np.array([5.0]),
        "colors": np.array([1.0, 0.5, 0.2]),
    }


def with_splats(scene, extra, k_sh):
    """``scene`` followed by the splats ``extra`` (zero SH coefficients)."""
    out = {k: np.concatenate([scene[k], extra[k]]) for k in NAMES[:-1]}
    out["sh_coeffs"] = np.concatenate([scene["sh_coeffs"], np.zeros(len(extra["opacities"]) * k_sh * 3)])
    return out


@pytest.mark.parametrize(
    "seed,n,k,width,height,tile",
    [(0, 40, 0, 32, 24, 8), (1, 30, 1, 29, 19, 8), (2, 25, 4, 30, 21, 16), (3, 20, 9, 20, 27, 8), (4, 35, 16, 33, 17, 16),
     (5, 12, 16, 13, 9, 8)],
)
def test_render_matches_oracle(seed, n, k, width, height, tile):
    scene = random_scene(np.random.default_rng(seed), n, k)
    got = rlx_render(scene, width, height, tile_size=tile)
    want = oracle(scene, width, height, tile_size=tile)
    assert got.shape == (height * width * 4,) and got.dtype == np.float64
    assert want.reshape(-1, 4)[:, 3].max() > 0.5  # the scene is really in view
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def _opaque(scene):
    return {**scene, "opacities": scene["opacities"] + 5}  # a > 0.99: the alpha clamp


def _depth_ties(scene):
    return {**scene, "positions": np.round(scene["positions"] * 2) / 2}  # equal depths: index order


@pytest.mark.parametrize("edit", [_opaque, _depth_ties, lambda scene: with_splats(scene, near_splat(), 1)],
                         ids=["opaque", "depth_ties", "near_splat"])
def test_render_edge_cases(edit):
    scene = edit(random_scene(np.random.default_rng(14), 30, 1))
    np.testing.assert_allclose(rlx_render(scene, 24, 20), oracle(scene, 24, 20), rtol=0, atol=1e-9)


@pytest.mark.parametrize("x,generated", [(28.5, 1), (30.0, 0)])
def test_binning_uses_on_image_pixels(x, generated):
    # a tiny splat centred at screen x in a 29-pixel-wide image: tiles of 8 cover the columns 24..28 only
    meta = meta_vector(29, 19, **ATTRS)
    e, f, r, u, t, aspect = camera(meta, 29, 19)
    z = 4.0
    centre = e + z * f + (2 * x / 29 - 1) * z * t * aspect * r + (1 - 2 * 5.5 / 19) * z * t * u
    scene = {"positions": centre, "scales": np.log([0.02] * 3), "rotations": np.array([0.0, 0.0, 0.0, 1.0]), "opacities": np.array([2.0]),
             "colors": np.ones(3), "sh_coeffs": np.zeros(0)}
    assert tile_lists(**scene, meta=meta, width=29, height=19, **{k: ATTRS[k] for k in LIST_ATTRS})[1] == generated
    assert run_ops(scene, 29, 19)[1][-5] == generated


def test_binning_radius():
    scene = random_scene(np.random.default_rng(6), 30, 4)
    unbinned = oracle(scene, 24, 20, use_tiles=False)
    np.testing.assert_allclose(rlx_render(scene, 24, 20, radius_scale=4.0), unbinned, rtol=0, atol=1e-9)
    cropped = rlx_render(scene, 24, 20, radius_scale=0.05)
    np.testing.assert_allclose(cropped, oracle(scene, 24, 20, radius_scale=0.05), rtol=0, atol=1e-9)
    assert np.abs(cropped - unbinned).max() > 1e-2


def test_f32_close_to_f64_oracle():
    scene = {k: v.astype(np.float32) for k, v in random_scene(np.random.default_rng(7), 30, 9).items()}
    got = rlx_render(scene, 28, 20, dtype="f32")
    assert got.dtype == np.float32
    want = oracle_render(**{k: v.astype(np.float64) for k, v in scene.items()},
                         meta=meta_vector(28, 20, **ATTRS).astype(np.float32).astype(np.float64), width=28, height=20, **ATTRS)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("overrides", [{"max_splat_steps": 1}, {"transmittance_threshold": 0.9}, {"max_list_entries": 40}])
def test_compositing_limits(overrides):
    scene = random_scene(np.random.default_rng(8), 40, 1)
    want = oracle(scene, 32, 24, **overrides)
    assert np.abs(want - oracle(scene, 32, 24)).max() > 1e-2  # the limit really bites
    np.testing.assert_allclose(rlx_render(scene, 32, 24, **overrides), want, rtol=0, atol=1e-9)


def test_culled_splats_contribute_nothing():
    scene = random_scene(np.random.default_rng(9), 20, 4)
    got = rlx_render(with_splats(scene, culled_splats(), 4), 24, 18)
    np.testing.assert_array_equal(got, rlx_render(scene, 24, 18))
    np.testing.assert_allclose(got, oracle(scene, 24, 18), rtol=0, atol=1e-9)


@pytest.mark.parametrize("only_culled", [False, True])
def test_empty_scene_is_background(only_culled):
    scene = with_splats({k: np.zeros(0) for k in NAMES}, culled_splats(), 0) if only_culled else {k: np.zeros(0) for k in NAMES}
    pixels = rlx_render(scene, 13, 7).reshape(-1, 4)
    np.testing.assert_array_equal(pixels, np.tile([*meta_vector(13, 7, **ATTRS)[12:15], 0.0], (13 * 7, 1)))


@pytest.mark.parametrize(
    "seed,n,k,width,height,overrides",
    [(10, 25, 4, 29, 19, {}), (11, 30, 0, 20, 20, {"tile_size": 16}), (12, 40, 1, 32, 24, {"max_list_entries": 30, "radius_scale": 1.0})],
)
def test_prepare_buffer(seed, n, k, width, height, overrides):
    scene = with_splats(random_scene(np.random.default_rng(seed), n, k), culled_splats(), k)
    attrs = {**ATTRS, **overrides}
    meta = meta_vector(width, height, **attrs)
    _, prep, _ = run_ops(scene, width, height, **overrides)
    N, tile = len(scene["opacities"]), attrs["tile_size"]
    tiles_x, tiles_y = -(-width // tile), -(-height // tile)
    pixels, max_list = width * height, attrs["max_list_entries"]
    assert prep.shape == (15 * N + max_list + 2 * tiles_x * tiles_y + 3 * pixels + 11,)

    sp = splats(**scene, meta=meta, width=width, height=height, radius_scale=attrs["radius_scale"], alpha_cutoff=attrs["alpha_cutoff"])
    assert [s["valid"] for s in sp[-3:]] == [False, False, False]
    e = np.array(EYE)
    np.testing.assert_allclose(prep[: 4 * N], np.concatenate([s["q"] for s in sp]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(prep[4 * N : 5 * N], [s["a"] if s["valid"] else 0.0 for s in sp], rtol=0, atol=1e-12)
    o = [np.diag(1 / s["sigma"]) @ rotation(s["q"]).T @ (e - s["mu"]) for s in sp]
    np.testing.assert_allclose(prep[5 * N : 8 * N], np.concatenate(o), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(prep[8 * N : 11 * N], np.concatenate([1 / s["sigma"] for s in sp]), rtol=1e-12, atol=0)
    np.testing.assert_allclose(prep[11 * N : 15 * N], np.concatenate([[*s["color"], s["z"]] for s in sp]), rtol=0, atol=1e-12)

    lists, generated = tile_lists(**scene, meta=meta, width=width, height=height, **{k: attrs[k] for k in LIST_ATTRS})
    stored = min(generated, max_list)
    if "max_list_entries" in overrides:
        assert generated > max_list  # this case overflows
    entries = prep[15 * N : 15 * N + max_list]
    np.testing.assert_array_equal(entries, [*(i for lst in lists for i in lst), *[-1] * (max_list - stored)])
    ranges = prep[15 * N + max_list : 15 * N + max_list + 2 * tiles_x * tiles_y].reshape(-1, 2).astype(int)
    for (start, end), lst in zip(ranges, lists, strict=True):
        np.testing.assert_array_equal(entries[start:end], lst)

    rays = prep[15 * N + max_list + 2 * tiles_x * tiles_y : -11]
    want_rays = [pixel_ray(px, py, meta, width, height) for py in range(height) for px in range(width)]
    np.testing.assert_allclose(rays, np.concatenate(want_rays), rtol=0, atol=1e-12)
    np.testing.assert_allclose(prep[-11:], [width, height, tile, tiles_x, tiles_y, N, generated, stored, max_list, attrs["radius_scale"],
                                            attrs["alpha_cutoff"]], rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("overrides", [{}, {"max_list_entries": 30, "max_splat_steps": 3}])
def test_rasterize_of_prepare_is_render(dtype, overrides):
    scene = random_scene(np.random.default_rng(13), 35, 9)
    render, _, image = run_ops(scene, 27, 21, dtype=dtype, **overrides)
    np.testing.assert_array_equal(image, render)
