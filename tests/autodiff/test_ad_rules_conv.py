"""Rules of the conv and backward families against torch.autograd (float64): a small CNN,
an embedding + softmax cross-entropy model, second order (hvp) and vmap of conv ops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import rlx

RNG = np.random.default_rng(2024)


def _t(a, grad=False):
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


# ------------------------------------------------------------------------------ small CNN
CNN_SHAPES = {"x": (2, 3, 8, 8), "w1": (4, 3, 3, 3), "w2": (6, 2, 3, 3), "gamma": (6,), "beta": (6,), "w3": (24, 5)}
CNN_FEED = {k: RNG.standard_normal(s) for k, s in CNN_SHAPES.items()}
CNN_R = RNG.standard_normal((2, 5))


def _cnn_rlx(g, x, w1, w2, gamma, beta, w3):
    h = g.relu(g.conv2d(x, w1, padding=[1, 1]))                       # [2, 4, 8, 8]
    h = g.pool2d(h, kind="max", kernel_size=[2, 2])                  # [2, 4, 4, 4]
    h = g.conv2d(h, w2, padding=[1, 1], stride=[1, 1], groups=2)     # [2, 6, 4, 4]
    h = g.group_norm(h, gamma, beta, num_groups=3, eps=1e-5)
    h = g.pool2d(g.tanh(h), kind="mean", kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=False)  # [2, 6, 2, 2]
    return g.matmul(g.reshape(h, new_shape=[2, 24]), w3)


def _cnn_torch(x, w1, w2, gamma, beta, w3):
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, padding=1)), 2)
    h = F.group_norm(F.conv2d(h, w2, padding=1, groups=2), 3, gamma, beta, eps=1e-5)
    h = F.avg_pool2d(torch.tanh(h), 3, 2, 1, count_include_pad=False)
    return h.reshape(2, 24) @ w3


def _cnn_graph(params=("w1", "w2", "gamma", "beta", "w3")):
    g = rlx.Graph("cnn")
    leaves = {k: (g.param if k in params else g.input)(k, s, "f64") for k, s in CNN_SHAPES.items()}
    out = _cnn_rlx(g, **leaves)
    g.set_outputs([g.sum(out * g.constant(CNN_R))])
    return g


def _split(feed, g):
    ins = {k: v for k, v in feed.items() if k in g.inputs()}
    return ins, {k: v for k, v in feed.items() if k in g.params()}


def test_small_cnn_gradients_match_torch():
    g = _cnn_graph()
    names = list(CNN_SHAPES)
    ins, params = _split(CNN_FEED, g)
    loss, *grads = rlx.run(rlx.grad_with_loss(g, names), {**ins, "d_output": np.array(1.0)}, params)
    ts = {k: _t(v, grad=True) for k, v in CNN_FEED.items()}
    want_loss = (_cnn_torch(**ts) * _t(CNN_R)).sum()
    want = torch.autograd.grad(want_loss, [ts[k] for k in names])
    np.testing.assert_allclose(loss, want_loss.item(), rtol=1e-12)
    for name, got, w in zip(names, grads, want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


def test_small_cnn_hvp_matches_torch_double_backward():
    """Second order through conv2d_backward_*, max_pool2d_backward, group norm and pooling."""
    g = _cnn_graph()
    wrt = ["w1", "w2", "x"]
    v = {k: RNG.standard_normal(CNN_SHAPES[k]) for k in wrt}
    ins, params = _split(CNN_FEED, g)
    h = rlx.hvp(g, wrt)
    rlx.verify(h)
    out = rlx.run(h, {**ins, "d_output": np.array(1.0), **{f"t_{k}": v[k] for k in wrt}}, params)
    hv = out[-len(wrt):]
    ts = {k: _t(a, grad=True) for k, a in CNN_FEED.items()}
    loss = (_cnn_torch(**ts) * _t(CNN_R)).sum()
    grads = torch.autograd.grad(loss, [ts[k] for k in wrt], create_graph=True)
    dot = sum((gr * _t(v[k])).sum() for gr, k in zip(grads, wrt))
    want = torch.autograd.grad(dot, [ts[k] for k in wrt])
    for k, got, w in zip(wrt, hv, want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-8, atol=1e-10, err_msg=k)


def test_per_example_gradients_by_vmap_of_grad():
    g = rlx.Graph("one")
    x = g.input("x", (1, 3, 6, 6), "f64")
    w = g.param("w", (4, 3, 3, 3), "f64")
    y = g.pool2d(g.conv2d(x, w, stride=[2, 2], padding=[1, 1]), kind="max", kernel_size=[3, 3], stride=[1, 1], padding=[1, 1])
    g.set_outputs([g.sum(g.tanh(y))])
    per = rlx.vmap(rlx.grad(g, ["w"]), {"x": 0}, batch_size=4)
    xs, w0 = RNG.standard_normal((4, 1, 3, 6, 6)), RNG.standard_normal((4, 3, 3, 3))
    (dw,) = rlx.run(per, {"x": xs, "d_output": np.array(1.0)}, {"w": w0})
    for b in range(4):
        tw = _t(w0, grad=True)
        loss = torch.tanh(F.max_pool2d(F.conv2d(_t(xs[b]), tw, stride=2, padding=1), 3, 1, 1)).sum()
        np.testing.assert_allclose(dw[b], torch.autograd.grad(loss, tw)[0].numpy(), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ embedding + cross-entropy
def test_embedding_softmax_cross_entropy_matches_torch():
    table, w = RNG.standard_normal((10, 4)), RNG.standard_normal((4, 6))
    ids = np.array([[1, 4, 4, 9, 0], [3, 3, 7, 2, 1]], np.int64)
    labels = np.array([5, 2], np.int64)
    g = rlx.Graph("emb")
    t_, w_ = g.param("table", (10, 4), "f64"), g.param("w", (4, 6), "f64")
    i_, y_ = g.input("ids", (2, 5), "i64"), g.input("labels", (2,), "i64")
    logits = g.matmul(g.mean(g.gather(t_, i_, axis=0), axes=[1]), w_)
    g.set_outputs([g.mean(g.softmax_cross_entropy(logits, y_))])
    loss, dt, dw = rlx.run(rlx.grad_with_loss(g, ["table", "w"]), {"ids": ids, "labels": labels, "d_output": np.array(1.0)},
                           {"table": table, "w": w})
    tt, tw = _t(table, grad=True), _t(w, grad=True)
    want = F.cross_entropy(F.embedding(torch.from_numpy(ids), tt).mean(1) @ tw, torch.from_numpy(labels))
    gt, gw = torch.autograd.grad(want, [tt, tw])
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    np.testing.assert_allclose(dt, gt.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, gw.numpy(), rtol=1e-10, atol=1e-12)
    # second order through softmax_cross_entropy_backward (composite rule)
    v = RNG.standard_normal((4, 6))
    out = rlx.run(rlx.hvp(g, ["w"]), {"ids": ids, "labels": labels, "d_output": np.array(1.0), "t_w": v}, {"table": table, "w": w})
    tw = _t(w, grad=True)
    loss = F.cross_entropy(F.embedding(torch.from_numpy(ids), _t(table)).mean(1) @ tw, torch.from_numpy(labels))
    (gr,) = torch.autograd.grad(loss, tw, create_graph=True)
    (hv,) = torch.autograd.grad((gr * _t(v)).sum(), tw)
    np.testing.assert_allclose(out[-1], hv.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- vmap of conv ops
def _loop_check(build, feeds: dict, batched: dict, batch_size):
    g = rlx.Graph("f")
    leaves = {k: g.input(k, (a.shape[1:] if k in batched else a.shape), "f64") for k, a in feeds.items()}
    g.set_outputs([build(g, **leaves)])
    vg = rlx.vmap(g, {k: 0 for k in batched}, batch_size=batch_size)
    rlx.verify(vg)
    (got,) = rlx.run(vg, feeds)
    for b in range(next(feeds[k].shape[0] for k in batched)):
        (want,) = rlx.run(g, {k: (a[b] if k in batched else a) for k, a in feeds.items()})
        np.testing.assert_allclose(got[b], want, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("batch_size", [3, None], ids=["static_B", "symbolic_B"])
@pytest.mark.parametrize("batched", [("w",), ("x",), ("x", "w")], ids=lambda b: "+".join(b))
def test_vmap_conv2d_and_transpose_with_batched_weights(batched, batch_size):
    x, w = RNG.standard_normal((3, 2, 4, 7, 6)), RNG.standard_normal((3, 6, 2, 3, 2))
    feeds = {"x": x if "x" in batched else x[0], "w": w if "w" in batched else w[0]}
    _loop_check(lambda g, x, w: g.conv2d(x, w, stride=[2, 1], padding=[1, 1], dilation=[1, 2], groups=2), feeds, batched, batch_size)
    wt = RNG.standard_normal((3, 4, 3, 3, 2))
    feeds = {"x": x if "x" in batched else x[0], "w": wt if "w" in batched else wt[0]}
    _loop_check(lambda g, x, w: g.conv_transpose2d(x, w, stride=[2, 1], padding=[1, 0], dilation=[1, 2], output_padding=[1, 1],
                                                   groups=2), feeds, batched, batch_size)


@pytest.mark.parametrize("batch_size", [3, None], ids=["static_B", "symbolic_B"])
def test_vmap_conv_backward_ops_with_batched_weights(batch_size):
    dy, w = RNG.standard_normal((3, 2, 6, 4, 4)), RNG.standard_normal((3, 6, 2, 3, 2))
    geo = {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "groups": 2}
    _loop_check(lambda g, dy, w: g.conv2d_backward_input(dy, w, input_shape=(2, 4, 7, 6), **geo),
                {"dy": dy, "w": w}, ("dy", "w"), batch_size)
    _loop_check(lambda g, dy, w: g.conv2d_backward_input(dy, w, input_shape=(2, 4, 7, 6), **geo),
                {"dy": dy[0], "w": w}, ("w",), batch_size)
    x = RNG.standard_normal((3, 2, 4, 7, 6))
    _loop_check(lambda g, x, dy: g.conv2d_backward_weight(x, dy, weight_shape=(6, 2, 3, 2), **geo),
                {"x": x, "dy": dy}, ("x", "dy"), batch_size)
    _loop_check(lambda g, x, dy: g.conv2d_backward_weight(x, dy, weight_shape=(6, 2, 3, 2), **geo),
                {"x": x[0], "dy": dy}, ("dy",), batch_size)


def test_vmap_with_symbolic_per_example_batch_and_static_B():
    """N symbolic, B static: the batch axis is folded into the channels (groups·B)."""
    g = rlx.Graph("f")
    x = g.input("x", ("n", 2, 5, 5), "f64")
    w = g.param("w", (3, 2, 3, 3), "f64")
    g.set_outputs([g.pool2d(g.conv2d(x, w, padding=[1, 1]), kind="mean", kernel_size=[2, 2])])
    vg = rlx.vmap(g, {"x": 0}, batch_size=2)
    xs, w0 = RNG.standard_normal((2, 4, 2, 5, 5)), RNG.standard_normal((3, 2, 3, 3))
    (got,) = rlx.run(vg, {"x": xs}, {"w": w0})
    for b in range(2):
        want = F.avg_pool2d(F.conv2d(_t(xs[b]), _t(w0), padding=1), 2).numpy()
        np.testing.assert_allclose(got[b], want, rtol=1e-11, atol=1e-12)


def test_min_pool_gradient_matches_torch():
    x = RNG.standard_normal((1, 2, 5, 5))
    g = rlx.Graph("p")
    xi = g.input("x", x.shape, "f64")
    g.set_outputs([g.sum(g.pool2d(xi, kind="min", kernel_size=[3, 3], stride=[2, 2], padding=[1, 1]))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": x, "d_output": np.array(1.0)})
    tx = _t(x, grad=True)
    np.testing.assert_allclose(dx, torch.autograd.grad((-F.max_pool2d(-tx, 3, 2, 1)).sum(), tx)[0].numpy(), rtol=1e-12)


def test_prod_pool_gradient_at_zero_is_product_of_others():
    x = RNG.standard_normal((1, 1, 2, 2))
    x[0, 0, 0, 0] = 0.0
    g = rlx.Graph("p")
    xi = g.input("x", x.shape, "f64")
    g.set_outputs([g.sum(g.pool2d(xi, kind="prod", kernel_size=[2, 2]))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": x, "d_output": np.array(1.0)})
    flat = x.ravel()
    want = np.array([np.prod(np.delete(flat, i)) for i in range(4)]).reshape(x.shape)
    np.testing.assert_allclose(dx, want, rtol=1e-12)
