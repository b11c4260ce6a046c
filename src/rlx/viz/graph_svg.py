"""Graph pictures through Graphviz: DOT text generation and ``dot -Tsvg``.

``to_dot(obj)`` turns a HIR or MIR :class:`rlx.Graph`, an :class:`rlx.LirModule` or a
:class:`rlx.GraphModule` into DOT text:

* one box per node, labelled with its compact op text (``linear+bias+gelu``,
  ``fused_swiglu``, ``add`` …) and ``%id``; inputs, params and constants are ellipses;
* nodes are grouped into nested clusters by their HIR block label (``layer0/attn`` is the
  cluster ``attn`` inside ``layer0``): the node's own label on a HIR graph, the provenance
  label on MIR / LIR;
* colours by kind: HIR block, fused MIR op (created by the optimizer's fusion passes),
  primitive MIR op, input, param, constant; graph outputs get a double border;
* every edge carries the shape and dtype of the tensor it transports;
* tooltips (SVG ``<title>`` / ``xlink:title``) hold the provenance (HIR node, label, the
  passes that made the node), the attributes and, on LIR, the buffer slot and lifetime.

``render(dot_text, path)`` runs the ``dot`` program (found on ``PATH``) with a timeout;
when Graphviz is not installed it raises :class:`DotMissing`, an :class:`rlx.RlxError`
that says how to install it. ``draw_graph`` combines the two and also writes plain
``.dot`` files without Graphviz. ``draw_plan`` draws the memory-plan timeline with
:meth:`rlx.LirModule.draw` (matplotlib for PNG).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections import Counter
from typing import Any

from rlx.hir.inspect import op_kind, op_text, provenance_text
from rlx.ir.atomic import atomic_open, atomic_path
from rlx.ir.attrs import FrozenArray
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, GraphStage, Node
from rlx.ir.opdef import get_op, has_op
from rlx.viz.source import origin_text, origins_of

__all__ = ["DotMissing", "draw_graph", "draw_plan", "find_dot", "render", "to_dot"]

DOT_TIMEOUT_S = 120.0

#: fill colours by node kind (also used for the legend)
COLORS = {
    "input": "#c8e6c9",
    "param": "#fff3b0",
    "constant": "#e0e0e0",
    "hir": "#bbdefb",
    "fused": "#ffb74d",
    "mir": "#ffffff",
    "block": "#d1c4e9",
}
_CLUSTER_FILLS = ("#f5f9ff", "#eef3fb", "#e6edf7", "#dfe7f3")
_LEAVES = ("input", "param", "constant")


class DotMissing(RlxError):
    """The Graphviz ``dot`` program is not installed (or not on ``PATH``)."""


# ----------------------------------------------------------------------------- DOT text


def _q(text: Any) -> str:
    """A DOT double-quoted string (backslashes, quotes and newlines escaped)."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\r", "")
    return '"' + s.replace("\n", "\\n") + '"'


def _split(obj: Any) -> tuple[Graph, Any]:
    """(graph, plan or None) of a Graph, an LirModule or a GraphModule."""
    if isinstance(obj, Graph):
        return obj, None
    if hasattr(obj, "graph") and hasattr(obj, "plan") and isinstance(obj.graph, Graph):
        return obj.graph, obj.plan
    lir = getattr(obj, "_lir", None)
    if lir is not None:
        return lir.graph, lir.plan
    g = getattr(obj, "graph", None)
    if isinstance(g, Graph):
        return g, None
    raise RlxError(f"cannot draw a {type(obj).__name__}: expected a Graph, GraphModule or LirModule")


def node_kind(node: Node) -> str:
    """``input`` / ``param`` / ``constant`` / ``hir`` / ``fused`` / ``mir``."""
    if node.op in _LEAVES:
        return node.op
    level = get_op(node.op).level if has_op(node.op) else "mir"
    if level in ("hir", "fused"):
        return level
    return "mir"


def block_label(node: Node, stage: GraphStage) -> str | None:
    """The HIR block path a node belongs to (None for leaves and unlabelled nodes)."""
    if node.op in _LEAVES:
        return None
    if node.prov is not None and node.prov.label:
        return node.prov.label
    if stage is GraphStage.HIR:
        return node.name
    return None


