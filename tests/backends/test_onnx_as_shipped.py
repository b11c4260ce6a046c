"""ONNX models run exactly as shipped, checked against onnxruntime.

``rlx.onnx.import_runnable``: shape-like operands fed by graph inputs (Reshape / Expand / Tile
shapes, Range limits, ConstantOfShape, a Reduce's axes) are value-specialised at run time,
one build per distinct value set; u16 / u64 tensors import as rlx's own element types.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, opset: int = 18) -> bytes:
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def ort_run(m: bytes, feed: dict) -> list[np.ndarray]:
    return ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feed)


def check_runs(m: bytes, feeds: list[dict], value_inputs: tuple[str, ...]):
    runnable = rlx.onnx.import_runnable(m)
    for feed in feeds:
        want = ort_run(m, feed)
        got = runnable.run(feed)
        assert len(got) == len(want)
        for a, e in zip(got, want):
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6)
    assert runnable.value_inputs == value_inputs
    return runnable


def test_import_model_alone_refuses_a_runtime_shape():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              [("x", TensorProto.FLOAT, [2, 6]), ("s", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, None)])
    with pytest.raises(rlx.RlxError, match="must be static"):
        rlx.onnx.import_model(m)


def test_reshape_with_a_runtime_shape_builds_once_per_value():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              [("x", TensorProto.FLOAT, [2, 6]), ("s", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, None)])
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    feeds = [{"x": x, "s": np.array([3, 4])}, {"x": x, "s": np.array([-1, 2])}, {"x": x, "s": np.array([3, 4])}]
    r = check_runs(m, feeds, ("s",))
    assert r._specialized.stats["builds"] == 2


def test_expand_and_tile_with_runtime_shapes():
    m = model([helper.make_node("Expand", ["x", "shape"], ["e"]), helper.make_node("Tile", ["e", "reps"], ["y"])],
              [("x", TensorProto.FLOAT, [3, 1]), ("shape", TensorProto.INT64, ["n"]), ("reps", TensorProto.INT64, ["n"])],
              [("y", TensorProto.FLOAT, None)])
    x = RNG.standard_normal((3, 1)).astype(np.float32)
    check_runs(m, [{"x": x, "shape": np.array([3, 4]), "reps": np.array([1, 2])},
                   {"x": x, "shape": np.array([2, 3, 5]), "reps": np.array([2, 1, 1])}], ("reps", "shape"))


def test_range_feeding_constant_of_shape_reveals_the_next_value_input():
    """ConstantOfShape's shape is the Range's size: bound only once the Range's limit is."""
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Shape", ["r"], ["n"]),
             helper.make_node("ConstantOfShape", ["n"], ["z"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
             helper.make_node("Add", ["z", "x"], ["y"])]
    m = model(nodes, [("start", TensorProto.FLOAT, []), ("limit", TensorProto.FLOAT, []), ("delta", TensorProto.FLOAT, []),
                      ("x", TensorProto.FLOAT, [1])], [("y", TensorProto.FLOAT, None)])
    one = np.array([1.0], np.float32)
    check_runs(m, [{"start": np.array(0, np.float32), "limit": np.array(5, np.float32), "delta": np.array(1, np.float32), "x": one},
                   {"start": np.array(1, np.float32), "limit": np.array(2, np.float32), "delta": np.array(0.25, np.float32), "x": one}],
               ("delta", "limit", "start"))


def test_reduce_with_axes_fed_as_an_input():
    m = model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
              [("x", TensorProto.FLOAT, [2, 3, 4]), ("axes", TensorProto.INT64, [1])], [("y", TensorProto.FLOAT, None)])
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check_runs(m, [{"x": x, "axes": np.array([1])}, {"x": x, "axes": np.array([-1])}], ("axes",))


def test_a_model_without_value_inputs_is_compiled_once():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [4])], [("y", TensorProto.FLOAT, [4])])
    r = check_runs(m, [{"x": RNG.standard_normal(4).astype(np.float32)}], ())
    assert r._specialized is None


def test_missing_value_input_is_a_feed_error():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              [("x", TensorProto.FLOAT, [2, 6]), ("s", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, None)])
    with pytest.raises(rlx.FeedError, match="'s'"):
        rlx.onnx.import_runnable(m).run({"x": np.zeros((2, 6), np.float32)})


