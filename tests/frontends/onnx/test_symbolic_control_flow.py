"""ONNX If / Loop / Scan whose tensors have symbolic sizes: one ``import_model`` graph (no input
shapes) runs at two sizes through ``rlx.run`` and the compiled numpy plan, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
import rlx.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT
BACKENDS = ("jax", "torch", "onnxruntime")


def _model(nodes, inputs, outputs, inits=()) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _check(data: bytes, feeds: list[dict[str, np.ndarray]]) -> None:
    g, params = rlx.onnx.import_model(data)
    assert any(not s.is_static for s in (v.shape for v in g.inputs().values())), "the import must stay symbolic"
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    optimized, _ = rlx.optimize(g)
    exes = {"numpy": rlx.compile(g, backend="numpy"), "planned": rlx.compile(rlx.plan(optimized), backend="numpy"),
            **{b: rlx.compile(g, backend=b) for b in BACKENDS}}
    for feed in feeds:
        want = sess.run(None, feed)
        got = {"run": rlx.run(g, feed, params), **{k: e.run(inputs=feed, params=params) for k, e in exes.items()}}
        for how, outs in got.items():
            assert len(outs) == len(want), how
            for o, w in zip(outs, want):
                o = np.asarray(o)
                assert o.shape == w.shape, (how, o.shape, w.shape)
                np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5, err_msg=how)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_if_on_a_symbolic_tensor():
    """Branches read an outer [n, m] tensor: then = x * 2 reduced over rows, else = exp(x) summed."""
    x = helper.make_tensor_value_info("x", F, ["n", "m"])
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["xt"]),
                                helper.make_node("ReduceSum", ["xt", "ax0"], ["t"], keepdims=0)],
                               "then", [], [helper.make_tensor_value_info("t", F, ["m"])])
    else_g = helper.make_graph([helper.make_node("Exp", ["x"], ["xe"]),
                                helper.make_node("ReduceSum", ["xe", "ax0"], ["e"], keepdims=0)],
                               "else", [], [helper.make_tensor_value_info("e", F, ["m"])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["p"]),
             helper.make_node("If", ["p"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [helper.make_tensor("two", F, [], [2.0]), helper.make_tensor("zero", F, [], [0.0]),
             helper.make_tensor("ax0", TensorProto.INT64, [1], [0])]
    data = _model(nodes, [x], [helper.make_tensor_value_info("y", F, ["m"])], inits)
    _check(data, [{"x": _rand(3, 4) + 2}, {"x": _rand(5, 2, seed=1) - 2}, {"x": _rand(1, 6, seed=2)}])


def _loop_body(with_rows: bool):
    outs = [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_out", F, ["n", "m"])]
    nodes = [helper.make_node("Mul", ["s_in", "half"], ["s1"]),
             helper.make_node("Add", ["s1", "x"], ["s_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    if with_rows:
        nodes.append(helper.make_node("ReduceMax", ["s_out"], ["row"], axes=[0], keepdims=0))
        outs.append(helper.make_tensor_value_info("row", F, ["m"]))
    return helper.make_graph(nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                             helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                                             helper.make_tensor_value_info("s_in", F, ["n", "m"])], outs)


_LOOP_INITS = [helper.make_tensor("half", F, [], [0.5]), helper.make_tensor("yes", TensorProto.BOOL, [], [True])]


def test_loop_with_a_runtime_trip_count_carries_a_symbolic_tensor():
    """A Loop (while_) whose trip count is an input carries an [n, m] state that reads an outer [n, m]."""
    x = helper.make_tensor_value_info("x", F, ["n", "m"])
    trips = helper.make_tensor_value_info("trips", TensorProto.INT64, [])
    nodes = [helper.make_node("Loop", ["trips", "yes", "x"], ["final"], body=_loop_body(False))]
    data = _model(nodes, [x, trips], [helper.make_tensor_value_info("final", F, ["n", "m"])], _LOOP_INITS)
    _check(data, [{"x": _rand(3, 4), "trips": np.array(5, np.int64)},
                  {"x": _rand(2, 6, seed=1), "trips": np.array(0, np.int64)},
                  {"x": _rand(1, 2, seed=2), "trips": np.array(2, np.int64)}])


def test_loop_with_a_fixed_trip_count_stacks_symbolic_rows():
    """A Loop with a constant trip count stacks a per-step [m] row (scan outputs) of a symbolic state."""
    x = helper.make_tensor_value_info("x", F, ["n", "m"])
    nodes = [helper.make_node("Loop", ["three", "yes", "x"], ["final", "rows"], body=_loop_body(True))]
    inits = [*_LOOP_INITS, helper.make_tensor("three", TensorProto.INT64, [], [3])]
    data = _model(nodes, [x], [helper.make_tensor_value_info("final", F, ["n", "m"]),
                               helper.make_tensor_value_info("rows", F, [3, "m"])], inits)
    _check(data, [{"x": _rand(3, 4)}, {"x": _rand(2, 6, seed=1)}])


def _scan_model(prefix: bool) -> bytes:
    """Scan over the first axis of [t, b, m] (all symbolic): a decaying running sum carried; each step
    yields the new state itself (a prefix scan: one rlx ``scan``) or its tanh (unrolled per length)."""
    last = helper.make_node("Identity", ["acc_out"], ["y_t"]) if prefix else helper.make_node("Tanh", ["acc_out"], ["y_t"])
    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "decay"], ["kept"]), helper.make_node("Add", ["kept", "x_t"], ["acc_out"]), last],
        "body", [helper.make_tensor_value_info("acc_in", F, ["b", "m"]), helper.make_tensor_value_info("x_t", F, ["b", "m"])],
        [helper.make_tensor_value_info("acc_out", F, ["b", "m"]), helper.make_tensor_value_info("y_t", F, ["b", "m"])])
    x = helper.make_tensor_value_info("x", F, ["t", "b", "m"])
    init = helper.make_tensor_value_info("init", F, ["b", "m"])
    nodes = [helper.make_node("Scan", ["init", "x"], ["acc", "ys"], body=body, num_scan_inputs=1)]
    return _model(nodes, [init, x], [helper.make_tensor_value_info("acc", F, ["b", "m"]),
                                     helper.make_tensor_value_info("ys", F, ["t", "b", "m"])],
                  [helper.make_tensor("decay", F, [], [0.9])])


_SCAN_FEEDS = [{"init": _rand(2, 3), "x": _rand(4, 2, 3, seed=1)}, {"init": _rand(1, 5, seed=2), "x": _rand(6, 1, 5, seed=3)}]


def test_prefix_scan_over_a_symbolic_length_is_one_scan():
    _check(_scan_model(True), _SCAN_FEEDS)


def test_other_scans_of_a_symbolic_length_specialise_per_shape():
    """A scan output that is not the state unrolls: import_model asks for shapes, import_runnable imports per length."""
    data = _scan_model(False)
    with pytest.raises(rlx.onnx.OnnxUnsupported, match="symbolic length"):
        rlx.onnx.import_model(data)
    runnable = rlx.onnx.import_runnable(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for feed in _SCAN_FEEDS:
        for o, w in zip(runnable.run(feed), sess.run(None, feed)):
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)
