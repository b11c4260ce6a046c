"""QLinearConv (quantized CNNs) against onnxruntime and a float64 torch oracle written here."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from onnx import helper, numpy_helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _model(x, w, consts, attrs, with_bias):
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"] + (["b"] if with_bias else [])
    inits = [numpy_helper.from_array(v, n) for n, v in consts.items()] + [numpy_helper.from_array(w, "w")]
    y_type = helper.np_dtype_to_tensor_dtype(consts["yz"].dtype)
    graph = helper.make_graph(
        [helper.make_node("QLinearConv", names, ["y"], **attrs)], "m",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("y", y_type, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _oracle(x, w, c, attrs, nsp):
    """Integer conv in float64 by torch, + bias, times x_scale * w_scale / y_scale, round half to even, + y_zp."""
    xs = torch.from_numpy(x.astype(np.float64) - c["xz"].astype(np.float64))
    wz = c["wz"].astype(np.float64).reshape(-1, *[1] * (w.ndim - 1))
    ws = torch.from_numpy(w.astype(np.float64) - wz)
    pads = attrs.get("pads", [0] * (2 * nsp))
    assert pads[:nsp] == pads[nsp:]
    conv = torch.nn.functional.conv1d if nsp == 1 else torch.nn.functional.conv2d
    acc = conv(xs, ws, stride=attrs.get("strides", 1), padding=pads[:nsp], dilation=attrs.get("dilations", 1),
               groups=attrs.get("group", 1)).numpy()
    bshape = [1, -1] + [1] * nsp
    if "b" in c:
        acc = acc + c["b"].astype(np.float64).reshape(bshape)
    scale = np.float64(c["xs"]) * c["ws"].astype(np.float64).reshape(bshape) / np.float64(c["ys"])
    info = np.iinfo(c["yz"].dtype)
    return np.clip(np.rint(acc * scale) + np.float64(c["yz"]), info.min, info.max).astype(c["yz"].dtype)


CASES = [  # x shape, w shape, attrs, weight dtype, per-channel weights, bias
    ((1, 3, 7, 7), (4, 3, 3, 3), {}, np.uint8, False, False),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"strides": [2, 1], "pads": [1, 1, 1, 1], "group": 2}, np.int8, True, True),
    ((1, 2, 8, 8), (3, 2, 2, 2), {"dilations": [2, 2]}, np.int8, True, True),
    ((2, 3, 11), (5, 3, 3), {"pads": [2, 2], "strides": [2]}, np.uint8, False, True),
]


@pytest.mark.parametrize(("xshape", "wshape", "attrs", "wdt", "per_channel", "bias"), CASES)
@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
def test_qlinear_conv_matches_onnxruntime_and_torch(xshape, wshape, attrs, wdt, per_channel, bias, xdt):
    m = wshape[0]
    wdt = np.int8 if xdt == np.int8 else wdt  # onnxruntime has no s8 x u8 kernel
    x = RNG.integers(np.iinfo(xdt).min, np.iinfo(xdt).max, xshape, endpoint=True).astype(xdt)
    # u8 x s8 w: onnxruntime's x86 kernel saturates pairs of products at int16, so (as quantizers do with
    # reduce_range) the weights keep to 7 bits there
    lo, hi = (-64, 63) if (xdt, wdt) == (np.uint8, np.int8) else (np.iinfo(wdt).min, np.iinfo(wdt).max)
    w = RNG.integers(lo, hi, wshape, endpoint=True).astype(wdt)
    c = {"xs": np.float32(0.02), "xz": np.array(7 if xdt == np.uint8 else -3, xdt),
         "ws": RNG.uniform(0.002, 0.01, m).astype(np.float32) if per_channel else np.float32(0.004),
         "wz": (np.zeros(m, wdt) if wdt == np.int8 else RNG.integers(100, 150, m).astype(wdt)) if per_channel
         else np.array(0 if wdt == np.int8 else 128, wdt),
         "ys": np.float32(0.3), "yz": np.array(5 if xdt == np.int8 else 120, xdt)}
    if bias:
        c["b"] = RNG.integers(-3000, 3000, m).astype(np.int32)
    model = _model(x, w, c, attrs, bias)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    oracle = _oracle(x, w, c, attrs, len(xshape) - 2)
    assert got.dtype == want.dtype == xdt and got.shape == want.shape == oracle.shape
    np.testing.assert_array_equal(got, oracle)
    # onnxruntime requantises in float32: a product within an ulp of a .5 tie may round the other way
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
    assert np.mean(got == want) > 0.99
    assert len(np.unique(got)) > 10  # not saturated to a constant


def test_qlinear_conv_refuses_a_mis_sized_weight_scale():
    x = np.zeros((1, 2, 4, 4), np.uint8)
    w = np.zeros((3, 2, 2, 2), np.uint8)
    c = {"xs": np.float32(1), "xz": np.uint8(0), "ws": np.ones(2, np.float32), "wz": np.uint8(0),
         "ys": np.float32(1), "yz": np.uint8(0)}
    with pytest.raises(rlx.RlxError, match="w_scale"):
        import_model(_model(x, w, c, {}, False))