def _tooltip(node: Node, stage: GraphStage, plan: Any, step: dict[int, int]) -> str:
    lines = [f"%{node.id} = {node.op} : {node.type}"]
    if node.name and node.op not in _LEAVES:
        lines.append(f"name: {node.name}")
    lines += [f"source: {origin_text(o)}" for o in origins_of(node)]
    origin = provenance_text(node)
    lines.append(f"provenance: {origin}" if origin else f"provenance: built at {stage.value.upper()}")
    shown = [(k, v) for k, v in node.attrs.items() if node.op not in _LEAVES]
    lines += [f"  {k} = {attr_text(v)}" for k, v in shown]
    if plan is not None:
        slot = plan.assignments.get(node.id)
        if slot is not None:
            lines.append(f"slot: offset {slot.offset}, {slot.size} B")
        view = plan.view_aliases.get(node.id)
        if view is not None:
            lines.append(f"view of %{view.root} at +{view.byte_offset} B")
        if node.id in plan.lifetimes:
            birth, death = plan.lifetimes[node.id]
            lines.append(f"live: steps {birth}..{death}")
        if node.id in step:
            lines.append(f"schedule step {step[node.id]}")
        if node.id in plan.outside:
            lines.append("outside the arena")
    return "\n".join(lines)


def _label(node: Node, plan: Any) -> str:
    if node.op in ("input", "param"):
        head = f"{node.attrs['name']}\n{node.type}"
    else:
        text = op_text(node)
        if len(text) > 48:
            text = text[:45] + "..."
        head = f"{text}\n%{node.id}"
        if node.name and node.op != "constant" and (node.prov is None or (node.prov.hir is None and not node.prov.label)):
            head += f" {node.name}"
    if plan is not None:
        slot = plan.assignments.get(node.id)
        if slot is not None:
            head += f"\n@{slot.offset} +{slot.size}B"
            if node.id in plan.view_aliases:
                head += " (view)"
    return head


def _node_stmt(node: Node, stage: GraphStage, plan: Any, step: dict[int, int], outputs: set[int]) -> str:
    kind = node_kind(node)
    attrs = {
        "label": _label(node, plan),
        "tooltip": _tooltip(node, stage, plan, step),
        "fillcolor": COLORS[kind],
        "shape": "ellipse" if kind in _LEAVES else "box",
        "style": "filled" if kind in _LEAVES else "filled,rounded",
    }
    if kind == "fused":
        attrs["penwidth"] = "2"
        attrs["color"] = "#e65100"
    if node.id in outputs:
        attrs["peripheries"] = "2"
    body = ", ".join(f"{k}={_q(v)}" for k, v in attrs.items())
    return f"n{node.id} [{body}];"


class _Tree:
    """Nested clusters: block path components -> subtree, plus the nodes placed at this level."""

    def __init__(self) -> None:
        self.children: dict[str, _Tree] = {}
        self.nodes: list[str] = []
        self.bodies: list[_Tree] = []  # control-flow bodies drawn at this level
        self.title = ""
        self.cluster_id = ""

    def add(self, path: list[str], stmt: str) -> None:
        tree = self
        for part in path:
            tree = tree.children.setdefault(part, _Tree())
        tree.nodes.append(stmt)

    def emit(self, lines: list[str], indent: str, prefix: str, depth: int, counter: list[int]) -> None:
        lines.extend(indent + s for s in self.nodes)
        for name, child in self.children.items():
            counter[0] += 1
            full = f"{prefix}/{name}" if prefix else name
            lines.append(f"{indent}subgraph cluster_{counter[0]} {{")
            lines.append(f"{indent}  label={_q(name)}; tooltip={_q('block ' + full)}; style=\"filled,rounded\";")
            lines.append(f"{indent}  fillcolor={_q(_CLUSTER_FILLS[depth % len(_CLUSTER_FILLS)])}; color=\"#7f9cc0\";")
            child.emit(lines, indent + "  ", full, depth + 1, counter)
            lines.append(f"{indent}}}")
        for body in self.bodies:
            counter[0] += 1
            cid = body.cluster_id or f"cluster_{counter[0]}"
            lines.append(f"{indent}subgraph {cid} {{")
            lines.append(f"{indent}  label={_q(body.title)}; tooltip={_q('control-flow body ' + body.title)}; "
                         'style="dashed,rounded"; color="#8e24aa";')
            body.emit(lines, indent + "  ", prefix, depth + 1, counter)
            lines.append(f"{indent}}}")


