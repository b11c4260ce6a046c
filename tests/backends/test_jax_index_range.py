"""The JAX backend's out-of-range indices behave as the NumPy reference's: the same RlxError (not NaN,
not a dropped update), for every index-reading op; in-range indices (negative ones wrap) give the
reference's numbers. The same executable is run in range first, then out of range (a cached
XLA executable reports a host check's error differently from the first, tracing call)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

import rlx

F = np.float32


def _cases():
    g = rlx.Graph("gather")
    t, i = g.input("t", (3, 2)), g.input("i", (2,), "i64")
    g.set_outputs([g.gather(t, i, axis=0)])
    yield "gather", g, {"t": np.arange(6, dtype=F).reshape(3, 2)}, "i", np.array([-3, 2]), np.array([3, 0]), 3

    g = rlx.Graph("gather_elements")
    d, i = g.input("d", (2, 3)), g.input("i", (2, 2), "i64")
    g.set_outputs([g.gather_elements(d, i, axis=1)])
    yield "gather_elements", g, {"d": np.arange(6, dtype=F).reshape(2, 3)}, "i", np.array([[0, -1], [2, 1]]), \
        np.array([[0, 1], [-4, 1]]), -4

    for red in ("none", "add", "max"):
        g = rlx.Graph("scatter_elements")
        d, i, u = g.input("d", (4,)), g.input("i", (3,), "i64"), g.input("u", (3,))
        g.set_outputs([g.scatter_elements(d, i, u, axis=0, reduction=red)])
        yield f"scatter_elements[{red}]", g, {"d": np.ones(4, F), "u": np.array([5, -2, 7], F)}, "i", \
            np.array([0, -1, 0]), np.array([1, 4, 0]), 4

    g = rlx.Graph("scatter_add")
    u, i = g.input("u", (3, 2)), g.input("i", (3,), "i64")
    g.set_outputs([g.scatter_add(u, i, num_rows=4)])
    yield "scatter_add", g, {"u": np.arange(6, dtype=F).reshape(3, 2)}, "i", np.array([0, 3, 0]), np.array([0, 9, 1]), 9

    g = rlx.Graph("gather_backward")
    dy, i = g.input("dy", (2, 2)), g.input("i", (2,), "i64")
    g.set_outputs([g.gather_backward(dy, i, axis=0, table_shape=[3, 2])])
    yield "gather_backward", g, {"dy": np.ones((2, 2), F)}, "i", np.array([1, -1]), np.array([1, 3]), 3

    g = rlx.Graph("cross_entropy")
    lg, lab = g.input("logits", (2, 3)), g.input("labels", (2,), "i64")
    g.set_outputs([g.softmax_cross_entropy(lg, lab)])
    yield "softmax_cross_entropy", g, {"logits": np.array([[1, 2, 3], [0, 0, 1]], F)}, "labels", np.array([2, 0]), \
        np.array([3, 0]), 3

    g = rlx.Graph("grouped_matmul")
    x, w, e = g.input("x", (2, 3)), g.input("w", (2, 3, 2)), g.input("e", (2,), "i64")
    g.set_outputs([g.grouped_matmul(x, w, e)])
    yield "grouped_matmul", g, {"x": np.ones((2, 3), F), "w": np.arange(12, dtype=F).reshape(2, 3, 2)}, "e", \
        np.array([1, 0]), np.array([1, 2]), 2


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_out_of_range_indices_raise_like_the_reference(case):
    _name, g, feed, key, good, bad, wrong = case
    exe = rlx.compile(g, backend="jax")
    want = rlx.run(g, {**feed, key: good})[0]
    np.testing.assert_allclose(exe.run({**feed, key: good})[0], want, rtol=1e-6)
    with pytest.raises(rlx.RlxError, match="out of range") as ref:
        rlx.run(g, {**feed, key: bad})
    with pytest.raises(rlx.RlxError, match="out of range") as got:
        exe.run({**feed, key: bad})
    assert f"index {wrong} " in str(ref.value) and f"index {wrong} " in str(got.value), (str(ref.value), str(got.value))
    np.testing.assert_allclose(exe.run({**feed, key: good})[0], want, rtol=1e-6)  # the executable still works
