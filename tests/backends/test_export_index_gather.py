"""advanced_index with constant indices on adjacent axes leaves the exporter as one ``Gather`` (no GatherND,
no Transpose): the values against NumPy's own fancy indexing, run by onnxruntime and OpenVINO; the forms
that need the general GatherND path (apart axes, a new axis, an out-of-range or non-constant index) keep it."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

X = np.arange(2 * 5 * 4 * 3, dtype=np.float32).reshape(2, 5, 4, 3) * 0.5 - 7
I0 = np.array([[4, -1, 0], [2, 3, -5]], np.int64)  # [2, 3], negatives count from the end
I1 = np.array([[-4], [1]], np.int64)  # [2, 1]: broadcast with I0
J = np.array([2, 0, -1, 1], np.int64)

CASES = {  # pattern, constant indices, NumPy key, whether one Gather is expected
    "one_axis": (":i", [J], (slice(None), J), True),
    "two_adjacent_broadcast": (":ii", [I0, I1], (slice(None), I0, I1), True),
    "leading_pair": ("ii", [I0[:, :2] % 2, I1], (I0[:, :2] % 2, I1), True),
    "trailing_pair_unfold": ("::ii", [np.array([[3], [0]]), np.array([[-1, 2]])],
                             (slice(None), slice(None), np.array([[3], [0]]), np.array([[-1, 2]])), True),
    "apart_axes": (":i:i", [np.array([1, 2]), np.array([0, 2])],
                   (slice(None), np.array([1, 2]), slice(None), np.array([0, 2])), False),
}


def _graph(pattern: str, consts: list[np.ndarray]) -> rlx.Graph:
    g = rlx.Graph("gather_in_place")
    x = g.input("x", X.shape, "f32")
    g.set_outputs([g.advanced_index([x, *(g.constant(c) for c in consts)], pattern=pattern)])
    return g


@pytest.mark.parametrize("name", sorted(CASES))
def test_constant_adjacent_index_is_one_gather(name):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from rlx.backends.onnx import export

    pattern, consts, key, one_gather = CASES[name]
    proto = export(_graph(pattern, consts))
    onnx.checker.check_model(proto, full_check=True)
    ops = [n.op_type for n in proto.graph.node]
    if one_gather:
        assert "Gather" in ops and "GatherND" not in ops and "Transpose" not in ops, ops
    else:
        assert "GatherND" in ops, ops
    want = X[key]
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    try:
        import openvino as ov
    except ImportError:
        return
    core = ov.Core()
    compiled = core.compile_model(core.read_model(proto.SerializeToString()), "CPU")
    np.testing.assert_array_equal(compiled({0: X})[compiled.outputs[0]], want)


def test_out_of_range_and_runtime_indices_keep_the_general_form():
    pytest.importorskip("onnx")
    from rlx.backends.onnx import export

    oor = export(_graph(":i", [np.array([0, 5])]))  # 5 is past axis 1 (size 5): the engine's error path stays
    assert "GatherND" in [n.op_type for n in oor.graph.node]
    g = rlx.Graph("runtime_index")
    x, i = g.input("x", X.shape, "f32"), g.input("i", (3,), "i64")
    g.set_outputs([g.advanced_index([x, i], pattern=":i")])
    assert "GatherND" in [n.op_type for n in export(g).graph.node]


def test_engine_backends_match_numpy_on_a_constant_index():
    pytest.importorskip("onnxruntime")
    pattern, consts, key, _ = CASES["two_adjacent_broadcast"]
    exe = rlx.compile(_graph(pattern, consts), backend="onnxruntime", threads=1)
    np.testing.assert_array_equal(exe.run({"x": X})[0], X[key])
