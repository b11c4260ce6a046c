"""CONTRIBUTING.md's worked examples, executed.

The elementwise-kind example is applied, as the one edit it claims to be, to a copy of the
package; a child process then checks every consumer the guide lists against torch (kernel,
type rule, gradient, JVP, vmap, activation_backward, jax and torch backends, ONNX export through
onnxruntime and back, torch.export import, the generated op case). The backend example is run
as written.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rlx
from rlx.runtime.compile import BACKENDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
MARKER = "    # new activation kinds go here"


def _example(name: str) -> str:
    found = re.search(rf"<!-- worked-example: {name} -->\n```python\n(.*?)```", GUIDE, re.S)
    assert found, f"CONTRIBUTING.md lost its {name} example"
    return found.group(1)


CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import torch
    import rlx
    import rlx.onnx

    x = np.array([[0.5, -2.0, 3.0], [1.5, -0.25, 4.0]])
    oracle = torch.reciprocal(torch.from_numpy(x)).numpy()

    def graph(dtype="f64"):
        g = rlx.Graph("r")
        xi = g.input("x", [2, 3], dtype)
        g.set_outputs([g.reciprocal(xi)])
        return g

    g = graph()
    np.testing.assert_allclose(rlx.run(g, {"x": x})[0], oracle, rtol=1e-12)
    np.testing.assert_allclose(rlx.compile(g).run(inputs={"x": x})[0], oracle, rtol=1e-12)   # arena
    for backend in ("jax", "torch"):
        np.testing.assert_allclose(rlx.compile(g, backend=backend).run(inputs={"x": x})[0], oracle, rtol=1e-12)
    try:
        graph("i32")
    except rlx.ShapeError as exc:
        assert "reciprocal" in str(exc)
    else:
        raise AssertionError("reciprocal accepted an int operand")

    t = torch.from_numpy(x).requires_grad_()
    torch.reciprocal(t).sum().backward()
    s = rlx.Graph("loss")
    si = s.input("x", [2, 3], "f64")
    s.set_outputs([s.sum(s.reciprocal(si))])
    np.testing.assert_allclose(rlx.run(rlx.grad(s, ["x"]), {"x": x, "d_output": np.array(1.0)})[0], t.grad.numpy(), rtol=1e-12)
    tangent = np.ones_like(x)
    jv = rlx.run(rlx.jvp(g, ["x"]), {"x": x, "t_x": tangent})[1]
    np.testing.assert_allclose(jv, -oracle * oracle, rtol=1e-12)
    b = rlx.Graph("bwd")
    bx, bdy = b.input("x", [2, 3], "f64"), b.input("dy", [2, 3], "f64")
    b.set_outputs([b.activation_backward(bx, bdy, kind="reciprocal")])
    np.testing.assert_allclose(rlx.run(b, {"x": x, "dy": 2.0 * tangent})[0], -2.0 * oracle * oracle, rtol=1e-12)
    batched = rlx.run(rlx.vmap(graph("f64"), {"x": 0}, batch_size=2), {"x": np.stack([x, 2 * x])})[0]
    np.testing.assert_allclose(batched, np.stack([oracle, oracle / 2]), rtol=1e-12)

    import onnxruntime as ort
    model = rlx.onnx.export(g, {})
    assert "Reciprocal" in [n.op_type for n in model.graph.node]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], oracle, rtol=1e-12)
    back, _ = rlx.onnx.import_model(model)
    assert [n.attrs.get("kind") for n in back.nodes if n.op == "activation"] == ["reciprocal"]

    class M(torch.nn.Module):
        def forward(self, a):
            return torch.reciprocal(a)

    tg, params = rlx.torch.import_module(M(), (torch.from_numpy(x),))
    assert any(n.op == "activation" and n.attrs["kind"] == "reciprocal" for n in tg.nodes)

    sys.path.insert(0, sys.argv[1])
    from ops.cases_elementwise import CASES
    case = next(c for c in CASES if c.id == "activation-reciprocal")
    got, want = rlx.run(case.graph()[0], *case.split_feed())[0], np.asarray(case.expected()[0])
    np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
    print("ok")
''')


def test_adding_an_elementwise_kind_is_one_edit(tmp_path):
    for lib in ("jax", "onnx", "onnxruntime", "torch"):
        pytest.importorskip(lib)
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "rlx", src / "rlx", ignore=shutil.ignore_patterns("__pycache__"))
    kinds = src / "rlx" / "ops" / "kinds.py"
    text = kinds.read_text(encoding="utf-8")
    assert text.count(MARKER) == 1
    kinds.write_text(text.replace(MARKER, _example("kind") + MARKER), encoding="utf-8")
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=1", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(ROOT / "tests")], env=env,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


COMPOSITE_CHILD = textwrap.dedent('''
    import numpy as np
    import onnxruntime as ort
    import torch
    import rlx
    import rlx.onnx
    from rlx.backends.jax.lowering import coverage as jax_coverage
    from rlx.backends.torch_backend.lowering import LOWERINGS, TABLE, TORCH
    from rlx.ops import rows

    x = np.random.default_rng(0).standard_normal((3, 5))
    oracle = torch.log_softmax(torch.from_numpy(x), dim=0).numpy()

    def graph():
        g = rlx.Graph("ls")
        g.set_outputs([g.log_softmax(g.input("x", [3, 5], "f64"), axis=0)])
        return g

    g = graph()
    np.testing.assert_allclose(rlx.run(g, {"x": x})[0], oracle, rtol=1e-12)
    for backend in ("numpy", "jax", "torch"):
        np.testing.assert_allclose(rlx.compile(g, backend=backend).run({"x": x})[0], oracle, rtol=1e-12)
    assert jax_coverage()["log_softmax"] == "lowered" and TABLE.how("log_softmax") == "lowered"

    t = torch.from_numpy(x).requires_grad_()
    w = torch.linspace(-1.0, 1.0, 15, dtype=torch.float64).reshape(3, 5)
    (torch.log_softmax(t, dim=0) * w).sum().backward()
    s = rlx.Graph("loss")
    si = s.input("x", [3, 5], "f64")
    s.set_outputs([s.sum(s.log_softmax(si, axis=0) * s.constant(w.numpy()))])
    grad = rlx.run(rlx.grad(s, ["x"]), {"x": x, "d_output": np.array(1.0)})[0]
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-10, atol=1e-12)
    tangent = np.random.default_rng(1).standard_normal((3, 5))
    _, want_t = torch.func.jvp(lambda a: torch.log_softmax(a, dim=0), (torch.from_numpy(x),), (torch.from_numpy(tangent),))
    np.testing.assert_allclose(rlx.run(rlx.jvp(g, ["x"]), {"x": x, "t_x": tangent})[1], want_t.numpy(), rtol=1e-10, atol=1e-12)
    batched = rlx.run(rlx.vmap(graph(), {"x": 0}, batch_size=2), {"x": np.stack([x, 2 * x])})[0]
    np.testing.assert_allclose(batched[1], torch.log_softmax(torch.from_numpy(2 * x), dim=0).numpy(), rtol=1e-12)

    model = rlx.onnx.export(g, {})
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], oracle, rtol=1e-12)

    node = g.nodes[-1]
    xt = torch.from_numpy(x)
    assert LOWERINGS["log_softmax"].__name__ == "_log_softmax"  # the fast path replaced the row
    np.testing.assert_allclose(LOWERINGS["log_softmax"]([xt], node.attrs, node.type).numpy(),
                               rows.log_softmax(TORCH, [xt], node.attrs, node.type).numpy(), rtol=1e-12)
    print("ok")
''')


def _applied(tmp_path, edits):
    """A copy of the package with ``edits`` ((file, marker or None to append, example name)) applied."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "rlx", src / "rlx", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, marker, name in edits:
        path = src / "rlx" / rel
        text = path.read_text(encoding="utf-8")
        if marker is None:
            text = text.rstrip("\n") + "\n\n\n" + _example(name)
        else:
            assert text.count(marker) == 1, f"{rel} lost its marker {marker!r}"
            text = text.replace(marker, _example(name) + "\n\n" + marker)
        path.write_text(text, encoding="utf-8")
    return src


