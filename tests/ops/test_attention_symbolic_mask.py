"""Attention's derivative graphs at symbolic sequence lengths: the positional keep mask comes from the one
mask row (rlx.ops.rows.position_keep) on the graph namespace; gradients and a Hessian-vector product
against torch autograd with the mask written out independently (bottom-right aligned)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")

B, H, D = 2, 2, 3
ONE = np.array(1.0)


def _graph(attrs):
    g = rlx.Graph("sym_attn")
    q = g.input("q", (B, "sq", H * D), "f64")
    k = g.input("k", (B, "sk", H * D), "f64")
    v = g.input("v", (B, "sk", H * D), "f64")
    a = g.attention(q, k, v, num_heads=H, head_dim=D, layout="bshd", **attrs)
    g.set_outputs([g.sum(a * a * a) + g.mean(a)])
    return g


def _torch_loss(attrs, sq, sk):
    i = torch.arange(sq)[:, None] + (sk - sq)
    j = torch.arange(sk)[None, :]
    keep = j <= i
    if attrs["mask_kind"] == "sliding_window":
        keep = keep & (j >= i - attrs["window"])

    def f(q, k, v):
        def heads(t):
            return t.view(B, -1, H, D).transpose(1, 2)

        s = (heads(q) @ heads(k).transpose(-1, -2) * D ** -0.5).masked_fill(~keep, -1e9)
        o = (torch.softmax(s, -1) @ heads(v)).transpose(1, 2).reshape(B, sq, H * D)
        return (o ** 3).sum() + o.mean()

    return f


@pytest.mark.parametrize("attrs", [{"mask_kind": "causal"}, {"mask_kind": "sliding_window", "window": 1}],
                         ids=["causal", "window"])
@pytest.mark.parametrize("sq, sk", [(3, 5), (4, 4), (5, 3)])  # decode-like, square, fully masked rows
def test_symbolic_length_mask_gradients_match_torch(attrs, sq, sk):
    g = _graph(attrs)
    rng = np.random.default_rng(sq * 10 + sk)
    feed = {"q": rng.standard_normal((B, sq, H * D)), "k": rng.standard_normal((B, sk, H * D)),
            "v": rng.standard_normal((B, sk, H * D))}
    names = ["q", "k", "v"]
    f = _torch_loss(attrs, sq, sk)
    primals = tuple(torch.from_numpy(feed[n]).requires_grad_() for n in names)

    got = rlx.run(rlx.grad_with_loss(g, names), {**feed, "d_output": ONE})
    loss = f(*primals)
    loss.backward()
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-12)
    for n, dg, t in zip(names, got[1:], primals):
        np.testing.assert_allclose(dg, t.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=n)

    vec = {n: rng.standard_normal(a.shape) for n, a in feed.items()}
    hv = rlx.run(rlx.hvp(g, names), {**feed, "d_output": ONE, **{f"t_{n}": vec[n] for n in names}})[-len(names):]
    _, want = torch.autograd.functional.hvp(f, tuple(torch.from_numpy(feed[n]) for n in names),
                                            tuple(torch.from_numpy(vec[n]) for n in names))
    for n, a, b in zip(names, hv, want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


def test_the_row_builds_the_symbolic_mask(monkeypatch):
    """The derivative graph's mask at symbolic lengths comes from the mask row (no second builder)."""
    from rlx.ops import rows

    seen = []
    row = rows.position_keep

    def spy(xp, kind, sq, sk, window, like=None):
        seen.append((type(xp).__name__, kind, sq, sk))
        return row(xp, kind, sq, sk, window, like)

    monkeypatch.setattr(rows, "position_keep", spy)
    rlx.grad(_graph({"mask_kind": "sliding_window", "window": 2}), ["q"])
    assert seen and all(kind == "sliding_window" and (sq, sk) == ("sq", "sk") for _, kind, sq, sk in seen), seen


@pytest.mark.parametrize("kind, window", [("causal", None), ("sliding_window", 0), ("sliding_window", 2)])
@pytest.mark.parametrize("sq, sk", [(3, 5), (4, 4), (5, 3)])
def test_the_mask_row_on_every_namespace(kind, window, sq, sk):
    """The row's positions-from-end form equals the bottom-right rule written out, on NumPy, torch and the
    graph namespace (static: a host constant, what the attention_backward decomposition embeds)."""
    from rlx.ops import rows
    from rlx.ops.kinds import NUMPY, GraphNamespace

    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    want = (j <= i) & ((j >= i - window) if kind == "sliding_window" else True)
    got_np = rows.position_keep(NUMPY, kind, sq, sk, window)
    got_graph = rows.position_keep(GraphNamespace(rlx.Graph("m")), kind, sq, sk, window)
    from rlx.backends.torch_backend.lowering import TORCH

    got_torch = rows.position_keep(TORCH, kind, sq, sk, window, torch.zeros(1)).numpy()
    for got in (got_np, got_graph, got_torch):
        np.testing.assert_array_equal(got, want)
