"""ONNX detection ops (NonMaxSuppression, NonZero, Unique, RoiAlign) against onnxruntime.

The data-sized ones run through ``rlx.onnx.import_runnable`` (value specialisation on the
inputs that size the output); RoiAlign with constant boxes imports as one graph whose
feature map is a runtime input.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, opset: int = 18, inits=()) -> bytes:
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def ort_run(m: bytes, feed: dict) -> list[np.ndarray]:
    return ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feed)


def same_as_ort(m: bytes, feeds: list[dict], atol: float = 0.0, rtol: float = 0.0):
    runnable = rlx.onnx.import_runnable(m)
    for feed in feeds:
        want, got = ort_run(m, feed), runnable.run(feed)
        assert len(got) == len(want)
        for a, e in zip(got, want):
            assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
    return runnable


# ---------------------------------------------------------------- NonMaxSuppression
def nms_model(center_point_box: int = 0, with_score: bool = True) -> bytes:
    ins = ["boxes", "scores", "k", "iou"] + (["st"] if with_score else [])
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=center_point_box)
    decl = [("boxes", F, None), ("scores", F, None), ("k", I64, [1]), ("iou", F, [1])]
    return model([node], decl + ([("st", F, [1])] if with_score else []), [("sel", I64, None)])


def random_boxes(rng, batches: int, n: int, center: bool) -> np.ndarray:
    a, b = rng.uniform(0, 10, (2, batches, n, 2)).astype(np.float32)
    if center:
        return np.concatenate([a, np.abs(b - 5) + 0.1], -1).astype(np.float32)
    return np.concatenate([a, b], -1)  # any diagonal pair of corners, flipped ones included


def nms_feed(rng, batches, classes, n, k, iou, st=None, center=False):
    boxes = random_boxes(rng, batches, n, center)
    scores = np.round(rng.uniform(0, 1, (batches, classes, n)), 1).astype(np.float32)  # ties
    feed = {"boxes": boxes, "scores": scores, "k": np.array([k]), "iou": np.array([iou], np.float32)}
    if st is not None:
        feed["st"] = np.array([st], np.float32)
    return feed


@pytest.mark.parametrize("center", [0, 1])
def test_nms_random_boxes_match_onnxruntime(center):
    rng = np.random.default_rng(center)
    feeds = [nms_feed(rng, b, c, n, k, iou, st, bool(center))
             for b, c, n, k, iou, st in [(1, 1, 12, 5, 0.3, 0.2), (2, 3, 20, 4, 0.5, 0.5), (3, 2, 30, 100, 0.1, 0.0),
                                         (1, 2, 8, 0, 0.5, 0.1), (2, 1, 15, 3, 0.0, 0.95), (1, 1, 10, 10, 1.0, 0.3)]]
    r = same_as_ort(nms_model(center), feeds)
    assert set(r.value_inputs) == {"boxes", "scores", "k", "iou", "st"}


def test_nms_without_score_threshold_keeps_low_and_negative_scores():
    rng = np.random.default_rng(7)
    feed = nms_feed(rng, 2, 2, 10, 6, 0.4)
    feed["scores"] -= 0.5
    same_as_ort(nms_model(with_score=False), [feed])


def test_nms_zero_area_boxes_and_identical_boxes():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 2, 5], [2, 2, 2, 5], [3, 3, 3, 3]]], np.float32)
    scores = np.array([[[0.5, 0.9, 0.9, 0.8, 0.7, 0.6]]], np.float32)
    feed = {"boxes": boxes, "scores": scores, "k": np.array([10]), "iou": np.array([0.5], np.float32),
            "st": np.array([0.0], np.float32)}
    r = same_as_ort(nms_model(), [feed])
    # independently: the tie goes to the lower index; zero-area boxes suppress nothing
    np.testing.assert_array_equal(r.run(feed)[0][:, 2], [1, 3, 4, 5])


def test_nms_iou_exactly_at_threshold_is_kept():
    boxes = np.array([[[0, 0, 1, 2], [0, 1, 1, 3]]], np.float32)  # IoU 1/3
    feed = {"boxes": boxes, "scores": np.array([[[0.9, 0.8]]], np.float32), "k": np.array([5]),
            "iou": np.array([1 / 3], np.float32), "st": np.array([0.0], np.float32)}
    same_as_ort(nms_model(), [feed])


def test_nms_constant_operands_import_without_specialisation():
    rng = np.random.default_rng(3)
    feed = nms_feed(rng, 2, 2, 9, 3, 0.3, 0.1)
    consts = [helper.make_node("Constant", [], [k], value=onnx.numpy_helper.from_array(v)) for k, v in feed.items()]
    m = model([*consts, helper.make_node("NonMaxSuppression", list(feed), ["sel"])], [], [("sel", I64, None)])
    graph, params = rlx.onnx.import_model(m)
    got = rlx.compile(graph).run({}, params)[0]
    np.testing.assert_array_equal(got, ort_run(m, {})[0])


def test_nms_bad_box_shape_is_a_typed_error():
    m = nms_model()
    feed = {"boxes": np.zeros((1, 3, 3), np.float32), "scores": np.zeros((1, 1, 3), np.float32),
            "k": np.array([1]), "iou": np.array([0.5], np.float32), "st": np.array([0.0], np.float32)}
    with pytest.raises(rlx.RlxError, match="NonMaxSuppression boxes"):
        rlx.onnx.import_runnable(m).run(feed)


# ---------------------------------------------------------------- NonZero / Unique
def test_nonzero_matches_onnxruntime():
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [("x", F, None)], [("y", I64, None)])
    rng = np.random.default_rng(1)
    x = (rng.uniform(size=(3, 4, 2)) > 0.6).astype(np.float32)
    same_as_ort(m, [{"x": x}, {"x": np.zeros((2, 2), np.float32)}])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sort", [0, 1])
def test_unique_matches_onnxruntime(axis, sort):
    kw = {"sorted": sort} if axis is None else {"sorted": sort, "axis": axis}
    m = model([helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], **kw)], [("x", F, None)],
              [("y", F, None), ("i", I64, None), ("inv", I64, None), ("c", I64, None)], opset=11)
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.integers(0, 3, (4, 3, 2)).astype(np.float32)},
             {"x": rng.integers(-2, 2, (5, 2, 3)).astype(np.float32)}]
    same_as_ort(m, feeds)


def test_unique_integer_input_and_unused_outputs():
    m = model([helper.make_node("Unique", ["x"], ["y", "", "inv"], sorted=0)], [("x", I64, None)],
              [("y", I64, None), ("inv", I64, None)], opset=11)
    same_as_ort(m, [{"x": np.array([5, 1, 5, 5, 2, 1, 9])}])


def test_nms_on_computed_boxes_then_gathering_the_kept_boxes():
    """A detection head's tail: boxes / scores computed from the input, NMS, the kept boxes gathered;
    the runnable specialises on the graph input the NMS operands depend on."""
    c = [helper.make_node("Constant", [], [n], value=onnx.numpy_helper.from_array(v)) for n, v in
         [("two", np.array(2.0, np.float32)), ("k", np.array([4])), ("iou", np.array([0.3], np.float32)),
          ("st", np.array([0.4], np.float32)), ("zero", np.array(0)), ("col", np.array(2)), ("sq", np.array([0]))]]
    nodes = [*c, helper.make_node("Mul", ["raw", "two"], ["boxes"]), helper.make_node("Sigmoid", ["logits"], ["scores"]),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "k", "iou", "st"], ["sel"]),
             helper.make_node("Gather", ["sel", "col"], ["idx"], axis=1),
             helper.make_node("Gather", ["boxes", "zero"], ["b0"], axis=0),
             helper.make_node("Gather", ["b0", "idx"], ["kept"], axis=0)]
    m = model(nodes, [("raw", F, [1, 16, 4]), ("logits", F, [1, 1, 16])], [("kept", F, None), ("sel", I64, None)])
    rng = np.random.default_rng(11)
    feeds = [{"raw": random_boxes(rng, 1, 16, False), "logits": rng.standard_normal((1, 1, 16)).astype(np.float32)}
             for _ in range(2)]
    r = same_as_ort(m, feeds)
    assert set(r.value_inputs) == {"raw", "logits"}


def test_nms_behind_an_unfoldable_intermediate_says_why():
    """Value specialisation folds the graph with the inputs bound; an intermediate over the folding
    limit stays a runtime value, so the NMS boxes cannot become static: the error says so."""
    from rlx.frontends.onnx.importer import FOLD_LIMIT

    rep = [1, 1, 2, FOLD_LIMIT // 64 + 1]  # img [1, 1, 4, 32] tiled past the limit
    c = [helper.make_node("Constant", [], [n], value=onnx.numpy_helper.from_array(v)) for n, v in
         [("rep", np.array(rep)), ("ax", np.array([1, 3])), ("shp", np.array([1, 2, 4])), ("k", np.array([3])),
          ("iou", np.array([0.5], np.float32))]]
    nodes = [*c, helper.make_node("Tile", ["img", "rep"], ["big"]),
             helper.make_node("ReduceMean", ["big", "ax"], ["m"], keepdims=0),
             helper.make_node("Reshape", ["m", "shp"], ["boxes"]),
             helper.make_node("NonMaxSuppression", ["boxes", "sc", "k", "iou"], ["sel"])]
    m = model(nodes, [("img", F, [1, 1, 4, 32]), ("sc", F, [1, 1, 2])], [("sel", I64, None)])
    feed = {"img": np.ones((1, 1, 4, 32), np.float32), "sc": np.ones((1, 1, 2), np.float32)}
    with pytest.raises(rlx.RlxError, match="folding limit"):
        rlx.onnx.import_runnable(m).run(feed)
