"""``rlx draw -o graph.html``: a self-contained interactive viewer (no network, no CDN).

One HTML file with the graph as JSON, laid out here (:mod:`rlx.viz.layout`), and inline
JavaScript / CSS (``viewer.js``, ``viewer.css`` next to this module) that draws it as SVG:
pan (drag) and zoom (wheel), collapsible blocks (click a block's title; large graphs open
collapsed), search (name, op, ``%id``), a details panel (click a node: type, every
attribute, provenance, operands with their weights, users, buffer slot) and, for a planned
module, the memory timeline beside it — activations over schedule steps, weights apart.
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
from rlx.viz.graph_svg import AUTO_COLLAPSE_NODES, COLORS, _label, _split, attr_text, block_label, node_kind, top_block
from rlx.viz.layout import layered

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
    rows.append(["provenance", provenance_text(node) or f"built at {stage.value.upper()}"])
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


def viewer_data(obj: Any, *, collapse: str = "auto") -> dict[str, Any]:
    """The JSON the viewer draws: laid-out nodes, edges, blocks, details, the plan."""
    g, plan = _split(obj)
    stage = GraphStage.LIR if plan is not None else g.stage
    step = {nid: i for i, nid in enumerate(plan.schedule)} if plan is not None else {}
    users: dict[int, list[int]] = {}
    for n in g.nodes:
        for src in n.inputs:
            users.setdefault(src, []).append(n.id)
    shown = [n for n in g.nodes if n.op not in _WEIGHTS]
    labels = {n.id: _label(n, plan) for n in shown}
    drawn = set(labels)
    boxes = layered([n.id for n in shown], {n.id: [i for i in n.inputs if i in drawn] for n in shown}, labels)
    outputs = set(g.output_ids)
    nodes = []
    for n in shown:
        b = boxes[n.id]
        nodes.append({"id": n.id, "label": labels[n.id], "kind": node_kind(n), "x": round(b.x, 1), "y": round(b.y, 1),
                      "w": round(b.w, 1), "h": b.h, "block": top_block(n, stage), "output": n.id in outputs,
                      "search": f"%{n.id} {op_text(n)} {n.name or ''} {n.attrs.get('name', '') if n.op == 'input' else ''}".lower(),
                      "details": _details(g, n, stage, plan, users.get(n.id, []), step)})
    edges = [[src, n.id, str(g.node(src).type)] for n in shown for src in n.inputs if src in drawn]
    blocks = sorted({nd["block"] for nd in nodes if nd["block"]}, key=lambda b: min(nd["id"] for nd in nodes if nd["block"] == b))
    ops = sum(1 for n in shown if n.op != "input")
    collapsed = bool(blocks) and (collapse == "blocks" or (collapse == "auto" and ops > AUTO_COLLAPSE_NODES))
    return {"name": g.name, "stage": stage.value, "node_count": len(g), "nodes": nodes, "edges": edges, "blocks": blocks,
            "collapsed": collapsed, "colors": COLORS, "plan": _plan_data(g, plan) if plan is not None else None}


def to_html(obj: Any, *, title: str | None = None, collapse: str = "auto") -> str:
    data = viewer_data(obj, collapse=collapse)
    title = title or f"{data['name']} — {data['stage'].upper()}, {data['node_count']} nodes"
    # every "<" as \u003c: no "</script>" and no "<!--" (which makes the parser skip the closing tag) in the island
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=True).replace("<", "\\u003c")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title>\n<style>\n{_asset('viewer.css')}\n</style></head>\n<body>\n"
        f"<header><b>{escape(title)}</b><input id=\"search\" type=\"search\" placeholder=\"search: name, op, %id\">"
        "<span id=\"hits\"></span><button id=\"fit\">fit</button><button id=\"collapse-all\">collapse blocks</button>"
        "<button id=\"expand-all\">expand blocks</button></header>\n"
        "<main><div id=\"canvas\"><svg id=\"graph\"></svg></div><aside><div id=\"details\">click a node</div>"
        "<div id=\"memory\"></div></aside></main>\n"
        f"<script id=\"rlx-data\" type=\"application/json\">{payload}</script>\n"
        f"<script>\n{_asset('viewer.js')}\n</script>\n</body></html>\n"
    )


def draw_html(obj: Any, path: str | os.PathLike[str], **options: Any) -> str:
    path = os.fspath(path)
    with atomic_open(path, "w") as fh:  # laid out before the old file is replaced
        fh.write(to_html(obj, **options))
    return path
