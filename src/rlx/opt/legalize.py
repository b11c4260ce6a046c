"""Legalization for backends: explicit broadcasts and claim-set checks."""

from __future__ import annotations

from collections.abc import Iterable

from rlx.ir.flags import BROADCASTS
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import get_op, has_op
from rlx.ir.shape import Shape
from rlx.opt.manager import Pass, PassResult, graph_attrs
from rlx.opt.rebuild import Rebuilder


def _broadcasts(node: Node) -> bool:
    return has_op(node.op) and BROADCASTS in get_op(node.op).flags


def _clean_trailing(operand: Shape, out: Shape) -> bool:
    """``operand`` equals the right-aligned tail of ``out`` with no size-1 dims."""
    if len(operand) > len(out):
        return False
    tail = out[len(out) - len(operand):]
    return tuple(operand) == tuple(tail) and 1 not in operand


def needs_expand(operand: Node, out: Node) -> bool:
    s, o = operand.shape, out.shape
    if s == o or not o.is_static:  # a dynamic target cannot be spelled for a size-1 operand dim
        return False
    if s.numel == 1:
        return False
    return not _clean_trailing(s, o)


def legalize_broadcast(g: Graph) -> PassResult:
    """Give every broadcasting operand of an op flagged :data:`~rlx.ir.flags.BROADCASTS` (binary,
    compare, where) an explicit ``expand`` to the output shape, unless it is a 1-element tensor
    or a clean trailing slice."""
    nodes = g.nodes
    todo = [n for n in nodes if _broadcasts(n) and any(needs_expand(nodes[i], n) for i in n.inputs)]
    if not todo:
        return PassResult(g, None, {"expanded": 0})
    rb = Rebuilder(g, "legalize_broadcast")
    expanded = 0
    for node in nodes:
        if not _broadcasts(node) or not any(needs_expand(nodes[i], node) for i in node.inputs):
            rb.copy(node, trusted=True)
            continue
        ins = []
        for i in node.inputs:
            src = nodes[i]
            if needs_expand(src, node):
                target = list(node.shape)
                ins.append(rb.emit("expand", [rb.map[i]], {"target_shape": target}, like=(node,)))
                expanded += 1
            else:
                ins.append(rb.map[i])
        rb.alias(node.id, rb.dst.append(node.op, ins, dict(node.attrs), name=node.name, prov=node.prov, type=node.types).id)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"expanded": expanded})


#: leaves every backend takes, claimed or not
ALWAYS_CLAIMED = frozenset({"input", "param", "constant"})


def unclaimed(g: Graph, claims: Iterable[str]) -> list[tuple[int, str]]:
    """(id, op) of ``g``'s own nodes a backend does not claim (bodies not searched; leaves always
    accepted); an empty claim set accepts everything."""
    claimed = frozenset(claims)
    if not claimed:
        return []
    return [(n.id, n.op) for n in g.nodes if n.op not in claimed and n.op not in ALWAYS_CLAIMED]


def legalize_for_backend(g: Graph, claims: Iterable[str]) -> list[tuple[int, str]]:
    """Every node a backend claiming ``claims`` cannot run, as (id, op) pairs (docs/pipeline.md#lowering-for-a-backend);
    empty when legal (an empty claim set accepts everything; leaves are always accepted).

    Bodies of control-flow and ``custom_fn`` nodes are searched too (a backend running a ``scan``
    runs its body): a node inside a body is reported as ``(id of the outer node holding it, its
    op)``, once per such node, so the pairs count nodes."""
    claimed = frozenset(claims)
    if not claimed:
        return []
    out: list[tuple[int, str]] = []

    def walk(h: Graph, owner: int | None) -> None:
        for node in h.nodes:
            if node.op not in claimed and node.op not in ALWAYS_CLAIMED:
                out.append((node.id if owner is None else owner, node.op))
            for name in graph_attrs(node.op):
                sub = node.attrs.get(name)
                if isinstance(sub, Graph):
                    walk(sub, node.id if owner is None else owner)

    walk(g, None)
    return out


LEGALIZE_BROADCAST = Pass("legalize_broadcast", legalize_broadcast, frozenset({"expand"}))
