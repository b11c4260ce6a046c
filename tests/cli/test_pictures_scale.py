"""Pictures that scale: shared constants are drawn once per use (no fan-out), large graphs
collapse by block, control-flow bodies are nested clusters, tooltips carry every attribute."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import rlx
from rlx.viz import draw_graph, to_dot
from rlx.viz import graph_svg as gs

from .pictures import read_svg, svg_clusters, svg_nodes

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")


def resnet_like(blocks: int = 16) -> rlx.Graph:
    """~400 nodes; one CSE-shared scale constant feeds every block (the ResNet-50 fan-out)."""
    g = rlx.Graph("resnet_like")
    x = g.input("x", (1, 8, 8, 8))
    scale = g.constant(np.full((1, 8, 1, 1), 0.5, np.float32))
    for i in range(blocks):
        r = x
        for j in range(3):
            w = g.param(f"b{i}.c{j}.w", (8, 8, 3, 3))
            x = g.conv2d(x, w, padding=[1, 1])
            x = g.relu(x * scale + scale)
        x = g.relu(x + r)
        for _ in range(12):
            x = g.tanh(x * scale)
    g.set_outputs([x])
    return g


def _leaf_out_edges(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in re.finditer(r"^  (n[0-9_u]+) -> ", text, re.M):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def test_shared_constant_is_drawn_once_per_use():
    g = resnet_like()
    assert len(g) > 400
    text = to_dot(g, collapse="none")
    scale = next(n for n in g.nodes if n.op == "constant")
    users = sum(n.inputs.count(scale.id) for n in g.nodes)
    assert users > 100
    copies = re.findall(rf"^\s+(n{scale.id}_u\d+_\d+) \[", text, re.M)
    assert len(copies) == users and len(set(copies)) == users
    edges = _leaf_out_edges(text)
    assert all(edges[c] == 1 for c in copies)
    assert max(edges.values()) <= max(len([u for u in g.nodes if v.id in u.inputs]) for v in g.nodes if v.op not in ("param", "constant"))


@needs_dot
def test_resnet_sized_graph_renders(tmp_path):
    """Graphviz used to time out (120 s) on this shape; the run here is bounded by a child timeout."""
    g = resnet_like()
    path = tmp_path / "big.svg"
    t0 = time.perf_counter()
    draw_graph(g, path, collapse="none")
    elapsed = time.perf_counter() - t0
    nodes = svg_nodes(read_svg(path))
    assert sum(1 for k in nodes if re.fullmatch(r"n\d+", k)) == sum(1 for n in g.nodes if n.op != "constant")
    assert elapsed < gs.DOT_TIMEOUT_S


def blocky_module(layers: int) -> rlx.GraphModule:
    def build(h):
        x = h.input("x", (2, 16))
        for i in range(layers):
            with h.block(f"layer{i}"):
                with h.block("mlp"):
                    x = h.linear(x, h.param(f"w{i}", (16, 16)), bias=h.param(f"b{i}", (16,)), activation="gelu")
        return x

    return rlx.define("blocky", build)


def test_collapse_by_block():
    mir = blocky_module(4).lower_to_mir(rlx.FusionPolicy.FUSABLE)
    text = to_dot(mir, collapse="blocks")
    boxes = re.findall(r"^\s+(b_\d+) \[label=\"(layer\d)\\n(\d+) ops", text, re.M)
    assert [b[1] for b in boxes] == ["layer0", "layer1", "layer2", "layer3"]
    members = {f"layer{i}": sum(1 for n in mir.nodes if n.prov and (n.prov.label or "").split("/")[0] == f"layer{i}")
               for i in range(4)}
    assert {b[1]: int(b[2]) for b in boxes} == members
    edges = re.findall(r"^  (b_\d+) -> (b_\d+) ", text, re.M)
    assert edges == [("b_1", "b_2"), ("b_2", "b_3"), ("b_3", "b_4")]
    assert "param" not in "".join(re.findall(r'^\s+n\d+ \[label="[^"]*', text, re.M))
    assert to_dot(mir, collapse="none").count("b_1") == 0
    auto_small = to_dot(mir)  # small: auto keeps every node
    assert "b_1 [" not in auto_small
    big = blocky_module(1 + gs.AUTO_COLLAPSE_NODES // 3).lower_to_mir(rlx.FusionPolicy.FUSABLE)
    assert "(blocks collapsed)" in to_dot(big)


def _control_flow_graph() -> rlx.Graph:
    sig = [("x", (3,), "f32"), ("i", (), "i32")]

    def sub(name, fn):
        b = rlx.Graph(name)
        args = [b.input(n, s, d) for n, s, d in sig]
        out = fn(b, *args)
        b.set_outputs(out if isinstance(out, list) else [out])
        return b

    cond = sub("cond", lambda h, x, i: h.lt(i, h.scalar(3, rlx.i32)))
    body = sub("body", lambda h, x, i: [x * 1.5 + h.sin(x), i + h.scalar(1, rlx.i32)])
    g = rlx.Graph("loop")
    x = g.input("x", (3,))
    out = g.while_([x, g.constant(np.array(0, np.int32))], cond=cond, body=body, max_iterations=10)
    g.set_outputs([out])
    return g


def test_control_flow_bodies_are_nested_clusters():
    g = _control_flow_graph()
    text = to_dot(g)
    loop = next(n for n in g.nodes if n.op == "while_")
    for key in ("cond", "body"):
        assert f'label="%{loop.id}.{key}: {key}"' in text
        assert re.search(rf"n{loop.id} -> n{loop.id}_{key}_n\d+ \[style=dashed", text)
    body = loop.attrs["body"]
    for n in body.nodes:
        if n.op not in ("param", "constant"):
            assert f"n{loop.id}_body_n{n.id} [" in text


@needs_dot
def test_control_flow_svg_and_full_attribute_tooltips(tmp_path):
    g = _control_flow_graph()
    root = read_svg(draw_graph(g, tmp_path / "cf.svg"))
    clusters = svg_clusters(root)
    loop = next(n for n in g.nodes if n.op == "while_")
    assert f"%{loop.id}.body: body" in clusters and f"%{loop.id}.cond: cond" in clusters
    tip = svg_nodes(root)[f"n{loop.id}"]["tooltip"]
    assert "max_iterations = 10" in tip and "graph @body" in tip


def test_thousands_of_nodes_fall_back_quickly():
    """A 3000-node chain without blocks: the DOT text is written in well under a second per
    thousand nodes and leaves out params (the fallback), in a child with a time limit."""
    code = (
        "import time, rlx\n"
        "g = rlx.Graph('chain'); x = g.input('x', (4,))\n"
        "for i in range(1500): x = g.relu(x + g.param(f'p{i}', (4,)))\n"
        "g.set_outputs([x])\n"
        "from rlx.viz import to_dot\n"
        "t = time.perf_counter(); text = to_dot(g); print(time.perf_counter() - t, 'param' in text.split('node [',1)[1])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    _, has_params = proc.stdout.split()
    assert has_params == "False"
