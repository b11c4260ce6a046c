"""gaussian_splat_render_backward lowers to primitives (upstream's logical kernel): the reverse-mode
derivative of the forward body plus the training options, checked against the hand-written
reference kernel (rlx.ops.splat_kernel.backward), option by option and segment by segment."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rlx
from opt.test_splat_lowering import PRIMITIVES, RENDER, SCENE, _scene, lower_checked
from rlx.ir.errors import InternalError
from rlx.ops import splat_backward_lower
from rlx.ops.splat import grad_segments

CLAIMS = PRIMITIVES | {"expand"}  # reverse mode broadcasts cotangents back (a primitive data-movement op)
EXACT = dict(loss_grad_clip=0.0, sh_band=3, max_anisotropy=0.0)
PIXELS = RENDER["width"] * RENDER["height"]


def _feed(n: int, k: int, seed: int, attrs: dict, dtype=np.float64) -> dict[str, np.ndarray]:
    feed = _scene(n, k, seed, attrs, dtype)
    feed["d_rgba"] = np.random.default_rng(100 + seed).normal(0, 1, PIXELS * 4).astype(dtype)
    return feed


def _graphs(feed: dict[str, np.ndarray], attrs: dict, batch: int = 0) -> tuple[rlx.Graph, rlx.Graph]:
    g = rlx.Graph("splat_backward")
    vals = [g.input(k, feed[k].shape, rlx.DType.of(feed[k].dtype)) for k in (*SCENE, "d_rgba")]
    g.set_outputs([g.gaussian_splat_render_backward(*vals, **attrs, batch_dims=batch)])
    return g, lower_checked(g, CLAIMS)


def _both(feed: dict[str, np.ndarray], attrs: dict, batch: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g, low = _graphs(feed, attrs, batch)
    (want,) = rlx.run(g, inputs=feed)  # the reference kernel
    (got,) = rlx.run(low, inputs=feed)
    assert got.shape == want.shape and got.dtype == want.dtype
    return got, want


CASES = [
    ("exact", 6, 0, 1, {}, EXACT),
    ("exact_sh16", 4, 16, 3, {}, EXACT),
    ("clip", 5, 4, 2, {}, {**EXACT, "loss_grad_clip": 0.3}),
    ("sh_band0", 5, 4, 2, {}, {**EXACT, "sh_band": 0}),
    ("sh_band2", 4, 16, 3, {}, {**EXACT, "sh_band": 2}),
    ("anisotropy", 6, 1, 4, {}, {**EXACT, "max_anisotropy": 1.5}),
    ("defaults_step_limit", 8, 1, 5, {"max_splat_steps": 2}, {}),
    ("all_options_overflow", 8, 4, 6, {"max_list_entries": 5}, {"loss_grad_clip": 0.5, "sh_band": 1, "max_anisotropy": 1.2}),
    ("early_stop", 8, 0, 6, {"transmittance_threshold": 0.6}, EXACT),
]


@pytest.mark.parametrize(("name", "n", "k", "seed", "extra", "opts"), CASES, ids=[c[0] for c in CASES])
def test_backward_lowers_to_primitives_and_matches_the_kernel(name, n, k, seed, extra, opts):
    attrs = {**RENDER, **extra, **opts}
    feed = _feed(n, k, seed, attrs)
    got, want = _both(feed, attrs)
    segments = grad_segments(n, k)
    assert got.shape == (segments["sh_coeffs"].stop,)
    for part, where in segments.items():  # the packed layout, segment by segment
        np.testing.assert_allclose(got[where], want[where], rtol=1e-8, atol=1e-8, err_msg=part)
    for part in ("positions", "scales", "opacities", "colors"):
        assert np.abs(want[segments[part]]).max() > 1e-3, part  # the scene is seen: gradients are not trivially zero


def test_options_change_the_gradient():
    """Each option is exercised by the scenes above: off vs on differ in the kernel, and the body follows."""
    base = {**RENDER, **EXACT}
    feed = _feed(5, 4, 2, base)
    _, exact = _both(feed, base)
    seg = grad_segments(5, 4)
    assert np.abs(feed["d_rgba"]).max() > 0.3  # the clip bites
    _, clipped = _both(feed, {**base, "loss_grad_clip": 0.3})
    assert np.abs(clipped - exact).max() > 1e-3
    _, band0 = _both(feed, {**base, "sh_band": 0})
    sh = band0[seg["sh_coeffs"]].reshape(5, 4, 3)
    assert np.all(sh[:, 1:] == 0) and np.abs(sh[:, 0]).max() > 0 and np.abs(exact[seg["sh_coeffs"]]).reshape(5, 4, 3)[:, 1:].max() > 0
    scales = np.exp(feed["scales"].reshape(5, 3))
    assert (scales.max(1) / scales.min(1) > 1.5).any()  # some splats are over the anisotropy limit
    _, aniso = _both(feed, {**base, "max_anisotropy": 1.5})
    assert np.abs(aniso[seg["scales"]] - exact[seg["scales"]]).max() > 1e-2


def test_anisotropy_ties_pick_the_first_axis():
    """Equal extreme log-scales: the penalty's gradient goes to the first of them (the kernel's argmax / argmin)."""
    attrs = {**RENDER, **EXACT, "max_anisotropy": 1.2}
    feed = _feed(3, 0, 7, attrs)
    feed["scales"] = np.log(np.array([0.1, 0.1, 0.3, 0.2, 0.2, 0.2, 0.3, 0.1, 0.3]))  # min tie, no spread, max tie
    got, want = _both(feed, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8)
    _, exact = _both(feed, {**attrs, "max_anisotropy": 0.0})
    penalty = (got - exact)[grad_segments(3, 0)["scales"]].reshape(3, 3)
    np.testing.assert_allclose(penalty, [[-3, 0, 3], [0, 0, 0], [3, -3, 0]], rtol=1e-9, atol=1e-12)


def test_exact_body_matches_finite_differences_of_the_lowered_render():
    """Independent of both kernels: the colour / opacity gradients against central differences of the image."""
    attrs = {**RENDER, **EXACT}
    feed = _feed(4, 0, 8, attrs)
    _, low = _graphs(feed, attrs)
    (packed,) = rlx.run(low, inputs=feed)
    seg = grad_segments(4, 0)
    g = rlx.Graph("render")
    g.set_outputs([g.gaussian_splat_render(*[g.input(k, feed[k].shape, rlx.f64) for k in SCENE], **RENDER)])

    def loss(part: str, i: int, h: float) -> float:
        moved = {**feed, part: feed[part].copy()}
        moved[part][i] += h
        return float(rlx.run(g, inputs={k: moved[k] for k in SCENE})[0] @ feed["d_rgba"])

    for part, i in (("colors", 1), ("colors", 7), ("opacities", 2), ("positions", 4)):
        fd = (loss(part, i, 1e-6) - loss(part, i, -1e-6)) / 2e-6
        assert math.isclose(packed[seg[part]][i], fd, rel_tol=1e-4, abs_tol=1e-6), (part, i)


def test_backward_f32_batched_and_empty():
    attrs = {**RENDER, "loss_grad_clip": 0.5, "sh_band": 1, "max_anisotropy": 2.0}
    feeds = [_feed(5, 4, s, attrs, np.float32) for s in (8, 9)]
    batched = {k: np.stack([f[k] for f in feeds]) for k in (*SCENE, "d_rgba")}
    got, want = _both(batched, attrs, batch=1)
    assert got.dtype == np.float32 and got.shape == (2, grad_segments(5, 4)["sh_coeffs"].stop)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    empty = {**_feed(1, 0, 1, attrs), **{k: np.zeros(0) for k in SCENE[:6]}}
    got, want = _both(empty, attrs)
    assert got.shape == want.shape == (0,)


def test_unfilled_hook_is_an_internal_error(monkeypatch):
    monkeypatch.setattr(splat_backward_lower, "RENDER_VJP", {})
    feed = _feed(2, 0, 1, {**RENDER, **EXACT})
    with pytest.raises(InternalError, match="no derivative builder"):
        _graphs(feed, {**RENDER, **EXACT})
