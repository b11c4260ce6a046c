"""The narrow element types (fnuz fp8, e8m0, fp4, i4 u4 i2 u2) through ONNX import / export and the backends.

Expected values come from ml_dtypes conversions written in the test, onnx's reference evaluator
and onnxruntime, never from rlx itself.
"""

from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import rlx  # noqa: E402
from rlx import DType  # noqa: E402
from rlx.backends.onnx import OnnxUnsupported, export  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402
from rlx.frontends.onnx.loading import raw_bytes  # noqa: E402

NARROW = {  # rlx name -> (ONNX data type, ml_dtypes type)
    "f8e4m3fnuz": (TP.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz), "f8e5m2fnuz": (TP.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
    "f8e8m0": (TP.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu), "f4e2m1": (TP.FLOAT4E2M1, ml_dtypes.float4_e2m1fn),
    "i4": (TP.INT4, ml_dtypes.int4), "u4": (TP.UINT4, ml_dtypes.uint4), "i2": (TP.INT2, ml_dtypes.int2),
    "u2": (TP.UINT2, ml_dtypes.uint2),
}
X = np.array([[0.3, -0.7, 1.5, 2.5, -2.5, 3.9], [-1.2, 0.0, 7.0, -8.0, 0.5, 1.0]], np.float32)


def _model(nodes, inputs, outputs, opset=25, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint8)


@pytest.mark.parametrize("name", list(NARROW))
def test_packed_initializer_imports_with_its_values(name):
    onnx_type, np_type = NARROW[name]
    values = np.array([1, 0, 1, 1, 0], np.float32).astype(np_type)  # 5 elements: an odd count pads the last byte
    t = numpy_helper.from_array(values, "w")
    assert len(t.raw_data) == raw_bytes(onnx_type, 5) == (-(-5 * DType(name).bits // 8))
    m = _model([helper.make_node("Identity", ["w"], ["y"])], [], [_vi("y", onnx_type, [5])], inits=[t])
    g, params = import_model(m)
    (got,) = rlx.run(g, {}, params)
    assert got.dtype == np_type and np.array_equal(_bits(got), _bits(values))


def test_packed_raw_data_of_the_wrong_size_is_refused():
    t = numpy_helper.from_array(np.arange(5).astype(ml_dtypes.uint4), "w")
    t.raw_data = t.raw_data + b"\0"
    m = _model([helper.make_node("Identity", ["w"], ["y"])], [], [_vi("y", TP.UINT4, [5])], inits=[t])
    with pytest.raises(rlx.FormatError, match="raw_data holds 4 bytes"):
        import_model(m)


@pytest.mark.parametrize("name", ["i4", "u4", "i2", "u2"])
def test_cast_to_sub_byte_ints(name):
    """float -> int truncates toward zero (in range); int -> int keeps the low bits (two's complement)."""
    onnx_type, np_type = NARROW[name]
    bits, signed = DType(name).bits, name.startswith("i")
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    xf = np.array([lo, hi, lo + 0.75, hi - 0.25, 0.0], np.float32)
    xi = np.arange(-20, 20, dtype=np.int8)
    m = _model([helper.make_node("Cast", ["a"], ["ya"], to=onnx_type), helper.make_node("Cast", ["b"], ["yb"], to=onnx_type)],
               [_vi("a", TP.FLOAT, [5]), _vi("b", TP.INT8, [40])], [_vi("ya", onnx_type, [5]), _vi("yb", onnx_type, [40])])
    g, params = import_model(m)
    ya, yb = rlx.run(g, {"a": xf, "b": xi}, params)
    assert ya.dtype == np_type and yb.dtype == np_type
    np.testing.assert_array_equal(ya.astype(np.int64), np.trunc(xf).astype(np.int64))
    low = xi.astype(np.int64) & ((1 << bits) - 1)
    want = np.where(low > hi, low - (1 << bits), low) if signed else low
    np.testing.assert_array_equal(yb.astype(np.int64), want)


@pytest.mark.parametrize("name", ["f8e4m3fnuz", "f8e5m2fnuz"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_fnuz_matches_the_onnx_reference(name, saturate):
    onnx_type, np_type = NARROW[name]
    x = np.array([0.3, -0.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 1e-9, 200.0, 17.3], np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=onnx_type, saturate=saturate)], [_vi("x", TP.FLOAT, [10])],
               [_vi("y", onnx_type, [10])])
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": x}, params)
    assert got.dtype == np_type
    np.testing.assert_array_equal(_bits(got), _bits(want))
    big = float(ml_dtypes.finfo(np_type).max)
    if saturate:
        assert got.astype(np.float32)[2] == big and got.astype(np.float32)[5] == -big
    else:
        assert np.isnan(got.astype(np.float32)[2:6]).all()


def test_cast_to_f4e2m1_saturates_as_ml_dtypes_does():
    x = np.array([0.25, 0.75, -3.5, 1e6, -np.inf, 5.0, 0.0], np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT4E2M1)], [_vi("x", TP.FLOAT, [7])], [_vi("y", TP.FLOAT4E2M1, [7])])
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": x}, params)
    np.testing.assert_array_equal(got.astype(np.float32), [0.0, 1.0, -4.0, 6.0, -6.0, 4.0, 0.0])


@pytest.mark.parametrize("name", list(NARROW))
def test_narrow_types_widen_exactly_to_float(name):
    onnx_type, np_type = NARROW[name]
    values = np.arange(1 << DType(name).bits, dtype=np.uint8).view(np_type)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT)], [_vi("x", onnx_type, [values.size])],
               [_vi("y", TP.FLOAT, [values.size])])
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": values}, params)
    np.testing.assert_array_equal(got, values.astype(np.float32))


