"""Graph building: operators, registry-driven builder methods, names, leaves, equality."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import rlx
from rlx.ir.opdef import builder_methods


def test_operators_and_scalars():
    g = rlx.Graph("ops")
    x = g.input("x", (2, 3), "f16")
    y = ((x + 1) * 2.0 - x / 4) ** 2
    z = -y
    assert y.dtype == rlx.f16 and z.shape == (2, 3)
    g.set_outputs([z, 2.5 - x])
    xv = np.arange(6, dtype=np.float16).reshape(2, 3)
    out, back = rlx.run(g, {"x": xv})
    ref = -(((xv.astype(np.float32) + 1) * 2 - xv / 4) ** 2)
    np.testing.assert_allclose(out, ref.astype(np.float16), rtol=2e-3)
    np.testing.assert_allclose(back, (2.5 - xv.astype(np.float32)).astype(np.float16))


def test_int_operands_are_node_ids_in_builders():
    g = rlx.Graph("ids")
    a = g.input("a", (3,))
    b = g.exp(a.id)  # an int is a node id
    assert g.node(b).inputs == (a.id,)
    with pytest.raises(rlx.RlxError, match="%99 does not exist"):
        g.exp(99)


def test_values_from_another_graph_rejected():
    g1, g2 = rlx.Graph("a"), rlx.Graph("b")
    x = g1.input("x", (1,))
    with pytest.raises(rlx.RlxError, match="belongs to graph 'a', not 'b'"):
        g2.exp(x)


def test_every_registered_method_dispatches():
    g = rlx.Graph("m")
    for method, (op, _preset) in builder_methods().items():
        assert callable(getattr(g, method)), method
        assert rlx.get_op(op).name == op


def test_unknown_method_and_attribute():
    g = rlx.Graph("u")
    x = g.input("x", (2,))
    with pytest.raises(AttributeError, match="no attribute or op builder 'frobnicate'"):
        g.frobnicate(x)
    with pytest.raises(rlx.AttributeSchemaError, match="unknown attribute 'axis'"):
        g.exp(x, axis=0)
    with pytest.raises(rlx.AttributeSchemaError, match=r"activation\.kind"):
        g.activation(x, kind="gelu2")


def test_leaves_names_outputs():
    g = rlx.Graph("leaves")
    x = g.input("x", ("batch", 4))
    w = g.param("w", (4,), "bf16")
    y = g.mul(x, w, name="scaled")
    g.set_outputs([y, x])
    assert list(g.inputs()) == ["x"] and list(g.params()) == ["w"]
    assert g.inputs()["x"] == x and y.name == "scaled" and y.dtype == rlx.f32
    assert g.outputs == [y.id, x.id] and len(g) == 3
    assert g.users()[x.id] == [y.id]


def test_structural_equality():
    def build(kind):
        g = rlx.Graph("eq")
        g.set_outputs([g.activation(g.input("x", (2,)), kind=kind)])
        return g

    assert build("exp") == build("exp")
    assert build("exp") != build("log")


def test_constants_copy_and_freeze():
    arr = np.ones(3, np.float32)
    g = rlx.Graph("c")
    c = g.constant(arr)
    arr[0] = 5
    assert g.node(c).attrs["value"].array[0] == 1
    (out,) = (lambda: (g.set_outputs([c]), rlx.run(g))[1])()
    np.testing.assert_array_equal(out, np.ones(3, np.float32))


def test_custom_op_through_the_public_door(temporary_op):
    temporary_op(rlx.OpDef(
        name="test_square_plus", family="custom", arity=1, operands=("x",),
        attrs={"bias": rlx.AttrSpec("float", default=0.0)},
        infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0] ** 2 + attrs["bias"],
        doc="x**2 + bias (test-only custom op)"))
    g = rlx.Graph("custom")
    x = g.input("x", (3,))
    g.set_outputs([g.test_square_plus(x, bias=1.5)])
    rlx.verify(g)
    assert rlx.parse(str(g)) == g
    (out,) = rlx.run(g, {"x": np.array([1, 2, 3], np.float32)})
    np.testing.assert_allclose(out, [2.5, 5.5, 10.5])
    with pytest.raises(rlx.RlxError, match="already registered"):
        rlx.register_op(rlx.get_op("test_square_plus"))


def test_feed_errors_are_all_reported():
    g = rlx.Graph("feed")
    x = g.input("x", ("n", 3))
    y = g.input("y", ("n",))
    w = g.param("w", (3,))
    g.set_outputs([x * w, y])
    with pytest.raises(rlx.FeedError) as info:
        rlx.run(g, {"x": np.zeros((2, 3), np.float64), "y": np.zeros(5, np.float32), "z": 1}, {})
    text = str(info.value)
    for needle in ("dtype float64 given, f32 declared", "unknown input 'z'", "missing param 'w'"):
        assert needle in text
    with pytest.raises(rlx.FeedError, match="symbol 'n' = 2 elsewhere, but 5 here"):
        rlx.run(g, {"x": np.zeros((2, 3), np.float32), "y": np.zeros(5, np.float32)}, {"w": np.zeros(3, np.float32)})
    with pytest.raises(rlx.FeedError, match="it is a param"):
        rlx.run(g, {"x": np.zeros((2, 3), np.float32), "y": np.zeros(2, np.float32), "w": np.zeros(3, np.float32)})


def test_import_loads_only_numpy_and_ml_dtypes():
    code = (
        "import sys; before = set(sys.modules); import rlx; new = set(sys.modules) - before;"
        "roots = {m.split('.')[0] for m in new};"
        "import json; print(json.dumps(sorted(r for r in roots if not r.startswith('_'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    roots = set(json.loads(out))
    stdlib = set(sys.stdlib_module_names)
    assert roots - stdlib <= {"rlx", "numpy", "ml_dtypes"}, roots - stdlib


def test_import_without_ml_dtypes_works_and_bf16_names_the_missing_package():
    """ml_dtypes is a core dependency, but an environment without it still imports rlx and runs
    f32 graphs; only bf16 / fp8 storage fails, with an error that says what to install."""
    code = (
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import numpy as np, rlx\n"
        "g = rlx.Graph('g'); x = g.input('x', [3], 'f32'); g.set_outputs([g.exp(x) + 1.0])\n"
        "print(rlx.run(g, {'x': np.zeros(3, np.float32)})[0].tolist())\n"
        "print(rlx.DType.BF16.itemsize)\n"
        "try:\n    rlx.DType.BF16.numpy\nexcept rlx.RlxError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[2.0, 2.0, 2.0]" and out[1] == "2"
    assert "pip install ml_dtypes" in out[2]
