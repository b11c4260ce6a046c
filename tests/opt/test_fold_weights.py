"""fold_weights: weight-only subgraphs (torch.export's transposed linear weights, a BatchNorm folded
into a conv weight) computed once and bound as params; the graph verifies after the pass, no
weight-only node is left, and the numbers match torch and the unfolded graph."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.opt.fold_affine import fold_conv_affine
from rlx.opt.fold_weights import fold_weights

torch = pytest.importorskip("torch")


def _weight_only_compute(g: rlx.Graph, params) -> int:
    known = {n.id for n in g.nodes if n.op == "constant" or (n.op == "param" and n.attrs["name"] in params)}
    count = 0
    for n in g.nodes:
        if n.op not in ("param", "constant") and n.inputs and all(i in known for i in n.inputs):
            known.add(n.id)
            count += 1
    return count


def _net():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    return m.eval()


def test_weight_only_subgraphs_become_params_with_the_same_numbers():
    m, x = _net(), torch.randn(2, 3, 6, 6)
    g, params = rlx.torch.import_module(m, (x,))
    g = fold_conv_affine(g).graph
    assert _weight_only_compute(g, params) > 0  # the transposed linear weights and the BN-scaled conv weight
    folded, fparams = fold_weights(g, params)
    rlx.verify(folded)
    assert _weight_only_compute(folded, fparams) == 0
    assert set(fparams) == {n.attrs["name"] for n in folded.nodes if n.op == "param"}
    assert len(folded) < len(g)
    feed = {next(iter(g.inputs())): x.numpy()}
    with torch.no_grad():
        want = m(x).numpy()
    got = rlx.run(folded, feed, fparams)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, rlx.run(g, feed, params)[0], rtol=1e-6, atol=1e-6)
    for backend in ("numpy", "torch"):
        np.testing.assert_allclose(rlx.compile(folded, backend=backend, params=fparams).run(feed)[0], want, rtol=1e-5, atol=1e-5)


def test_unbound_params_stay_and_wrong_values_are_named():
    g = rlx.Graph("partial")
    x = g.input("x", (2, 3))
    w, v = g.param("w", (4, 3)), g.param("v", (3, 3))
    g.set_outputs([g.matmul(x, g.transpose(w, perm=[1, 0])) + 1.0, g.matmul(x, g.transpose(v, perm=[1, 0]))])
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 3)).astype(np.float32)
    folded, fparams = fold_weights(g, {"w": W})
    rlx.verify(folded)
    names = {n.attrs["name"] for n in folded.nodes if n.op == "param"}
    assert "v" in names and "w" not in names and len(fparams) == 1  # v has no value: it stays a param, its transpose stays
    (wt,) = fparams.values()
    np.testing.assert_array_equal(wt, W.T)
    feed, V = {"x": rng.standard_normal((2, 3)).astype(np.float32)}, rng.standard_normal((3, 3)).astype(np.float32)
    for got, want in zip(rlx.run(folded, feed, {**fparams, "v": V}), rlx.run(g, feed, {"w": W, "v": V})):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(rlx.RlxError, match="'w'"):
        fold_weights(g, {"w": W.astype(np.float64)})