@pytest.mark.parametrize("name", ["i4", "u4", "i2", "u2", "f4e2m1", "f8e4m3fnuz"])
def test_quantize_dequantize_linear_match_the_onnx_reference(name):
    onnx_type, np_type = NARROW[name]
    zp_value = np.array(1 if name.startswith("u") else 0).astype(np_type)
    q = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"]), helper.make_node("DequantizeLinear", ["y", "s", "zp"], ["z"])],
               [_vi("x", TP.FLOAT, [2, 6])], [_vi("y", onnx_type, [2, 6]), _vi("z", TP.FLOAT, [2, 6])],
               inits=[numpy_helper.from_array(np.array(0.5, np.float32), "s"), numpy_helper.from_array(zp_value, "zp")])
    want_y, want_z = ReferenceEvaluator(q).run(None, {"x": X})
    g, params = import_model(q)
    got_y, got_z = rlx.run(g, {"x": X}, params)
    assert got_y.dtype == np_type
    np.testing.assert_array_equal(_bits(got_y), _bits(want_y))
    np.testing.assert_array_equal(got_z, want_z)


@pytest.mark.parametrize("name", ["i4", "u4", "i2", "u2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e8m0"])
def test_exported_cast_agrees_with_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    np_type = NARROW[name][1]
    g = rlx.Graph("c")
    x = g.input("x", (2, 6))
    y = g.cast(g.cast(x, to=DType(name)), to=DType.F32)
    g.set_outputs([y])
    lo, hi = (int(ml_dtypes.iinfo(np_type).min), int(ml_dtypes.iinfo(np_type).max)) if name[0] in "iu" else (0, 0)
    x_in = np.clip(X, lo, hi) if name[0] in "iu" else np.abs(X) + 0.1 if name == "f8e8m0" else X
    (ref,) = rlx.run(g, {"x": x_in})
    np.testing.assert_array_equal(ref, np.trunc(x_in).astype(np_type).astype(np.float32) if name[0] in "iu"
                                  else x_in.astype(np_type).astype(np.float32))
    proto = export(g, opset=25 if name in ("i2", "u2", "f8e8m0") else 21)
    (got,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x_in})
    np.testing.assert_array_equal(got, ref)


