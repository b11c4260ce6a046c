"""The rebuild helper every pass uses: copy a graph node by node into a fresh graph.

Unchanged nodes keep their name and provenance (upstream's ``add_node`` drops both).
Nodes a pass creates get merged provenance from the nodes they replace, with the pass
name appended to ``Provenance.passes``. The helper records the old → new id map that
the pass manager composes so that callers' references never drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlx.ir.graph import RESULT, Graph, Node, Provenance, Value
from rlx.ir.shape import TensorType


def use_counts(g: Graph) -> list[int]:
    """Uses per node: distinct consumer nodes plus one per appearance in the graph outputs."""
    counts = [0] * len(g.nodes)
    for node in g.nodes:
        ins = node.inputs
        if len(ins) == 1:
            counts[ins[0]] += 1
        else:
            for src in set(ins):
                counts[src] += 1
    for out in g.output_ids:
        counts[out] += 1
    return counts


def uses_and_consumer(g: Graph) -> tuple[list[int], list[int]]:
    """:func:`use_counts` plus, per node, its last consumer node id (-1 if none).

    For a node with exactly one use that is not a graph output, that is its only consumer;
    two flat int lists are much cheaper than ``g.users()`` on large graphs.
    """
    n = len(g.nodes)
    counts = [0] * n
    last = [-1] * n
    for node in g.nodes:
        nid = node.id
        ins = node.inputs
        if len(ins) == 1:
            src = ins[0]
            counts[src] += 1
            last[src] = nid
        else:
            for src in set(ins):
                counts[src] += 1
                last[src] = nid
    for out in g.output_ids:
        counts[out] += 1
    return counts, last


def merge_prov(nodes: Iterable[Node], pass_name: str) -> Provenance:
    """Provenance for a node made from ``nodes``: first HIR id and label found, union of pass
    histories and of source-model origins (in order)."""
    hir: int | None = None
    label: str | None = None
    passes: dict[str, None] = {}
    origins: dict = {}
    for node in nodes:
        p = node.prov
        if p is None:
            continue
        if hir is None and p.hir is not None:
            hir = p.hir
        if label is None and p.label is not None:
            label = p.label
        passes.update(dict.fromkeys(p.passes))
        origins.update(dict.fromkeys(p.origins))
    passes.pop(pass_name, None)
    return Provenance(hir, label, (*passes, pass_name), tuple(origins))


class Rebuilder:
    """Builds ``dst`` from ``src``; ``map`` holds old id → new id for every value kept.

    ``copy(node)`` re-emits an unchanged node with its mapped operands (fast path: no
    re-inference when operand types are unchanged). ``emit(op, inputs, attrs, like=...)``
    appends a new node created by the pass, with inferred type and merged provenance.
    """

    def __init__(self, src: Graph, pass_name: str):
        self.src = src
        self.pass_name = pass_name
        self.dst = Graph(src.name, src.stage, src.symbol_ranges)
        self.map: dict[int, int] = {}
        self._src_nodes = src.nodes
        self._dst_nodes = self.dst.nodes

    # ----------------------------------------------------------------- copying
    def copy(self, node: Node, trusted: bool = False) -> int:
        """Re-emit ``node`` unchanged. ``trusted``: the pass guarantees operand types are unchanged."""
        m = self.map
        if node.op == RESULT and node.id in m:  # its producer was replaced, results included
            return m[node.id]
        ins = tuple(m[i] for i in node.inputs)
        dst_nodes = self._dst_nodes
        if node.op == RESULT:  # already appended with its producer: just map it
            new_id = self.dst.append(RESULT, ins, node.attrs, name=node.name).id
        elif trusted or ins == node.inputs or all(dst_nodes[n].type == self._src_nodes[o].type for n, o in zip(ins, node.inputs)):
            new_id = len(dst_nodes)
            self.dst._push(Node(new_id, node.op, node.attrs, ins, node.type, node.name, node.prov, node.extra_types))
        else:
            new_id = self.dst.append(node.op, ins, dict(node.attrs), name=node.name, prov=node.prov).id
        m[node.id] = new_id
        return new_id

    def alias(self, old: int, new: int) -> None:
        """Old value ``old`` is now computed by new node ``new``."""
        self.map[old] = new

    def mapped(self, old: int) -> int:
        return self.map[old]

    def value(self, new_id: int) -> Value:
        return Value(self.dst, new_id)

    # ---------------------------------------------------------------- emitting
    def emit(
        self,
        op: str,
        inputs: Sequence[int | Value],
        attrs: Mapping[str, Any] | None = None,
        *,
        like: Sequence[Node] = (),
        name: str | None = None,
        type: TensorType | tuple[TensorType, ...] | None = None,
    ) -> int:
        """Append a new node built by this pass; provenance merged from ``like`` (old nodes)."""
        prov = merge_prov(like, self.pass_name)
        return self.dst.append(op, list(inputs), attrs or {}, name=name, prov=prov, type=type).id

    def stamp(self, start: int, like: Sequence[Node], name: str | None = None, last: int | None = None) -> None:
        """Give provenance to nodes ``dst[start:]`` appended by foreign code (e.g. a decompose hook).

        ``last`` (a new id) gets ``name`` when given. Pre-existing names are kept.
        """
        prov = merge_prov(like, self.pass_name)
        nodes = self._dst_nodes
        for i in range(start, len(nodes)):
            node = nodes[i]
            new_name = name if (i == last and name is not None) else node.name
            nodes[i] = dataclasses.replace(node, prov=prov, name=new_name)

    def rename(self, new_id: int, name: str | None, prov: Provenance | None = None) -> None:
        node = self._dst_nodes[new_id]
        self._dst_nodes[new_id] = dataclasses.replace(node, name=name, prov=prov if prov is not None else node.prov)

    def finish(self) -> tuple[Graph, dict[int, int]]:
        """Set outputs through the map and return the new graph and the id map."""
        self.dst.set_outputs([self.map[o] for o in self.src.output_ids])
        return self.dst, self.map
