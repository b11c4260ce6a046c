"""What the compiled backends share beyond rlx.runtime.executable: which nodes an output needs."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rlx.ir.graph import Graph

__all__ = ["live_nodes"]


def live_nodes(g: Graph, outputs: Sequence[int] | None = None, given: Collection[int] = ()) -> list[bool]:
    """``live[node id]``: whether one of ``outputs`` (default: ``g``'s) depends on the node, not looking
    past the nodes in ``given`` (values a module receives instead of computing them)."""
    live = [False] * len(g)
    for o in g.output_ids if outputs is None else outputs:
        live[o] = True
    for node in reversed(g.nodes):
        if live[node.id] and node.id not in given:
            for i in node.inputs:
                live[i] = True
    return live


