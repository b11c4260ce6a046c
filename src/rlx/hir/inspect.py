"""Stage-aware text dumps with op histograms (docs/pipeline.md#text-dumps).

* :func:`pretty_print` — ``graph @name (N nodes, K outputs, X arena)``, an ``op kinds:``
  histogram (count descending, then name), one line per node with its provenance
  (``// hir=h3, "label", pass=…``) and ``← output`` marks, then ``return``.
* :func:`inspect_hir` — ``hir @name (N nodes, K outputs, fusion=Direct)``, a ``block ops:``
  histogram, rows such as ``h3 ["linear"] = linear+bias+gelu(h0, h1, h2) : [2, 8] f32``;
  attributes show in brackets (``concat[axis=1](%4, %5)``).
* :func:`inspect_mir` — ``pretty_print`` inside ``mir @name { … }``, optionally after a
  :func:`inspect_graph_diff` against the graph before.
* :func:`inspect_lir` — fingerprint, buffer plan rows, io, then the MIR graph.
* :func:`inspect` — dispatches on a module's or graph's stage.

Op kinds are op names, except that ``activation``, ``binary`` and ``compare`` nodes count
under their kind (``gelu``, ``add``, ``lt``).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rlx.hir.policy import FusionPolicy
from rlx.ir.attrs import FrozenArray
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, GraphStage, Node
from rlx.ir.opdef import get_op, has_op
from rlx.ir.units import format_bytes  # re-exported: rlx.hir.inspect.format_bytes


def _kind_attr(op: str) -> str | None:
    """The attribute shown instead of the op's name (``OpDef.shown_kind``), if any."""
    return get_op(op).shown_kind if has_op(op) else None


def op_kind(node: Node) -> str:
    key = _kind_attr(node.op)
    return str(node.attrs[key]) if key is not None and key in node.attrs else node.op


def op_histogram(g: Graph) -> list[tuple[str, int]]:
    """(kind, count) pairs, most frequent first, ties by name."""
    counts = Counter(op_kind(n) for n in g.nodes)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def format_histogram(g: Graph) -> str:
    return ", ".join(f"{k}={c}" for k, c in op_histogram(g))


def static_bytes(g: Graph) -> int:
    """Σ bytes of every node with a static shape (upstream's naive 'arena' in the header)."""
    return sum(n.type.nbytes or 0 for n in g.nodes)


def _attr_text(value: Any) -> str:
    if isinstance(value, FrozenArray):
        return f"tensor{list(value.array.shape)}"
    if isinstance(value, Graph):
        return f"graph@{value.name}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_attr_text(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (bool, type(None))) else str(value)


def op_text(node: Node) -> str:
    """Compact op text: ``matmul``, ``gelu``, ``concat[axis=1]``, ``linear+bias+gelu``, ``const(16B)``, ``input("x")``."""
    if node.op == "constant":
        return f"const({node.attrs['value'].array.nbytes}B)"
    if node.op in ("input", "param"):
        return f'{node.op}("{node.attrs["name"]}")'
    text = get_op(node.op).text if has_op(node.op) else None
    if text is not None:
        return text(node.attrs)
    kind_key = _kind_attr(node.op)
    shown = {k: v for k, v in node.attrs.items() if k != kind_key and v is not None and v != ()}
    body = ", ".join(f"{k}={_attr_text(v)}" for k, v in shown.items())
    return op_kind(node) + (f"[{body}]" if body else "")


def _ref(prefix: str, i: int) -> str:
    return f"{prefix}{i}"


def _tag(node: Node, prefix: str) -> str:
    ref = _ref(prefix, node.id)
    if node.op in ("input", "param"):
        return f'{ref} [{node.op} "{node.attrs["name"]}"]'
    if node.name is not None:
        return f'{ref} ["{node.name}"]'
    return ref


def provenance_text(node: Node) -> str | None:
    """``hir=h3, "label", pass=a,b`` or None when the node has no provenance."""
    prov = node.prov
    if prov is None:
        return None
    parts = []
    if prov.hir is not None:
        parts.append(f"hir=h{prov.hir}")
    if prov.label is not None:
        parts.append(json.dumps(prov.label, ensure_ascii=False))
    if prov.passes:
        parts.append("pass=" + ",".join(prov.passes))
    return ", ".join(parts) or None


def _node_lines(g: Graph, prefix: str) -> list[str]:
    outputs = set(g.output_ids)
    rows = []
    for node in g.nodes:
        args = "(" + ", ".join(_ref(prefix, i) for i in node.inputs) + ")" if node.inputs else ""
        line = f"  {_tag(node, prefix)} = {op_text(node)}{args} : {node.type}"
        origin = provenance_text(node)
        if origin:
            line += f"  // {origin}"
        if node.id in outputs:
            line += "  ← output"
        rows.append(line)
    returns = ", ".join(_ref(prefix, i) for i in g.output_ids)
    rows.append("  return" + (f" {returns}" if returns else ""))
    return rows


def pretty_stats(g: Graph) -> str:
    """The header and the op-kind histogram of :func:`pretty_print`."""
    head = f"graph @{g.name} ({len(g)} nodes, {len(g.output_ids)} outputs, {format_bytes(static_bytes(g))} arena)"
    return f"{head}\n  op kinds: {format_histogram(g)}"


def pretty_print(g: Graph) -> str:
    prefix = "h" if g.stage is GraphStage.HIR else "%"
    return "\n".join([pretty_stats(g), "", *_node_lines(g, prefix)])


