"""Elementwise regions (docs/pipeline.md#elementwise-regions): group chains of elementwise ops into one
``elementwise_region`` node. Unfusing them goes through the op's ``decompose`` hook
(:mod:`rlx.opt.unfuse`), so there is one replay implementation, not two.

A node joins the region of its region-member operands when every such operand has
exactly one use (graph outputs count); operands from several regions merge them
(upstream starts a new region instead). A region is
kept when it has ≥ 2 members and exactly one of them (the last) is used outside it;
it is emitted at that tail's position.
"""

from __future__ import annotations

from typing import Any

import rlx.ops  # noqa: F401  (registers every op: ELIGIBLE is read from them)
from rlx.ir.dtype import DType
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import all_ops, get_op, has_op
from rlx.opt.fusion import Match, apply_matches, infers
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder, uses_and_consumer

#: the ops that may join a region (``OpDef.region_key`` set)
ELIGIBLE = frozenset(o.name for o in all_ops() if o.region_key is not None)


def _eligible(node: Node, nodes: list[Node]) -> bool:
    if node.op not in ELIGIBLE or not node.shape.is_static:
        return False
    if get_op(node.op).region_key == "to" and nodes[node.inputs[0]].dtype != node.dtype:
        return False  # a cast joins only where it changes no dtype
    out = node.shape.numel or 0
    for i in node.inputs:
        n = nodes[i].shape.numel  # None unless static
        if not n or out % n:
            return False
    return True


def encode_step(node: Node, operands: list[tuple[str, int]]) -> Any:
    """One chain step in the ``elementwise_region`` format: ``[op, sub, *operands]``
    (``where`` has no sub); operands are ``["in", i]`` or ``["step", j]``."""
    key = get_op(node.op).region_key
    if not key:
        return [node.op, *operands]
    sub = node.attrs[key]
    return [node.op, sub.value if isinstance(sub, DType) else sub, *operands]


def find_regions(g: Graph, max_steps: int | None = None, max_inputs: int | None = None) -> list[Match]:
    nodes = g.nodes
    uses, last = uses_and_consumer(g)
    outputs = set(g.output_ids)
    region: dict[int, int] = {}
    step: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for n in nodes:
        if not _eligible(n, nodes):
            continue
        mins = [i for i in dict.fromkeys(n.inputs) if i in region]
        roots = {region[i] for i in mins}
        depth = 1 + max((step[i] for i in mins), default=-1)
        if mins and all(uses[i] == 1 and i not in outputs for i in mins) and (max_steps is None or depth < max_steps):
            # join (and merge) the operands' regions: union by size
            root = max(roots, key=lambda r: len(members[r]))
            for other in roots - {root}:
                for m in members.pop(other):
                    region[m] = root
                    members[root].append(m)
            region[n.id], step[n.id] = root, depth
            members[root].append(n.id)
        else:
            region[n.id], step[n.id] = n.id, 0
            members[n.id] = [n.id]
    out: list[Match] = []
    for ms in members.values():
        if len(ms) < 2:
            continue
        ms.sort()
        inside = set(ms)
        # a member stays internal iff its one use is a consumer inside the region
        escaping = [m for m in ms if m in outputs or uses[m] != 1 or last[m] not in inside]
        tail = ms[-1]
        if escaping != [tail]:
            continue
        ext: list[int] = []
        index: dict[int, int] = {}
        chain = []
        pos_of = {m: k for k, m in enumerate(ms)}
        for m in ms:
            ops: list[tuple[str, int]] = []
            for i in nodes[m].inputs:
                if i in inside:
                    ops.append(("step", pos_of[i]))
                else:
                    if i not in index:
                        index[i] = len(ext)
                        ext.append(i)
                    ops.append(("in", index[i]))
            chain.append(encode_step(nodes[m], ops))
        if max_inputs is not None and len(ext) > max_inputs:
            continue
        tail_node = nodes[tail]
        attrs = {"chain": chain, "num_inputs": len(ext)}
        if not infers("elementwise_region", [nodes[i].type for i in ext], attrs, tail_node.type):
            continue

        def build(rb: Rebuilder, ext=ext, attrs=attrs, ms=ms, tail_node=tail_node) -> dict[int, int]:
            like = [nodes[m] for m in ms]
            new = rb.emit("elementwise_region", [rb.map[i] for i in ext], attrs, like=like, name=tail_node.name, type=tail_node.type)
            return {tail_node.id: new}

        out.append(Match(tail, frozenset(ms), build, "elementwise_region"))
    return out


def mark_elementwise_regions(g: Graph, max_steps: int | None = None, max_inputs: int | None = None) -> PassResult:
    """Group elementwise chains into ``elementwise_region`` nodes (no-op if the op is not registered)."""
    if not has_op("elementwise_region"):
        return PassResult(g, None, {"regions": 0})
    res = apply_matches(g, find_regions(g, max_steps, max_inputs), "mark_elementwise_regions")
    return PassResult(res.graph, res.id_map, {"regions": res.stats.get("fused", 0)})


MARK_REGIONS = Pass("mark_elementwise_regions", mark_elementwise_regions, frozenset({"elementwise_region"}))