#: above this many op nodes, ``collapse="auto"`` draws each top-level block as one box
AUTO_COLLAPSE_NODES = 300
#: above this many op nodes (after collapsing), params and constants are left out
AUTO_HIDE_LEAVES_NODES = 1500
#: control-flow bodies nested deeper than this are not drawn (the node's tooltip names them)
MAX_BODY_DEPTH = 3


def attr_text(value: Any) -> str:
    """An attribute in full for tooltips and the viewer (tensors by dtype, shape and first values)."""
    if isinstance(value, FrozenArray):
        arr = value.array
        head = ", ".join(str(v) for v in arr.reshape(-1)[:8].tolist())
        return f"tensor {arr.dtype}{list(arr.shape)} [{head}{', …' if arr.size > 8 else ''}]"
    if isinstance(value, Graph):
        return f"graph @{value.name} ({len(value)} nodes)"
    if isinstance(value, tuple):
        return "[" + ", ".join(attr_text(v) for v in value) + "]"
    return str(value)


def top_block(node: Node, stage: GraphStage) -> str | None:
    label = block_label(node, stage)
    parts = [p for p in (label or "").split("/") if p]
    return parts[0] if parts else None


def should_collapse(g: Graph, stage: GraphStage, collapse: str) -> bool:
    """``blocks``: always (when there are blocks); ``auto``: when the graph is large."""
    if collapse == "none":
        return False
    blocks = {top_block(n, stage) for n in g.nodes} - {None}
    if not blocks:
        return False
    ops = sum(1 for n in g.nodes if n.op not in _LEAVES)
    return collapse == "blocks" or ops > AUTO_COLLAPSE_NODES


class _Emitter:
    """DOT statements of one graph (and, recursively, its control-flow bodies)."""

    def __init__(self, stage: GraphStage, plan: Any, show_params: bool, collapse: bool):
        self.stage, self.plan, self.show_params, self.collapse = stage, plan, show_params, collapse
        self.edges: list[str] = []
        self.used_kinds: set[str] = set()
        self.clusters = [0]

    def graph(self, g: Graph, tree: _Tree, prefix: str, depth: int) -> None:
        plan = self.plan if depth == 0 else None
        step = {nid: i for i, nid in enumerate(plan.schedule)} if plan is not None else {}
        outputs = set(g.output_ids) if depth == 0 else set()
        uses: dict[int, int] = {}
        for n in g.nodes:
            for src in n.inputs:
                uses[src] = uses.get(src, 0) + 1
        unit: dict[int, str] = {}  # node id -> DOT id of what is drawn for it (its box, or its block's)
        blocks: dict[str, list[Node]] = {}
        for node in g.nodes:
            if node.op in ("param", "constant"):
                continue
            block = top_block(node, self.stage) if self.collapse and depth == 0 else None
            if block is not None:
                blocks.setdefault(block, []).append(node)
                unit[node.id] = f"{prefix}b_{list(blocks).index(block) + 1}"
                continue
            unit[node.id] = f"{prefix}n{node.id}"
            kind = node_kind(node)
            self.used_kinds.add(kind)
            label = block_label(node, self.stage)
            path = [p for p in (label or "").split("/") if p] if depth == 0 or self.stage is not GraphStage.HIR else []
            tree.add(path, self._node_stmt(f"{prefix}n{node.id}", node, plan, step, outputs))
            for key, value in node.attrs.items():
                if isinstance(value, Graph):
                    self._body(node, key, value, tree, path, f"{prefix}n{node.id}", depth)
        for i, (block, members) in enumerate(blocks.items(), 1):
            self.used_kinds.add("block")
            hist = ", ".join(f"{k}×{c}" for k, c in _counts(members)[:6])
            tip = f"block {block}: {len(members)} ops\n" + "\n".join(f"{k} × {c}" for k, c in _counts(members))
            attrs = {"label": f"{block}\n{len(members)} ops: {hist}", "tooltip": tip, "fillcolor": COLORS["block"],
                     "shape": "box3d", "style": "filled"}
            body = ", ".join(f"{k}={_q(v)}" for k, v in attrs.items())
            tree.add([], f"{prefix}b_{i} [{body}];")
        seen: set[tuple[str, str]] = set()
        for node in g.nodes:
            if node.id not in unit:
                continue
            dst = unit[node.id]
            for slot, src in enumerate(node.inputs):
                t = g.node(src).type
                leaf = g.node(src)
                if leaf.op in ("param", "constant"):
                    if not self.show_params or dst.startswith(f"{prefix}b_"):
                        continue
                    # drawn once per use, next to its user: a shared constant never fans out
                    copy = f"{prefix}n{src}" if uses.get(src, 0) == 1 else f"{prefix}n{src}_u{node.id}_{slot}"
                    self.used_kinds.add(node_kind(leaf))
                    tree.add(self._path_of(node, depth), self._node_stmt(copy, leaf, plan, step, outputs))
                    tip = f"%{src} -> %{node.id} (operand {slot}): {t}"
                    self.edges.append(f"  {copy} -> {dst} [label={_q(' ' + str(t))}, tooltip={_q(tip)}];")
                    continue
                s = unit.get(src)
                if s is None or s == dst or (s, dst) in seen:
                    continue
                if dst.startswith(f"{prefix}b_") or s.startswith(f"{prefix}b_"):
                    seen.add((s, dst))
                tip = f"%{src} -> %{node.id} (operand {slot}): {t}"
                self.edges.append(f"  {s} -> {dst} [label={_q(' ' + str(t))}, tooltip={_q(tip)}];")

    def _path_of(self, node: Node, depth: int) -> list[str]:
        label = block_label(node, self.stage)
        return [p for p in (label or "").split("/") if p] if depth == 0 else []

    def _body(self, node: Node, key: str, body: Graph, tree: _Tree, path: list[str], owner: str, depth: int) -> None:
        if depth + 1 > MAX_BODY_DEPTH:
            return
        sub = _Tree()
        prefix = f"{owner}_{key}_"
        self.graph(body, sub, prefix, depth + 1)
        sub.title = f"%{node.id}.{key}: {body.name}"  # type: ignore[attr-defined]
        holder = tree
        for part in path:
            holder = holder.children.setdefault(part, _Tree())
        holder.bodies.append(sub)
        first = next((n for n in body.nodes if n.op not in ("param", "constant")), None)
        if first is not None:
            self.clusters[0] += 1
            sub.cluster_id = f"cluster_body_{self.clusters[0]}"  # type: ignore[attr-defined]
            self.edges.append(f"  {owner} -> {prefix}n{first.id} [style=dashed, color=\"#8e24aa\", "
                              f"lhead={sub.cluster_id}, tooltip={_q(f'body {key} of %{node.id}')}];")

    def _node_stmt(self, dot_id: str, node: Node, plan: Any, step: dict[int, int], outputs: set[int]) -> str:
        return _node_stmt(node, self.stage, plan, step, outputs).replace(f"n{node.id} [", f"{dot_id} [", 1)


