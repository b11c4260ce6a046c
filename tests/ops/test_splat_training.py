"""Gaussian splatting beyond single ops: autodiff through a render (vs finite differences of the
independent oracle), refusals that must not be silent, the decomposed form under autodiff, the
arena runtime, run-time buffer checks, and a small scene fitted to a target image by gradient descent."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from ops import splat_oracle as so
from rlx.ops.splat import grad_segments, render_meta

SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs")
ATTRS = dict(width=16, height=12, tile_size=8)


def _feed(n: int = 6, k: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    scene = so.random_scene(np.random.default_rng(seed), n, k)
    return {**scene, "meta": render_meta((0.4, 0.3, 3.5), (0, 0, 0), fov_y_degrees=50, background=(0.1, 0.2, 0.3)).astype(np.float64)}


def _graph(feed: dict[str, np.ndarray], decomposed: bool = False) -> tuple[rlx.Graph, list[rlx.Value]]:
    g = rlx.Graph("splat")
    v = [g.input(k, [a.size], "f64") for k, a in feed.items()]
    if decomposed:
        img = g.gaussian_splat_rasterize(g.gaussian_splat_prepare(*v, **ATTRS), v[6], **ATTRS)
    else:
        img = g.gaussian_splat_render(*v, **ATTRS)
    return g, [img]


def _oracle_image(feed: dict[str, np.ndarray]) -> np.ndarray:
    return so.render(**feed, **ATTRS, radius_scale=1.6, alpha_cutoff=1 / 255, max_splat_steps=32, transmittance_threshold=0.01,
                     max_list_entries=576)


def _l2_graph(feed, target, decomposed=False) -> rlx.Graph:
    g, (img,) = _graph(feed, decomposed)
    diff = img - g.constant(target)
    g.set_outputs([g.sum(diff * diff)])
    return g


@pytest.mark.parametrize("decomposed", [False, True])
def test_grad_of_an_l2_image_loss_matches_finite_differences_of_the_oracle(decomposed):
    feed = _feed()
    target = np.random.default_rng(1).uniform(0, 1, 16 * 12 * 4)
    bwd = rlx.grad_with_loss(_l2_graph(feed, target, decomposed), wrt=list(SCENE))
    rlx.verify(bwd)
    loss, *grads = rlx.run(bwd, {**feed, "d_output": np.array(1.0)})
    np.testing.assert_allclose(loss, np.sum((_oracle_image(feed) - target) ** 2), rtol=1e-12)
    rng, eps = np.random.default_rng(2), 1e-6
    for name, grad in zip(SCENE, grads):
        direction = rng.standard_normal(feed[name].shape)
        hi, lo = dict(feed), dict(feed)
        hi[name], lo[name] = feed[name] + eps * direction, feed[name] - eps * direction
        fd = (np.sum((_oracle_image(hi) - target) ** 2) - np.sum((_oracle_image(lo) - target) ** 2)) / (2 * eps)
        np.testing.assert_allclose(np.sum(grad * direction), fd, rtol=1e-5, atol=1e-7, err_msg=name)


def test_decomposed_render_is_fused_for_autodiff():
    g = _l2_graph(_feed(), np.zeros(16 * 12 * 4), decomposed=True)
    ops = [n.op for n in rlx.prepare_graph_for_ad(g).nodes]
    assert "gaussian_splat_render" in ops
    assert "gaussian_splat_prepare" not in ops and "gaussian_splat_rasterize" not in ops


def test_refusals_name_what_cannot_be_differentiated():
    feed = _feed()
    g = _l2_graph(feed, np.zeros(16 * 12 * 4))
    with pytest.raises(rlx.AutodiffError, match="meta"):
        rlx.grad_with_loss(g, wrt=["meta"])
    with pytest.raises(rlx.AutodiffError, match="meta"):
        rlx.jvp(g, wrt=["meta"])
    with pytest.raises(rlx.AutodiffError, match="second-order"):
        rlx.hvp(g, wrt=["positions"])
    h = rlx.Graph("packed")
    v = [h.input(k, [a.size], "f64") for k, a in feed.items()]
    h.set_outputs([h.sum(h.gaussian_splat_prepare(*v, **ATTRS))])
    with pytest.raises(rlx.AutodiffError, match="gaussian_splat_prepare"):
        rlx.grad_with_loss(h, wrt=["positions"])


def test_grad_segments_follow_the_packed_layout():
    n, k = 3, 4
    seg = grad_segments(n, k)
    assert [(s.start, s.stop) for s in seg.values()] == [(0, 9), (9, 18), (18, 30), (30, 33), (33, 42), (42, 78)]
    assert grad_segments(n, 0)["sh_coeffs"] == slice(42, 51)  # no SH: an N·3 slot of zeros (upstream's layout)


def test_optimized_planned_arena_run_equals_the_oracle():
    feed = {k: v.astype(np.float32) for k, v in _feed(seed=3).items()}
    g = rlx.Graph("arena")
    v = [g.input(k, [a.size], "f32") for k, a in feed.items()]
    img = g.gaussian_splat_render(*v, **ATTRS)
    g.set_outputs([g.sqrt(img + 1.0)])
    opt, _ = rlx.optimize(g)
    (got,) = rlx.compile(rlx.plan(opt)).run(inputs=feed)
    want = np.sqrt(_oracle_image({k: a.astype(np.float64) for k, a in feed.items()}) + 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rasterize_refuses_a_buffer_built_for_another_framebuffer():
    feed = _feed()
    g = rlx.Graph("mismatch")
    v = [g.input(k, [a.size], "f64") for k, a in feed.items()]
    prep = g.gaussian_splat_prepare(*v, width=8, height=6, tile_size=4)  # same packed length as 6 × 8
    g.set_outputs([g.gaussian_splat_rasterize(prep, v[6], width=6, height=8, tile_size=4)])
    with pytest.raises(rlx.RlxError, match="built for"):
        rlx.run(g, feed)


@pytest.mark.parametrize(("where", "value", "match"), [(-1, np.nan, "not finite"), (-6, 1e6, "do not fit"),
                                                       (-5, 3.0, "do not fit"), ("entry", 99.0, "corrupt"),
                                                       ("range", 1e4, "corrupt"), ("entry", 0.5, "corrupt")])
def test_a_corrupt_prepare_buffer_is_a_clear_run_time_error(where, value, match):
    """rasterize reads a buffer anyone can feed; it must reject a bad one, never index out of bounds."""
    feed = _feed()
    g = rlx.Graph("prep")
    v = [g.input(k, [a.size], "f64") for k, a in feed.items()]
    g.set_outputs([g.gaussian_splat_prepare(*v, **ATTRS)])
    (buf,) = rlx.run(g, feed)
    n, cap = 6, 576
    if where == "entry":
        buf[15 * n] = value
    elif where == "range":
        buf[15 * n + cap + 1] = value
    else:
        buf[where] = value
    h = rlx.Graph("raster")
    h.set_outputs([h.gaussian_splat_rasterize(h.input("prep", [buf.size], "f64"), h.input("meta", [23], "f64"), **ATTRS)])
    with pytest.raises(rlx.RlxError, match=match):
        rlx.run(h, {"prep": buf, "meta": feed["meta"]})


@pytest.mark.parametrize(("index", "value", "match"), [(9, 0.0, "fov_y"), (9, 180.0, "fov_y"), (0, np.nan, "degenerate"),
                                                       (7, 0.0, "degenerate")])
def test_a_bad_camera_is_a_clear_run_time_error(index, value, match):
    feed = _feed()
    feed["meta"] = feed["meta"].copy()
    feed["meta"][index] = value
    if index == 7:  # up = (0, 0, 1) with the eye at z = 3.5 looking at the origin: up ∥ view direction
        feed["meta"][[0, 1, 2, 6, 8]] = [0.0, 0.0, 3.5, 0.0, 1.0]
    g, outs = _graph(feed)
    g.set_outputs(outs)
    with pytest.raises(rlx.RlxError, match=match):
        rlx.run(g, feed)


def test_fitting_a_scene_to_a_target_image_lowers_the_loss():
    """Adam on colours, opacities and positions of a perturbed scene: the L2 image loss falls below a tenth."""
    truth = _feed(n=8, k=0, seed=4)
    target = _oracle_image(truth)
    rng = np.random.default_rng(5)
    start = dict(truth, colors=rng.uniform(0, 1, truth["colors"].shape), opacities=truth["opacities"] - 1.0,
                 positions=truth["positions"] + rng.normal(0, 0.05, truth["positions"].shape))
    wrt = ["colors", "opacities", "positions"]
    bwd = rlx.grad_with_loss(_l2_graph(start, target), wrt=wrt)
    state, m, s = dict(start), {k: 0.0 for k in wrt}, {k: 0.0 for k in wrt}
    losses = []
    for step in range(1, 121):
        loss, *grads = rlx.run(bwd, {**state, "d_output": np.array(1.0)})
        losses.append(float(loss))
        for name, grad in zip(wrt, grads):
            m[name] = 0.9 * m[name] + 0.1 * grad
            s[name] = 0.999 * s[name] + 0.001 * grad**2
            state[name] = state[name] - 0.02 * (m[name] / (1 - 0.9**step)) / (np.sqrt(s[name] / (1 - 0.999**step)) + 1e-8)
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
