"""ONNX import: mapping, folding of static shape chains, errors, and the light models of the onnx wheel."""

from __future__ import annotations

import glob
import os
import sys

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx.onnx  # noqa: E402

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT = sorted(glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_import_does_not_need_onnx_at_rlx_import():
    code = "import sys, rlx; assert 'onnx' not in sys.modules; import rlx.onnx; assert 'onnx' not in sys.modules; print('ok')"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert rlx.onnx.import_model is not None


def test_shape_chain_is_folded_into_a_reshape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Concat", ["d0u", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [helper.make_tensor("i0", TensorProto.INT64, [], [0]), helper.make_tensor("ax", TensorProto.INT64, [1], [0]),
             helper.make_tensor("m1", TensorProto.INT64, [1], [-1])]
    m = _model(nodes, [x], [y], inits)
    g, params = rlx.onnx.import_model(m)
    ops = [n.op for n in g.nodes]
    assert ops == ["input", "reshape"], ops
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(rlx.run(g, {"x": xv}, params)[0], xv.reshape(2, 12))


def test_gemm_batchnorm_decompose_and_match_onnxruntime():
    r = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [3], r.random(3).astype(np.float32) + 0.5) for n in ("s", "b", "m", "v")]
    inits.append(helper.make_tensor("w", TensorProto.FLOAT, [75, 4], r.standard_normal(300).astype(np.float32)))
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
             helper.make_node("HardSigmoid", ["bn"], ["hs"]),
             helper.make_node("Flatten", ["hs"], ["f"]),
             helper.make_node("Gemm", ["f", "w"], ["y"], alpha=0.5)]
    m = _model(nodes, [x], [y], inits)
    g, params = rlx.onnx.import_model(m)
    assert set(params) == {"s", "b", "m", "v", "w"}
    feed = {"x": r.standard_normal((2, 3, 5, 5)).astype(np.float32)}
    np.testing.assert_allclose(rlx.run(g, feed, params)[0], _ort(m, feed)[0], rtol=1e-5, atol=1e-5)


def test_unsupported_ops_are_listed_with_counts():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"], domain="com.example"),
             helper.make_node("Frobnicate", ["a"], ["b"], domain="com.example"),
             helper.make_node("ImageDecoder", ["b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    with pytest.raises(rlx.onnx.UnsupportedOpsError) as info:
        rlx.onnx.import_model(_model(nodes, [x], [y]))
    assert info.value.counts == {"com.example.Frobnicate": 2, "ImageDecoder": 1}
    assert "com.example.Frobnicate x2" in str(info.value) and "ImageDecoder x1" in str(info.value)


def test_function_body_fallback_mean_variance_normalization():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], [x], [y], opset=13)
    g, params = rlx.onnx.import_model(m)
    feed = {"x": np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    np.testing.assert_allclose(rlx.run(g, feed, params)[0], _ort(m, feed)[0], rtol=1e-4, atol=1e-5)


def _with_pre_softmax_output(model):
    """The light models end in a softmax over equal logits (their weights are constant splats), so the
    probabilities are uniform; also expose the softmax input so the comparison sees the whole network."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    soft = [n for n in out.graph.node if n.op_type == "Softmax"]
    if soft:
        out.graph.output.append(helper.make_tensor_value_info(soft[-1].input[0], TensorProto.FLOAT, None))
    return out


@pytest.mark.skipif(not LIGHT, reason="the installed onnx wheel ships no light models")
@pytest.mark.parametrize("path", LIGHT, ids=lambda p: os.path.basename(p)[6:-5])
def test_light_model_import_optimize_plan_run(path):
    model = _with_pre_softmax_output(onnx.load(path))
    g, params = rlx.onnx.import_model(model)
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(tuple(v.shape)).astype(v.dtype.numpy) for k, v in g.inputs().items()}
    opt, _ = rlx.optimize(g)
    lir = rlx.plan(opt)
    got = rlx.compile(lir).run(inputs=feeds, params=params)
    want = _ort(model, feeds)
    assert len(got) == len(want) == len(model.graph.output)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * float(np.max(np.abs(b))))
    assert float(np.max(np.abs(want[-1]))) > 0


def test_nine_light_models_are_shipped():
    names = {os.path.basename(p)[6:-5] for p in LIGHT}
    assert names == {"bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
                     "vgg19", "zfnet512"}, names
