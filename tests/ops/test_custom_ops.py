"""The extension points end to end: ``rlx.custom_op`` (the worked example of docs/custom_ops.md)
and ``custom_fn`` with custom derivative bodies. The generic op-case runners cover
``custom_fn`` through tests/ops/cases_custom.py; this module checks what they cannot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from finite_diff import fd_gradient
from opcases import sub

DOC = Path(__file__).resolve().parents[2] / "docs" / "custom_ops.md"


def doc_blocks() -> list[str]:
    """The ```python blocks of docs/custom_ops.md, in order."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 4, "docs/custom_ops.md should hold the worked example"
    return blocks


@pytest.fixture
def softplus(custom_cleanup):
    """Registers ``scaled_softplus`` by running the doc's first code block; returns its namespace."""
    ns: dict = {}
    exec(compile(doc_blocks()[0], str(DOC), "exec"), ns)
    assert "scaled_softplus" in rlx.custom_ops()
    return ns


def oracle(x, beta):
    return np.logaddexp(0.0, beta * x) / beta


X = np.random.default_rng(0).standard_normal((2, 3)) * 3


def _softplus_graph(beta=1.5):
    g = rlx.Graph("sp")
    x = g.input("x", (2, 3), "f64")
    g.set_outputs([g.scaled_softplus(x, beta=beta)])
    return g


# ------------------------------------------------------------------------------ docs
def test_doc_code_blocks_run(custom_cleanup):
    ns: dict = {}
    for k, block in enumerate(doc_blocks()):
        exec(compile(block, f"{DOC}[block {k}]", "exec"), ns)


def test_registering_does_not_import_jax():
    code = ("import sys, rlx\n"
            f"exec(compile(open({str(DOC)!r}).read().split('```python')[1].split('```')[0], 'doc', 'exec'))\n"
            "assert 'scaled_softplus' in rlx.custom_ops()\n"
            "assert 'jax' not in sys.modules, 'custom_op imported jax'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ------------------------------------------------------------------------------ custom op end to end
def test_custom_op_build_verify_run_text(softplus):
    g = _softplus_graph()
    rlx.verify(g)
    node = g.nodes[-1]
    assert node.op == "scaled_softplus" and node.attrs == {"beta": 1.5}
    (y,) = rlx.run(g, {"x": X})
    np.testing.assert_allclose(y, oracle(X, 1.5), rtol=1e-12)
    text = str(g)
    assert "scaled_softplus" in text and rlx.parse(text) == g
    default = rlx.Graph("d")
    default.set_outputs([default.scaled_softplus(default.input("x", (3,), "f32"))])
    assert default.nodes[-1].attrs["beta"] == 1.0
    with pytest.raises(rlx.ShapeError, match="beta must be > 0"):
        default.scaled_softplus(default.input("y", (3,), "f32"), beta=-1.0)
    with pytest.raises(rlx.ShapeError, match="float tensor"):
        default.scaled_softplus(default.input("i", (3,), "i32"))
    with pytest.raises(rlx.AttributeSchemaError, match="unknown attribute"):
        default.scaled_softplus(default.input("z", (3,), "f32"), alpha=2.0)


def test_custom_op_save_load(softplus, tmp_path):
    g = _softplus_graph()
    path = tmp_path / "sp.rlx.json"
    rlx.save(g, path)
    back = rlx.load(path)
    assert back == g and rlx.fingerprint(back) == rlx.fingerprint(g)
    np.testing.assert_allclose(rlx.run(back, {"x": X})[0], oracle(X, 1.5))
    text = rlx.to_json(g)
    rlx.unregister_custom_op("scaled_softplus")
    with pytest.raises(rlx.FormatError, match="scaled_softplus"):
        rlx.load(path)
    with pytest.raises(rlx.FormatError, match="unknown op 'scaled_softplus'"):
        rlx.from_json(text)
    with pytest.raises(rlx.ParseError):
        rlx.parse(str(g))


def test_custom_op_grad_jvp_against_finite_differences(softplus):
    g = rlx.Graph("loss")
    x = g.input("x", (2, 3), "f64")
    w = g.input("w", (2, 3), "f64")
    g.set_outputs([g.sum(g.scaled_softplus(x * w, beta=0.7) * w)])
    feed = {"x": X, "w": np.random.default_rng(1).standard_normal((2, 3))}
    bwd = rlx.grad(g, ["x", "w"])
    rlx.verify(bwd)
    dx, dw = rlx.run(bwd, {**feed, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dx, fd_gradient(g, feed, "x"), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, fd_gradient(g, feed, "w"), rtol=1e-6, atol=1e-7)
    t = np.random.default_rng(2).standard_normal((2, 3))
    _, tangent = rlx.run(rlx.jvp(g, ["x"]), {**feed, "t_x": t})
    np.testing.assert_allclose(tangent, np.sum(dx * t), rtol=1e-9)


def test_custom_op_vmap_matches_loop(softplus):
    h = rlx.Graph("row")
    v = h.input("v", (3,), "f64")
    s = h.input("s", (3,), "f64")
    h.set_outputs([h.scaled_softplus(v * s, beta=2.0)])
    batched = rlx.vmap(h, {"v": 0}, batch_size=2)  # s shared
    s0 = np.array([1.0, -2.0, 0.5])
    (out,) = rlx.run(batched, {"v": X, "s": s0})
    for b in range(2):
        np.testing.assert_allclose(out[b], rlx.run(h, {"v": X[b], "s": s0})[0], rtol=1e-12)


def test_custom_op_compiles_for_numpy_and_jax(softplus):
    g = _softplus_graph()
    want = oracle(X, 1.5)
    np.testing.assert_allclose(rlx.compile(g, backend="numpy").run({"x": X})[0], want, rtol=1e-12)
    pytest.importorskip("jax")
    from rlx.backends.jax import LOWERINGS

    assert LOWERINGS["scaled_softplus"] is softplus["softplus_jax"]
    x32 = X.astype(np.float32)
    g32 = rlx.Graph("sp32")
    g32.set_outputs([g32.scaled_softplus(g32.input("x", (2, 3), "f32"), beta=1.5)])
    (got,) = rlx.compile(g32, backend="jax").run({"x": x32})
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, oracle(x32.astype(np.float64), 1.5), rtol=1e-5, atol=1e-6)
    rlx.unregister_custom_op("scaled_softplus")
    assert "scaled_softplus" not in LOWERINGS


def test_jax_lowering_registered_after_the_backend_loaded(custom_cleanup):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from rlx.backends.jax import LOWERINGS, coverage

    rlx.custom_op("test_twice", infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: 2 * args[0],
                  jax=lambda args, attrs, out: 2 * jnp.asarray(args[0]), batch="elementwise")
    assert "test_twice" in LOWERINGS and coverage()["test_twice"] == "lowered"
    g = rlx.Graph("t")
    g.set_outputs([g.test_twice(g.input("x", (3,), "f32"))])
    np.testing.assert_allclose(rlx.compile(g, backend="jax").run({"x": np.arange(3, dtype=np.float32)})[0], [0, 2, 4])
    # replaced without a lowering: the old lowering goes, host_fallback runs the NumPy kernel
    rlx.custom_op("test_twice", infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: 3 * args[0], replace=True)
    assert "test_twice" not in LOWERINGS
    g2 = rlx.Graph("t2")
    g2.set_outputs([g2.test_twice(g2.input("x", (3,), "f32"))])
    with pytest.raises(rlx.RlxError, match="no lowering for op 'test_twice'"):
        rlx.compile(g2, backend="jax").run({"x": np.ones(3, np.float32)})
    got = rlx.compile(g2, backend="jax", host_fallback=True).run({"x": np.ones(3, np.float32)})[0]
    np.testing.assert_allclose(got, [3, 3, 3])


# ------------------------------------------------------------------------------ registration rules
def test_registration_errors(custom_cleanup):
    def ident(ins, attrs):
        return ins[0]

    def kern(args, attrs, out):
        return args[0]

    with pytest.raises(rlx.RlxError, match="built-in"):
        rlx.custom_op("matmul", infer=ident, kernel=kern)
    with pytest.raises(rlx.RlxError, match="built-in"):
        rlx.custom_op("matmul", infer=ident, kernel=kern, replace=True)
    with pytest.raises(rlx.RlxError, match="clashes with the Graph attribute"):
        rlx.custom_op("set_outputs", infer=ident, kernel=kern)
    with pytest.raises(rlx.RlxError, match="identifier"):
        rlx.custom_op("my-op", infer=ident, kernel=kern)
    with pytest.raises(rlx.RlxError, match="unknown batch rule"):
        rlx.custom_op("test_b", infer=ident, kernel=kern, batch="rowwise")
    assert "test_b" not in rlx.custom_ops() and not any(op.name == "test_b" for op in rlx.all_ops())
    rlx.custom_op("test_ident", infer=ident, kernel=kern)
    with pytest.raises(rlx.RlxError, match="already registered"):
        rlx.custom_op("test_ident", infer=ident, kernel=kern)
    with pytest.raises(rlx.RlxError, match=r"not registered with rlx\.custom_op"):
        rlx.unregister_custom_op("matmul")
    rlx.unregister_custom_op("test_ident")
    with pytest.raises(rlx.RlxError, match="unknown custom op"):
        rlx.unregister_custom_op("test_ident")
    with pytest.raises(AttributeError):
        rlx.Graph("g").test_ident(1)


def test_missing_rules_are_errors_and_no_grad_is_declared(custom_cleanup):
    rlx.custom_op("test_floor2", operands=("x", "y"), infer=lambda ins, attrs: ins[0],
                  kernel=lambda args, attrs, out: np.floor(args[0]) + np.floor(args[1]))
    g = rlx.Graph("g")
    x = g.input("x", (3,), "f64")
    g.set_outputs([g.sum(g.test_floor2(x, x))])
    with pytest.raises(rlx.AutodiffError, match="test_floor2"):
        rlx.grad(g, ["x"])
    rlx.custom_op("test_floor2", operands=("x", "y"), infer=lambda ins, attrs: ins[0],
                  kernel=lambda args, attrs, out: np.floor(args[0]) + np.floor(args[1]), no_grad=True,
                  batch="elementwise", replace=True)
    h = rlx.Graph("h")
    y = h.input("x", (3,), "f64")
    h.set_outputs([h.sum(h.test_floor2(y, y) + y)])
    (dx,) = rlx.run(rlx.grad(h, ["x"]), {"x": np.array([0.5, 1.5, -2.5]), "d_output": np.array(1.0)})
    np.testing.assert_allclose(dx, np.ones(3))


# ------------------------------------------------------------------------------ custom_fn
SIG = [("x", (4,), "f64")]
WS = np.array([0.2, 0.7, -1.4, 2.6])


def _ste_graph(custom: bool, jvp: bool = False) -> rlx.Graph:
    body = sub("trunc", SIG, lambda h, x: h.cast(h.cast(x, to="i32"), to="f64"))  # true derivative 0
    extra = {}
    if custom:
        extra["vjp_body"] = sub("vjp", [*SIG, ("d_output", (4,), "f64")], lambda h, x, d: d)
    if jvp:
        extra["jvp_body"] = sub("jvp", [*SIG, ("tangent_0", (4,), "f64")], lambda h, x, t: t)
    g = rlx.Graph("ste")
    w = g.input("w", (4,), "f64")
    g.set_outputs([g.sum(g.custom_fn([w], body=body, **extra) * w)])
    return g


def test_custom_fn_uses_the_custom_vjp():
    truncated = np.trunc(WS)
    seed = {"w": WS, "d_output": np.array(1.0)}
    (true_grad,) = rlx.run(rlx.grad(_ste_graph(custom=False), ["w"]), seed)
    np.testing.assert_allclose(true_grad, truncated)  # d trunc / dw = 0: only the outer factor
    (ste_grad,) = rlx.run(rlx.grad(_ste_graph(custom=True), ["w"]), seed)
    np.testing.assert_allclose(ste_grad, truncated + WS)  # straight through: d trunc / dw = 1
    # without a jvp_body the JVP differentiates body (documented); with one it is used
    t = np.ones(4)
    np.testing.assert_allclose(rlx.run(rlx.jvp(_ste_graph(custom=True), ["w"]), {"w": WS, "t_w": t})[1], truncated.sum())
    np.testing.assert_allclose(rlx.run(rlx.jvp(_ste_graph(custom=True, jvp=True), ["w"]), {"w": WS, "t_w": t})[1],
                               (truncated + WS).sum())


def test_custom_vjp_survives_vmap():
    g = _ste_graph(custom=True, jvp=True)
    rows = np.stack([WS, -WS * 0.5])
    per_example = rlx.vmap(rlx.grad(g, ["w"]), {"w": 0, "d_output": None}, batch_size=2)
    (got,) = rlx.run(per_example, {"w": rows, "d_output": np.array(1.0)})
    truncated = np.trunc(rows)
    np.testing.assert_allclose(got, truncated + rows)
    # grad of a vmapped custom_fn: the vmapped vjp_body is used
    batched = rlx.vmap(g, {"w": 0}, batch_size=2)
    h = rlx.Graph("total")
    w = h.input("w", (2, 4), "f64")
    (inner,) = rlx.ops.control_flow.inline(h, batched, {"w": w})
    h.set_outputs([h.sum(inner)])
    assert any(n.op == "custom_fn" and n.attrs["vjp_body"] is not None for n in batched.nodes)
    (dw,) = rlx.run(rlx.grad(h, ["w"]), {"w": rows, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dw, truncated + rows)


def test_custom_fn_vmap_with_shared_operand_sums_its_gradient():
    sig = [("x", (3,), "f64"), ("s", (3,), "f64")]
    body = sub("mul", sig, lambda h, x, s: x * s)
    vjp = sub("vjp", [*sig, ("d_output", (3,), "f64")], lambda h, x, s, d: [d * s * 2.0, d * x * 2.0])  # deliberately 2x
    g = rlx.Graph("f")
    x, s = g.input("x", (3,), "f64"), g.input("s", (3,), "f64")
    g.set_outputs([g.custom_fn([x, s], body=body, vjp_body=vjp)])
    batched = rlx.vmap(g, {"x": 0}, batch_size=2)
    h = rlx.Graph("loss")
    bx, bs = h.input("x", (2, 3), "f64"), h.input("s", (3,), "f64")
    (y,) = rlx.ops.control_flow.inline(h, batched, {"x": bx, "s": bs})
    h.set_outputs([h.sum(y)])
    xs, s0 = X, np.array([1.0, 2.0, 3.0])
    dx, ds = rlx.run(rlx.grad(h, ["x", "s"]), {"x": xs, "s": s0, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dx, 2.0 * np.broadcast_to(s0, (2, 3)))
    np.testing.assert_allclose(ds, 2.0 * xs.sum(0))


def test_custom_fn_save_load_and_jax(tmp_path):
    g = _ste_graph(custom=True, jvp=True)
    rlx.save(g, tmp_path / "ste.json")
    back = rlx.load(tmp_path / "ste.json")
    assert back == g
    (dw,) = rlx.run(rlx.grad(back, ["w"]), {"w": WS, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dw, np.trunc(WS) + WS)
    pytest.importorskip("jax")
    h = rlx.Graph("f32")
    w = h.input("w", (4,), "f32")
    body = sub("body", [("x", (4,), "f32")], lambda s, x: s.sin(x) * x)
    h.set_outputs([h.custom_fn([w], body=body)])
    w32 = WS.astype(np.float32)
    (got,) = rlx.compile(h, backend="jax").run({"w": w32})
    np.testing.assert_allclose(got, rlx.run(h, {"w": w32})[0], rtol=1e-6)
