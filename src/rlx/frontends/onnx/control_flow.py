"""ONNX If / Loop / Scan bodies as rlx subgraphs (for the structured ``if_`` / ``while_`` / ``scan`` ops).

An ONNX body reads outer-scope values by name; an rlx subgraph only sees its positional
``input`` nodes. :func:`convert_body` converts an ONNX body into a standalone rlx
:class:`~rlx.ir.graph.Graph` with a child importer: outer values known at import time are
copied in as constants, every other outer value it reads becomes a *capture* input (the
caller passes the outer value as the matching operand). See the importer's control-flow
section for which cases use the structured ops and which are unrolled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlx.ir.graph import Graph, Value
from rlx.ir.onnx_format import OnnxUnsupported
from rlx.ir.shape import TensorType

#: a subgraph input: ("body", i) binds ONNX body input i, ("cap", name) an outer value, ("extra", key) anything else
Slot = tuple[str, Any]


def captures_of(cx: Any, *bodies: Any) -> list[str]:
    """Outer names the bodies read that are runtime values of ``cx`` (import-time constants excluded), in first-use order."""
    from rlx.frontends.onnx.import_context import _outer_names

    seen: list[str] = []
    for body in bodies:
        for name in _outer_names(body):
            if name in seen or name not in cx.env:
                continue
            if cx.env[name].id in cx.known:
                continue
            seen.append(name)
    return seen


def convert_body(cx: Any, body: Any, name: str, slots: Sequence[tuple[Slot, TensorType]],
                 finish: Callable[[Any, dict[Slot, Value], list[Value]], Sequence[Value]]) -> Graph:
    """An rlx subgraph with inputs ``slots`` (in order) running ONNX ``body``.

    ``finish(child, inputs, body_outputs)`` builds the subgraph's outputs in ``child.g`` from
    the converted body outputs (``inputs`` maps each slot to its input node)."""
    from rlx.frontends.onnx.import_context import _outer_names

    child = type(cx)(cx.model, limits=cx.limits, budget=cx.budget, depth=cx.depth + 1)
    child.opsets, child.opset = cx.opsets, cx.opset
    child.g = Graph(name)
    child._uid = cx._uid
    vals: dict[Slot, Value] = {}
    for k, (slot, t) in enumerate(slots):
        v = child.g.input(f"a{k}", t.shape, t.dtype)
        vals[slot] = v
        if slot[0] == "body":
            child.env[body.input[slot[1]].name] = v
            child.deps[body.input[slot[1]].name] = frozenset()
        elif slot[0] == "cap":
            child.env[slot[1]] = v
            child.deps[slot[1]] = frozenset({slot[1]})
    for outer in _outer_names(body):
        if outer not in child.env and outer in cx.env and cx.env[outer].id in cx.known:
            child.env[outer] = child.const(cx.known[cx.env[outer].id], computed=False)
            child.deps[outer] = frozenset()
    for t in body.initializer:
        child.env[t.name] = child.const(child.tensor(t), computed=False)
        child.deps[t.name] = frozenset()
    for node in body.node:
        child.convert_node(node, cx.opsets)
    outs = [child.value(o.name) for o in body.output]
    child.g.set_outputs(list(finish(child, vals, outs)))
    return child.g


def same_type(got: Value, want: TensorType, what: str) -> None:
    if got.type != want:
        raise OnnxUnsupported(f"{what}: the body gives {got.type}, but the carried value is {want}")
