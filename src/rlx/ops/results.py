"""Multi-result structure: the ``result`` op that holds results 1.. of a multi-result node, and ``split``.

A node whose type rule returns a tuple of types has one result per type. Result 0 is the
node itself; result ``r`` is the node ``result(%k) {index=r}`` that the graph appends right
after it, at id ``k + r`` (:mod:`rlx.ir.graph`). ``result`` nodes compute nothing: runtimes,
planners and autodiff treat them as the producer's extra outputs, so, like the sources
(level ``source``), they have no kernel and no rules of their own. Rules of a multi-result op see every result: its kernel returns
a tuple of arrays, its VJP gets a tuple of cotangents (``None`` for results nobody uses),
its JVP and batch rules return a tuple. An op whose result count depends on its
attributes (split into one piece, a loop with one carry) builds an ordinary one-result
node when that count is 1: its kernel then returns one array and its VJP gets one
cotangent (:func:`as_tuple` reads both forms); the builder still returns a 1-tuple.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import known_ge
from rlx.ops.common import along_axis, axis_of


def _result_type(ins, attrs):
    raise ShapeError("a result node is appended with its multi-result producer (result r of node %k is node %k+r); "
                     "build the producer and take its results")


defop(
    name="result", family="results", level="source", arity=1, operands=("producer",),
    attrs={"index": AttrSpec("int", doc="which result of the producer (>= 1; result 0 is the producer node)")},
    infer=_result_type, kernel=None, flags={"complex_ad"},
    doc="Result `index` (>= 1) of the multi-result node it reads, stored at that node's id + index. "
    "Created with its producer, never on its own; it computes nothing (runtimes write it with the producer).",
)


# ---------------------------------------------------------------------------------- split
def _split_canon(ins, attrs):
    try:
        return {**attrs, "axis": axis_of(attrs["axis"], ins[0])}
    except ShapeError:
        return attrs


def _split_type(ins, attrs):
    (t,) = ins
    axis = along_axis(t, attrs, "split")
    sizes, n = attrs["sizes"], t.shape[axis]
    if not sizes:
        raise ShapeError("split needs at least one piece (sizes is empty)")
    if any(known_ge(s, 0) is False for s in sizes):
        raise ShapeError(f"split sizes must be >= 0, got {list(sizes)}")
    total = sum(sizes)
    if total != n:  # symbolic sizes compare in canonical form: floordiv(n + 1, 2) + n - floordiv(n + 1, 2) == n
        raise ShapeError(f"split sizes {list(sizes)} sum to {total}, but axis {axis} has {n}")
    dims = list(t.shape)
    return tuple(TensorType(Shape([*dims[:axis], s, *dims[axis + 1:]]), t.dtype) for s in sizes)


def as_tuple(node, value):
    """A multi-result rule's per-result value(s) as a tuple: ``value`` itself for a one-result node."""
    return value if node.extra_types else (value,)


def one_or_tuple(values):
    """What a kernel of a node with ``len(values)`` results returns: one array, or a tuple of them."""
    return values[0] if len(values) == 1 else tuple(values)


def _split_kernel(args, attrs, out):
    cuts = np.cumsum(attrs["sizes"])[:-1]
    return one_or_tuple(np.split(args[0], cuts, axis=attrs["axis"]))


def _split_vjp(ctx, node, cts):
    if not ctx.wants(node, 0):
        return [None]
    parts = [ct if ct is not None else ctx.zeros_like(o) for ct, o in zip(as_tuple(node, cts), ctx.outputs(node))]
    return [parts[0] if len(parts) == 1 else ctx.graph.concat(parts, axis=node.attrs["axis"])]


def _split_jvp(ctx, node, tangents):
    return ctx.graph.split(tangents[0], axis=node.attrs["axis"], sizes=node.attrs["sizes"])


def _split_batch(ctx, node, operands, batched):
    return ctx.graph.split(operands[0], axis=ctx.shift_axis(node.attrs["axis"]), sizes=node.attrs["sizes"])


defop(
    name="split", family="results", arity=1, operands=("x",),
    attrs={"axis": AttrSpec("int", default=0),
           "sizes": AttrSpec("sizes", doc="the length of each piece along axis (symbolic ones add up to a symbolic axis)")},
    canonicalize=_split_canon, infer=_split_type, kernel=_split_kernel,
    vjp=_split_vjp, jvp=_split_jvp, batch=_split_batch, flags={"complex_ad"},
    doc="Cut x along `axis` into len(sizes) pieces of those lengths (they must add up to the axis size): "
    "one node with one result per piece (ONNX Split, torch.split with a list). VJP: concat of the "
    "piece cotangents (zeros for unused pieces).",
)
