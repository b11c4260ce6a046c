"""Model-level planner tests: arena / lower bound <= 1.05, checker passes, arena execution == rlx.run exactly."""

from __future__ import annotations

import numpy as np
import pytest
from lir_models import MODELS

import rlx
from rlx.lir import check, plan
from rlx.runtime.compile import compile as rlx_compile

POLICIES = {
    "all-in-arena": {},
    "activations-only": {"inputs": "outside", "params": "outside", "constants": "outside"},
    "reserved-weights": {"params": "reserved"},
}
_TABLE: list[str] = []


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    g, feed, params = MODELS[request.param]()
    return request.param, g, feed, params, rlx.run(g, feed, params)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_model_plan_ratio_checker_and_exact_execution(model, policy):
    name, g, feed, params, ref = model
    lir = plan(g, **POLICIES[policy])
    check(lir)
    p = lir.plan
    _TABLE.append(f"{name:15s} {policy:17s} nodes={len(g):4d} arena={p.arena_size:9d} lower_bound={p.lower_bound:9d} "
                  f"ratio={p.ratio:.4f} no_reuse={p.total_unshared_bytes:9d} heuristic={p.heuristic} inplace={len(p.inplace)} "
                  f"views={len(p.view_aliases)}")
    print("\n" + _TABLE[-1])
    assert p.arena_size / p.lower_bound <= 1.05
    out = rlx_compile(lir, params=params, adopt=False).run(feed)
    assert len(out) == len(ref)
    for a, b in zip(ref, out):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_training_plan_keeps_backward_buffers_off_the_weights():
    g, _feed, params = MODELS["train-mlp"]()
    lir = plan(g, params="reserved")
    _lo, hi = lir.plan.weight_region
    assert sum(v.nbytes for v in params.values()) <= hi <= sum(-(-v.nbytes // 64) * 64 for v in params.values())
    for nid, slot in lir.plan.assignments.items():
        if g.nodes[nid].op != "param":
            assert slot.offset >= hi
    # a separately planned copy pinned to the same weight layout agrees on every weight offset
    again = plan(g, weight_layout=lir.plan.weight_layout())
    assert again.plan.weight_layout() == lir.plan.weight_layout()


def test_training_graph_from_autodiff_if_available():
    grad_with_loss = getattr(rlx, "grad_with_loss", None)
    if grad_with_loss is None:
        pytest.skip("rlx.grad_with_loss is not available yet")
    g = rlx.Graph("ad")
    x = g.input("x", (16, 32))
    w1, b1 = g.param("w1", (32, 64)), g.param("b1", (64,))
    w2 = g.param("w2", (64, 8))
    loss = g.sum(g.relu(x @ w1 + b1) @ w2)
    g.set_outputs([loss])
    bwd = grad_with_loss(g, wrt=["w1", "b1", "w2"])
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((32, 64)).astype(np.float32), "b1": rng.standard_normal(64).astype(np.float32),
              "w2": rng.standard_normal((64, 8)).astype(np.float32)}
    feed = {"x": rng.standard_normal((16, 32)).astype(np.float32)}
    feed.update({name: np.ones(v.shape, np.float32) for name, v in bwd.inputs().items() if name not in feed})
    lir = plan(bwd, params="reserved")
    assert lir.plan.ratio <= 1.05
    for a, b in zip(rlx.run(bwd, feed, params), rlx_compile(lir, params=params, adopt=False).run(feed)):
        np.testing.assert_array_equal(a, b)
