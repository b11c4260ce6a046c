"""A tiny MoE layer (top-2 router, SiLU expert MLPs on grouped_matmul) runs end to end (build, optimize,
plan, run) and matches a NumPy loop reference; its gradients match finite differences; the same layer
with Q8_K-packed expert weights (dequant_grouped_matmul) matches the loop on the known weights."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

T, D, F, E, TOPK = 6, 16, 16, 4, 2  # tokens, model width, expert hidden width, experts, experts per token


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w_router": rng.standard_normal((D, E)),
        "w_up": rng.standard_normal((E, D, F)) * 0.3,
        "w_down": rng.standard_normal((E, F, D)) * 0.3,
    }


def _moe(g: rlx.Graph, x: rlx.Value, router: rlx.Value, up, down) -> rlx.Value:
    """x + Σ_k gate_k · down_e(silu(up_e(x))), e = the k-th routed expert; ``up`` / ``down``: (x, ids) -> value."""
    logits = g.matmul(x, router)
    ids = g.top_k(logits, k=TOPK, output="indices")  # [T, TOPK]
    gates = g.softmax(g.top_k(logits, k=TOPK, output="values"), axis=-1)
    out = x
    for k in range(TOPK):
        idk = g.reshape(g.narrow(ids, axis=1, start=k, length=1), new_shape=[T])
        gk = g.narrow(gates, axis=1, start=k, length=1)
        out = out + gk * down(g.silu(up(x, idk)), idk)
    return out


def _build(dtype: str = "f64") -> rlx.Graph:
    g = rlx.Graph("tiny_moe")
    x = g.input("x", (T, D), dtype)
    w = {k: g.param(k, v.shape, dtype) for k, v in _weights().items()}
    out = _moe(g, x, w["w_router"], lambda h, i: g.grouped_matmul(h, w["w_up"], i), lambda h, i: g.grouped_matmul(h, w["w_down"], i))
    g.set_outputs([out])
    return g


def _silu(v):
    return v / (1.0 + np.exp(-v))


def _reference(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """The layer as an explicit loop over tokens and their routed experts."""
    out = x.copy()
    for t in range(T):
        logits = x[t] @ w["w_router"]
        order = sorted(range(E), key=lambda e: -logits[e])[:TOPK]
        z = np.exp(logits[order] - logits[order].max())
        gate = z / z.sum()
        for k, e in enumerate(order):
            out[t] += gate[k] * (_silu(x[t] @ w["w_up"][e]) @ w["w_down"][e])
    return out


def test_tiny_moe_layer_end_to_end_matches_numpy_loop():
    g = _build()
    rlx.verify(g)
    params = _weights()
    x = np.random.default_rng(1).standard_normal((T, D))
    want = _reference(x, params)
    np.testing.assert_allclose(rlx.run(g, {"x": x}, params)[0], want, rtol=1e-10, atol=1e-12)
    opt, _ = rlx.optimize(g)
    rlx.verify(opt)
    assert sum(n.op == "grouped_matmul" for n in opt.nodes) == 2 * TOPK
    got = rlx.compile(rlx.plan(opt), params=params).run(inputs={"x": x})
    np.testing.assert_allclose(got[0], want, rtol=1e-10, atol=1e-12)


def test_tiny_moe_layer_gradients_match_finite_differences():
    g = rlx.Graph("tiny_moe_loss")
    x = g.input("x", (T, D), "f64")
    w = {k: g.param(k, v.shape, "f64") for k, v in _weights().items()}
    out = _moe(g, x, w["w_router"], lambda h, i: g.grouped_matmul(h, w["w_up"], i), lambda h, i: g.grouped_matmul(h, w["w_down"], i))
    r = np.random.default_rng(2).standard_normal((T, D))
    g.set_outputs([g.sum(out * g.constant(r))])
    params = _weights()
    x0 = np.random.default_rng(3).standard_normal((T, D))
    names = ["x", "w_up", "w_down"]
    bwd = rlx.grad(g, names)
    rlx.verify(bwd)
    got = rlx.run(bwd, {"x": x0, "d_output": np.array(1.0)}, params)
    feed = {"x": x0, **params}

    def loss(f):
        return rlx.run(g, {"x": f["x"]}, {k: f[k] for k in params})[0]

    rng = np.random.default_rng(4)
    eps = 1e-6
    for name, gr in zip(names, got):
        assert gr.shape == feed[name].shape
        for _ in range(3):  # random directions (router ties are measure-zero)
            d = rng.standard_normal(feed[name].shape)
            hi, lo = {**feed, name: feed[name] + eps * d}, {**feed, name: feed[name] - eps * d}
            np.testing.assert_allclose(np.sum(gr * d), (loss(hi) - loss(lo)) / (2 * eps), rtol=1e-6, atol=1e-8, err_msg=name)


def _pack_q8_k_experts(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Experts q [E, N, K] int8 (GGUF stores [N, K]) with one f32 scale per 256-block -> Q8_K bytes."""
    blocks = q.reshape(-1, 256)
    out = []
    for b, dv in zip(blocks, d):
        bsums = b.reshape(16, 16).astype(np.int16).sum(axis=1).astype("<i2")
        out.append(np.concatenate([np.array([dv], "<f4").view(np.uint8), b.astype(np.int8).view(np.uint8), bsums.view(np.uint8)]))
    return np.concatenate(out)