def test_export_below_the_types_opset_is_refused():
    g = rlx.Graph("c")
    g.set_outputs([g.cast(g.input("x", (3,)), to=DType.I4)])
    with pytest.raises(OnnxUnsupported, match="i4 needs opset 21"):
        export(g, opset=18)


def test_narrow_types_on_the_jax_backend():
    pytest.importorskip("jax")
    g = rlx.Graph("c")
    x = g.input("x", (2, 6))
    outs = [g.cast(g.cast(x, to=DType(n)), to=DType.F32) for n in ("i4", "u4", "f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1")]
    g.set_outputs(outs)
    x_in = np.clip(np.abs(X), 0, 7)
    want = rlx.run(g, {"x": x_in})
    got = rlx.compile(g, backend="jax").run({"x": x_in})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_torch_backend_carries_fnuz_and_hosts_sub_byte_ints():
    pytest.importorskip("torch")
    from rlx.backends.torch_backend.lowering import TorchDTypeError, torch_dtype

    g = rlx.Graph("c")
    x = g.input("x", (2, 6))
    g.set_outputs([g.cast(x, to=DType.F8E4M3FNUZ), g.cast(g.cast(x, to=DType.F8E5M2FNUZ), to=DType.F32)])
    got = rlx.compile(g, backend="torch").run({"x": X})
    np.testing.assert_array_equal(_bits(got[0]), _bits(X.astype(ml_dtypes.float8_e4m3fnuz)))
    np.testing.assert_array_equal(got[1], X.astype(ml_dtypes.float8_e5m2fnuz).astype(np.float32))
    h = rlx.Graph("i4")
    q = h.cast(h.input("x", (4,)), to=DType.I4)
    h.set_outputs([q, h.cast(h.add(q, q), to=DType.F32)])  # i4 arithmetic wraps: 7 + 7 = -2
    xs = np.array([7.0, -8.0, 3.5, -1.0], np.float32)
    got = rlx.compile(h, backend="torch").run({"x": xs})
    assert got[0].dtype == ml_dtypes.int4 and got[0].astype(np.int64).tolist() == [7, -8, 3, -1]
    np.testing.assert_array_equal(got[1], [-2.0, 0.0, 6.0, -2.0])
    with pytest.raises(TorchDTypeError, match="no torch dtype for i4"):
        torch_dtype(DType.I4)


def test_upstream_json_refuses_a_type_it_lacks():
    g = rlx.Graph("c")
    g.set_outputs([g.cast(g.input("x", (3,)), to=DType.U4)])
    with pytest.raises(rlx.RlxError, match="u4"):
        rlx.to_upstream_json(g)


@pytest.mark.parametrize("name", list(NARROW))
def test_save_load_round_trips_the_bytes(tmp_path, name):
    np_type = NARROW[name][1]
    w = np.arange(1 << DType(name).bits, dtype=np.uint8).view(np_type).reshape(1, -1)
    g = rlx.Graph("s")
    p = g.param("w", w.shape, DType(name))
    g.set_outputs([g.cast(p, to=DType.F32)])
    rlx.save(g, tmp_path / "m.rlx", params={"w": w})
    back = rlx.load(tmp_path / "m.rlx")
    assert np.array_equal(_bits(back.params["w"]), _bits(w)) and back.params["w"].dtype == np_type


