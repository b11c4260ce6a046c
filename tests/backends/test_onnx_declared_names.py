"""Declared types are checked on import; ONNX names survive import, optimize, plan and export.

Every value the model declares (``value_info`` and graph outputs) is compared with what rlx
computes: a disagreement, from the file or from a converter bug, is a ``DeclaredTypeError``
naming the value and the node, never a silent cast. Names: a torch export with named inputs
and outputs goes through import -> optimize -> plan -> export and comes back with the same
input / output names (onnx.checker full check, numbers vs onnxruntime), and the rlx nodes are
named after the ONNX values they compute.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_context  # noqa: E402
from rlx.ir.onnx_format import DeclaredTypeError  # noqa: E402

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, value_info=()) -> onnx.ModelProto:
    info = lambda rows: [helper.make_tensor_value_info(*r) for r in rows]
    g = helper.make_graph(nodes, "m", info(inputs), info(outputs), value_info=info(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


RELU_NEG = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Neg", ["h"], ["y"], name="neg")]


def test_consistent_declarations_import():
    m = model(RELU_NEG, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, "n"])],
              [("h", TensorProto.FLOAT, [2, 3])])
    g, params = rlx.onnx.import_model(m)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(rlx.run(g, {"x": x}, params)[0], -np.maximum(x, 0))


@pytest.mark.parametrize(("info", "match"), [
    (("h", TensorProto.INT64, [2, 3]), r"Relu node 'relu': value 'h' is declared i64 but rlx computes f32"),
    (("h", TensorProto.FLOAT, [2, 4]), r"Relu node 'relu': value 'h' is declared with shape \[2, 4\] but rlx computes \[2, 3\]"),
    (("h", TensorProto.FLOAT, [6]), r"value 'h' is declared with shape \[6\]"),
])
def test_value_info_disagreeing_with_rlx_is_an_error(info, match):
    m = model(RELU_NEG, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, None)], [info])
    with pytest.raises(DeclaredTypeError, match=match):
        rlx.onnx.import_model(m)


def test_graph_output_declared_another_dtype_is_an_error_not_a_cast():
    m = model(RELU_NEG, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.DOUBLE, [2, 3])])
    with pytest.raises(DeclaredTypeError, match="value 'y' is declared f64 but rlx computes f32"):
        rlx.onnx.import_model(m)


def test_a_converter_bug_cannot_pass_silently(monkeypatch):
    """A converter that drops a row (the kind of bug the Slice / ConvTranspose fixes were) is caught."""
    real = import_context.CONVERTERS["Relu"]

    def buggy(cx, node, ins, attrs):
        return real(cx, node, [cx.g.narrow(ins[0], axis=0, start=0, length=1)], attrs)

    monkeypatch.setitem(import_context.CONVERTERS, "Relu", buggy)
    m = model(RELU_NEG, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])])
    with pytest.raises(DeclaredTypeError, match=r"Neg node 'neg': value 'y' is declared with shape \[2, 3\] but rlx computes \[1, 3\]"):
        rlx.onnx.import_model(m)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, pixels):
        h = torch.relu(self.conv(pixels)).mean(dim=(2, 3))
        return self.fc(h), h.sum(dim=1)


def test_names_survive_import_optimize_plan_export():
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Block().eval(), (torch.from_numpy(x),), buf, dynamo=False, opset_version=17,
                          input_names=["pixels"], output_names=["logits", "energy"])
    source = onnx.load_from_string(buf.getvalue())
    g, params = rlx.onnx.import_model(source)
    assert [o.name for o in g.outputs] == ["logits", "energy"]
    onnx_values = {o for n in source.graph.node for o in n.output}
    named = {n.name for n in g.nodes if n.name and n.op not in ("input", "param")}
    assert named <= onnx_values and len(named) >= 4  # rlx nodes carry the ONNX value names
    g, _ = rlx.optimize(g)
    lir = rlx.plan(g)
    back = rlx.onnx.export(lir.graph, params)  # runs onnx.checker (full check)
    assert [i.name for i in back.graph.input] == ["pixels"]
    assert [o.name for o in back.graph.output] == ["logits", "energy"]
    assert {n.name for n in back.graph.node if n.name} & onnx_values  # ONNX nodes named after their values
    want = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"]).run(None, {"pixels": x})
    got = ort.InferenceSession(back.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"pixels": x})
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
