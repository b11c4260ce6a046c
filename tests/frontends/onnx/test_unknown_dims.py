"""Input dims written as ``dim_value = 0``, ``-1`` or left out (as some exporters write "unknown")
become fresh symbols: one ``rlx.onnx.import_model`` graph runs at any size, and so do ``rlx run`` /
``rlx inspect`` on the file, checked against onnxruntime at two sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.cli.conftest import run_cli

import rlx
import rlx.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SIZES = [(2, 3, 8, 10), (1, 3, 12, 6)]


def _classifier() -> bytes:
    """A small image classifier as a converter writes it: batch / height / width declared 0, -1 and
    missing; Conv → Relu → MaxPool → Resize x2 → GlobalAveragePool → Flatten → Gemm →
    Softmax, plus a second output that reads the spatial size (Shape → Slice → Cast → ReduceProd)."""
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [0, 3, -1, None])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, [0, 5])
    area = helper.make_tensor_value_info("area", TensorProto.FLOAT, [-1])
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "fc"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(np.array([2], np.int64), "i2"),
             numpy_helper.from_array(np.array([4], np.int64), "i4")]
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Resize", ["p", "", "scales"], ["u"], mode="linear"),
             helper.make_node("GlobalAveragePool", ["u"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
             helper.make_node("Shape", ["u"], ["us"]),
             helper.make_node("Slice", ["us", "i2", "i4"], ["hw"]),
             helper.make_node("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceProd", ["hwf"], ["area"], keepdims=1)]
    graph = helper.make_graph(nodes, "classifier", [x], [probs, area], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _want(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    """onnxruntime's outputs for the file with its unknown dims written as names (onnxruntime takes a
    declared 0 literally and refuses any other size there)."""
    model = onnx.load_from_string(data)
    for vi in model.graph.input:
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_value <= 0 and not d.dim_param:
                d.Clear()
                d.dim_param = f"unknown{i}"
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": x})


def test_zero_minus_one_and_missing_dims_import_as_one_graph():
    data = _classifier()
    g, params = rlx.onnx.import_model(data)
    shape = g.inputs()["image"].shape
    assert shape[1] == 3 and not any(isinstance(shape[i], int) for i in (0, 2, 3))
    assert len({str(shape[i]) for i in (0, 2, 3)}) == 3  # three distinct fresh symbols
    exe = rlx.compile(g, backend="numpy")
    rng = np.random.default_rng(2)
    for size in SIZES:
        x = rng.standard_normal(size).astype(np.float32)
        want = _want(data, x)
        for how, got in [("run", rlx.run(g, {"image": x}, params)), ("numpy", exe.run({"image": x}, params))]:
            for w, o in zip(want, got):
                np.testing.assert_allclose(np.asarray(o), w, rtol=1e-4, atol=1e-5, err_msg=f"{how} at {size}")


def test_a_shapeless_input_asks_for_its_shape():
    """No declared shape at all (rank unknown): import_model says so; import_runnable imports per shape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    data = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(rlx.onnx.OnnxUnsupported, match=r"'x'.*rank"):
        rlx.onnx.import_model(data)
    a = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_array_equal(rlx.onnx.import_runnable(data).run({"x": a})[0], np.maximum(a, 0))


def test_cli_inspect_and_run_at_two_sizes(tmp_path):
    path = tmp_path / "classifier.onnx"
    data = _classifier()
    path.write_bytes(data)
    res = run_cli("inspect", path, "--json")
    assert res.rc == 0, res.err
    doc = json.loads(res.out)
    shape = doc["inputs"][0]["shape"]
    assert shape[1] == 3 and all(isinstance(shape[i], str) for i in (0, 2, 3))
    rng = np.random.default_rng(4)
    for k, size in enumerate(SIZES):
        x = rng.standard_normal(size).astype(np.float32)
        np.save(tmp_path / f"x{k}.npy", x)
        out = tmp_path / f"out{k}.npz"
        res = run_cli("run", path, "--input", f"image={tmp_path / f'x{k}.npy'}", "-o", out)
        assert res.rc == 0, res.err
        with np.load(out) as z:
            got = [z["output_0"], z["output_1"]]
        for w, o in zip(_want(data, x), got):
            np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-5, err_msg=f"rlx run at {size}")
