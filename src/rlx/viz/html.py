"""``rlx draw -o graph.html``: a self-contained interactive viewer (no network, no CDN).

One HTML file with the graph as JSON, laid out here (:mod:`rlx.viz.layout`), and inline
JavaScript / CSS (``viewer.js``, ``viewer.css`` next to this module) that draws it as SVG:
pan (drag) and zoom (wheel), an overview of the whole graph (click it to go there),
collapsible blocks (click a block's title; large graphs open collapsed, grouped by block or
module path), control-flow bodies (If branches, Scan / Loop bodies) opened in place by
clicking their node, search (name, op, ``%id``, the source model's op type and node name; ``"n12"`` in quotes: that
whole word only), a
details panel (click a node: type, the ONNX / torch node it came from, every attribute,
provenance, operands with their weights, users, buffer slot) and, for a planned module, the
memory timeline beside it — activations over schedule steps, weights apart. The page's
address can carry ``#q=TEXT`` (search and go to the first match) and ``#open=KEY`` (open a
node's bodies; a key is ``ID`` or ``ID/attr/ID`` inside a body).
Params and constants are not drawn as nodes: they are listed with the node that uses them.
"""

from __future__ import annotations

import json
import os
from html import escape
from importlib import resources
from typing import Any

from rlx.hir.inspect import op_text, provenance_text
from rlx.ir.atomic import atomic_open
from rlx.ir.graph import Graph, GraphStage, Node
from rlx.viz.graph_svg import AUTO_COLLAPSE_NODES, COLORS, MAX_BODY_DEPTH, _label, _split, attr_text, block_label, node_kind
from rlx.viz.layout import layered
from rlx.viz.source import block_path, group_depth, origin_text, origins_of, path_parts, path_prefix, source_label, source_search

__all__ = ["draw_html", "to_html", "viewer_data"]

_WEIGHTS = ("param", "constant")


def _asset(name: str) -> str:
    return resources.files("rlx.viz").joinpath(name).read_text(encoding="utf-8")


def _operand(g: Graph, src: int) -> str:
    n = g.node(src)
    what = f'{n.op} "{n.attrs["name"]}"' if n.op in ("input", "param") else op_text(n)
    return f"%{src} {what} : {n.type}"


def _details(g: Graph, node: Node, stage: GraphStage, plan: Any, users: list[int], step: dict[int, int]) -> list[list[str]]:
    rows = [["node", f"%{node.id} = {node.op} : {node.type}"]]
    if node.name:
        rows.append(["name", node.name])
    label = block_label(node, stage)
    if label:
        rows.append(["block", label])
    origins = node.prov.origins if node.prov is not None else ()
    built = f"imported from {origins[0].framework}" if origins else f"built at {stage.value.upper()}"
    rows.append(["provenance", provenance_text(node) or built])
    for k, v in node.attrs.items():
        if node.op not in ("input", "param"):
            rows.append([f"attr {k}", attr_text(v)])
    for i, src in enumerate(node.inputs):
        rows.append([f"operand {i}", _operand(g, src)])
    if users:
        rows.append(["users", ", ".join(f"%{u}" for u in users[:50]) + (" …" if len(users) > 50 else "")])
    if plan is not None:
        slot = plan.assignments.get(node.id)
        if slot is not None:
            rows.append(["slot", f"offset {slot.offset}, {slot.size} B"])
        view = plan.view_aliases.get(node.id)
        if view is not None:
            rows.append(["view", f"of %{view.root} at +{view.byte_offset} B"])
        if node.id in plan.lifetimes:
            birth, death = plan.lifetimes[node.id]
            rows.append(["live", f"steps {birth}..{death}"])
        if node.id in step:
            rows.append(["schedule step", str(step[node.id])])
    return rows


def _plan_data(g: Graph, plan: Any) -> dict[str, Any]:
    buffers = []
    for nid, (birth, death) in sorted(plan.lifetimes.items()):
        slot = plan.assignments.get(nid)
        if slot is None or nid in plan.view_aliases:
            continue
        node = g.node(nid)
        name = node.attrs["name"] if node.op in ("input", "param") else (node.name or op_text(node))
        buffers.append({"node": nid, "label": f"%{nid} {name}", "kind": "weight" if node.op in _WEIGHTS else "activation",
                        "offset": int(slot.offset), "size": int(slot.size), "birth": int(birth),
                        "death": int(min(death, len(plan.schedule)))})
    return {"arena": int(plan.arena_size), "lower_bound": int(plan.lower_bound), "steps": len(plan.schedule),
            "buffers": buffers}


def _body_graphs(node: Node) -> list[tuple[str, Graph]]:
    """The control-flow bodies of a node (If branches, a Scan / Loop body): graph-valued attributes."""
    return [(k, v) for k, v in node.attrs.items() if isinstance(v, Graph)]


