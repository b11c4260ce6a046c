"""Helpers the compiled backends share: which nodes an output needs."""

from __future__ import annotations

from rlx.ir.graph import Graph


def live_nodes(g: Graph) -> list[bool]:
    """``live[node id]``: whether some output of ``g`` depends on the node."""
    live = [False] * len(g)
    for o in g.output_ids:
        live[o] = True
    for node in reversed(g.nodes):
        if live[node.id]:
            for i in node.inputs:
                live[i] = True
    return live
