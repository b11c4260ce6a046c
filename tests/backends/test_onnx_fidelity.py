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
from rlx.backends.onnx import import_model  # noqa: E402

F = torch.nn.functional


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


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