def inspect_hir(g: Graph, policy: FusionPolicy | str | None = None) -> str:
    fusion = FusionPolicy.coerce(policy).title
    head = f"hir @{g.name} ({len(g)} nodes, {len(g.output_ids)} outputs, fusion={fusion})"
    return "\n".join([head, f"  block ops: {format_histogram(g)}", "", *_node_lines(g, "h")])


def inspect_graph_diff(before: Graph, after: Graph) -> str:
    """``diff: a → b nodes (c → d outputs)`` and ``op delta: kind+n, kind-m`` (alphabetical, non-zero)."""
    a, b = Counter(op_kind(n) for n in before.nodes), Counter(op_kind(n) for n in after.nodes)
    delta = [(k, b[k] - a[k]) for k in sorted(set(a) | set(b)) if b[k] != a[k]]
    lines = [f"diff: {len(before)} → {len(after)} nodes ({len(before.output_ids)} → {len(after.output_ids)} outputs)"]
    lines.append("op delta: " + (", ".join(f"{k}{d:+d}" for k, d in delta) if delta else "none"))
    return "\n".join(lines)


def inspect_mir(g: Graph, before: Graph | None = None) -> str:
    body = "\n".join("  " + line if line else "" for line in pretty_print(g).split("\n"))
    text = f"mir @{g.name} {{\n{body}\n}}"
    return (inspect_graph_diff(before, g) + "\n" + text) if before is not None else text


def inspect_lir(lir: Any) -> str:
    """Dump an LIR module: fingerprint, buffer plan rows by offset, phases, io, then the MIR graph.

    Duck-typed on ``lir.graph`` and ``lir.plan`` (``arena_size``, ``assignments``, ``schedule``,
    ``view_aliases``, ``alignment``, ``phases``, ``io``), so any plan object of that shape works.
    """
    g: Graph = lir.graph
    plan = lir.plan
    lines = [f"lir @{g.name} {{"]
    fingerprint = getattr(lir, "fingerprint", None)
    if callable(fingerprint):
        lines.append(f"  fingerprint: {str(fingerprint())[:16]}")
    assignments = dict(getattr(plan, "assignments", None) or {})
    views = dict(getattr(plan, "view_aliases", None) or {})
    phases = dict(getattr(plan, "phases", None) or {})
    naive = sum(getattr(a, "size", 0) for a in assignments.values())
    arena = getattr(plan, "arena_size", 0)
    align = getattr(plan, "alignment", None)
    lines.append(f"  arena: {arena} bytes (saved {max(0, naive - arena)} vs {naive} naive" + (f", align={align})" if align else ")"))
    schedule = list(getattr(plan, "schedule", None) or range(len(g)))
    lines.append(f"  schedule: {len(schedule)} nodes, {len(views)} views")
    symbols = sorted({d for n in g.nodes for d in n.shape.symbols})
    if symbols:
        lines.append("  dynamic: " + ", ".join(symbols))
    step = {node_id: i for i, node_id in enumerate(schedule)}
    for node_id, slot in sorted(assignments.items(), key=lambda kv: (getattr(kv[1], "offset", 0), kv[0])):
        row = f"  {getattr(slot, 'offset', '?')}\t{getattr(slot, 'size', '?')}\t%{node_id} sched={step.get(node_id, '?')}"
        if node_id in views:
            view = views[node_id]
            row += f" [view→%{getattr(view, 'root', '?')}+{getattr(view, 'byte_offset', 0)}]"
        if node_id in phases:
            row += f" {phases[node_id]}"
        lines.append(row)
    if phases:
        lines.append("  phases:")
        by_phase: dict[str, list[int]] = {}
        for node_id, phase in sorted(phases.items()):
            by_phase.setdefault(str(phase), []).append(node_id)
        for phase, ids in by_phase.items():
            lines.append(f"    {phase}: " + ", ".join(f"%{i}" for i in ids))
    io = getattr(plan, "io", None)
    if io is not None:
        lines.append("  io:")
        for kind in ("inputs", "params"):
            entries = getattr(io, kind, None) if not isinstance(io, dict) else io.get(kind)
            if entries:
                lines.append(f"    {kind}: " + ", ".join(f"{name}=%{i}" for name, i in entries))
        outs = getattr(io, "outputs", None) if not isinstance(io, dict) else io.get("outputs")
        if outs:
            lines.append("    outputs: " + ", ".join(f"%{i}" for i in outs))
    lines.append("  --- mir ---")
    lines += ["  " + line if line else "" for line in pretty_print(g).split("\n")]
    lines.append("}")
    return "\n".join(lines)


def inspect(obj: Any) -> str:
    """The dump for ``obj``'s stage: a GraphModule, a Graph (HIR or MIR) or an LIR module."""
    from rlx.hir.module import GraphModule

    if isinstance(obj, GraphModule):
        if obj.stage is GraphStage.LIR:
            return inspect_lir(obj.lir)
        if obj.stage is GraphStage.HIR:
            return inspect_hir(obj.graph, obj.fusion_policy)
        return inspect_mir(obj.graph)
    if isinstance(obj, Graph):
        if obj.stage is GraphStage.HIR:
            return inspect_hir(obj)
        return inspect_mir(obj)
    if hasattr(obj, "graph") and hasattr(obj, "plan"):
        return inspect_lir(obj)
    raise RlxError(f"inspect expects a GraphModule, Graph or LIR module, got {type(obj).__name__}")
