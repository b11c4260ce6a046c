"""Which nodes are *views*: results that are a contiguous byte range of an operand's buffer.

The rule for each op lives in one table, :data:`VIEW_RULES`, keyed by op name: a function
``(node, in_types) -> byte offset or None`` (None: this instance is not a view and needs its
own buffer). Users register more with :func:`register_view`. A view gets no allocation: it
aliases its *root* (the first non-view ancestor) at the summed byte offset and keeps that
root alive. Only static shapes are resolved; a dynamic node is never a view.

Multi-result ops have views per result (:data:`RESULT_VIEW_RULES`): ``(node, in_types, r) ->
byte offset of result r inside operand 0, or None``. Result 0 is the node itself, result r its
``result`` node; each aliases operand 0's root on its own (a ``split`` along an axis with only
size-1 dims before it cuts its operand into contiguous pieces, so every piece is a view).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.shape import TensorType

ViewRule = Callable[[Node, list[TensorType]], "int | None"]


def _static(*types: TensorType) -> bool:
    return all(t.shape.is_static for t in types)


def _reshape(node: Node, ins: list[TensorType]) -> int | None:
    return 0 if _static(ins[0], node.type) else None


def _cast(node: Node, ins: list[TensorType]) -> int | None:
    return 0 if node.dtype == ins[0].dtype and _static(ins[0]) else None


def _narrow(node: Node, ins: list[TensorType]) -> int | None:
    """A narrow is contiguous when every dim before the axis is 1, or it keeps the whole axis."""
    src = ins[0]
    if not _static(src):
        return None
    axis, start, length = node.attrs["axis"] % len(src.shape), node.attrs["start"], node.attrs["length"]
    outer = math.prod(src.shape[:axis])
    inner = math.prod(src.shape[axis + 1:])
    if length == src.shape[axis] and start == 0:
        return 0
    if outer <= 1:
        return start * inner * src.dtype.itemsize
    return None


def _transpose(node: Node, ins: list[TensorType]) -> int | None:
    """A transpose that keeps the relative order of every axis of size > 1 moves no bytes."""
    src = ins[0]
    if not _static(src):
        return None
    perm = node.attrs["perm"]
    moved = [p for p in perm if src.shape[p] != 1]
    return 0 if moved == sorted(moved) else None


def _expand(node: Node, ins: list[TensorType]) -> int | None:
    """An expand that adds no elements (only leading 1s) is a reshape."""
    src = ins[0]
    if not _static(src, node.type) or math.prod(node.shape) != math.prod(src.shape):
        return None
    return 0


def _single_concat(node: Node, ins: list[TensorType]) -> int | None:
    return 0 if len(ins) == 1 and ins[0].dtype == node.dtype and _static(ins[0]) else None


VIEW_RULES: dict[str, ViewRule] = {
    "reshape": _reshape,
    "cast": _cast,
    "narrow": _narrow,
    "transpose": _transpose,
    "expand": _expand,
    "concat": _single_concat,
}

def _split_piece(node: Node, ins: list[TensorType], r: int) -> int | None:
    """Piece r of a split is contiguous when every dim before the axis is 1 (or there is one piece)."""
    src = ins[0]
    if not _static(src):
        return None
    axis, sizes = node.attrs["axis"] % len(src.shape), node.attrs["sizes"]
    if math.prod(src.shape[:axis]) > 1 and len(sizes) > 1:
        return None
    return sum(sizes[:r]) * math.prod(src.shape[axis + 1:]) * src.dtype.itemsize


RESULT_VIEW_RULES: dict[str, Callable[[Node, list[TensorType], int], int | None]] = {
    "split": _split_piece,
}

# View ops take their data from operand 0 (the aliased tensor).
VIEW_OPERAND = 0


def register_view(op: str, rule: ViewRule) -> None:
    """Declare (or replace) the view rule of an op."""
    VIEW_RULES[op] = rule


def view_offset(node: Node, in_types: list[TensorType]) -> int | None:
    """Byte offset of ``node`` inside its operand 0, or None when it is not a pure view."""
    rule = VIEW_RULES.get(node.op)
    if rule is None or not node.inputs or not node.type.shape.is_static:
        return None
    off = rule(node, in_types)
    if off is None:
        return None
    size = node.type.nbytes or 0
    src_size = in_types[VIEW_OPERAND].nbytes
    if src_size is None or off < 0 or off + size > src_size:
        return None
    return off


def _result_view(node: Node, nodes: tuple[Node, ...] | list[Node]) -> tuple[Node, int | None]:
    """(producer, byte offset in the producer's operand 0) of a result of a multi-result op with a result view rule."""
    producer, r = (nodes[node.id - node.attrs["index"]], node.attrs["index"]) if node.op == RESULT else (node, 0)
    rule = RESULT_VIEW_RULES.get(producer.op)
    if rule is None or not producer.inputs or not node.type.shape.is_static:
        return producer, None
    src = nodes[producer.inputs[VIEW_OPERAND]].type
    off = rule(producer, [nodes[i].type for i in producer.inputs], r)
    if off is None or src.nbytes is None or off < 0 or off + (node.type.nbytes or 0) > src.nbytes:
        return producer, None
    return producer, off


def resolve_views(g: Graph) -> dict[int, tuple[int, int]]:
    """Every view node -> (root id, byte offset in the root), chains of views resolved."""
    nodes = g.nodes
    out: dict[int, tuple[int, int]] = {}
    for node in nodes:
        if node.op == RESULT or node.extra_types or node.op in RESULT_VIEW_RULES:
            producer, off = _result_view(node, nodes)
            src = producer.inputs[VIEW_OPERAND] if off is not None else -1
        elif node.op in VIEW_RULES and node.inputs:
            off = view_offset(node, [nodes[i].type for i in node.inputs])
            src = node.inputs[VIEW_OPERAND] if off is not None else -1
        else:
            continue
        if off is None:
            continue
        root, base = out.get(src, (src, 0))
        out[node.id] = (root, base + off)
    return out


def describe(view_aliases: Mapping[int, Any]) -> str:
    return ", ".join(f"%{v}->%{a[0]}+{a[1]}" for v, a in sorted(view_aliases.items()))