def _counts(nodes: list[Node]) -> list[tuple[str, int]]:
    """(op kind, count) of a block's members, most frequent first."""
    counts = Counter(op_kind(n) for n in nodes)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def to_dot(obj: Any, *, title: str | None = None, show_params: bool = True, legend: bool = True, rankdir: str = "TB",
           collapse: str = "auto") -> str:
    """DOT text for a HIR / MIR graph, an LirModule or a GraphModule (see the module docstring).

    Params and constants used more than once are drawn once per use (no fan-out);
    ``show_params=False`` leaves them out. ``collapse``: ``"blocks"`` draws each top-level
    block as one box, ``"none"`` never, ``"auto"`` (default) when the graph has more than
    :data:`AUTO_COLLAPSE_NODES` op nodes; past :data:`AUTO_HIDE_LEAVES_NODES` the leaves go.
    Control-flow bodies are drawn as nested clusters.
    """
    if collapse not in ("auto", "none", "blocks"):
        raise RlxError(f"collapse must be 'auto', 'none' or 'blocks', got {collapse!r}")
    g, plan = _split(obj)
    stage = GraphStage.LIR if plan is not None else g.stage
    collapsed = should_collapse(g, stage, collapse)
    if collapse == "auto" and sum(1 for n in g.nodes if n.op not in _LEAVES) > AUTO_HIDE_LEAVES_NODES and not collapsed:
        show_params = False
    fused = sum(1 for n in g.nodes if node_kind(n) == "fused")
    head = title or f"{g.name} — {stage.value.upper()}, {len(g)} nodes" + (f", {fused} fused" if fused else "")
    if collapsed:
        head += " (blocks collapsed)"
    if plan is not None:
        head += f"\narena {plan.arena_size} B, lower bound {plan.lower_bound} B"
    lines = [
        f"digraph {_q(g.name)} {{",
        f"  graph [label={_q(head)}, labelloc=\"t\", fontname=\"Helvetica\", rankdir={_q(rankdir)}, compound=true, "
        "nodesep=\"0.25\", ranksep=\"0.35\", tooltip=" + _q(f"{g.name} ({stage.value.upper()})") + "];",
        '  node [fontname="Helvetica", fontsize="10", margin="0.08,0.04"];',
        '  edge [fontname="Helvetica", fontsize="8", color="#555555", fontcolor="#37474f"];',
    ]
    em = _Emitter(stage, plan, show_params, collapsed)
    tree = _Tree()
    em.graph(g, tree, "", 0)
    tree.emit(lines, "  ", "", 0, [0])
    lines += em.edges
    if legend:
        keys = [k for k in COLORS if k in em.used_kinds]
        if keys:
            lines.append("  subgraph cluster_legend {")
            lines.append('    label="legend"; style="dashed"; color="#9e9e9e"; fontsize="9";')
            for k in keys:
                name = {"hir": "HIR block", "fused": "fused op", "mir": "MIR op", "block": "collapsed block"}.get(k, k)
                style = "filled" if k in (*_LEAVES, "block") else "filled,rounded"
                shape = "ellipse" if k in _LEAVES else ("box3d" if k == "block" else "box")
                lines.append(f"    legend_{k} [label={_q(name)}, shape={shape}, "
                             f"style={_q(style)}, fillcolor={_q(COLORS[k])}, fontsize=\"9\", tooltip={_q(name)}];")
            for a, b in itertools.pairwise(keys):
                lines.append(f"    legend_{a} -> legend_{b} [style=invis];")
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- rendering


