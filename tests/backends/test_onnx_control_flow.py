"""ONNX If / Loop / Scan imported as structured rlx if_ / while_ / scan, compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx.importer import import_model  # noqa: E402


def _model(graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _rlx(model, feeds):
    g, params = import_model(model)
    return g, rlx.run(g, feeds, params)


def _ops(g):
    return [n.op for n in g.nodes]


def _if_model():
    # then: Gather(table, idx) — idx is out of range when the predicate is false; else: x * 2
    then_g = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["t_out"], axis=0)], "then",
        [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["e_out"])], "else",
        [], [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [3])])
    nodes = [
        helper.make_node("Constant", [], ["four"], value=helper.make_tensor("four", TensorProto.INT64, [], [4])),
        helper.make_node("Less", ["idx", "four"], ["ok"]),
        helper.make_node("If", ["ok"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    graph = helper.make_graph(
        nodes, "if_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("table", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    return _model(graph)


@pytest.mark.parametrize("idx", [1, 3, 7])
def test_if_runtime_condition_stays_structured(idx):
    model = _if_model()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(3).astype(np.float32),
             "table": rng.standard_normal((4, 3)).astype(np.float32),
             "idx": np.array(idx, np.int64)}
    g, got = _rlx(model, feeds)
    assert "if_" in _ops(g)
    want = _ort(model, feeds)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-6)


def _loop_model():
    # while x < limit (data dependent) and i < 100: x = x * 2 + 1; counts iterations in a second state
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_in", "two"], ["x2"]),
         helper.make_node("Add", ["x2", "one"], ["x_out"]),
         helper.make_node("Add", ["n_in", "one_i"], ["n_out"]),
         helper.make_node("ReduceMax", ["x_out"], ["mx"], keepdims=0),
         helper.make_node("Less", ["mx", "limit"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("n_in", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("n_out", TensorProto.INT64, [])])
    nodes = [helper.make_node("ReduceMax", ["x"], ["mx0"], keepdims=0),
             helper.make_node("Less", ["mx0", "limit"], ["c0"]),
             helper.make_node("Loop", ["trip", "c0", "x", "n0"], ["x_final", "n_final"], body=body)]
    graph = helper.make_graph(
        nodes, "loop_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("limit", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("x_final", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("n_final", TensorProto.INT64, [])],
        initializer=[helper.make_tensor("trip", TensorProto.INT64, [], [100]),
                     helper.make_tensor("n0", TensorProto.INT64, [], [0]),
                     helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                     helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
                     helper.make_tensor("one_i", TensorProto.INT64, [], [1])])
    return _model(graph)


@pytest.mark.parametrize("limit", [-1.0, 5.0, 1000.0])
def test_loop_data_dependent_condition_is_while(limit):
    model = _loop_model()
    feeds = {"x": np.array([0.5, -1.0], np.float32), "limit": np.array(limit, np.float32)}
    g, got = _rlx(model, feeds)
    assert "while_" in _ops(g)
    want = _ort(model, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6)


def _scan_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["s_row"])], "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("s_row", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Scan", ["s0", "xs"], ["total", "prefix"], body=body, num_scan_inputs=1)]
    graph = helper.make_graph(
        nodes, "scan_model",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("prefix", TensorProto.FLOAT, [5, 3])])
    return _model(graph)


def test_scan_cumulative_sum_is_scan():
    model = _scan_model()
    rng = np.random.default_rng(1)
    feeds = {"s0": rng.standard_normal(3).astype(np.float32), "xs": rng.standard_normal((5, 3)).astype(np.float32)}
    g, got = _rlx(model, feeds)
    ops = _ops(g)
    assert "scan" in ops and "concat" not in ops
    want = _ort(model, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)


def test_loop_runtime_trip_count_is_while():
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "w"], ["x_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)], "trip_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = _model(graph)
    g, _ = import_model(model)
    assert "while_" in _ops(g)
    for trip in (0, 1, 4):
        feeds = {"x": np.array([1.0, 2.0], np.float32), "M": np.array(trip, np.int64),
                 "w": np.array([0.5, -1.0], np.float32)}
        _, got = _rlx(model, feeds)
        np.testing.assert_allclose(np.asarray(got[0]), _ort(model, feeds)[0], rtol=1e-6)
