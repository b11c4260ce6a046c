"""ONNX detection ops: NonMaxSuppression, Unique (outputs sized by the data) and RoiAlign.

NonMaxSuppression is a sequential greedy selection and Unique's outputs have a length fixed
by the input's values, so neither is a fixed-shape MIR graph: both are computed at import
time from operands known then (constants, or graph inputs bound by value specialisation,
:mod:`rlx.frontends.onnx.runnable`; ``cx.static`` raises ``NeedsStatic`` otherwise, as for
Compress). RoiAlign's output shape is static: with the boxes known, its bilinear sampling
becomes constant gather indices and weights applied to the feature map ``X``, which stays a
runtime value.
"""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _axis, _first
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported


def _optional_static(cx, node, i: int, what: str) -> np.ndarray | None:
    """Input ``i`` as NumPy when it is given (and non-empty), else None."""
    if i >= len(node.input) or not node.input[i]:
        return None
    arr = np.asarray(cx.static(node.input[i], what))
    return arr if arr.size else None


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """Boxes ``[..., 4]`` as ``(y_min, x_min, y_max, x_max)`` (either diagonal pair of corners, or centre + size)."""
    if center_point_box == 0:
        y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
        return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], -1)
    if center_point_box == 1:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    raise OnnxFormatError(f"NonMaxSuppression center_point_box must be 0 or 1, got {center_point_box}")


def _overlaps(box: np.ndarray, others: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Whether each of ``others`` has IoU strictly above the threshold with ``box`` (an empty box overlaps nothing)."""
    ih = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iw = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.maximum(ih, 0) * np.maximum(iw, 0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    valid = (area > 0) & (areas > 0) & (inter > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return valid & (inter / np.where(valid, union, 1) > iou_threshold)


def nms_select(boxes: np.ndarray, scores: np.ndarray, max_per_class: int, iou_threshold: float,
               score_threshold: float | None, center_point_box: int = 0) -> np.ndarray:
    """Selected ``[batch, class, box]`` triples, int64 ``[n, 3]``: per batch and class, boxes by descending
    score (ties: lower index first) above ``score_threshold``, each kept unless its IoU with a kept one
    exceeds ``iou_threshold``, at most ``max_per_class``."""
    corners = _corners(boxes, center_point_box)
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = np.argsort(-s, kind="stable")
            if score_threshold is not None:
                order = order[s[order] > score_threshold]
            kept: list[int] = []
            while order.size and len(kept) < max_per_class:
                i = int(order[0])
                kept.append(i)
                rest = order[1:]
                order = rest[~_overlaps(corners[b, i], corners[b, rest], iou_threshold)]
            out += [(b, c, i) for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


@converter("NonMaxSuppression")
def _non_max_suppression(cx, node, ins, attrs):
    boxes = np.asarray(cx.static(node.input[0], "NonMaxSuppression boxes"))
    scores = np.asarray(cx.static(node.input[1], "NonMaxSuppression scores"))
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[::2] != boxes.shape[:2]:
        raise OnnxFormatError(f"NonMaxSuppression boxes {list(boxes.shape)} must be [batches, boxes, 4] and scores "
                              f"{list(scores.shape)} [batches, classes, boxes]")
    max_out = _optional_static(cx, node, 2, "NonMaxSuppression max_output_boxes_per_class")
    iou = _optional_static(cx, node, 3, "NonMaxSuppression iou_threshold")
    score = _optional_static(cx, node, 4, "NonMaxSuppression score_threshold")
    k = 0 if max_out is None else max(int(_first(max_out, "max_output_boxes_per_class")), 0)
    iou_t = 0.0 if iou is None else float(_first(iou, "iou_threshold"))
    score_t = None if score is None else float(_first(score, "score_threshold"))
    if not 0.0 <= iou_t <= 1.0:
        raise OnnxFormatError(f"NonMaxSuppression iou_threshold must lie in [0, 1], got {iou_t}")
    cx.check_elements(scores.size * 3, "the NonMaxSuppression selection")
    n = boxes.shape[1]  # each kept box is tested against the boxes left: bound that work, not only the output
    cx.check_elements(scores.shape[0] * scores.shape[1] * min(k, n) * n, "the NonMaxSuppression overlap tests")
    sel = nms_select(boxes, scores, k, iou_t, score_t, int(attrs.get("center_point_box", 0)))
    return cx.const(sel)


@converter("NonZero")
def _non_zero(cx, node, ins, attrs):
    x = np.asarray(cx.static(node.input[0], "NonZero input"))
    return cx.const(np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1))


def unique(x: np.ndarray, axis: int | None, sort: bool) -> tuple[np.ndarray, ...]:
    """ONNX Unique's ``(Y, indices, inverse_indices, counts)``: the distinct elements (or slices along
    ``axis``) ascending, or in order of first occurrence when not ``sort``; ``indices`` their first
    positions, ``inverse_indices`` each element's position in ``Y``, ``counts`` their multiplicities."""
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sort:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)


@converter("Unique")
def _unique(cx, node, ins, attrs):
    x = np.asarray(cx.static(node.input[0], "Unique input"))
    axis = attrs.get("axis")
    if axis is not None:
        axis = _axis(int(axis), x.ndim)
    if np.issubdtype(x.dtype, np.floating) and np.isnan(x).any():
        raise OnnxUnsupported("Unique of an input holding NaN (NaN equality is not specified)")
    y, first, inverse, counts = unique(x, axis, bool(attrs.get("sorted", 1)))
    return [cx.const(y.astype(x.dtype)), cx.const(first), cx.const(inverse), cx.const(counts)]
