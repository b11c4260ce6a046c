"""One graph with symbolic batch and sequence dims through optimize → plan → compile(numpy), run at
several sizes against a NumPy oracle written independently of rlx.

The planner keeps the symbolic graph whole (``dynamic_symbols``); the arena executor binds the
symbols from each feed, specialises the plan to those sizes once (an LRU PlanCache) and reuses it.
"""

import numpy as np
import pytest

import rlx

E, H, D = 16, 2, 8
SIZES = [(1, 7), (2, 16), (3, 33)]


def attention_block(ranges=None):
    g = rlx.Graph("block", ranges=ranges)
    x = g.input("x", ("batch", "seq", E))
    p = {n: g.param(n, s) for n, s in [("gamma", (E,)), ("beta", (E,)), ("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)),
                                      ("wo", (E, E)), ("w1", (E, 2 * E)), ("w2", (2 * E, E))]}
    h = g.layer_norm(x, p["gamma"], p["beta"])
    b, s = x.shape[0], x.shape[1]

    def heads(t):
        return g.transpose(g.reshape(t, [b, s, H, D]), perm=[0, 2, 1, 3])

    q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
    att = g.softmax(g.matmul(q, g.transpose(k, perm=[0, 1, 3, 2])) * (D ** -0.5), axis=-1)
    y = x + g.reshape(g.transpose(g.matmul(att, v), perm=[0, 2, 1, 3]), [-1, s, E]) @ p["wo"]
    flat = g.reshape(y, [-1, E])  # [batch*seq, E]
    out = flat + g.tanh(flat @ p["w1"]) @ p["w2"]
    g.set_outputs([out, g.reduce(out, op="sum", axes=[0], keep_dim=False)])
    return g


def oracle(x, w):
    mu = x.mean(-1, keepdims=True)
    h = (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w["gamma"] + w["beta"]
    bsz, seq, _ = x.shape

    def heads(t):
        return t.reshape(bsz, seq, H, D).transpose(0, 2, 1, 3)

    q, k, v = heads(h @ w["wq"]), heads(h @ w["wk"]), heads(h @ w["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) * D ** -0.5
    att = np.exp(scores - scores.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = x + (att @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, E) @ w["wo"]
    flat = y.reshape(-1, E)
    out = flat + np.tanh(flat @ w["w1"]) @ w["w2"]
    return [out, out.sum(0)]


def _weights(g, rng):
    return {n: (rng.standard_normal(tuple(v.shape)) * 0.3).astype(np.float32) for n, v in g.params().items()}


@pytest.mark.parametrize("ranges", [None, {"batch": (1, 4), "seq": (7, 64)}], ids=["unbounded", "ranged"])
def test_symbolic_graph_plans_once_and_runs_at_many_sizes(ranges):
    g = attention_block(ranges)
    assert g.outputs[0].shape == ("batch*seq", E)
    optimized, _ = rlx.optimize(g)
    rlx.verify(optimized)
    assert optimized.symbol_ranges == (ranges or {})
    lir = rlx.plan(optimized)
    assert set(lir.plan.dynamic_symbols) == {"batch", "seq"}  # planned once, symbolic: sizes come at run time
    rng = np.random.default_rng(0)
    w = _weights(g, rng)
    exe = rlx.compile(lir, backend="numpy", params=w)
    for bsz, seq in [*SIZES, SIZES[0]]:
        x = rng.standard_normal((bsz, seq, E)).astype(np.float32)
        got = exe.run({"x": x})
        for a, want in zip(got, oracle(x.astype(np.float64), {k: v.astype(np.float64) for k, v in w.items()})):
            assert a.shape == want.shape
            np.testing.assert_allclose(a, want, rtol=2e-4, atol=2e-4)
    assert len(exe._special) == len(SIZES)  # one specialised plan per binding, the repeated size reused
    if ranges:
        with pytest.raises(rlx.FeedError, match=r"'seq' = 65 is outside its range \[7, 64\]"):
            exe.run({"x": np.zeros((1, 65, E), np.float32)})