def test_tiny_moe_layer_q8_k_packed_experts():
    rng = np.random.default_rng(5)
    q_up = rng.integers(-127, 128, (E, F, D))
    q_down = rng.integers(-127, 128, (E, D, F))
    d_up = (rng.random(E * F * D // 256) * 0.004).astype(np.float32)
    d_down = (rng.random(E * D * F // 256) * 0.004).astype(np.float32)
    w_up = (q_up.reshape(-1, 256) * d_up[:, None].astype(np.float64)).reshape(E, F, D).transpose(0, 2, 1)  # [E, D, F]
    w_down = (q_down.reshape(-1, 256) * d_down[:, None].astype(np.float64)).reshape(E, D, F).transpose(0, 2, 1)
    router = _weights()["w_router"].astype(np.float32)
    g = rlx.Graph("tiny_moe_q8k")
    x = g.input("x", (T, D), "f32")
    r = g.param("w_router", router.shape, "f32")
    pu = g.param("up_q8k", (E * F * D // 256 * 292,), "u8")
    pd = g.param("down_q8k", (E * D * F // 256 * 292,), "u8")
    out = _moe(g, x, r, lambda h, i: g.dequant_grouped_matmul(h, pu, i, scheme="gguf_q8_k", n=F),
               lambda h, i: g.dequant_grouped_matmul(h, pd, i, scheme="gguf_q8_k", n=D))
    g.set_outputs([out])
    rlx.verify(g)
    params = {"w_router": router, "up_q8k": _pack_q8_k_experts(q_up, d_up), "down_q8k": _pack_q8_k_experts(q_down, d_down)}
    x0 = np.random.default_rng(6).standard_normal((T, D)).astype(np.float32)
    want = _reference(x0.astype(np.float64), {"w_router": router.astype(np.float64), "w_up": w_up, "w_down": w_down})
    opt, _ = rlx.optimize(g)
    got = rlx.compile(rlx.plan(opt), params=params).run(inputs={"x": x0})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_expert_id_out_of_range_raises():
    g = rlx.Graph("bad_ids")
    x, w, i = g.input("x", (2, 3), "f32"), g.input("w", (2, 3, 4), "f32"), g.input("i", (2,), "i32")
    g.set_outputs([g.grouped_matmul(x, w, i)])
    feed = {"x": np.ones((2, 3), np.float32), "w": np.ones((2, 3, 4), np.float32)}
    for ids in ([0, 2], [-1, 0]):
        with pytest.raises(rlx.RlxError, match="out of range"):
            rlx.run(g, {**feed, "i": np.array(ids, np.int32)})
