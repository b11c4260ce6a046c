"""com.microsoft QLinearAdd / Mul / Sigmoid / LeakyRelu / GlobalAveragePool / Concat against onnxruntime
and a float64 NumPy dequantize-op-requantize written here."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _q(v, s, z, dt):
    info = np.iinfo(dt)
    return np.clip(np.rint(v / s) + z, info.min, info.max).astype(dt)


def _run(op, names, consts, xs, dt, **attrs):
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], domain="com.microsoft", **attrs)], "m",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), list(v.shape))
         for n, v in xs.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, xs)
    g, params = import_model(model)
    (got,) = rlx.run(g, xs, params)
    return got, want


def _check(got, want, oracle):
    assert got.dtype == want.dtype == oracle.dtype and got.shape == want.shape == oracle.shape
    # rlx dequantizes / requantizes in float32 (the standard ops), onnxruntime too (some ops through a lookup
    # table), the oracle in float64: a value within float32 rounding of a .5 tie may land one step off
    for other in (oracle, want):
        assert np.abs(got.astype(np.int32) - other.astype(np.int32)).max() <= 1
        assert np.mean(got == other) > 0.97
    assert len(np.unique(got)) > 5


def _ints(dt, shape):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dt)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_binary(op, dt):
    a, b = _ints(dt, (2, 3, 4, 5)), _ints(dt, (3, 1, 5))  # broadcasting
    z = (lambda v: np.array(v, dt))
    c = {"as": np.float32(0.0517), "az": z(3), "bs": np.float32(0.0213), "bz": z(-7 if dt == np.int8 else 130),
         "ys": np.float32(0.0937 if op == "QLinearAdd" else 0.813), "yz": z(5 if dt == np.int8 else 120)}
    got, want = _run(op, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], c, {"a": a, "b": b}, dt)
    fa = (a.astype(np.float64) - c["az"]) * np.float64(c["as"])
    fb = (b.astype(np.float64) - c["bz"]) * np.float64(c["bs"])
    _check(got, want, _q(fa + fb if op == "QLinearAdd" else fa * fb, np.float64(c["ys"]), c["yz"], dt))


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_unary(op, dt):
    x = _ints(dt, (4, 64))
    c = {"xs": np.float32(0.0517), "xz": np.array(10 if dt == np.uint8 else -2, dt),
         "ys": np.float32(1 / 256 if op == "QLinearSigmoid" else 0.0413), "yz": np.array(0 if dt == np.uint8 else -128, dt)}
    if op == "QLinearLeakyRelu":
        c["yz"] = np.array(60 if dt == np.uint8 else -60, dt)
    attrs = {"alpha": 0.1} if op == "QLinearLeakyRelu" else {}
    got, want = _run(op, ["x", "xs", "xz", "ys", "yz"], c, {"x": x}, dt, **attrs)
    f = (x.astype(np.float64) - c["xz"]) * np.float64(c["xs"])
    y = 1 / (1 + np.exp(-f)) if op == "QLinearSigmoid" else np.where(f >= 0, f, 0.1 * f)
    _check(got, want, _q(y, np.float64(c["ys"]), c["yz"], dt))


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(channels_last):
    dt = np.uint8
    x = _ints(dt, (2, 6, 5, 8))  # NCHW, or NHWC with channels_last
    c = {"xs": np.float32(0.0517), "xz": np.array(128, dt), "ys": np.float32(0.0113), "yz": np.array(128, dt)}
    got, want = _run("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], c, {"x": x}, dt,
                     channels_last=channels_last)
    f = (x.astype(np.float64) - 128) * np.float64(c["xs"])
    axes = (1, 2) if channels_last else (2, 3)
    _check(got, want, _q(f.mean(axis=axes, keepdims=True), np.float64(c["ys"]), c["yz"], dt))


def test_qlinear_concat():
    dt = np.int8
    a, b = _ints(dt, (2, 3, 4)), _ints(dt, (2, 5, 4))
    c = {"ys": np.float32(0.0737), "yz": np.array(1, dt), "as": np.float32(0.0517), "az": np.array(-3, dt),
         "bs": np.float32(0.0913), "bz": np.array(4, dt)}
    got, want = _run("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], c, {"a": a, "b": b}, dt, axis=1)
    fa = (a.astype(np.float64) - c["az"]) * np.float64(c["as"])
    fb = (b.astype(np.float64) - c["bz"]) * np.float64(c["bs"])
    _check(got, want, _q(np.concatenate([fa, fb], axis=1), np.float64(c["ys"]), c["yz"], dt))


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_average_pool(channels_last):
    import torch

    dt = np.uint8
    x = _ints(dt, (2, 5, 9, 8))
    c = {"xs": np.float32(0.0517), "xz": np.array(100, dt), "ys": np.float32(0.0313), "yz": np.array(90, dt)}
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0], "count_include_pad": 0}
    got, want = _run("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], c, {"x": x}, dt,
                     channels_last=channels_last, **attrs)
    f = torch.from_numpy((x.astype(np.float64) - 100) * np.float64(c["xs"]))
    if channels_last:
        f = f.permute(0, 3, 1, 2)
    y = torch.nn.functional.avg_pool2d(f, (3, 2), (2, 2), padding=(1, 0), count_include_pad=False)
    if channels_last:
        y = y.permute(0, 2, 3, 1)
    _check(got, want, _q(y.numpy(), np.float64(c["ys"]), c["yz"], dt))


@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_to_float(per_column):
    # 7-bit weights: onnxruntime's x86 u8 x s8 kernel saturates pairs of products at int16
    a, b = _ints(np.uint8, (2, 7, 16)), RNG.integers(-64, 63, (16, 5), endpoint=True).astype(np.int8)
    consts = {"b": b, "as": np.float32(0.013), "bs": RNG.uniform(0.01, 0.03, 5).astype(np.float32) if per_column
              else np.float32(0.021), "az": np.array(120, np.uint8),
              "bz": RNG.integers(-4, 4, 5).astype(np.int8) if per_column else np.array(2, np.int8),
              "bias": RNG.normal(size=5).astype(np.float32)}
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()]
    graph = helper.make_graph(
        [helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"], ["y"],
                          domain="com.microsoft")], "m",
        [helper.make_tensor_value_info("a", onnx.TensorProto.UINT8, [2, 7, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"a": a}, params)
    acc = (a.astype(np.int64) - 120) @ (b.astype(np.int64) - consts["bz"].astype(np.int64))
    expect = acc * (np.float64(consts["as"]) * consts["bs"].astype(np.float64)) + consts["bias"]
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (2, 7, 5)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
