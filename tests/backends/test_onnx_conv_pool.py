"""ONNX ConvTranspose with 3-D spatial input and MaxPool's Indices output, against torch / onnxruntime."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("kw", [{}, {"stride": 2}, {"stride": (2, 1, 3), "padding": (1, 0, 1), "output_padding": (1, 0, 2),
                                                     "dilation": (1, 2, 1)},
                                {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, {"dilation": 2, "padding": (2, 1, 0)}])
def test_conv_transpose3d_matches_torch(kw):
    torch.manual_seed(0)
    m = torch.nn.ConvTranspose3d(4, 6, (3, 2, 3), **kw).eval()
    x = torch.randn(2, 4, 3, 4, 5)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), buf, dynamo=False, opset_version=17, input_names=["x"])
    g, params = import_model(buf.getvalue())
    (got,) = rlx.run(g, {"x": x.numpy()}, params)
    with torch.no_grad():
        want = m(x).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _maxpool(shape, **attrs):
    out = helper.make_tensor_value_info("i", TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])


@pytest.mark.parametrize(("shape", "attrs"), [
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "storage_order": 1}),
    ((1, 2, 8, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 9, 9), {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [1, 2]}),
    ((2, 2, 5, 4, 6), {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]}),
])
def test_maxpool_indices_match_onnxruntime(shape, attrs):
    """Small integer values make ties common: the first maximum in window order must win, as onnxruntime."""
    model = _maxpool(shape, **attrs)
    x = RNG.integers(-3, 4, size=shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    got = rlx.run(g, {"x": x}, params)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert len(np.unique(got[1])) > 1


def test_maxpool_indices_index_the_flattened_input():
    """The spec's definition, written out: x.flat[i] is the window's value, i counts batch and channel too."""
    x = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    g, params = import_model(_maxpool(x.shape, kernel_shape=[2, 2], strides=[2, 1]))
    y, i = rlx.run(g, {"x": x}, params)
    np.testing.assert_array_equal(x.reshape(-1)[i], y)
    want = np.stack([x[:, :, r * 2: r * 2 + 2, c: c + 2].reshape(2, 3, 4).max(-1) for r in range(3) for c in range(4)], -1)
    np.testing.assert_array_equal(y.reshape(2, 3, 12), want)
    assert i.min() >= 0 and i.max() < x.size and (i[1] >= 3 * 30).all()  # batch 1's planes come after batch 0's


@pytest.mark.parametrize("shape", [(2, 3, 6, 4), (1, 2, 4, 6, 6)])
def test_maxpool_then_maxunpool_matches_onnxruntime(shape):
    """MaxUnpool writes each pooled value back at its Indices position (batch and channel planes included)."""
    nsp = len(shape) - 2
    geo = {"kernel_shape": [2] * nsp, "strides": [2] * nsp}
    graph = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y", "i"], **geo),
                               helper.make_node("MaxUnpool", ["y", "i"], ["u"], **geo)], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    x = RNG.standard_normal(shape).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(got) == x.size // 2 ** nsp
