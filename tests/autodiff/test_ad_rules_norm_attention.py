"""Rules of the normalization and attention families end to end, against torch.autograd (float64).

A llama-style block built from MIR ops (rms_norm with beta, rope, causal attention, SwiGLU)
is differentiated w.r.t. every param and the input; Hessian-vector products go through
layer_norm + attention (the rules emit primitive ops, so second order needs no rules on
backward kernels) and through the whole llama block.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import rlx

B, S, H, D = 2, 5, 2, 4
DM, FF = H * D, 12
EPS = 1e-5


def _rope_tables(rows: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    inv = 10000.0 ** (-np.arange(0, head_dim, 2) / head_dim)
    ang = np.arange(rows)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)


COS, SIN = _rope_tables(S, D)
LLAMA_PARAMS = {"g1": (DM,), "b1": (DM,), "wq": (DM, DM), "wk": (DM, DM), "wv": (DM, DM), "wo": (DM, DM),
                "g2": (DM,), "b2": (DM,), "w1": (DM, FF), "w3": (DM, FF), "w2": (FF, DM)}


def _llama_graph(r: np.ndarray) -> rlx.Graph:
    g = rlx.Graph("llama_block")
    x = g.input("x", (B, S, DM), "f64")
    p = {n: g.param(n, shape, "f64") for n, shape in LLAMA_PARAMS.items()}
    cos, sin = g.constant(COS), g.constant(SIN)
    h = g.rms_norm(x, p["g1"], p["b1"], eps=EPS)
    q = g.rope(g.matmul(h, p["wq"]), cos, sin, head_dim=D)
    k = g.rope(g.matmul(h, p["wk"]), cos, sin, head_dim=D)
    a = g.attention(q, k, g.matmul(h, p["wv"]), num_heads=H, head_dim=D, mask_kind="causal")
    x2 = x + g.matmul(a, p["wo"])
    h2 = g.rms_norm(x2, p["g2"], p["b2"], eps=EPS)
    ff = g.matmul(g.silu(g.matmul(h2, p["w1"])) * g.matmul(h2, p["w3"]), p["w2"])
    g.set_outputs([g.sum((x2 + ff) * g.constant(r))])
    return g


def _torch_llama(r: np.ndarray):
    rt = torch.from_numpy(r)
    cos, sin = torch.from_numpy(COS), torch.from_numpy(SIN)
    causal = torch.ones(S, S, dtype=torch.bool).tril()

    def rms(t, gamma, beta):
        return t / torch.sqrt((t * t).mean(-1, keepdim=True) + EPS) * gamma + beta

    def rope(t):  # NeoX half split per head
        th = t.view(B, S, H, D)
        a, b = th[..., : D // 2], th[..., D // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([a * c - b * s, b * c + a * s], dim=-1).reshape(B, S, DM)

    def heads(t):
        return t.view(B, S, H, D).transpose(1, 2)

    def f(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, w3, w2):
        h = rms(x, g1, b1)
        q, k, v = heads(rope(h @ wq)), heads(rope(h @ wk)), heads(h @ wv)
        s = (q @ k.transpose(-1, -2) * D ** -0.5).masked_fill(~causal, -1e9)  # written out: SDPA has no double backward
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, DM)
        x2 = x + a @ wo
        h2 = rms(x2, g2, b2)
        return ((x2 + (F.silu(h2 @ w1) * (h2 @ w3)) @ w2) * rt).sum()

    return f


def _llama_feed(seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, S, DM))
    params = {n: rng.standard_normal(shape) * (0.4 if len(shape) == 2 else 1.0) for n, shape in LLAMA_PARAMS.items()}
    return x, params, rng.standard_normal((B, S, DM))


def test_llama_block_gradient_matches_torch():
    x, params, r = _llama_feed()
    g = _llama_graph(r)
    names = ["x", *LLAMA_PARAMS]
    bwd = rlx.grad_with_loss(g, wrt=names)
    rlx.verify(bwd)
    loss, *grads = rlx.run(bwd, {"x": x, "d_output": np.array(1.0)}, params)
    leaves = [torch.from_numpy(a).requires_grad_() for a in (x, *params.values())]
    want_loss = _torch_llama(r)(*leaves)
    want = torch.autograd.grad(want_loss, leaves)
    np.testing.assert_allclose(loss, want_loss.item(), rtol=1e-12)
    for name, got, w in zip(names, grads, want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


def test_llama_block_hvp_matches_torch():
    x, params, r = _llama_feed(1)
    g = _llama_graph(r)
    names = ["x", "g1", "b1", "wq", "wk", "wv", "w1"]
    h = rlx.hvp(g, names)
    rlx.verify(h)
    rng = np.random.default_rng(2)
    feed = {"x": x, **params}
    vec = {n: rng.standard_normal(feed[n].shape) for n in names}
    outs = rlx.run(h, {"x": x, "d_output": np.array(1.0), **{f"t_{n}": vec[n] for n in names}}, params)
    f = _torch_llama(r)
    rest = {n: torch.from_numpy(a) for n, a in feed.items() if n not in names}
    order = ["x", *LLAMA_PARAMS]

    def fsel(*vals):
        env = {**rest, **dict(zip(names, vals))}
        return f(*(env[n] for n in order))

    _, hv = torch.autograd.functional.hvp(fsel, tuple(torch.from_numpy(feed[n]) for n in names),
                                          tuple(torch.from_numpy(vec[n]) for n in names))
    for n, got, want in zip(names, outs[2 + len(names):], hv):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


@pytest.mark.parametrize("attrs", [
    {"mask_kind": "causal"},
    {"mask_kind": "none", "score_scale": 0.7, "attn_logit_softcap": 2.0},
    {"mask_kind": "sliding_window", "window": 1, "attn_logit_softcap": 1.5},
], ids=["causal", "scale_softcap", "window_softcap"])
def test_hvp_through_layer_norm_and_attention_matches_torch(attrs):
    sq = 4
    g = rlx.Graph("ln_attn")
    x = g.input("x", (B, sq, DM), "f64")
    gamma, beta = g.param("gamma", (DM,), "f64"), g.param("beta", (DM,), "f64")
    wq, wk, wv = (g.param(n, (DM, DM), "f64") for n in ("wq", "wk", "wv"))
    h = g.layer_norm(x, gamma, beta, eps=EPS)
    a = g.attention(g.matmul(h, wq), g.matmul(h, wk), g.matmul(h, wv), num_heads=H, head_dim=D, **attrs)
    g.set_outputs([g.mean(a * a * a) + g.sum(a)])
    names = ["x", "gamma", "beta", "wq", "wk", "wv"]
    hv_graph = rlx.hvp(g, names)
    rlx.verify(hv_graph)
    rng = np.random.default_rng(4)
    feed = {"x": rng.standard_normal((B, sq, DM)), "gamma": rng.standard_normal(DM), "beta": rng.standard_normal(DM),
            **{n: rng.standard_normal((DM, DM)) * 0.5 for n in ("wq", "wk", "wv")}}
    vec = {n: rng.standard_normal(a.shape) for n, a in feed.items()}
    params = {n: a for n, a in feed.items() if n != "x"}
    outs = rlx.run(hv_graph, {"x": feed["x"], "d_output": np.array(1.0), **{f"t_{n}": vec[n] for n in names}}, params)

    scale = attrs.get("score_scale") or D ** -0.5
    cap = attrs.get("attn_logit_softcap")
    i = torch.arange(sq)[:, None]
    j = torch.arange(sq)[None, :]
    keep = {"causal": j <= i, "sliding_window": (j <= i) & (j >= i - attrs.get("window", 0)), "none": None}[attrs["mask_kind"]]

    def f(xt, gt, bt, q_w, k_w, v_w):
        ht = F.layer_norm(xt, (DM,), gt, bt, EPS)

        def heads(t):
            return t.view(B, sq, H, D).transpose(1, 2)

        q, k, v = heads(ht @ q_w), heads(ht @ k_w), heads(ht @ v_w)
        s = q @ k.transpose(-1, -2) * scale
        if cap is not None:
            s = cap * torch.tanh(s / cap)
        if keep is not None:
            s = s.masked_fill(~keep, -1e9)
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, sq, DM)
        return (o ** 3).mean() + o.sum()

    primals = tuple(torch.from_numpy(feed[n]) for n in names)
    loss, hv = torch.autograd.functional.hvp(f, primals, tuple(torch.from_numpy(vec[n]) for n in names))
    np.testing.assert_allclose(outs[0], loss.item(), rtol=1e-12)
    for n, got, want in zip(names, outs[2 + len(names):], hv):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


def test_attention_bias_gets_a_real_gradient():
    """The additive bias mask is differentiable (d bias = d scores, summed over broadcast axes)."""
    g = rlx.Graph("bias")
    q, k, v = (g.input(n, (1, 3, DM), "f64") for n in "qkv")
    bias = g.input("bias", (H, 3, 3), "f64")
    g.set_outputs([g.sum(g.attention(q, k, v, bias, num_heads=H, head_dim=D, mask_kind="bias", attn_logit_softcap=1.0) ** 2)])
    rng = np.random.default_rng(6)
    feed = {n: rng.standard_normal((1, 3, DM)) for n in "qkv"}
    feed["bias"] = rng.standard_normal((H, 3, 3))
    got = rlx.run(rlx.grad(g, ["bias"]), {**feed, "d_output": np.array(1.0)})[0]
    tb = torch.from_numpy(feed["bias"]).requires_grad_()
    qt, kt, vt = (torch.from_numpy(feed[n]).view(1, 3, H, D).transpose(1, 2) for n in "qkv")
    s = torch.tanh(qt @ kt.transpose(-1, -2) * D ** -0.5) + tb
    o = torch.softmax(s, -1) @ vt
    (want,) = torch.autograd.grad((o ** 2).sum(), tb)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