def _graph_view(g: Graph, stage: GraphStage, plan: Any, prefix: str, depth: int) -> dict[str, Any]:
    """Laid-out nodes and edges of ``g`` (a body: ``prefix`` makes its node keys unique), each
    node with its details, its source-model origin and its own bodies (to ``MAX_BODY_DEPTH``)."""
    step = {nid: i for i, nid in enumerate(plan.schedule)} if plan is not None else {}
    users: dict[int, list[int]] = {}
    for n in g.nodes:
        for src in n.inputs:
            users.setdefault(src, []).append(n.id)
    shown = [n for n in g.nodes if n.op not in _WEIGHTS]
    labels = {}
    for n in shown:
        src = source_label(n)
        labels[n.id] = _label(n, plan) + (f"\n‹{src}›" if src else "")
    drawn = set(labels)
    boxes = layered([n.id for n in shown], {n.id: [i for i in n.inputs if i in drawn] for n in shown}, labels)
    outputs = set(g.output_ids)
    nodes = []
    for n in shown:
        b = boxes[n.id]
        details = _details(g, n, stage, plan, users.get(n.id, []), step)
        details[1:1] = [["source", origin_text(o)] for o in origins_of(n)]
        entry: dict[str, Any] = {
            "id": n.id, "key": f"{prefix}{n.id}", "label": labels[n.id], "kind": node_kind(n), "x": round(b.x, 1),
            "y": round(b.y, 1), "w": round(b.w, 1), "h": b.h, "block": None, "output": n.id in outputs,
            "search": (f"%{n.id} {op_text(n)} {n.name or ''} {n.attrs.get('name', '') if n.op == 'input' else ''} "
                       f"{source_search(n)}").lower(),
            "details": details}
        bodies = _body_graphs(n)
        if bodies and depth < MAX_BODY_DEPTH:
            owner = next((o.name for o in origins_of(n) if o.name), None) or n.name or n.op
            entry["bodies"] = [{"title": f"{owner}: {attr}",
                                **_graph_view(body, GraphStage.MIR, None, f"{prefix}{n.id}/{attr}/", depth + 1)}
                               for attr, body in bodies]
        nodes.append(entry)
    edges = [[f"{prefix}{src}", f"{prefix}{n.id}", str(g.node(src).type)] for n in shown for src in n.inputs if src in drawn]
    box = [min((d["x"] - d["w"] / 2 for d in nodes), default=0), min((d["y"] for d in nodes), default=0),
           max((d["x"] + d["w"] / 2 for d in nodes), default=0), max((d["y"] + d["h"] for d in nodes), default=0)]
    return {"nodes": nodes, "edges": edges, "box": [round(v, 1) for v in box]}


def _group(g: Graph, stage: GraphStage, nodes: list[dict[str, Any]]) -> None:
    """Set each drawn node's ``block``: its block / module path at the depth that gives an overview;
    a large graph without any path is grouped in runs of consecutive ops."""
    by_id = {n.id: n for n in g.nodes}
    paths = {d["id"]: block_path(by_id[d["id"]], stage) for d in nodes}
    depth = group_depth([path_parts(p) for p in paths.values()])
    for d in nodes:
        d["block"] = path_prefix(paths[d["id"]], depth) or None
    ops = [d for d in nodes if d["kind"] != "input"]
    if not any(d["block"] for d in nodes) and len(ops) > AUTO_COLLAPSE_NODES:
        size = max(50, len(ops) // 20)
        for i in range(0, len(ops), size):
            run = ops[i:i + size]
            name = f"ops %{run[0]['id']}–%{run[-1]['id']}"
            for d in run:
                d["block"] = name


def viewer_data(obj: Any, *, collapse: str = "auto") -> dict[str, Any]:
    """The JSON the viewer draws: laid-out nodes (with their control-flow bodies), edges, blocks,
    details (the source model's op and node name among them), the plan."""
    g, plan = _split(obj)
    stage = GraphStage.LIR if plan is not None else g.stage
    view = _graph_view(g, stage, plan, "", 0)
    nodes = view["nodes"]
    _group(g, stage, nodes)
    blocks = sorted({nd["block"] for nd in nodes if nd["block"]}, key=lambda b: min(nd["id"] for nd in nodes if nd["block"] == b))
    ops = sum(1 for n in nodes if n["kind"] != "input")
    collapsed = bool(blocks) and (collapse == "blocks" or (collapse == "auto" and ops > AUTO_COLLAPSE_NODES))
    return {"name": g.name, "stage": stage.value, "node_count": len(g), "nodes": nodes, "edges": view["edges"],
            "box": view["box"], "blocks": blocks, "collapsed": collapsed, "colors": COLORS,
            "plan": _plan_data(g, plan) if plan is not None else None}


def to_html(obj: Any, *, title: str | None = None, collapse: str = "auto") -> str:
    data = viewer_data(obj, collapse=collapse)
    title = title or f"{data['name']} — {data['stage'].upper()}, {data['node_count']} nodes"
    # every "<" as \u003c: no "</script>" and no "<!--" (which makes the parser skip the closing tag) in the island
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=True).replace("<", "\\u003c")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title>\n<style>\n{_asset('viewer.css')}\n</style></head>\n<body>\n"
        f"<header><b>{escape(title)}</b><input id=\"search\" type=\"search\" placeholder=\"search: name, op, %id, source op\">"
        "<span id=\"hits\"></span><button id=\"fit\">fit</button><button id=\"collapse-all\">collapse blocks</button>"
        "<button id=\"expand-all\">expand blocks</button></header>\n"
        "<main><div id=\"canvas\"><svg id=\"graph\"></svg><svg id=\"overview\"></svg></div><aside><div id=\"details\">click a node</div>"
        "<div id=\"memory\"></div></aside></main>\n"
        f"<script id=\"rlx-data\" type=\"application/json\">{payload}</script>\n"
        f"<script>\n{_asset('viewer.js')}\n</script>\n</body></html>\n"
    )


def draw_html(obj: Any, path: str | os.PathLike[str], **options: Any) -> str:
    path = os.fspath(path)
    with atomic_open(path, "w") as fh:  # laid out before the old file is replaced
        fh.write(to_html(obj, **options))
    return path