NUMPY_OPS = {"Add": np.add, "Mul": np.multiply, "Max": np.maximum, "Less": np.less, "BitShift": np.left_shift}


@pytest.mark.parametrize(("dtype", "np_dtype"), [(TensorProto.UINT16, np.uint16), (TensorProto.UINT64, np.uint64)])
@pytest.mark.parametrize("op", sorted(NUMPY_OPS))
def test_unsigned_elementwise(op, dtype, np_dtype):
    """NumPy's unsigned arithmetic (wrapping) is ONNX's; onnxruntime checks it too where it has a kernel."""
    attrs = {"direction": "LEFT"} if op == "BitShift" else {}
    out = TensorProto.BOOL if op == "Less" else dtype
    m = model([helper.make_node(op, ["a", "b"], ["y"], **attrs)], [("a", dtype, [6]), ("b", dtype, [6])], [("y", out, [6])])
    info = np.iinfo(np_dtype)
    a = np.array([0, 1, 7, info.max - 3, info.max, 12345], np_dtype)  # wrap-around at the top of the range
    b = np.array([0, 3, 2, 5, 1, 3], np_dtype)
    (got,) = rlx.onnx.import_runnable(m).run({"a": a, "b": b})
    want = NUMPY_OPS[op](a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    try:
        (ort_want,) = ort_run(m, {"a": a, "b": b})
    except Exception as exc:  # onnxruntime has no kernel for this op and type
        assert "NOT_IMPLEMENTED" in str(exc)
        return
    np.testing.assert_array_equal(got, ort_want)


def test_sequence_ops_with_runtime_positions():
    """Construct / Erase / Insert / At / Length / ConcatFromSequence / SplitToSequence, positions fed as inputs."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=1, keepdims=0),
             helper.make_node("SequenceConstruct", ["a", "b", "a"], ["s1"]),
             helper.make_node("SequenceErase", ["s1", "erase"], ["s2"]),
             helper.make_node("SequenceInsert", ["s2", "b", "insert"], ["s3"]),
             helper.make_node("SequenceAt", ["rows", "at"], ["picked"]),
             helper.make_node("SequenceInsert", ["s3", "picked"], ["s4"]),
             helper.make_node("ConcatFromSequence", ["s4"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("SequenceLength", ["s4"], ["n"]),
             helper.make_node("SplitToSequence", ["a", "sizes"], ["parts"], axis=0),
             helper.make_node("ConcatFromSequence", ["parts"], ["joined"], axis=-1)]
    i64 = lambda name: (name, TensorProto.INT64, [])
    m = model(nodes, [("x", TensorProto.FLOAT, [3, 3]), ("a", TensorProto.FLOAT, [3]), ("b", TensorProto.FLOAT, [3]),
                      i64("erase"), i64("insert"), i64("at"), ("sizes", TensorProto.INT64, [2])],
              [("stacked", TensorProto.FLOAT, None), ("n", TensorProto.INT64, None), ("joined", TensorProto.FLOAT, None)])
    x = RNG.standard_normal((3, 3)).astype(np.float32)
    a, b = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    feed = lambda e, i, t, s: {"x": x, "a": a, "b": b, "erase": np.array(e), "insert": np.array(i),
                               "at": np.array(t), "sizes": np.array(s)}
    check_runs(m, [feed(0, 1, 2, [1, 2]), feed(-1, -2, -3, [3, 0]), feed(1, 2, 0, [2, 1])],
               ("at", "erase", "insert", "sizes"))


def test_sequence_position_out_of_range_is_a_format_error():
    m = model([helper.make_node("SequenceConstruct", ["a", "a"], ["s"]), helper.make_node("SequenceAt", ["s", "at"], ["y"])],
              [("a", TensorProto.FLOAT, [2]), ("at", TensorProto.INT64, [])], [("y", TensorProto.FLOAT, None)])
    with pytest.raises(rlx.RlxError, match="position 2 is out of range for a sequence of 2"):
        rlx.onnx.import_runnable(m).run({"a": np.zeros(2, np.float32), "at": np.array(2)})
