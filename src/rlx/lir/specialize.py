"""Bind symbolic dims to sizes and re-plan: ``specialize(lir, {"batch": 4})``.

The graph is rebuilt node by node with every size attribute bound (input / param shapes,
reshape targets, narrow bounds …: kinds ``dims``, ``sizes``, ``size``) and each node's type
re-inferred by its op rule. Node ids are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph
from rlx.ops.evaluate import bind_attrs
from rlx.ops.evaluate import bind_graph as bind_nodes

__all__ = ["bind_attrs", "bind_graph", "specialize"]  # bind_attrs: re-exported for the backends


def bind_graph(g: Graph, binding: Mapping[str, int]) -> Graph:
    """A copy of ``g`` with the given symbols replaced by sizes (ids, names, provenance kept)."""
    for sym, size in binding.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RlxError(f"specialize: symbol {sym!r} must be bound to an int >= 0, got {size!r}")
    return bind_nodes(g, binding)


def specialize(lir: Any, binding: Mapping[str, int], **plan_options: Any):
    """Bind symbols of an LirModule (or Graph) and plan it again with the same options."""
    from rlx.lir.plan import LirModule, plan

    if isinstance(lir, LirModule):
        graph, options = lir.graph, dict(lir.options)
    elif isinstance(lir, Graph):
        graph, options = lir, {}
    else:
        raise RlxError(f"specialize expects an LirModule or Graph, got {type(lir).__name__}")
    present = {s for node in graph.nodes for s in node.type.shape.symbols}
    unknown = sorted(set(binding) - present)
    if unknown:
        raise RlxError(f"specialize: symbol(s) {unknown} do not occur in graph {graph.name!r} (it has {sorted(present)})")
    options.update(plan_options)
    alignment = options.pop("alignment", 64)
    return plan(bind_graph(graph, binding), alignment, **options)
