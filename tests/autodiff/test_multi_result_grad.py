"""Gradients through multi-result nodes, checked against central finite differences of ``rlx.run``:
unused results get no cotangent, a result used twice sums its contributions."""

from __future__ import annotations

import numpy as np
from adcheck import fd_gradient

import rlx

X = np.random.default_rng(0).standard_normal((3, 7))


def test_grad_with_unused_results_and_two_uses():
    """Only piece 2 and the top_k values are used (twice): the others get no cotangent."""
    g = rlx.Graph("loss")
    x = g.input("x", (3, 7), "f64")
    _, b, c = g.split(x, axis=1, sizes=[2, 4, 1])
    vals, _ = g.top_k(b, k=2, output="both")
    g.set_outputs([g.sum(vals * vals) + g.sum(g.sin(vals)) + g.sum(c * 3.0)])
    bwd = rlx.grad(g, ["x"])
    rlx.verify(bwd)
    (dx,) = rlx.run(bwd, {"x": X, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dx, fd_gradient(g, {"x": X}, (), "x"), rtol=1e-6, atol=1e-8)
    assert np.all(dx[:, :2] == 0)
