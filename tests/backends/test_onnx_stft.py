"""ONNX STFT (real / complex signals, windows, onesided) vs NumPy's FFT in float64 and onnxruntime;
MelWeightMatrix vs onnx.reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx.frontends.onnx import import_model, import_runnable  # noqa: E402


def _model(node, feeds, inits=()):
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(k, elem[v.dtype], list(v.shape)) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("channels,windowed,onesided,step,length", [(1, False, 1, 8, 16), (1, True, 1, 5, 12), (2, True, 0, 4, 10),
                                                                    (1, False, 0, 3, 7)])
def test_stft_matches_numpy_fft(channels, windowed, onesided, step, length):
    rng = np.random.default_rng(channels + step)
    signal = rng.standard_normal((2, 40, channels)).astype(np.float32)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step"), numpy_helper.from_array(np.array(length, np.int64), "length")]
    feeds = {"signal": signal, **({"window": window} if windowed else {})}
    node = helper.make_node("STFT", ["signal", "step", "window" if windowed else "", "length"], ["y"], onesided=onesided)
    m = _model(node, feeds, inits)
    g, params = import_model(m)
    (got,) = rlx.run(g, feeds, params)
    sig = signal[..., 0].astype(np.float64) + (1j * signal[..., 1] if channels == 2 else 0)
    frames = 1 + (40 - length) // step
    idx = np.arange(frames)[:, None] * step + np.arange(length)
    spec = np.fft.fft(sig[:, idx] * (window.astype(np.float64) if windowed else 1), axis=-1)[..., : length // 2 + 1 if onesided else length]
    want = np.stack([spec.real, spec.imag], axis=-1)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    (ort_out,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got, ort_out, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mel,dft,rate,low,high", [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 8000.0), (5, 32, 8000, 300.0, 3000.0)])
def test_mel_weight_matrix_matches_reference(mel, dft, rate, low, high):
    """The parameters fed at run time (as the node suite does): import_runnable value-specialises them."""
    feeds = {"mel": np.array(mel, np.int64), "dft": np.array(dft, np.int64), "rate": np.array(rate, np.int64),
             "low": np.array(low, np.float32), "high": np.array(high, np.float32)}
    m = _model(helper.make_node("MelWeightMatrix", list(feeds), ["y"]), feeds)
    (got,) = import_runnable(m).run(feeds)
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    assert got.shape == (dft // 2 + 1, mel) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
