"""The JAX splat lowerings against the NumPy kernels. The dense (GPU / TPU) formulation of render,
render_backward (with and without the training options) and render_jvp, forced on this CPU: f64
(tight: no threshold can flip) and f32, SH bands, partial edge tiles, an overflowing list,
batch_dims, a training step whose backward graph runs under jit; and the CPU default (the NumPy
kernel on the host)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from ops import splat_oracle as so
from rlx.ops.splat import render_meta

pytest.importorskip("jax")
from rlx.backends.jax import lowering_splat

SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs")


@pytest.fixture(autouse=True)
def dense(monkeypatch):
    """The dense (GPU / TPU) formulation, on this CPU; each test graph is new, so no cached host executable interferes."""
    monkeypatch.setattr(lowering_splat, "DENSE_ON_CPU", True)


def _feed(n, k, seed, dtype=np.float64):
    scene = so.random_scene(np.random.default_rng(seed), n, k)
    meta = render_meta((0.4, 0.3, 3.5), (0, 0, 0), fov_y_degrees=50, background=(0.1, 0.2, 0.3)).astype(np.float64)
    return {key: v.astype(dtype) for key, v in {**scene, "meta": meta}.items()}


def _both(build, feed, dtype="f64"):
    """``build(g, leaves)`` -> outputs, run by the NumPy kernels and by one jitted JAX executable."""
    g = rlx.Graph("splat")
    v = {k: g.input(k, list(a.shape), dtype) for k, a in feed.items()}
    g.set_outputs(list(build(g, v)))
    want = rlx.run(g, feed)
    got = [np.asarray(a) for a in rlx.compile(g, backend="jax").run(inputs=feed)]
    return got, want


CONFIGS = [  # (n, k, seed, attrs)
    (12, 4, 0, dict(width=20, height=13, tile_size=8)),
    (30, 16, 1, dict(width=16, height=16, tile_size=4, max_list_entries=40)),  # the list overflows
    (8, 0, 2, dict(width=11, height=7, tile_size=16, max_splat_steps=2, transmittance_threshold=0.5)),
]
EXACT = dict(loss_grad_clip=0.0, sh_band=3, max_anisotropy=0.0)
TRAINING = dict(loss_grad_clip=0.3, sh_band=1, max_anisotropy=1.5)


@pytest.mark.parametrize(("n", "k", "seed", "attrs"), CONFIGS)
def test_render_backward_and_jvp_match_the_reference_kernels(n, k, seed, attrs):
    """One executable per configuration: the render, both backward variants and the jvp."""
    feed = _feed(n, k, seed)
    rng = np.random.default_rng(seed + 7)
    feed["d_rgba"] = rng.uniform(-1, 1, attrs["width"] * attrs["height"] * 4)
    feed.update({f"t_{key}": rng.standard_normal(feed[key].shape) for key in SCENE})

    def build(g, v):
        scene = [v[key] for key in (*SCENE, "meta")]
        return [g.gaussian_splat_render(*scene, **attrs),
                g.gaussian_splat_render_backward(*scene, v["d_rgba"], **attrs, **EXACT),
                g.gaussian_splat_render_backward(*scene, v["d_rgba"], **attrs, **TRAINING),
                g.gaussian_splat_render_jvp(*scene, *(v[f"t_{key}"] for key in SCENE), **attrs)]

    got, want = _both(build, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12, err_msg="render")
    for name, a, b in zip(("backward", "backward with training options", "jvp"), got[1:], want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=name)


def test_an_empty_scene_is_the_background():
    feed = _feed(0, 0, 3)
    got, want = _both(lambda g, v: [g.gaussian_splat_render(*(v[key] for key in (*SCENE, "meta")), width=8, height=8,
                                                            tile_size=4)], feed)
    np.testing.assert_array_equal(got[0], want[0])


def test_float32_and_batch_dims():
    a, b = _feed(10, 4, 5, np.float32), _feed(10, 4, 6, np.float32)
    feed = {key: np.stack([a[key], b[key]]) for key in a}
    (got,), (want,) = _both(lambda g, v: [g.gaussian_splat_render(*(v[key] for key in (*SCENE, "meta")), width=16, height=12,
                                                                  tile_size=8, batch_dims=1)], feed, dtype="f32")
    assert got.dtype == np.float32 and got.shape == (2, 16 * 12 * 4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_training_graph_runs_on_the_jax_backend():
    feed = _feed(8, 1, 9)
    g = rlx.Graph("fit")
    v = {k: g.input(k, list(a.shape), "f64") for k, a in feed.items()}
    img = g.gaussian_splat_render(*(v[key] for key in (*SCENE, "meta")), width=16, height=12, tile_size=8)
    diff = img - g.constant(np.full(16 * 12 * 4, 0.5))
    g.set_outputs([g.sum(diff * diff)])
    bwd = rlx.grad_with_loss(g, wrt=list(SCENE))
    seeded = {**feed, "d_output": np.array(1.0)}
    want = rlx.run(bwd, seeded)
    got = rlx.compile(bwd, backend="jax").run(inputs=seeded)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-8, atol=1e-10)


def test_cpu_executables_call_the_reference_kernel_on_the_host(monkeypatch):
    monkeypatch.setattr(lowering_splat, "DENSE_ON_CPU", False)
    feed = _feed(9, 4, 11, np.float32)
    (got,), (want,) = _both(lambda g, v: [g.gaussian_splat_render(*(v[key] for key in (*SCENE, "meta")), width=12, height=9,
                                                                  tile_size=4)], feed, dtype="f32")
    np.testing.assert_array_equal(got, want)  # the same NumPy kernel, bit for bit