E8M0_X = np.array([0.0, 0.124, 0.25, 1.1, 1.5, 1.75, 3.0, 6.0, 1e-40, 3e-39, 2.0**127, 3e38, -2.0, np.nan], np.float32)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_cast_to_e8m0_rounding_matches_the_onnx_reference(saturate, mode):
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT8E8M0, saturate=saturate, round_mode=mode)],
               [_vi("x", TP.FLOAT, [E8M0_X.size])], [_vi("y", TP.FLOAT8E8M0, [E8M0_X.size])])
    (want,) = ReferenceEvaluator(m).run(None, {"x": E8M0_X})
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": E8M0_X}, params)
    assert got.dtype == ml_dtypes.float8_e8m0fnu
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_cast_to_e8m0_saturates_inf_to_the_largest_value():
    """The Cast spec's table: saturate + up maps Inf to E8M0_MAX (2**127); NaN stays NaN."""
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT8E8M0)], [_vi("x", TP.FLOAT, [2])], [_vi("y", TP.FLOAT8E8M0, [2])])
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": np.array([np.inf, np.nan], np.float32)}, params)
    assert got.astype(np.float32)[0] == 2.0**127 and np.isnan(got.astype(np.float32)[1])


BITCASTS = [(TP.FLOAT, TP.INT32, np.float32), (TP.INT64, TP.DOUBLE, np.int64), (TP.FLOAT16, TP.UINT16, np.float16),
            (TP.INT8, TP.UINT8, np.int8), (TP.BOOL, TP.UINT8, np.bool_), (TP.BFLOAT16, TP.INT16, ml_dtypes.bfloat16),
            (TP.FLOAT8E4M3FNUZ, TP.INT8, ml_dtypes.float8_e4m3fnuz), (TP.INT4, TP.UINT4, ml_dtypes.int4)]


@pytest.mark.parametrize(("src", "dst", "np_src"), BITCASTS)
def test_bitcast_matches_numpy_view_and_round_trips_through_export(src, dst, np_src):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, size=(3, 4), dtype=np.uint8)
    if np.dtype(np_src).itemsize > 1:
        x = rng.integers(-(2**31), 2**31 - 1, size=(3, 4), dtype=np.int64).astype(np.dtype(np_src).str.replace("f", "i"))
    x = (x != 0) if np_src is np.bool_ else (x & 0xF).astype(np.uint8) if np_src is ml_dtypes.int4 else x
    x = np.ascontiguousarray(x).view(np_src) if np_src is not np.bool_ else x
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=dst)], [_vi("x", src, [3, 4])], [_vi("y", dst, [3, 4])], opset=26)
    want = x.view(helper.tensor_dtype_to_np_dtype(dst)) if np_src is not np.bool_ else x.astype(np.uint8)
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": x}, params)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))
    back, bparams = import_model(export(g, params, opset=26))
    np.testing.assert_array_equal(_bits(rlx.run(back, {"x": x}, bparams)[0]), _bits(want))


def test_bitcast_agrees_with_onnxruntime_where_it_runs_it():
    ort = pytest.importorskip("onnxruntime")
    x = np.array([[1.0, -0.0, np.inf], [np.nan, 1e-40, -3.5]], np.float32)
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT32)], [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.INT32, [2, 3])],
               opset=26)
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # an onnxruntime without opset 26 / BitCast
        pytest.skip(f"onnxruntime cannot run BitCast: {str(exc)[:120]}")
    (want,) = sess.run(None, {"x": x})
    g, params = import_model(m)
    np.testing.assert_array_equal(rlx.run(g, {"x": x}, params)[0], want)


def test_bitcast_between_widths_is_refused():
    g = rlx.Graph("b")
    with pytest.raises(rlx.ShapeError, match="32 bits"):
        g.bitcast(g.input("x", (2,)), to=DType.F16)


def test_bitcast_export_needs_opset_26():
    g = rlx.Graph("b")
    g.set_outputs([g.bitcast(g.input("x", (2,)), to=DType.I32)])
    with pytest.raises(OnnxUnsupported, match="opset 26"):
        export(g, opset=21)


def test_bitcast_on_the_jax_and_torch_backends():
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    x = np.array([1.0, -2.0, np.inf, 0.5], np.float32).astype(ml_dtypes.bfloat16)
    g = rlx.Graph("b")
    v = g.input("x", (4,), DType.BF16)
    g.set_outputs([g.bitcast(v, to=DType.I16), g.bitcast(g.bitcast(v, to=DType.U16), to=DType.F16)])
    want = [x.view(np.int16), x.view(np.float16)]
    for backend in ("jax", "torch"):
        got = rlx.compile(g, backend=backend).run({"x": x})
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a).view(np.uint16), b.view(np.uint16))


