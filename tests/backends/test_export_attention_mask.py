"""The ONNX export's attention mask at symbolic sequence lengths is the mask row's (rlx.ops.rows.position_keep
on int64 ONNX positions); one exported model run by onnxruntime at several lengths against the bottom-right
rule written out in NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

H, D = 2, 4


def _oracle(q, k, v, kind, window):
    sq, sk = q.shape[-2], k.shape[-2]
    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    keep = (j <= i) & ((j >= i - window) if kind == "sliding_window" else True)
    s = np.where(keep, q.astype(np.float64) @ np.swapaxes(k, -1, -2) * D ** -0.5, -1e9)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("kind, window", [("causal", None), ("sliding_window", 1)])
def test_symbolic_length_mask_exports_through_the_row(kind, window):
    g = rlx.Graph("attn")
    q = g.input("q", (1, H, "sq", D))
    k, v = g.input("k", (1, H, "sk", D)), g.input("v", (1, H, "sk", D))
    g.set_outputs([g.attention(q, k, v, num_heads=H, head_dim=D, mask_kind=kind, window=window)])
    model = rlx.onnx.export(g, {})
    ops = {n.op_type for n in model.graph.node}
    assert {"Range", "GreaterOrEqual"} <= ops, ops
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for sq, sk in ((3, 5), (4, 4), (5, 2)):
        feed = {"q": rng.standard_normal((1, H, sq, D)), "k": rng.standard_normal((1, H, sk, D)),
                "v": rng.standard_normal((1, H, sk, D))}
        feed = {n: a.astype(np.float32) for n, a in feed.items()}
        (got,) = sess.run(None, feed)
        np.testing.assert_allclose(got, _oracle(feed["q"], feed["k"], feed["v"], kind, window), rtol=2e-5, atol=2e-6,
                                   err_msg=f"{kind} sq={sq} sk={sk}")


@pytest.mark.parametrize("bias_value", [0.0, -0.5])
def test_a_bound_bias_of_zeros_is_not_added(bias_value):
    """An attention bias the export binds to zeros (a padding mask that masks nothing, folded) adds nothing
    to the softmax's input, so no Add is written; any other bias is. Values: the formula in NumPy."""
    sq = 3
    g = rlx.Graph("attn_bias")
    q, k, v = (g.input(n, (1, H, sq, D)) for n in "qkv")
    bias = g.param("bias", (1, 1, sq, sq))
    g.set_outputs([g.attention(q, k, v, bias, num_heads=H, head_dim=D, mask_kind="bias")])
    bias_v = np.full((1, 1, sq, sq), bias_value, np.float32)
    bias_v[..., 0, -1] = bias_value * 3
    model = rlx.onnx.export(g, {"bias": bias_v})
    assert ("Add" in {n.op_type for n in model.graph.node}) == (bias_value != 0)
    rng = np.random.default_rng(1)
    feed = {n: rng.standard_normal((1, H, sq, D)).astype(np.float32) for n in "qkv"}
    (got,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    s = feed["q"].astype(np.float64) @ np.swapaxes(feed["k"], -1, -2) * D ** -0.5 + bias_v
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(got, (p / p.sum(-1, keepdims=True)) @ feed["v"], rtol=2e-5, atol=2e-6)