def test_adding_a_composite_op_is_one_row_and_a_defop(tmp_path):
    for lib in ("jax", "onnx", "onnxruntime", "torch"):
        pytest.importorskip(lib)
    src = _applied(tmp_path, [("ops/rows.py", "# new composite rows go here", "composite-row"),
                              ("ops/reduction.py", "# new composite ops go here", "composite-op"),
                              ("backends/torch_backend/lowering.py", None, "composite-fast-path")])
    (tmp_path / "child.py").write_text(COMPOSITE_CHILD, encoding="utf-8")
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=1", "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1"}
    res = subprocess.run([sys.executable, str(tmp_path / "child.py")], env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_the_backend_example_registers_and_runs():
    namespace: dict = {}
    exec(compile(_example("backend"), "CONTRIBUTING.md", "exec"), namespace)
    try:
        g = rlx.Graph("m")
        x, w = g.input("x", [2, 3], "f32"), g.param("w", [3], "f32")
        g.set_outputs([g.tanh(x * w)])
        feed = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) / 4}
        w_value = np.array([1.0, -0.5, 2.0], np.float32)
        got = rlx.compile(g, backend="eager", params={"w": w_value}).run(inputs=feed)[0]
        np.testing.assert_allclose(got, np.tanh(feed["x"] * w_value), rtol=1e-6)
    finally:
        BACKENDS.pop("eager", None)
