"""fold_conv_affine: an eval-mode BatchNorm after a conv (as torch.export leaves it) folded into the
conv weight; the verifier passes after the pass, the numbers match the unoptimized graph and torch."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.opt.fold_affine import fold_conv_affine

torch = pytest.importorskip("torch")


def _model(bias: bool):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=bias), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 4, 1), torch.nn.BatchNorm2d(4))
    with torch.no_grad():
        for bn in (m[1], m[4]):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    return m.eval()


@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_folds_into_the_conv(bias):
    m = _model(bias)
    x = torch.randn(2, 3, 10, 10)
    g, params = rlx.torch.import_module(m, (x,))
    res = fold_conv_affine(g)
    assert res.stats["folded"] == 2
    folded = res.graph
    rlx.verify(folded)
    def per_pixel_binaries(gr):  # elementwise ops over the activations (batch 2), not over the weights
        return sum(n.op == "binary" and len(n.shape) == 4 and n.shape[0] == 2 for n in gr.nodes)

    assert per_pixel_binaries(folded) == 2 < per_pixel_binaries(g)  # each BN chain became one bias add
    feed = {next(iter(g.inputs())): x.numpy()}
    want = rlx.run(g, feed, params)[0]
    got = rlx.run(folded, feed, params)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got, m(x).numpy(), rtol=1e-4, atol=1e-5)
    exe = rlx.compile(folded, params=params)
    np.testing.assert_allclose(exe.run(feed)[0], want, rtol=1e-5, atol=1e-5)


def test_chains_that_are_not_weight_only_or_not_per_channel_stay():
    g = rlx.Graph("keep")
    x, s = g.input("x", (1, 2, 4, 4)), g.input("s", (2, 1, 1))  # s is data, not a weight
    y = g.conv2d(x, g.param("w", (2, 2, 3, 3)), padding=[1, 1])
    g.set_outputs([y * s])
    res = fold_conv_affine(g)
    assert res.stats["folded"] == 0 and res.graph is g


class LinearNorm(torch.nn.Module):
    """LeViT's linear layer: a bias-free Linear, then BatchNorm1d over the flattened tokens."""

    def __init__(self, k: int, c: int):
        super().__init__()
        self.linear = torch.nn.Linear(k, c, bias=False)
        self.bn = torch.nn.BatchNorm1d(c)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        return self.bn(self.linear(x).flatten(0, 1)).reshape(x.shape[0], x.shape[1], -1)


@pytest.mark.parametrize("tokens", [True, False])
def test_batchnorm1d_folds_into_the_linear_weight(tokens):
    """matmul -> reshape keeping the last dim -> (x - mean) * s + beta: one matmul by W · s and one bias add."""
    torch.manual_seed(0)
    m = (LinearNorm(6, 5) if tokens else torch.nn.Sequential(torch.nn.Linear(6, 5, bias=False), LinearNorm(5, 5).bn)).eval()
    x = torch.randn(2, 3, 6) if tokens else torch.randn(4, 6)
    g, params = rlx.torch.import_module(m, (x,))
    res = fold_conv_affine(g)
    assert res.stats["folded"] == 1
    folded = rlx.verify(res.graph)

    def activation_binaries(gr):  # elementwise ops that read the input (not the weights' preparation)
        data: set[int] = set()
        for n in gr.nodes:
            if n.op == "input" or data.intersection(n.inputs):
                data.add(n.id)
        return sum(n.op == "binary" and n.id in data for n in gr.nodes)

    assert activation_binaries(folded) == 1 < activation_binaries(g)
    feed = {next(iter(g.inputs())): x.numpy()}
    got = rlx.run(folded, feed, params)[0]
    np.testing.assert_allclose(got, rlx.run(g, feed, params)[0], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got, m(x).numpy(), rtol=1e-4, atol=1e-5)


def test_a_matmul_by_data_or_a_per_row_scale_stays():
    g = rlx.Graph("keep")
    x, w = g.input("x", (3, 4)), g.input("w", (4, 5))  # the weight is data
    g.set_outputs([g.matmul(x, w) * g.param("s", (5,))])
    assert fold_conv_affine(g).stats["folded"] == 0
    g = rlx.Graph("rows")
    x = g.input("x", (3, 4))
    g.set_outputs([g.matmul(x, g.param("w", (4, 5))) * g.param("s", (3, 1))])  # per row, not per column
    assert fold_conv_affine(g).stats["folded"] == 0
