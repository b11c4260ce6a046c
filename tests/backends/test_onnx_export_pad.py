"""A constant pad (the torch frontend's gather + where per axis) leaves the exporter as one Pad over all its axes,
which onnxruntime merges into the Conv after it (HF MobileNetV2's TF-style padding); values against torch, on
onnxruntime and OpenVINO. Pads the rewrite does not cover (crops, reflect) keep their Gather form and values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.onnx  # noqa: E402
import rlx.torch  # noqa: E402


class _PadConv(torch.nn.Module):
    def __init__(self, pad, value=0.0, mode="constant"):
        super().__init__()
        self.pad, self.value, self.mode = pad, value, mode
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        kw = {"value": self.value} if self.mode == "constant" else {}
        return self.conv(torch.nn.functional.pad(x, self.pad, mode=self.mode, **kw))


def _export(module, x):
    g, params = rlx.torch.import_module(module.eval(), (x,))
    return g, params, rlx.onnx.export(g, params)


def _ort(proto, x):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("pad,value", [((0, 1, 0, 1), 0.0), ((1, 2, 3, 0), 0.0), ((2, 2, 0, 0), -1.5),
                                       ((0, 0, 1, 1, 0, 0, 1, 0), 0.5)])
def test_constant_pad_is_one_pad_node(pad, value):
    torch.manual_seed(0)
    module = _PadConv(pad, value)
    x = torch.randn(2, 3, 9, 10)
    _, _, proto = _export(module, x)
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops["Pad"] == 1 and not ops["Gather"] and not ops["Where"], ops
    with torch.no_grad():
        want = module(x).numpy()
    np.testing.assert_allclose(_ort(proto, x.numpy()), want, rtol=1e-5, atol=1e-5)


def test_nan_input_still_propagates_through_the_pad():
    torch.manual_seed(1)
    module = _PadConv((0, 1, 0, 1))
    x = torch.randn(1, 3, 8, 8)
    x[0, 1, 3, 5] = float("nan")
    _, _, proto = _export(module, x)
    with torch.no_grad():
        want = module(x).numpy()
    got = _ort(proto, x.numpy())
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pad,mode", [((-1, 2, 1, 0), "constant"), ((1, 1, 1, 1), "reflect")])
def test_other_pads_keep_their_values(pad, mode):
    torch.manual_seed(2)
    module = _PadConv(pad, mode=mode)
    x = torch.randn(2, 3, 9, 10)
    _, _, proto = _export(module, x)
    with torch.no_grad():
        want = module(x).numpy()
    np.testing.assert_allclose(_ort(proto, x.numpy()), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_engines_fold_the_pad_and_match_torch(backend):
    if backend == "openvino":
        pytest.importorskip("openvino")
    torch.manual_seed(3)
    module = _PadConv((0, 1, 0, 1))
    x = torch.randn(2, 3, 16, 16)
    g, params = rlx.torch.import_module(module.eval(), (x,))
    fn = rlx.compile(g, backend=backend, params=params, threads=1)
    with torch.no_grad():
        want = module(x).numpy()
    got = fn.run({next(iter(g.inputs())): x.numpy()})
    got = next(iter(got.values())) if isinstance(got, dict) else got
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hole", [False, True])
def test_a_mask_that_is_not_a_pad_stays_a_where(hole):
    # gather [0, 0, 1, 2, 3, 3] along W masked at both ends is a pad of (1, 1); a mask that also hides an
    # inside position is not a pad and must keep its Where (values against NumPy)
    idx = np.array([0, 0, 1, 2, 3, 3], np.int64)
    mask = np.array([False, True, True, True, True, False])
    if hole:
        mask[2] = False
    g = rlx.Graph("masked_gather")
    x = g.input("x", (2, 3, 4, 4))
    y = g.gather(x, g.constant(idx), axis=3)
    g.set_outputs([g.where(g.constant(mask.reshape(1, 1, 1, 6)), y, g.constant(np.float32(2.5)))])
    proto = rlx.onnx.export(g, {})
    ops = Counter(n.op_type for n in proto.graph.node)
    assert (ops["Pad"], ops["Where"]) == ((0, 1) if hole else (1, 0)), ops
    xv = np.random.default_rng(4).standard_normal((2, 3, 4, 4)).astype(np.float32)
    want = np.where(mask.reshape(1, 1, 1, 6), xv[..., idx], np.float32(2.5))
    np.testing.assert_array_equal(_ort(proto, xv), want)
