"""fuse_decomposed_attention: softmax(Q Kᵀ · s [+ mask]) V as torch.export and torch's ONNX exporter
leave it becomes one ``attention`` node; the verifier runs after the pass (run_passes), and the
numbers match torch's own module and the unfused graph."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rlx
from rlx.opt import run_passes
from rlx.opt.fuse_attention import FUSE_ATTENTION

torch = pytest.importorskip("torch")


class Eager(torch.nn.Module):
    """The attention of many transformers' "eager" paths: the scale on the scores, or on q and k apart."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def forward(self, q, k, v, bias):
        d = q.shape[-1]
        if self.mode == "split":  # torch's ONNX exporter of scaled_dot_product_attention: sqrt(scale) on q and on kᵀ
            s = (q * d ** -0.25) @ (k.transpose(-2, -1) * d ** -0.25)
        elif self.mode == "div":
            s = q @ k.transpose(-2, -1) / math.sqrt(d)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)) * 0.3 + bias
        return torch.softmax(s, dim=-1) @ v


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    bias = torch.randn(2, 1, 5, 5, generator=g)
    return q, k, v, bias


def _fused(g: rlx.Graph) -> rlx.Graph:
    res = run_passes(g, [FUSE_ATTENTION], check=True)  # the verifier runs on the result
    return res.graph


@pytest.mark.parametrize("mode", ["split", "div", "bias"])
def test_decomposed_attention_becomes_one_op_and_keeps_its_numbers(mode):
    m, args = Eager(mode).eval(), _inputs()
    g, params = rlx.torch.import_module(m, args)
    fused = _fused(g)
    att = [n for n in fused.nodes if n.op == "attention"]
    assert len(att) == 1 and not any(n.op == "softmax" for n in fused.nodes)
    assert att[0].attrs["mask_kind"] == ("bias" if mode == "bias" else "none")
    want_scale = 0.3 if mode == "bias" else 8 ** -0.5
    assert att[0].attrs["score_scale"] == pytest.approx(want_scale, rel=1e-6)
    feed = {name: a.numpy() for name, a in zip(g.inputs(), args)}
    with torch.no_grad():
        want = m(*args).numpy()
    for got in (rlx.run(fused, feed, params)[0], rlx.compile(fused, params=params).run(feed)[0],
                rlx.compile(fused, backend="torch", params=params).run(feed)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rlx.run(fused, feed, params)[0], rlx.run(g, feed, params)[0], rtol=1e-5, atol=1e-6)


def test_shared_scores_and_narrow_floats_are_left_alone():
    g = rlx.Graph("shared")
    q, k, v = (g.input(n, (1, 2, 4, 8)) for n in "qkv")
    s = g.matmul(q, g.transpose(k, perm=[0, 1, 3, 2])) * 0.5
    g.set_outputs([g.matmul(g.softmax(s, axis=-1), v), s])  # the scores are an output too
    assert not any(n.op == "attention" for n in _fused(g).nodes)
    h = rlx.Graph("half")
    q, k, v = (h.input(n, (1, 2, 4, 8), "f16") for n in "qkv")
    h.set_outputs([h.matmul(h.softmax(h.matmul(q, h.transpose(k, perm=[0, 1, 3, 2])), axis=-1), v)])
    assert not any(n.op == "attention" for n in _fused(h).nodes)


def test_transformer_layer_in_the_default_pipeline_matches_torch():
    """A torch.nn encoder layer written with explicit matmuls: rlx.optimize fuses its attention and the
    optimized graph still matches torch on the numpy and torch backends."""
    torch.manual_seed(1)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj, self.norm = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, s, 3, 4, 4).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v
            return x + self.proj(a.transpose(1, 2).reshape(b, s, 16))

    m, x = Layer().eval(), torch.randn(2, 6, 16)
    g, params = rlx.torch.import_module(m, (x,))
    opt, _ = rlx.optimize(g)
    assert sum(n.op == "attention" for n in opt.nodes) == 1
    with torch.no_grad():
        want = m(x).numpy()
    feed = {next(iter(g.inputs())): x.numpy()}
    for backend in ("numpy", "torch"):
        np.testing.assert_allclose(rlx.compile(opt, backend=backend, params=params).run(feed)[0], want, rtol=1e-5, atol=1e-5)
