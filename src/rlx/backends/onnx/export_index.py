"""ONNX export of ``advanced_index`` / ``advanced_index_put`` as GatherND / ScatterND.

x is transposed so that the indexed axes come first; the index tensors are wrapped (negative ones
count from the end), broadcast together (added to a zero of their joint shape) and stacked on a new
last axis; GatherND then gives [broadcast dims, kept axes], which a Transpose and an Unsqueeze (new
axes) put in NumPy's layout (:func:`rlx.ops.advanced_index.layout`). The put runs the same steps in
reverse around ScatterND. Differences, documented rather than hidden: an out-of-range index is
onnxruntime's error, not rlx's RlxError; overwriting with duplicate indices is unspecified in ONNX
(rlx keeps the last update).
"""

from __future__ import annotations

import numpy as np

from rlx.backends.onnx.export_shapes import shape_value
from rlx.backends.onnx.exporter import _in_dtype, _in_shape, constant_of, exporter
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import OnnxUnsupported
from rlx.ir.shape import Shape, broadcast_shapes
from rlx.ops.advanced_index import full_pattern, indexed_axes, layout, result_shape


def _identity(perm: list[int]) -> bool:
    return perm == list(range(len(perm)))


def _transpose(ex, name: str, perm: list[int]) -> str:
    return name if _identity(perm) else ex.node("Transpose", [name], perm=perm)


def _gather_frame(ex, node, x: str, idx: list[str], first: int):
    """(x with indexed axes first, stacked [*S, k] indices, GatherND's axis labels, the axis order)."""
    shape = _in_shape(ex, node, 0)
    pattern = full_pattern(node.attrs["pattern"], len(shape))
    axes = indexed_axes(pattern)
    order = axes + [a for a in range(len(shape)) if a not in axes]
    wrapped = []
    for k, name in enumerate(idx):
        i = ex.cast(name, _in_dtype(ex, node, first + k), DType.I64)
        n = ex.scalar(shape[axes[k]], DType.I64) if isinstance(shape[axes[k]], int) else \
            ex.node("Gather", [ex.node("Shape", [x]), ex.ints([axes[k]])])
        wrapped.append(ex.node("Where", [ex.node("Less", [i, ex.scalar(0, DType.I64)]), ex.node("Add", [i, n]), i]))
    zero = wrapped[0]
    for w in wrapped[1:]:
        zero = ex.node("Add", [zero, w])
    zero = ex.node("Mul", [zero, ex.scalar(0, DType.I64)])
    stacked = ex.node("Concat", [ex.node("Unsqueeze", [ex.node("Add", [w, zero]), ex.ints([-1])]) for w in wrapped], axis=-1)
    nb = len(broadcast_shapes(*(Shape(_in_shape(ex, node, first + k)) for k in range(len(idx)))))
    labels = [("b", k) for k in range(nb)] + [("x", a) for a in order[len(axes):]]
    return _transpose(ex, x, order), stacked, labels, order, nb


def _gather_in_place(ex, node, ins) -> str | None:
    """Adjacent indexed axes, every index constant and in range, static dims: one ``Gather`` of the linear
    index on those axes merged into one (a Reshape), which leaves the index's dims where the axes were, the
    NumPy layout, with no Transpose around a GatherND. ConvBERT's unfold of its span conv ([2, 32, 16, 1]
    indexed by [9, 8, 1, 1] and [1, 1]), 1 thread: the per-layer Transpose / GatherND / Transpose becomes a
    Gather, as in torch's file. None where the general form is needed."""
    shape = _in_shape(ex, node, 0)
    pattern = node.attrs["pattern"]
    axes = indexed_axes(full_pattern(pattern, len(shape)))
    consts = [constant_of(ex, i) for i in node.inputs[1:]]
    if ("n" in pattern or not axes or axes != list(range(axes[0], axes[-1] + 1))
            or any(c is None or c.dtype.kind not in "iu" for c in consts)
            or not all(isinstance(d, int) for d in shape)):
        return None
    dims = [shape[a] for a in axes]
    if any(c.size and (c.min() < -n or c.max() >= n) for c, n in zip(consts, dims)):
        return None  # out of range: the general form keeps the engine's error
    nb = len(np.broadcast_shapes(*(c.shape for c in consts)))
    want = [("x", a) for a in range(axes[0])] + [("b", k) for k in range(nb)] + \
        [("x", a) for a in range(axes[-1] + 1, len(shape))]
    if layout(pattern, len(shape), nb) != want:
        return None
    lin = np.zeros((), np.int64)
    for c, n in zip(consts, dims):
        c = c.astype(np.int64)
        lin = lin * n + np.where(c < 0, c + n, c)
    x = ins[0]
    if len(axes) > 1:
        merged = [*shape[:axes[0]], int(np.prod(dims)), *shape[axes[-1] + 1:]]
        x = ex.node("Reshape", [x, ex.ints(merged)])
    return ex.node("Gather", [x, ex.const(lin)], axis=axes[0])


@exporter("advanced_index")
def _advanced_index(ex, node, ins):
    x, idx = ins[0], ins[1:]
    rank = len(_in_shape(ex, node, 0))
    if idx and (y := _gather_in_place(ex, node, ins)) is not None:
        return y
    if not idx:
        y, labels, nb = x, [("x", a) for a in range(rank)], 0
    else:
        xt, stacked, labels, _, nb = _gather_frame(ex, node, x, idx, 1)
        y = ex.node("GatherND", [xt, stacked])
    target = layout(node.attrs["pattern"], rank, nb)
    y = _transpose(ex, y, [labels.index(lab) for lab in target if lab[0] != "n"])
    new = [p for p, lab in enumerate(target) if lab[0] == "n"]
    return ex.node("Unsqueeze", [y, ex.ints(new)]) if new else y


@exporter("advanced_index_put")
def _advanced_index_put(ex, node, ins):
    x, values, idx = ins[0], ins[1], ins[2:]
    if not idx:
        raise OnnxUnsupported("advanced_index_put without index tensors")
    xt, stacked, labels, order, nb = _gather_frame(ex, node, x, idx, 2)
    xtype = ex.g.node(node.inputs[0]).type
    target = result_shape(xtype, broadcast_shapes(*(Shape(_in_shape(ex, node, 2 + k)) for k in range(len(idx)))), node.attrs["pattern"])
    upd = ex.node("Expand", [values, shape_value(ex, list(target))])  # symbolic sizes computed at run time
    numpy_labels = layout(node.attrs["pattern"], len(order), nb)
    upd = _transpose(ex, upd, [numpy_labels.index(lab) for lab in labels])
    out = ex.node("ScatterND", [xt, stacked, upd], reduction="add" if node.attrs["accumulate"] else None)
    return _transpose(ex, out, [order.index(a) for a in range(len(order))])
