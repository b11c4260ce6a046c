"""inline_into and promote_params_to_inputs (rlx.opt.graph_edit), checked by running the results."""

from __future__ import annotations

import numpy as np
import pytest

import rlx


def _block():
    s = rlx.Graph("block")
    x = s.input("x", (2, 3))
    y = s.tanh(s.matmul(x, s.param("w", (3, 3))) + s.constant(np.float32(0.5)))
    s.set_outputs([y, s.sum(y, axes=[1])])
    return s


def test_inline_twice_sharing_the_param():
    g = rlx.Graph("outer")
    a = g.input("a", (2, 3))
    (h, _) = rlx.inline_into(g, _block(), {"x": a})
    (h2, total) = rlx.inline_into(g, _block(), {"x": h})  # second copy shares param "w"
    g.set_outputs([h2, total])
    rlx.verify(g)
    assert list(g.params()) == ["w"]
    rng = np.random.default_rng(0)
    av, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
    got_h2, got_total = rlx.run(g, inputs={"a": av}, params={"w": w})
    want = np.tanh(np.tanh(av @ w + 0.5) @ w + 0.5)
    np.testing.assert_allclose(got_h2, want, rtol=1e-5)
    np.testing.assert_allclose(got_total, want.sum(1), rtol=1e-5)


def test_inline_with_param_bindings_and_errors():
    g = rlx.Graph("outer")
    a, w2 = g.input("a", (2, 3)), g.param("other", (3, 3))
    (h, _) = rlx.inline_into(g, _block(), {"x": a}, {"w": w2})
    assert list(g.params()) == ["other"]
    g.set_outputs([h])
    w = np.eye(3, dtype=np.float32)
    (got,) = rlx.run(g, inputs={"a": np.ones((2, 3), np.float32)}, params={"other": w})
    np.testing.assert_allclose(got, np.tanh(np.ones((2, 3)) + 0.5), rtol=1e-6)
    with pytest.raises(rlx.RlxError, match=r"input 'x'.*no binding"):
        rlx.inline_into(g, _block(), {})
    with pytest.raises(rlx.RlxError, match=r"param 'w'.*no binding"):
        rlx.inline_into(g, _block(), {"x": a}, {})
    with pytest.raises(rlx.RlxError, match=r"\[2, 3\] f32 in the source"):
        rlx.inline_into(g, _block(), {"x": g.input("b", (3, 3))})
    with pytest.raises(rlx.RlxError, match="value of the target graph"):
        rlx.inline_into(g, _block(), {"x": rlx.Graph("x").input("x", (2, 3))})


def test_promote_params_to_inputs():
    g = _block()
    p = rlx.promote_params_to_inputs(g, ["w", "not_a_param"])
    rlx.verify(p)
    assert list(p.params()) == [] and list(p.inputs()) == ["x", "w"]
    wid = g.params()["w"].id
    assert p.node(wid).op == "input" and p.node(wid).type == g.node(wid).type
    assert [n.op for n in p.nodes if n.id != wid] == [n.op for n in g.nodes if n.id != wid]
    x, w = np.ones((2, 3), np.float32), np.full((3, 3), 0.1, np.float32)
    np.testing.assert_allclose(rlx.run(p, inputs={"x": x, "w": w})[0], rlx.run(g, inputs={"x": x}, params={"w": w})[0])
    batched = rlx.vmap(p, in_axes={"w": 0})  # weights as data: a batch of weight matrices
    ws = np.stack([w, 2 * w])
    (out, _) = rlx.run(batched, inputs={"x": x, "w": ws})
    np.testing.assert_allclose(out[1], np.tanh(x @ (2 * w) + 0.5), rtol=1e-5)
