"""``custom_fn`` exported to ONNX: its forward body is inlined, its custom derivative bodies
(training-only) are not exported. Each model passes the full checker, runs in onnxruntime
equal to ``rlx.run``, and imports back into rlx equal again."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from backends.test_onnx_export_control_flow import _check, _f32, _op_types  # noqa: E402
from opcases import sub  # noqa: E402

_SIG = [("a", (2, 4), "f32"), ("s", (4,), "f32")]


def _soft_clip():
    """``tanh(a) * s + 0.5`` with a custom VJP that uses Cos / Sin (which the body never uses)."""
    body = sub("soft_clip", _SIG, lambda h, a, s: h.tanh(a) * s + h.scalar(0.5, rlx.f32))
    vjp = sub("soft_clip_vjp", [*_SIG, ("d_output", (2, 4), "f32")],
              lambda h, a, s, d: [d * h.cos(a), h.sum(d * h.sin(a), axes=[0])])
    return dict(body=body, vjp_body=vjp)


def _assert_no_derivative_ops(proto):
    ops = _op_types(proto.graph)
    assert "Cos" not in ops and "Sin" not in ops, ops  # the vjp_body is not exported


def test_custom_fn_with_custom_vjp_in_a_model():
    g = rlx.Graph("custom_fn_model")
    x = g.input("x", (2, 3))
    w = g.param("w", (3, 4))
    s = g.input("s", (4,))
    y = g.custom_fn([g.matmul(x, w), s], **_soft_clip())
    ident = sub("ident", [("v", (2, 4), "f32")], lambda h, v: v)  # a body returning its input
    g.set_outputs([g.relu(y) + g.custom_fn([y], body=ident), y])
    feeds = [{"x": _f32(2, 3, seed=s_), "s": _f32(4, seed=s_ + 1)} for s_ in (0, 5)]
    proto = _check(g, feeds, {"w": _f32(3, 4, seed=2)}, expect=["Tanh", "MatMul"])
    _assert_no_derivative_ops(proto)


def test_custom_fn_inside_an_if_branch_and_nested():
    """then: a custom_fn whose body holds another custom_fn; else: a plain expression."""
    inner = _soft_clip()
    outer_body = sub("outer", _SIG, lambda h, a, s: h.custom_fn([a * 2.0, s], **inner) - a)
    outer_vjp = sub("outer_vjp", [*_SIG, ("d_output", (2, 4), "f32"), ("primal_output", (2, 4), "f32")],
                    lambda h, a, s, d, y: [d * h.sin(y), h.sum(d, axes=[0])])
    then_b = sub("then", _SIG, lambda h, a, s: h.custom_fn([a, s], body=outer_body, vjp_body=outer_vjp))
    else_b = sub("else", _SIG, lambda h, a, s: a * s)
    g = rlx.Graph("custom_fn_in_if")
    p = g.input("p", (), "bool")
    a, s = g.input("a", (2, 4)), g.input("s", (4,))
    g.set_outputs([g.if_([p, a, s], then_branch=then_b, else_branch=else_b)])
    feeds = {"a": _f32(2, 4, seed=3), "s": _f32(4, seed=4)}
    proto = _check(g, [{"p": np.array(v), **feeds} for v in (True, False)], expect=["If", "Tanh"])
    _assert_no_derivative_ops(proto)


def test_custom_fn_and_while_on_symbolic_sizes_on_every_backend():
    """A custom_fn and a while_ whose bodies are typed [n, 4] (n symbolic): one graph runs at two sizes on
    the reference, compiled numpy, jax, torch and (exported) onnxruntime, against NumPy."""
    sig = [("a", ("n", 4), "f32"), ("s", (4,), "f32")]
    body = sub("soft_clip", sig, lambda h, a, s: h.tanh(a) * s + h.scalar(0.5, rlx.f32))
    g = rlx.Graph("symbolic_bodies")
    x, s = g.input("x", ("n", 4)), g.input("s", (4,))
    y = g.custom_fn([x, s], body=body)
    cond = sub("cond", [("v", ("n", 4), "f32")],
               lambda h, v: h.lt(h.reduce(h.abs(v), op="max", axes=[0, 1], keep_dim=False), h.scalar(8.0, rlx.f32)))
    grow = sub("grow", [("v", ("n", 4), "f32")], lambda h, v: v * 2.0 + 1.0)
    g.set_outputs([y, g.while_([y], cond=cond, body=grow, max_iterations=20)])
    exes = {b: rlx.compile(g, backend=b) for b in ("numpy", "jax", "torch", "onnxruntime")}
    proto = rlx.onnx.export(g, {})
    import onnxruntime as ort

    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (2, 5):
        feed = {"x": _f32(n, 4, seed=n), "s": _f32(4, seed=9)}
        want = np.tanh(feed["x"]) * feed["s"] + 0.5
        grown = want.copy()
        while np.abs(grown).max() < 8.0:
            grown = grown * 2.0 + 1.0
        runs = {"run": rlx.run(g, feed), "onnx": sess.run(None, feed), **{b: e.run(inputs=feed) for b, e in exes.items()}}
        for how, got in runs.items():
            np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-5, atol=1e-6, err_msg=how)
            np.testing.assert_allclose(np.asarray(got[1]), grown, rtol=1e-5, atol=1e-5, err_msg=how)
