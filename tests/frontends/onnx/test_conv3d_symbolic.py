"""ONNX Conv / ConvTranspose with 3-D spatial input and a symbolic batch (and height / width), imported
once through the shared ``rlx.frontends.conv3d`` (the torch reader's too) and checked against onnxruntime
at two input sizes: asymmetric pads, auto_pad SAME on symbolic sizes, groups, dilation, output_padding,
output_shape (its sizes static: the pads are derived from them), and output_shape's odd padding split."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
import rlx.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _model(op: str, wshape: tuple[int, ...], xshape: list, **attrs) -> bytes:
    w = np.random.default_rng(1).standard_normal(wshape).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(wshape[0 if op == "Conv" else 1] * attrs.get("group", 1)
                                                  if op == "ConvTranspose" else wshape[0]).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)], "conv3d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.reshape(-1).tolist()),
         helper.make_tensor("b", TensorProto.FLOAT, list(b.shape), b.tolist())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _check(model: bytes, shapes: list[tuple[int, ...]]) -> None:
    g, params = rlx.onnx.import_model(model)
    assert not g.inputs()["x"].shape.is_static  # one graph for every batch size
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for shape in shapes:
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        (got,) = rlx.run(g, {"x": x}, params)
        assert got.shape == want.shape, shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(shape))


@pytest.mark.parametrize("attrs", [
    {"pads": [1, 0, 1, 0, 1, 1], "strides": [2, 1, 2]},
    {"group": 2, "dilations": [2, 1, 1], "pads": [1, 1, 0, 1, 1, 0]},
    {"auto_pad": "SAME_UPPER", "strides": [1, 2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 1, 2]},
])
def test_conv3d_with_a_symbolic_batch_and_spatial_sizes(attrs):
    cin = 4
    w = (6, cin // attrs.get("group", 1), 3, 2, 3)
    _check(_model("Conv", w, ["n", cin, 5, "h", "w"], **attrs), [(1, cin, 5, 6, 7), (3, cin, 5, 4, 5)])


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 1, 2], "pads": [1, 0, 0, 1, 1, 0], "output_padding": [1, 0, 1]},
    {"group": 2, "strides": [1, 2, 2], "dilations": [2, 1, 1], "pads": [0, 1, 1, 1, 0, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2, 1]},
])
def test_conv_transpose3d_with_a_symbolic_batch(attrs):
    cin = 4
    w = (cin, 3, 3, 2, 3)
    _check(_model("ConvTranspose", w, ["n", cin, 3, 4, 5], **attrs), [(1, cin, 3, 4, 5), (2, cin, 3, 4, 5)])


def test_conv_transpose3d_with_output_shape():
    w = (2, 3, 2, 3, 3)
    model = _model("ConvTranspose", w, ["n", 2, 3, 4, 5], strides=[2, 2, 2], output_shape=[7, 9, 10])
    _check(model, [(1, 2, 3, 4, 5), (2, 2, 3, 4, 5)])


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose2d_output_shape_splits_the_padding_as_onnxruntime(auto_pad):
    """An odd total padding from output_shape: the extra one at the start unless SAME_UPPER."""
    model = _model("ConvTranspose", (2, 3, 3, 3), ["n", 2, 4, 5], strides=[2, 2], output_shape=[9, 10], auto_pad=auto_pad)
    _check(model, [(1, 2, 4, 5), (2, 2, 4, 5)])


def test_a_kernel_deeper_than_the_input_is_a_clear_error():
    model = _model("Conv", (2, 2, 5, 1, 1), [1, 2, 3, 4, 4])
    with pytest.raises(rlx.RlxError, match=r"Conv node .*kernel \(depth 5, dilation 1\) is larger than the padded depth 3"):
        rlx.onnx.import_model(model)
