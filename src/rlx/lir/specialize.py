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
from rlx.ir.opdef import get_op
from rlx.ir.symbolic import substitute


def bind_graph(g: Graph, binding: Mapping[str, int]) -> Graph:
    """A copy of ``g`` with the given symbols replaced by sizes (ids, names, provenance kept)."""
    for sym, size in binding.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RlxError(f"specialize: symbol {sym!r} must be bound to an int >= 0, got {size!r}")
    out = Graph(g.name, g.stage)
    for node in g.nodes:
        out.append(node.op, node.inputs, bind_attrs(node.op, node.attrs, binding), name=node.name, prov=node.prov)
    out.set_outputs(g.output_ids)
    return out


def bind_attrs(op: str, attrs: Mapping[str, Any], binding: Mapping[str, int]) -> Mapping[str, Any]:
    """``attrs`` of an ``op`` node with the bound symbols substituted in its size attributes
    (kinds ``dims``, ``sizes``, ``size``); the same mapping when nothing changes."""
    specs = get_op(op).attrs
    out: dict[str, Any] | None = None
    for key, value in attrs.items():
        spec = specs.get(key)
        if spec is None or value is None or spec.kind not in _SIZE_KINDS:
            continue
        if spec.kind == "size":
            bound = substitute(value, binding)
            changed = bound is not value
        else:
            bound = tuple(substitute(d, binding) for d in value)
            changed = any(b is not d for b, d in zip(bound, value))
        if changed:
            out = dict(attrs) if out is None else out
            out[key] = bound
    return attrs if out is None else out


_SIZE_KINDS = ("dims", "sizes", "size")


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
