"""ONNX Split and TopK import as ONE multi-result node (``split`` / ``top_k(output="both")``), checked
against onnxruntime, static and symbolic sizes."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx.onnx  # noqa: E402


def _model(node, x_shape, n_out, inits=(), opset=18, dtype=TensorProto.FLOAT):
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", dtype, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.INT64 if (node.op_type, j) == ("TopK", 1) else dtype, None)
                               for j, o in enumerate(node.output[:n_out])],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, xs, unordered_axis: int | None = None) -> rlx.Graph:
    """One import, then every feed in ``xs`` against onnxruntime (values exactly: these ops move data).
    ``unordered_axis``: the outputs' order along it is unspecified (TopK sorted=0), compare them sorted."""
    g, params = rlx.onnx.import_model(model)
    rlx.verify(g)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in xs:
        want = sess.run(None, {"x": x})
        got = rlx.run(g, {"x": x}, params)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype
            if unordered_axis is not None:
                a, b = np.sort(a, axis=unordered_axis), np.sort(b, axis=unordered_axis)
            np.testing.assert_array_equal(a, b)
    return g


def _ops(g: rlx.Graph) -> list[str]:
    return [n.op for n in g.nodes if n.op not in ("input", "param", "constant", "result")]


R = np.random.default_rng(0)


@pytest.mark.parametrize("split,opset", [([2, 3, 1], 13), ([2, 3, 1], 11), ([0, 6, 0], 13), (None, 18)])
def test_split_is_one_node(split, opset):
    if split is None:  # num_outputs: 6 into 4 -> 2, 2, 2, 0
        node, inits = helper.make_node("Split", ["x"], ["a", "b", "c", "d"], axis=1, num_outputs=4), []
    elif opset < 13:
        node, inits = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, split=split), []
    else:
        node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=1)
        inits = [helper.make_tensor("s", TensorProto.INT64, [3], split)]
    model = _model(node, [4, 6, 5], len(node.output), inits, opset=opset)
    g = _check(model, [R.standard_normal((4, 6, 5)).astype(np.float32)])
    assert _ops(g) == ["split"]
    (sp,) = [n for n in g.nodes if n.op == "split"]
    assert sp.num_results == len(node.output)


def test_split_unused_outputs_still_one_node():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    model = _model(node, [9, 2], 1)
    g = _check(model, [R.standard_normal((9, 2)).astype(np.float32)])
    assert _ops(g) == ["split"]


def test_split_of_a_symbolic_axis_into_equal_parts():
    """num_outputs over a symbolic axis: sizes floordiv(n + 2, 3) (twice) and the rest, one import for every n."""
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
    model = _model(node, ["batch", "n"], 3)
    g = _check(model, [R.standard_normal((2, n)).astype(np.float32) for n in (9, 7, 8, 5)] +
               [R.standard_normal((3, 6)).astype(np.float32)])
    assert _ops(g) == ["split"]
    (sp,) = [n for n in g.nodes if n.op == "split"]
    assert all(not isinstance(s, int) for s in sp.attrs["sizes"])


def test_split_of_a_symbolic_axis_opset_13_equal_parts():
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0)  # no sizes: equal halves
    model = _model(node, ["n", 3], 2, opset=13)
    g = _check(model, [R.standard_normal((n, 3)).astype(np.float32) for n in (4, 10)])
    assert _ops(g) == ["split"]


@pytest.mark.parametrize("k,axis,largest,sorted_", [(3, -1, 1, 1), (2, 0, 0, 1), (5, 1, 1, 0), (1, -1, 0, 1)])
def test_topk_is_one_node_with_values_and_indices(k, axis, largest, sorted_):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest, sorted=sorted_)
    model = _model(node, [4, 7], 2, [helper.make_tensor("k", TensorProto.INT64, [1], [k])])
    x = R.standard_normal((4, 7)).astype(np.float32)
    x[1, 2] = x[1, 5]  # a tie: the lower index first
    g = _check(model, [x], unordered_axis=None if sorted_ else axis)
    assert _ops(g) == ["top_k"]
    (tk,) = [n for n in g.nodes if n.op == "top_k"]
    assert tk.attrs["output"] == "both" and tk.num_results == 2


def test_topk_with_symbolic_batch_and_integers():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    model = _model(node, ["batch", 6], 2, [helper.make_tensor("k", TensorProto.INT64, [1], [3])], dtype=TensorProto.INT64)
    g = _check(model, [R.integers(-50, 50, (b, 6)).astype(np.int64) for b in (1, 5)])
    assert _ops(g) == ["top_k"]


def test_topk_opset_1_attribute_k():
    node = helper.make_node("TopK", ["x"], ["v", "i"], k=2)
    g = _check(_model(node, [3, 5], 2, opset=9), [R.standard_normal((3, 5)).astype(np.float32)])
    assert _ops(g) == ["top_k"]
