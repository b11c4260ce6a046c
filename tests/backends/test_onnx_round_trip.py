"""Round trip of the ONNX node suite (tests/backends/onnx_round_trip.py): every case rlx passes, exported
back by rlx.onnx.export, passes the full checker and matches the case's shipped outputs when run by
onnxruntime (onnx's reference evaluator where onnxruntime lacks a kernel).

Fast: every 32nd case in name order plus the cases that exercised an exporter fix. Slow (``-m slow``):
every case, and the 140 shipped model tests; the only refusals allowed are ops ONNX cannot express at the
exporter's opset.
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import numpy as np

from backends.onnx_round_trip import ALLOWED_REFUSALS, round_trip_case
from rlx.frontends.onnx import conformance

SAMPLE_EVERY = 32
#: cases an exporter fix made pass: floor modulo of floats (inf divisors, signed zeros), any / all of
#: bools, integer conv, float8 casts and quantisation, bfloat16 einsum, shifts of any integer type, cumulative
#: products (opset 18), the
#: new MaxPool Indices and 3-D ConvTranspose converters
REGRESSIONS = ("test_mod_float_edge_cases_fmod_0_float32", "test_mod_float_edge_cases_fmod_0_float16",
               "test_reduce_max_bool_inputs", "test_reduce_min_bool_inputs", "test_reduce_max_empty_set_bool",
               "test_convinteger_with_padding", "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
               "test_cast_FLOAT_to_FLOAT8E5M2", "test_cast_FLOAT8E4M3FN_to_FLOAT", "test_quantizelinear_e4m3fn",
               "test_dequantizelinear_e5m2", "test_einsum_batch_matmul_bfloat16", "test_maxpool_with_argmax_2d_precomputed_pads",
               "test_convtranspose_3d", "test_bitshift_right_int8_negative_input", "test_bitshift_right_int32_negative_shift",
               "test_bitshift_left_int32_shift_ge_width", "test_bitshift_left_uint16", "test_bitshift_right_uint64",
               "test_cumprod_1d_reverse_exclusive", "test_cumprod_2d_int32")


@pytest.fixture(scope="module")
def all_cases():
    return sorted(conformance.load_cases(), key=lambda c: c.name)


def _check(trips):
    bad = [(t.name, t.status, t.reason) for t in trips
           if t.status == "failed" or (t.status == "refused" and not ALLOWED_REFUSALS.search(t.reason))]
    assert not bad, bad


def test_sampled_cases_round_trip(all_cases):
    chosen = {c.name for c in all_cases[::SAMPLE_EVERY]} | set(REGRESSIONS)
    trips = [round_trip_case(c) for c in all_cases if c.name in chosen]
    _check(trips)
    by_name = {t.name: t for t in trips}
    assert all(by_name[n].status == "passed" for n in REGRESSIONS), [(n, by_name[n].status, by_name[n].reason) for n in REGRESSIONS]
    assert sum(t.status == "passed" for t in trips) >= 50


@pytest.mark.slow
def test_every_case_rlx_passes_round_trips(all_cases):
    trips = [round_trip_case(c) for c in all_cases]
    _check(trips)
    assert sum(t.status == "passed" for t in trips) >= 1745


@pytest.mark.slow
def test_onnx_shipped_model_tests_round_trip():
    """onnx's pytorch-converted, pytorch-operator and simple model tests: every one rlx passes round-trips."""
    cases = [c for kind in ("pytorch-converted", "pytorch-operator", "simple") for c in conformance.load_model_tests_of(kind)]
    trips = [round_trip_case(c) for c in cases]
    _check(trips)
    assert sum(t.status == "passed" for t in trips) >= 134


@pytest.mark.parametrize(("exclusive", "reverse"), [(False, False), (True, False), (False, True), (True, True)])
def test_cumulative_product_exports_at_opset_18(exclusive, reverse):
    """cumprod along the middle axis, written out as a running product, against NumPy's."""
    import onnxruntime as ort

    import rlx
    import rlx.onnx

    g = rlx.Graph("cp")
    x = g.input("x", (2, 5, 3))
    g.set_outputs([g.cumprod(x, axis=1, exclusive=exclusive, reverse=reverse)])
    a = np.random.default_rng(0).uniform(0.5, 1.5, (2, 5, 3)).astype(np.float32)
    ref = a[:, ::-1] if reverse else a
    want = np.cumprod(np.concatenate([np.ones_like(ref[:, :1]), ref[:, :-1]], 1) if exclusive else ref, axis=1)
    want = want[:, ::-1] if reverse else want
    proto = rlx.onnx.export(g)
    (got,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": a})
    np.testing.assert_allclose(got, want, rtol=1e-6)
