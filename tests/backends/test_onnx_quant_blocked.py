"""Blocked quantisation (QuantizeLinear / DequantizeLinear with block_size, opset 21) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _model(op, x, scale, zp, axis, block, x_type):
    names = ["x", "s"] + (["z"] if zp is not None else [])
    inputs = [helper.make_tensor_value_info("x", x_type, list(x.shape))]
    inits = [onnx.numpy_helper.from_array(scale, "s")] + ([onnx.numpy_helper.from_array(zp, "z")] if zp is not None else [])
    y_type = TensorProto.FLOAT if op == "DequantizeLinear" else (
        TensorProto.UINT8 if zp is None else onnx.helper.np_dtype_to_tensor_dtype(zp.dtype))
    graph = helper.make_graph([helper.make_node(op, names, ["y"], axis=axis, block_size=block)], "m", inputs,
                              [helper.make_tensor_value_info("y", y_type, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _run_both(op, x, scale, zp, axis, block, x_type):
    model = _model(op, x, scale, zp, axis, block, x_type)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    return got, want


@pytest.mark.parametrize(("shape", "axis", "block"), [((4, 10), 1, 4), ((9, 3), 0, 2), ((2, 6, 5), -2, 3)])
@pytest.mark.parametrize("zp_dtype", [None, np.int8, np.uint8])
def test_blocked_quantize_and_dequantize(shape, axis, block, zp_dtype):
    """The last block may be short (10 elements in blocks of 4); each block has its own scale / zero point."""
    ax = axis % len(shape)
    sshape = [-(-d // block) if i == ax else d for i, d in enumerate(shape)]
    scale = (RNG.uniform(0.02, 0.2, sshape)).astype(np.float32)
    zp = None if zp_dtype is None else RNG.integers(-20 if zp_dtype == np.int8 else 0, 20, sshape).astype(zp_dtype)
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    got, want = _run_both("QuantizeLinear", x, scale, zp, axis, block, TensorProto.FLOAT)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 3
    q = want
    got, want = _run_both("DequantizeLinear", q, scale, zp, axis, block, onnx.helper.np_dtype_to_tensor_dtype(q.dtype))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_blocked_scale_of_the_wrong_shape_is_refused():
    x = np.zeros((4, 10), np.float32)
    with pytest.raises(rlx.RlxError, match="blocked scale"):
        import_model(_model("QuantizeLinear", x, np.ones((4, 2), np.float32), None, 1, 4, TensorProto.FLOAT))
