"""Sequence ops inside small models: a tiny Mamba-style block runs end to end (build, optimize,
plan, run) and matches a NumPy loop reference; its gradients match finite differences; a
gated-delta-net layer carries its state across two chunks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rlx

B, S, D, H, N = 2, 6, 4, 5, 3  # batch, sequence, model width, SSM channels, state size


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w_in": rng.standard_normal((D, 2 * H)) * 0.5,
        "w_dt": rng.standard_normal((H, H)) * 0.3,
        "w_b": rng.standard_normal((H, N)) * 0.5,
        "w_c": rng.standard_normal((H, N)) * 0.5,
        "a_log": rng.standard_normal((H, N)) * 0.3,
        "d_skip": rng.standard_normal((H,)),
        "w_out": rng.standard_normal((H, D)) * 0.5,
    }


def _mamba_block(g: rlx.Graph, u: rlx.Value, w: dict[str, rlx.Value]) -> rlx.Value:
    """u [B, S, D] → u + out_proj(ssm(silu(x)) · silu(z)), softplus delta, A = −exp(A_log), D skip."""
    xz = g.matmul(u, w["w_in"])
    x = g.silu(g.narrow(xz, axis=2, start=0, length=H))
    z = g.narrow(xz, axis=2, start=H, length=H)
    delta = g.log(g.exp(g.matmul(x, w["w_dt"])) + 1.0)  # softplus (the caller's job, docs/semantics.md#sequence-models)
    bm, cm = g.matmul(x, w["w_b"]), g.matmul(x, w["w_c"])
    a = -g.exp(w["a_log"])
    y = g.selective_scan(x, delta, a, bm, cm, state_size=N)
    y = (y + x * w["d_skip"]) * g.silu(z)
    return u + g.matmul(y, w["w_out"])


def _build(dtype: str = "f64") -> rlx.Graph:
    g = rlx.Graph("tiny_mamba")
    u = g.input("u", (B, S, D), dtype)
    w = {k: g.param(k, v.shape, dtype) for k, v in _weights().items()}
    g.set_outputs([_mamba_block(g, u, w)])
    return g


def _silu(v):
    return v / (1.0 + np.exp(-v))


def _reference(u: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """The block as plain NumPy, the SSM as an explicit loop over batch, time, channel and state."""
    xz = u @ w["w_in"]
    x, z = _silu(xz[..., :H]), xz[..., H:]
    delta = np.log1p(np.exp(x @ w["w_dt"]))
    bm, cm = x @ w["w_b"], x @ w["w_c"]
    a = -np.exp(w["a_log"])
    y = np.zeros_like(x)
    for b in range(B):
        hs = np.zeros((H, N))
        for t in range(S):
            for c in range(H):
                for j in range(N):
                    hs[c, j] = math.exp(delta[b, t, c] * a[c, j]) * hs[c, j] + delta[b, t, c] * bm[b, t, j] * x[b, t, c]
                y[b, t, c] = sum(cm[b, t, j] * hs[c, j] for j in range(N))
    y = (y + x * w["d_skip"]) * _silu(z)
    return u + y @ w["w_out"]


def test_tiny_mamba_block_end_to_end_matches_numpy_loop():
    g = _build()
    rlx.verify(g)
    params = _weights()
    u = np.random.default_rng(1).standard_normal((B, S, D))
    want = _reference(u, params)
    np.testing.assert_allclose(rlx.run(g, {"u": u}, params)[0], want, rtol=1e-10, atol=1e-12)
    opt, _ = rlx.optimize(g)
    rlx.verify(opt)
    assert not any(n.op == "selective_scan" for n in opt.nodes), "the cpu pipeline does not claim it: unfused into a scan"
    assert any(n.op == "scan" for n in opt.nodes)
    lir = rlx.plan(opt)
    got = rlx.compile(lir, params=params).run(inputs={"u": u})
    np.testing.assert_allclose(got[0], want, rtol=1e-10, atol=1e-12)


def test_tiny_mamba_block_float32_plan():
    g = _build("f32")
    params = {k: v.astype(np.float32) for k, v in _weights().items()}
    u = np.random.default_rng(2).standard_normal((B, S, D)).astype(np.float32)
    opt, _ = rlx.optimize(g)
    got = rlx.compile(rlx.plan(opt), params=params).run(inputs={"u": u})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _reference(u.astype(np.float64), _weights()), rtol=1e-4, atol=1e-5)


def test_tiny_mamba_block_gradients_match_finite_differences():
    loss_g = rlx.Graph("tiny_mamba_loss")
    u = loss_g.input("u", (B, S, D), "f64")
    w = {k: loss_g.param(k, v.shape, "f64") for k, v in _weights().items()}
    out = _mamba_block(loss_g, u, w)
    r = np.random.default_rng(3).standard_normal((B, S, D))
    loss_g.set_outputs([loss_g.sum(out * loss_g.constant(r))])
    params = _weights()
    u0 = np.random.default_rng(4).standard_normal((B, S, D))
    names = ["u", "a_log", "w_dt"]
    bwd = rlx.grad(loss_g, names)
    rlx.verify(bwd)
    got = rlx.run(bwd, {"u": u0, "d_output": np.array(1.0)}, params)
    feed = {"u": u0, **params}
    eps = 1e-6

    def loss(f):
        return rlx.run(loss_g, {"u": f["u"]}, {k: f[k] for k in params})[0]

    for name, gr in zip(names, got):
        fd = np.zeros_like(feed[name])
        for idx in np.ndindex(fd.shape):
            hi, lo = ({**feed, name: feed[name].copy()} for _ in range(2))
            hi[name][idx] += eps
            lo[name][idx] -= eps
            fd[idx] = (loss(hi) - loss(lo)) / (2 * eps)
        np.testing.assert_allclose(gr, fd, rtol=1e-5, atol=1e-7, err_msg=name)


def test_gated_delta_net_state_output_chains_chunks():
    """Running two chunks, the second seeded with the first's output='state', equals one pass."""
    rng = np.random.default_rng(5)
    b, s, h, n = 1, 6, 2, 4

    def unit(a):
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    feed = {"q": unit(rng.standard_normal((b, s, h, n))), "k": unit(rng.standard_normal((b, s, h, n))),
            "v": rng.standard_normal((b, s, h, n)), "gate": -np.abs(rng.standard_normal((b, s, h))) * 0.2,
            "beta": 1.0 / (1.0 + np.exp(-rng.standard_normal((b, s, h))))}
    g = rlx.Graph("gdn_chunks")
    ins = {k: g.input(k, v.shape, "f64") for k, v in feed.items()}
    full = g.gated_delta_net(*ins.values(), state_size=n)
    halves = [{k: g.narrow(v, axis=1, start=st, length=s // 2) for k, v in ins.items()} for st in (0, s // 2)]
    st1 = g.gated_delta_net(*halves[0].values(), state_size=n, output="state")
    o1 = g.gated_delta_net(*halves[0].values(), state_size=n)
    o2 = g.gated_delta_net(*halves[1].values(), st1, state_size=n, carry_state=True)
    g.set_outputs([full, g.concat([o1, o2], axis=1)])
    want, got = rlx.run(g, feed)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tiny_mamba_block_on_jax_keeps_the_op():
    pytest.importorskip("jax")
    g = _build("f32")
    params = {k: v.astype(np.float32) for k, v in _weights().items()}
    u = np.random.default_rng(6).standard_normal((B, S, D)).astype(np.float32)
    opt, _ = rlx.optimize(g, backend="jax")
    assert any(n.op == "selective_scan" for n in opt.nodes), "the jax backend claims every op"
    got = rlx.compile(opt, backend="jax", params=params).run(inputs={"u": u})[0]
    np.testing.assert_allclose(got, _reference(u.astype(np.float64), _weights()), rtol=1e-4, atol=1e-5)