def find_dot() -> str | None:
    """The path of Graphviz's ``dot`` program, or None."""
    return shutil.which("dot")


def render(dot_text: str, path: str | os.PathLike[str], fmt: str | None = None, *, timeout: float = DOT_TIMEOUT_S) -> str:
    """Run ``dot -T<fmt>`` on ``dot_text`` and write ``path`` (format from the suffix by default)."""
    path = os.fspath(path)
    fmt = fmt or (os.path.splitext(path)[1].lstrip(".").lower() or "svg")
    exe = find_dot()
    if exe is None:
        raise DotMissing("Graphviz 'dot' was not found on PATH; install Graphviz (e.g. apt-get install graphviz, "
                         "brew install graphviz) or write the DOT text instead (-o FILE.dot)")
    with atomic_path(path) as tmp:  # dot writes a temporary; it replaces path only when complete
        try:
            proc = subprocess.run([exe, f"-T{fmt}", "-o", tmp], input=dot_text.encode("utf-8"), capture_output=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise RlxError(f"Graphviz dot took longer than {timeout:g} s; try --no-params or a smaller graph") from None
        if proc.returncode != 0:
            msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise RlxError(f"Graphviz dot failed (exit {proc.returncode}): {msg[0] if msg else 'no message'}")
    return path


def draw_graph(obj: Any, path: str | os.PathLike[str], **options: Any) -> str:
    """Write a picture of ``obj`` to ``path``: ``.html`` as the interactive viewer
    (:mod:`rlx.viz.html`), ``.dot`` / ``.gv`` as DOT text, anything else (``.svg``, ``.png``,
    ``.pdf``) rendered by Graphviz. ``options`` go to :func:`to_dot`."""
    path = os.fspath(path)
    if path.lower().endswith(".html"):
        from rlx.viz.html import draw_html

        return draw_html(obj, path, collapse=options.get("collapse", "auto"))
    text = to_dot(obj, **options)
    if path.lower().endswith((".dot", ".gv")):
        with atomic_open(path, "w") as fh:
            fh.write(text)
        return path
    return render(text, path)


def draw_plan(obj: Any, path: str | os.PathLike[str], **options: Any) -> str:
    """The memory-plan timeline of an LirModule (or a GraphModule at LIR): PNG / PDF through
    matplotlib, SVG by hand — :meth:`rlx.LirModule.draw`."""
    lir = getattr(obj, "_lir", None) or obj
    if not hasattr(lir, "draw") or not hasattr(lir, "plan"):
        raise RlxError(f"a memory-plan picture needs an LIR module, got {type(obj).__name__}")
    path = os.fspath(path)
    if not path.lower().endswith(".svg"):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise RlxError('a PNG/PDF plan picture needs matplotlib: pip install "rlx[viz]" (an .svg needs nothing)') from None
    return lir.draw(path, **options)