def test_torch_view_dtype_imports_as_bitcast():
    torch = pytest.importorskip("torch")
    import rlx.torch

    class View(torch.nn.Module):
        def forward(self, x):
            return x.view(torch.int32) + 1

    x = torch.tensor([[1.0, -0.0, 3.5], [float("inf"), 1e-40, -2.0]])
    g, params = rlx.torch.import_module(View(), (x,))
    assert any(n.op == "bitcast" for n in g.nodes)
    (got,) = rlx.run(g, {next(iter(g.inputs())): x.numpy()}, params)
    np.testing.assert_array_equal(got, (x.view(torch.int32) + 1).numpy())


@pytest.mark.parametrize(("shape", "axis", "block"), [((3, 4), 1, 2), ((4, 3), 0, 3), ((2, 5), 1, 2), ((2, 6, 2), -2, 4)])
@pytest.mark.parametrize("out", [TP.INT8, TP.UINT4])
def test_blocked_quantize_dequantize_match_the_onnx_reference(shape, axis, block, out):
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape).astype(np.float32) * 3
    ax = axis % len(shape)
    sshape = [-(-d // block) if i == ax else d for i, d in enumerate(shape)]
    scale = (rng.uniform(0.2, 1.0, size=sshape)).astype(np.float32)
    zp = rng.integers(0, 4, size=sshape).astype(helper.tensor_dtype_to_np_dtype(out))
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"], axis=axis, block_size=block),
                helper.make_node("DequantizeLinear", ["y", "s", "zp"], ["z"], axis=axis, block_size=block)],
               [_vi("x", TP.FLOAT, list(shape))], [_vi("y", out, list(shape)), _vi("z", TP.FLOAT, list(shape))],
               inits=[numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "zp")])
    want_y, want_z = ReferenceEvaluator(m).run(None, {"x": x})
    g, params = import_model(m)
    got_y, got_z = rlx.run(g, {"x": x}, params)
    np.testing.assert_array_equal(_bits(got_y), _bits(want_y))
    np.testing.assert_allclose(got_z, want_z, rtol=1e-6)


def test_blocked_scale_of_the_wrong_shape_is_refused():
    m = _model([helper.make_node("DequantizeLinear", ["x", "s"], ["z"], axis=1, block_size=2)],
               [_vi("x", TP.INT8, [3, 4])], [_vi("z", TP.FLOAT, [3, 4])],
               inits=[numpy_helper.from_array(np.ones((3, 3), np.float32), "s")])
    with pytest.raises(rlx.FormatError, match=r"needs \[3, 2\]"):
        import_model(m)


@pytest.mark.parametrize("src", [TP.INT32, TP.FLOAT8E5M2, TP.FLOAT16, TP.BFLOAT16])
@pytest.mark.parametrize("dst", [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2FNUZ])
def test_saturating_cast_to_fp8_from_ints_and_other_narrow_floats(src, dst):
    np_src = helper.tensor_dtype_to_np_dtype(src)
    x = np.array([-70000, -1000, -3, 0, 1, 17, 300, 1000, 57344] if src != TP.FLOAT16 else [-1000, -3, 0, 1, 17, 300, 60000],
                 np.float64).astype(np_src)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [_vi("x", src, [x.size])], [_vi("y", dst, [x.size])])
    want = x.astype(np.float64).clip(-float(ml_dtypes.finfo(helper.tensor_dtype_to_np_dtype(dst)).max),
                                     float(ml_dtypes.finfo(helper.tensor_dtype_to_np_dtype(dst)).max))
    g, params = import_model(m)
    (got,) = rlx.run(g, {"x": x}, params)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(helper.tensor_dtype_to_np_dtype(dst)).astype(np.float64))
