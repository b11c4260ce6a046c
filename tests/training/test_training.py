"""rlx.compile_training: optimizer steps against torch.optim, a fit, the shared weight layout,
input gradients against torch.autograd (float64 oracles)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import rlx
from rlx.lir import PlanError, Slot, check
from rlx.train import SGD, Adam, Trainer, TrainingError, make_optimizer

N, D, H = 16, 3, 5


def mlp_graph(dtype="f64", n=N, loss="mse") -> rlx.Graph:
    g = rlx.Graph("mlp")
    x = g.input("x", (n, D), dtype)
    y = g.input("y", (n, 1), dtype)
    h = g.tanh(g.matmul(x, g.param("w1", (D, H), dtype)) + g.param("b1", (H,), dtype))
    p = g.matmul(h, g.param("w2", (H, 1), dtype)) + g.param("b2", (1,), dtype)
    d = p - y
    g.set_outputs([g.mean(d * d, axes=[0, 1]) if loss == "mse" else g.sum(d * d, axes=[0, 1])])
    return g


def mlp_hir(n: int, hidden: int):
    def build(h):
        x, y = h.input("x", (n, D)), h.input("y", (n, 1))
        a = h.linear(x, h.param("w1", (D, hidden)), bias=h.param("b1", (hidden,)), activation="tanh")
        d = h.linear(a, h.param("w2", (hidden, 1)), bias=h.param("b2", (1,))) - y
        return h.mean(d * d, axes=[0, 1])

    return rlx.define("mlp_hir", build)


def init_params(rng, dtype=np.float64, hidden=H):
    return {"w1": (rng.normal(size=(D, hidden)) / 2).astype(dtype), "b1": (0.1 * rng.normal(size=hidden)).astype(dtype),
            "w2": (rng.normal(size=(hidden, 1)) / 2).astype(dtype), "b2": np.zeros(1, dtype)}


def data(rng, n=N, dtype=np.float64):
    x = rng.normal(size=(n, D))
    y = np.sin(x @ np.array([[1.0], [-2.0], [0.5]])) + 0.3 * x[:, :1] ** 2
    return {"x": x.astype(dtype), "y": y.astype(dtype)}


def torch_loss(params, feed):
    x, y = (torch.from_numpy(feed[k]) for k in ("x", "y"))
    h = torch.tanh(x @ params["w1"] + params["b1"])
    return (((h @ params["w2"] + params["b2"]) - y) ** 2).mean()


TORCH_OPT = {
    "sgd": lambda ps, kw: torch.optim.SGD(ps, **kw),
    "adam": lambda ps, kw: torch.optim.Adam(ps, **kw),
    "adamw": lambda ps, kw: torch.optim.AdamW(ps, **kw),
}
CONFIGS = [
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}),
    ("sgd", {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.5, "dampening": 0.3}),
    ("adam", {"lr": 0.01}),
    ("adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", {"lr": 0.02, "weight_decay": 0.1}),
]


# ------------------------------------------------------------------------ (a) optimizer steps
@pytest.mark.parametrize("kind, kw", CONFIGS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CONFIGS)])
def test_optimizer_update_equals_torch_on_same_gradients(kind, kw):
    """Optimizer.update alone, fed the very gradients torch uses, four steps."""
    rng = np.random.default_rng(1)
    params = init_params(rng)
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    topt = TORCH_OPT[kind](list(tparams.values()), dict(kw))
    opt = make_optimizer(kind, **kw)
    for _ in range(4):
        grads = {k: rng.normal(size=v.shape) for k, v in params.items()}
        for k, t in tparams.items():
            t.grad = torch.from_numpy(grads[k].copy())
        topt.step()
        opt.update(params, grads)
        for k in params:
            np.testing.assert_allclose(params[k], tparams[k].detach().numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kind, kw", CONFIGS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CONFIGS)])
def test_training_steps_equal_torch_autograd_and_optim(kind, kw):
    """Trainer.step (rlx gradients + update) against torch.autograd + torch.optim, float64."""
    rng = np.random.default_rng(2)
    init, feed = init_params(rng), data(rng)
    trainer = rlx.compile_training(mlp_graph(), optimizer=kind, params=init, **kw)
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    topt = TORCH_OPT[kind](list(tparams.values()), dict(kw))
    for _ in range(5):
        _, grads = trainer.gradients(feed)
        topt.zero_grad()
        tloss = torch_loss(tparams, feed)
        tloss.backward()
        for k in init:
            np.testing.assert_allclose(grads[k], tparams[k].grad.numpy(), rtol=1e-10, atol=1e-12)
        loss = trainer.step(feed)
        topt.step()
        assert loss == pytest.approx(tloss.item(), rel=1e-12)
        for k in init:
            np.testing.assert_allclose(trainer.params[k], tparams[k].detach().numpy(), rtol=1e-10, atol=1e-12)
    # the forward plan sees the updated weights
    with torch.no_grad():
        assert trainer.loss(feed) == pytest.approx(torch_loss(tparams, feed).item(), rel=1e-12)


def test_optimizer_options():
    assert isinstance(make_optimizer("ADAM", 0.5), Adam) and make_optimizer("adam", 0.5).lr == 0.5
    assert make_optimizer("adamw").decoupled and make_optimizer("sgd").lr == 1e-2
    opt = SGD(lr=0.3)
    assert make_optimizer(opt) is opt
    with pytest.raises(TrainingError, match="unknown optimizer"):
        make_optimizer("lbfgs")
    with pytest.raises(TrainingError, match="momentum"):
        make_optimizer("adam", momentum=0.9)
    with pytest.raises(TrainingError, match="nesterov"):
        SGD(nesterov=True)
    with pytest.raises(TrainingError):
        make_optimizer(opt, lr=0.1)
    with pytest.raises(TrainingError):
        Adam(betas=(1.0, 0.9))


# ------------------------------------------------------------------------ (b) a fit
@pytest.mark.parametrize("kind, kw", [("adam", {"lr": 0.02}), ("sgd", {"lr": 0.1, "momentum": 0.9})])
def test_two_layer_mlp_regression_loss_falls_10x(kind, kw):
    rng = np.random.default_rng(0)
    n, hidden = 64, 16
    feed = data(rng, n, np.float32)
    init = init_params(rng, np.float32, hidden)
    trainer = rlx.compile_training(mlp_hir(n, hidden), optimizer=kind, params=init, **kw)
    assert trainer.zero_copy
    start = trainer.loss(feed)
    for _ in range(200):
        trainer.step(feed)
    end = trainer.loss(feed)
    assert trainer.steps == 200 and len(trainer.history) == 200 and trainer.history[0] == pytest.approx(start)
    assert np.isfinite(end) and start / end >= 10, (start, end, trainer.history[::20])
    # forward LIR (optimized, re-synchronised weights) agrees with the reference interpreter
    mir = mlp_hir(n, hidden).lower_to_mir(policy=rlx.FusionPolicy.for_autodiff())
    ref = rlx.run(mir, inputs=feed, params={k: np.array(v) for k, v in trainer.params.items()})[0]
    assert end == pytest.approx(float(ref), rel=1e-5)
    # the caller's initial arrays are copied, not trained
    assert not any(np.shares_memory(init[k], trainer.params[k]) for k in init)


# ------------------------------------------------------------------------ (c) shared weights
def _roots(lir):
    views = lir.plan.view_aliases
    return {i: s for i, s in lir.plan.assignments.items() if i not in views}


def test_backward_plan_weights_at_forward_offsets_and_out_of_activations():
    rng = np.random.default_rng(3)
    trainer = rlx.compile_training(mlp_graph("f32"), params=init_params(rng, np.float32), optimizer="adam")
    fwd, bwd = trainer.forward, trainer.backward
    assert fwd.plan.weight_region is not None and fwd.plan.weight_region == bwd.plan.weight_region
    lo, hi = bwd.plan.weight_region
    assert lo == 0 and hi > 0
    f_ids, b_ids = dict(fwd.plan.io.params), dict(bwd.plan.io.params)
    assert set(f_ids) == set(b_ids) == {"w1", "b1", "w2", "b2"}
    for name in f_ids:
        fs, bs = fwd.plan.assignments[f_ids[name]], bwd.plan.assignments[b_ids[name]]
        assert fs == bs and fs.end <= hi, name
    assert fwd.plan.weight_layout() == bwd.plan.weight_layout()
    for lir in (fwd, bwd):
        params = set(dict(lir.plan.io.params).values())
        for nid, slot in _roots(lir).items():
            if nid not in params:
                assert slot.offset >= hi, (lir.name, nid, lir.graph.nodes[nid].op, slot)
        check(lir)  # the LIR checker proves no overlap in time x memory, and none inside the weight region
    # the backward has real activations (gradients of the weights' shapes) to keep out
    assert len(_roots(bwd)) > len(b_ids) + 3 and bwd.plan.arena_size > hi

    # the checker catches an activation moved into the weight region (the upstream hazard)
    nid = next(i for i in _roots(bwd) if bwd.graph.nodes[i].op not in ("param", "input", "constant"))
    moved = {**bwd.plan.assignments, nid: Slot(0, bwd.plan.assignments[nid].size)}
    bad = rlx.LirModule(bwd.graph, dataclasses.replace(bwd.plan, assignments=moved))
    with pytest.raises(PlanError, match="weight region"):
        check(bad)

    # zero copy: the owned params are the backward arena's weight slots
    arena = trainer.backward_executor.arena
    for name, arr in trainer.params.items():
        assert np.shares_memory(arr, arena)
        assert arr.__array_interface__["data"][0] - arena.__array_interface__["data"][0] == bwd.plan.assignments[b_ids[name]].offset


# ------------------------------------------------------------------------ (d) input gradients
def test_input_gradient_via_grad_with_loss_matches_torch():
    rng = np.random.default_rng(4)
    init, feed = init_params(rng), data(rng)
    g = mlp_graph()
    bwd = rlx.grad_with_loss(g, ["x", "w1"])
    loss, dx, dw1 = rlx.run(bwd, inputs={**feed, "d_output": np.array(1.0)}, params=init)

    x = torch.tensor(feed["x"], requires_grad=True)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    h = torch.tanh(x @ tp["w1"] + tp["b1"])
    tl = (((h @ tp["w2"] + tp["b2"]) - torch.from_numpy(feed["y"])) ** 2).mean()
    tdx, tdw1 = torch.autograd.grad(tl, [x, tp["w1"]])
    assert float(loss) == pytest.approx(tl.item(), rel=1e-12)
    np.testing.assert_allclose(dx, tdx.numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(dw1, tdw1.numpy(), rtol=1e-10, atol=1e-13)

    # the same through a trainer: x in wrt gets a gradient but is never updated; b1, w2, b2 stay frozen
    trainer = rlx.compile_training(g, ["x", "w1"], optimizer="sgd", lr=0.1, params=init)
    assert trainer.trainable == ["w1"]
    tloss, grads = trainer.gradients(feed)
    assert set(grads) == {"x", "w1"} and tloss == pytest.approx(tl.item(), rel=1e-12)
    np.testing.assert_allclose(grads["x"], tdx.numpy(), rtol=1e-10, atol=1e-13)
    x_before = feed["x"].copy()
    trainer.step(feed)
    np.testing.assert_array_equal(feed["x"], x_before)
    np.testing.assert_allclose(trainer.params["w1"], init["w1"] - 0.1 * tdw1.numpy(), rtol=1e-12)
    for k in ("b1", "w2", "b2"):
        np.testing.assert_array_equal(trainer.params[k], init[k])


# ------------------------------------------------------------------------ more
def test_symbolic_batch_uses_fed_params_and_matches_static():
    rng = np.random.default_rng(5)
    init, feed = init_params(rng), data(rng)
    static = rlx.compile_training(mlp_graph(), optimizer="adam", lr=0.01, params=init)
    dynamic = rlx.compile_training(mlp_graph(n="batch"), optimizer="adam", lr=0.01, params=init)
    assert static.zero_copy and not dynamic.zero_copy
    for _ in range(3):
        assert dynamic.step(feed) == pytest.approx(static.step(feed), rel=1e-12)
    for k in init:
        np.testing.assert_allclose(dynamic.params[k], static.params[k], rtol=1e-12)
    half = {k: v[: N // 2] for k, v in feed.items()}
    assert dynamic.loss(half) == pytest.approx(float(rlx.run(mlp_graph(n="batch"), inputs=half, params=dynamic.params)[0]), rel=1e-12)


def test_set_params_and_unoptimized_backward():
    rng = np.random.default_rng(6)
    init, feed = init_params(rng), data(rng)
    a = rlx.compile_training(mlp_graph(loss="sum"), params=init, optimize_backward=False)
    b = rlx.compile_training(mlp_graph(loss="sum"), params={k: np.zeros_like(v) for k, v in init.items()})
    b.set_params(init)
    assert a.loss(feed) == pytest.approx(b.loss(feed), rel=1e-12)
    assert a.step(feed) == pytest.approx(b.step(feed), rel=1e-12)
    for k in init:
        np.testing.assert_allclose(a.params[k], b.params[k], rtol=1e-12)
    assert "sgd" in repr(a) and isinstance(a, Trainer)
    with pytest.raises(rlx.FeedError, match="unknown param"):
        b.set_params({"nope": np.zeros(1)})


def test_errors():
    rng = np.random.default_rng(7)
    init = init_params(rng)
    g = mlp_graph()
    with pytest.raises(rlx.FeedError, match="missing initial value for param 'b2'"):
        rlx.compile_training(g, params={k: v for k, v in init.items() if k != "b2"})
    with pytest.raises(rlx.FeedError, match="'w1'"):
        rlx.compile_training(g, params={**init, "w1": init["w1"].astype(np.float32)})
    with pytest.raises(TrainingError, match="not an input or param"):
        rlx.compile_training(g, ["nope"], params=init)
    two = mlp_graph()
    two.set_outputs([*two.output_ids, two.inputs()["x"]])
    with pytest.raises(TrainingError, match="exactly one output"):
        rlx.compile_training(two, params=init)
    vec = mlp_graph()
    vec.set_outputs([vec.inputs()["y"] * 2.0])
    with pytest.raises(TrainingError, match="scalar"):
        rlx.compile_training(vec, params=init)
    with pytest.raises(TrainingError, match="LIR"):
        rlx.compile_training(rlx.plan(g), params=init)
    trainer = rlx.compile_training(g, params=init)
    with pytest.raises(rlx.FeedError, match="seed"):
        trainer.step({**data(rng), "d_output": np.array(1.0)})


def test_complex_params_are_refused_by_name():
    g = rlx.Graph("spectral")
    w = g.param("w", (4,), "c64")
    x = g.input("x", (4,), "f32")
    g.set_outputs([g.sum(g.complex_norm_sq(g.fft(g.cast(x, to="c64") * w)))])
    with pytest.raises(TrainingError, match="'w' is complex"):
        rlx.compile_training(g, wrt=["w"], params={"w": np.ones(4, np.complex64)})
