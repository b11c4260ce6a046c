"""gaussian_splat_render lowers to primitives (upstream's splat logical kernel): a claim set without the
splat ops reaches a primitive-only graph whose image equals the reference kernel's and the oracle's."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from ops import splat_oracle as so
from rlx.opt.legalize import legalize_for_backend
from rlx.opt.lower import rewrite_for_backend

PRIMITIVES = {"input", "param", "constant", "reshape", "transpose", "narrow", "concat", "reduce", "binary", "activation",
              "unary_math", "compare", "where", "cast", "matmul", "cumulative"}
SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs", "meta")


def _scene(n: int, k: int, seed: int, attrs: dict, dtype=np.float64, eye=(0.4, 0.3, 3.5)) -> dict[str, np.ndarray]:
    scene = so.random_scene(np.random.default_rng(seed), n, k)
    meta = so.meta_vector(**{key: attrs[key] for key in RENDER}, eye=eye)
    return {key: v.astype(dtype) for key, v in {**scene, "meta": meta}.items()}


RENDER = dict(width=12, height=10, tile_size=8, alpha_cutoff=1 / 255, max_splat_steps=32, transmittance_threshold=0.01,
              max_list_entries=64, radius_scale=1.6)


def _lowered(feed: dict[str, np.ndarray], attrs: dict, batch: int = 0) -> tuple[rlx.Graph, rlx.Graph]:
    g = rlx.Graph("splat")
    vals = [g.input(k, feed[k].shape, rlx.DType.of(feed[k].dtype)) for k in SCENE]
    g.set_outputs([g.gaussian_splat_render(*vals, **attrs, batch_dims=batch)])
    res = rewrite_for_backend(g, PRIMITIVES, strict=True)
    rlx.verify(res.graph)
    assert legalize_for_backend(res.graph, PRIMITIVES) == []
    assert {n.op for n in res.graph.nodes} <= PRIMITIVES
    return g, res.graph


CASES = [
    ("plain", 6, 0, 1, {}),
    ("sh_band1", 5, 4, 2, {}),
    ("sh_band3", 4, 16, 3, {}),
    ("list_overflow", 8, 0, 4, {"max_list_entries": 5}),
    ("step_limit", 8, 1, 5, {"max_splat_steps": 2}),
    ("early_stop", 8, 0, 6, {"transmittance_threshold": 0.6}),
    ("small_tiles", 7, 0, 7, {"tile_size": 3}),
]


@pytest.mark.parametrize(("name", "n", "k", "seed", "extra"), CASES, ids=[c[0] for c in CASES])
def test_render_lowers_to_primitives_and_matches_the_kernel(name, n, k, seed, extra):
    attrs = {**RENDER, **extra}
    feed = _scene(n, k, seed, attrs)
    g, low = _lowered(feed, attrs)
    (want,) = rlx.run(g, inputs=feed)  # the reference kernel
    (got,) = rlx.run(low, inputs=feed)
    oracle = so.render(**{key: feed[key] for key in SCENE}, **attrs)
    assert np.abs(want - oracle).max() < 1e-9  # the kernel itself agrees with the oracle on this scene
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert np.ptp(want) > 0  # the scene draws something


def test_render_f32_batched_and_empty():
    attrs = RENDER
    feeds = [_scene(5, 1, s, attrs, np.float32) for s in (8, 9)]
    batched = {k: np.stack([f[k] for f in feeds]) for k in SCENE}
    g, low = _lowered(batched, attrs, batch=1)
    (want,) = rlx.run(g, inputs=batched)
    (got,) = rlx.run(low, inputs=batched)
    assert got.dtype == np.float32 and got.shape == (2, 12 * 10 * 4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    empty = {**_scene(1, 0, 1, attrs), **{k: np.zeros(0) for k in SCENE[:6]}}
    g, low = _lowered(empty, attrs)
    np.testing.assert_array_equal(rlx.run(low, inputs=empty)[0], rlx.run(g, inputs=empty)[0])


def test_claimed_render_is_left_alone():
    feed = _scene(2, 0, 1, RENDER)
    g = rlx.Graph("splat")
    g.set_outputs([g.gaussian_splat_render(*[g.input(k, feed[k].shape, rlx.f64) for k in SCENE], **RENDER)])
    res = rewrite_for_backend(g, PRIMITIVES | {"gaussian_splat_render"})
    assert [n.op for n in res.graph.nodes].count("gaussian_splat_render") == 1
