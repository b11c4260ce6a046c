"""Real exporter output through rlx.onnx.import_model, checked against onnxruntime.

Regression cases beyond the node suite: torch.onnx.export (TorchScript mode) of ``flip``
(a Slice with step -1 whose end, -2**63 + 1, reaches index 0), ConvTranspose2d with pads and
output_padding, padding modes and resize.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import rlx  # noqa: E402
from frontends.torch.helpers import Fn  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

F = torch.nn.functional


def exported(module, x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (torch.from_numpy(x),), buf, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
    return buf.getvalue()


def check(module, x: np.ndarray) -> None:
    model = exported(module, x)
    (want,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1), (-1,)])
def test_flip(dims):
    check(Fn(lambda x: x.flip(dims)), RNG.standard_normal((4, 3, 2)).astype(np.float32))


@pytest.mark.parametrize("k,s,p,op,d", [(3, 2, 1, 1, 1), ((3, 4), (2, 3), (1, 2), (1, 2), 1), (3, 2, 0, 1, 1), (2, 3, 1, 2, 1),
                                        (3, 1, 1, 0, 2), (3, 2, 2, 1, 2)])
def test_conv_transpose_with_pads_and_output_padding(k, s, p, op, d):
    torch.manual_seed(0)
    module = torch.nn.ConvTranspose2d(3, 4, k, stride=s, padding=p, output_padding=op, dilation=d)
    check(module, RNG.standard_normal((2, 3, 5, 6)).astype(np.float32))


def test_conv_transpose_1d_with_output_padding():
    torch.manual_seed(0)
    check(torch.nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1), RNG.standard_normal((1, 2, 7)).astype(np.float32))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pads(mode):
    check(Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode)), RNG.standard_normal((1, 2, 4, 5)).astype(np.float32))


@pytest.mark.parametrize("mode,align", [("nearest", None), ("bilinear", False), ("bilinear", True), ("bicubic", False)])
def test_resize(mode, align):
    check(Fn(lambda x: F.interpolate(x, scale_factor=2, mode=mode, align_corners=align)),
          RNG.standard_normal((1, 2, 3, 4)).astype(np.float32))


@pytest.mark.parametrize(("k", "s", "p", "d", "g"), [(3, 1, 0, 1, 1), (3, 2, 1, 1, 1), ((2, 3, 1), (2, 1, 2), (1, 0, 1), 1, 1),
                                                     (3, 1, 2, 2, 1), (3, 1, 1, 1, 2)])
def test_conv3d(k, s, p, d, g):
    """rlx has 2-D convs only: a 3-D conv is imported as a sum of 2-D convs over the kernel's depth taps."""
    torch.manual_seed(0)
    check(torch.nn.Conv3d(4, 6, k, stride=s, padding=p, dilation=d, groups=g), RNG.standard_normal((2, 4, 7, 6, 5)).astype(np.float32))


@pytest.mark.parametrize("pool", [torch.nn.MaxPool3d(2, stride=2), torch.nn.AvgPool3d(3, stride=1, padding=1)])
def test_pool3d(pool):
    check(pool, RNG.standard_normal((2, 3, 6, 5, 4)).astype(np.float32))


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (2, 3, 5, 3)])
def test_prelu_opset6_slope_is_per_channel(shape):
    """PRelu-6 reads a 1-D slope as one value per channel (axis 1); opset 7 made it NumPy broadcasting."""
    from onnx import TensorProto, helper

    slope = np.array([0.1, -0.5, 2.0], np.float32)
    graph = helper.make_graph([helper.make_node("PRelu", ["x", "slope"], ["y"])], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                              initializer=[helper.make_tensor("slope", TensorProto.FLOAT, [3], slope)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 3
    x = RNG.standard_normal(shape).astype(np.float32)
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    c = slope.reshape(3, *[1] * (len(shape) - 2))
    np.testing.assert_allclose(got, np.where(x < 0, x * c, x), rtol=1e-6)  # the spec's formula (onnxruntime has no PRelu-6)


@pytest.mark.parametrize("name", ["test_PReLU_1d_multiparam", "test_PReLU_2d_multiparam", "test_PReLU_3d_multiparam",
                                  "test_Conv3d_dilated_strided", "test_Conv3d_groups"])
def test_onnx_shipped_pytorch_model(name):
    """onnx's pytorch-converted model tests (opset 6; outputs computed by PyTorch) as shipped."""
    from rlx.frontends.onnx import conformance

    (case,) = [c for c in conformance.load_model_tests_of("pytorch-converted") if c.name == name]
    result = conformance.run_case(case)
    assert result.status == "passed", result.reason


@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_fp8_e4m3fn_overflow(saturate):
    """saturate=0 overflows to NaN, saturate=1 clamps to +-448 (onnx's reference evaluator as the oracle)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, saturate=saturate)], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([1000.0, -1000.0, 448.0, 3.3, np.nan, np.inf, -np.inf], np.float32)
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
