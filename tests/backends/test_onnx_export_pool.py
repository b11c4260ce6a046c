"""torch's ``ceil_mode`` max pooling reaches rlx as pool2d over a ``-inf`` concat pad; the ONNX exporter
writes that pad as MaxPool's own asymmetric pads (rlx.backends.onnx.export_pool): no Concat is left, and
onnxruntime on the export gives torch's values, NaN windows included."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402


class _Pool(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return self.pool(x) + 1.0


def _run(proto, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _x(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("k", "s", "p", "hw"), [(3, 2, 0, (8, 10)), (3, 2, 1, (9, 6)), (2, 2, 0, (7, 7)),
                                                 (3, 3, 0, (11, 8))])
def test_ceil_mode_pad_becomes_maxpool_pads(k, s, p, hw):
    mod = _Pool(torch.nn.MaxPool2d(k, s, padding=p, ceil_mode=True)).eval()
    x = _x((2, 3, *hw))
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    proto = rlx.onnx.export(g, params)
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops["Concat"] == 0 and ops["MaxPool"] == 1, ops
    pads = [list(a.ints) for n in proto.graph.node if n.op_type == "MaxPool" for a in n.attribute if a.name == "pads"]
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = _run(proto, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert pads[0][2:] != pads[0][:2] or want.shape[2:] == tuple((d + 2 * p - k) // s + 1 for d in hw)
    xn = x.copy()  # NaN in a window's last cells (skipped by onnxruntime's MaxPool) and in the ceil window
    xn[0, 0, 1, 1], xn[1, 2, hw[0] - 1, hw[1] - 1], xn[0, 1, 0, 0] = np.nan, np.nan, np.inf
    with torch.no_grad():
        want = mod(torch.from_numpy(xn)).numpy()
    got = _run(proto, xn)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert np.isnan(want).any()


def test_onnxruntime_backend_matches_torch_on_ceil_pool():
    mod = _Pool(torch.nn.MaxPool2d(3, 2, ceil_mode=True)).eval()
    x = _x((1, 4, 12, 9), seed=3)
    x[0, 3, 11, 8] = np.nan
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    exe = rlx.compile(g, backend="onnxruntime", params=params, threads=1)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = exe.run(dict(zip(g.inputs(), [x])))[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_fill_that_is_not_minus_inf_keeps_the_concat():
    class Cat(torch.nn.Module):
        def forward(self, x):
            pad = torch.zeros(x.shape[0], x.shape[1], 1, x.shape[3])
            return torch.nn.functional.max_pool2d(torch.cat([x, pad], 2), 3, 2)

    mod = Cat().eval()
    x = _x((1, 2, 8, 7), seed=4) - 3.0  # all negative: the zero row wins where it lies in a window
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    proto = rlx.onnx.export(g, params)
    assert Counter(n.op_type for n in proto.graph.node)["Concat"] == 1
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(_run(proto, x), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino"])
def test_nan_term_in_blocked_conv_layout(engine):
    """A conv before and after the pool puts it in onnxruntime's NCHWc layout: the NaN term (HardSigmoid for
    the onnxruntime backend, ~5% cheaper on SqueezeNet there; Tanh for OpenVINO, whose HardSigmoid drops NaN)
    runs there too and still passes NaN through, as torch."""
    if engine == "openvino":
        pytest.importorskip("openvino")
    torch.manual_seed(0)
    mod = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.MaxPool2d(3, 2, ceil_mode=True),
                              torch.nn.Conv2d(16, 16, 1)).eval()
    x = _x((1, 3, 16, 13), seed=5)
    x[0, 1, 4, 9], x[0, 2, 15, 12], x[0, 0, 0, 0] = np.nan, np.inf, -np.inf
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(x),))
    exe = rlx.compile(g, backend=engine, params=params, threads=1)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    got = exe.run(dict(zip(g.inputs(), [x])))[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_nan_term_form_follows_the_engine():
    """The onnxruntime backend's export bounds the NaN term with HardSigmoid; a plain export (any engine) and
    the openvino backend's keep Tanh."""
    from rlx.backends.ort_backend import export_for_session

    mod = torch.nn.Sequential(torch.nn.MaxPool2d(3, 2)).eval()
    g, params = rlx.torch.import_module(mod, (torch.from_numpy(_x((1, 2, 9, 9))),))
    for engine, bounded in ((None, "Tanh"), ("onnxruntime", "HardSigmoid")):
        ops = Counter(n.op_type for n in export_for_session(g, params, engine=engine).graph.node)
        assert ops[bounded] == 1 and ops["Tanh" if bounded == "HardSigmoid" else "HardSigmoid"] == 0
