"""Unfuse: replace fused nodes by their primitive decomposition.

Generic: each fused op's own ``decompose(g, operands, attrs) -> Value`` hook (defined
next to the op, so decomposition and semantics cannot drift apart — upstream's unfuse
ignored ``FusedSwiGLU.gate_first``). The decomposition's nodes inherit the fused node's
provenance plus the pass name; the last one takes the fused node's name and id-map slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Node, Value
from rlx.ir.opdef import get_op, has_op
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder


class UnfuseError(RlxError):
    """A fused node could not be decomposed (no hook, or the hook's result has another type)."""


def fused_ops() -> list[str]:
    """Registered ops of level ``fused`` that have a ``decompose`` hook."""
    from rlx.ir.opdef import all_ops

    return [o.name for o in all_ops() if o.level == "fused" and o.decompose is not None]


def unfuse(g: Graph, select: Callable[[Node], bool] | Iterable[str] | None = None, pass_name: str = "unfuse") -> PassResult:
    """Decompose every fused node chosen by ``select`` (op names or a predicate; default:
    every op of level ``fused``)."""
    pick: Callable[[Node], bool]
    if select is None:
        def pick(node: Node) -> bool:
            return has_op(node.op) and get_op(node.op).level == "fused"
    elif callable(select):
        pick = select
    else:
        names = frozenset(select)

        def pick(node: Node) -> bool:
            return node.op in names

    if not any(pick(n) for n in g.nodes):
        return PassResult(g, None, {"unfused": 0})
    rb = Rebuilder(g, pass_name)
    count = 0
    for node in g.nodes:
        if not pick(node):
            rb.copy(node, trusted=True)
            continue
        opdef = get_op(node.op)
        if opdef.decompose is None:
            raise UnfuseError(f"node %{node.id} ({node.op}): op has no decompose hook")
        start = len(rb.dst.nodes)
        operands = [Value(rb.dst, rb.map[i]) for i in node.inputs]
        result = opdef.decompose(rb.dst, operands, dict(node.attrs))
        new_ids = [rb.dst._id(v) for v in (result if node.extra_types else [result])]  # one per result
        got = tuple(rb.dst.nodes[i].type for i in new_ids)
        if got != node.types:
            shown = ", ".join(map(str, got))
            raise UnfuseError(f"node %{node.id} ({node.op}): decomposition gives {shown}, the node is {', '.join(map(str, node.types))}")
        if new_ids[-1] >= start:
            rb.stamp(start, [node], name=node.name, last=new_ids[-1])
        for r, new_id in enumerate(new_ids):
            rb.alias(node.id + r, new_id)
        count += 1
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"unfused": count})


def unfuse_fused_for_autodiff(g: Graph) -> PassResult:
    """Decompose every fused op (elementwise regions included) into primitives."""
    return unfuse(g, None, "unfuse_fused_for_autodiff")


def unfuse_elementwise_regions(g: Graph) -> PassResult:
    return unfuse(g, ("elementwise_region",), "unfuse_elementwise_regions")


def unfuse_unclaimed(g: Graph, claims: Iterable[str]) -> PassResult:
    """Decompose fused nodes whose op a backend does not claim (empty claims: keep all)."""
    claimed = frozenset(claims)
    if not claimed:
        return PassResult(g, None, {"unfused": 0})

    def pick(node: Node) -> bool:
        return node.op not in claimed and has_op(node.op) and get_op(node.op).level == "fused"

    return unfuse(g, pick, "unfuse_unclaimed")


UNFUSE_ALL = Pass("unfuse_fused_for_autodiff", unfuse_fused_for_autodiff)
UNFUSE_REGIONS = Pass("unfuse_elementwise_regions", unfuse_elementwise_regions)
