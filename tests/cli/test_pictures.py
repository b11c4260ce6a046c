"""Pictures: graph SVGs through Graphviz (labels, clusters, colours, edge shapes, tooltips) and the plan PNG."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import rlx
from rlx.viz import DotMissing, draw_graph, draw_plan, to_dot
from rlx.viz import graph_svg as gs

from .conftest import hir_module
from .pictures import png_size, read_svg, svg_clusters, svg_edge_labels, svg_nodes, svg_texts

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")


def _stages():
    m = hir_module()
    mir = m.lower_to_mir(rlx.FusionPolicy.FUSABLE)
    opt, _ = rlx.optimize(mir)
    return m.graph, mir, opt, rlx.plan(opt)


# ------------------------------------------------------------------------------ DOT text


def test_dot_text_structure():
    _, _, opt, lir = _stages()
    text = to_dot(opt)
    assert text.startswith('digraph "cli_hir" {') and text.rstrip().endswith("}")
    assert text.count("subgraph cluster_") == 3  # the "encoder" and "head" blocks, the legend
    assert 'label="encoder"' in text
    assert text.count(f'fillcolor="{gs.COLORS["fused"]}"') == 2 + 1  # two fused nodes and the legend entry
    n_edges = sum(len(n.inputs) for n in opt.nodes)
    assert len(re.findall(r"^  n\d+ -> n\d+ ", text, re.M)) == n_edges
    no_params = to_dot(opt, show_params=False, legend=False)
    assert "param" not in no_params.split("node [", 1)[1].replace("provenance", "")
    assert "@" in to_dot(lir) and "arena" in to_dot(lir)


def test_dot_escapes_quotes_and_backslashes():
    g = rlx.Graph('a "quoted" \\ name')
    x = g.input("x", (2,))
    g.set_outputs([g.relu(x)])
    text = to_dot(g)
    assert 'digraph "a \\"quoted\\" \\\\ name"' in text


def test_dot_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(gs, "find_dot", lambda: None)
    _, _, opt, _ = _stages()
    with pytest.raises(DotMissing, match="Graphviz") as info:
        draw_graph(opt, tmp_path / "g.svg")
    assert isinstance(info.value, rlx.RlxError)
    assert not (tmp_path / "g.svg").exists()
    path = draw_graph(opt, tmp_path / "g.dot")  # DOT text needs no Graphviz
    assert open(path).read() == to_dot(opt)


# ----------------------------------------------------------------------------------- SVG


@needs_dot
def test_mir_svg_labels_clusters_shapes_and_tooltips(tmp_path):
    _, _, opt, _ = _stages()
    root = read_svg(draw_graph(opt, tmp_path / "opt.svg"))
    nodes = svg_nodes(root)
    assert {f"n{n.id}" for n in opt.nodes} | {f"legend_{k}" for k in ("input", "param", "fused")} == set(nodes)
    fused = [n for n in opt.nodes if n.op == "fused_matmul_bias_act"]
    assert len(fused) == 2
    for n in fused:
        info = nodes[f"n{n.id}"]
        assert info["texts"][0].startswith("fused_matmul_bias_act") and info["texts"][1] == f"%{n.id}"
        assert gs.COLORS["fused"] in info["fills"]
        assert "provenance: hir=h" in info["tooltip"] and "pass=fuse_matmul_bias_act" in info["tooltip"]
    x = nodes[f"n{opt.inputs()['x'].id}"]
    assert x["texts"] == ["x", "[4, 8] f32"]
    assert "encoder" in svg_clusters(root)
    edges = svg_edge_labels(root)
    assert "[4, 8] f32" in edges and "[4, 16] f32" in edges and "[8, 16] f32" in edges
    assert len(edges) == sum(len(n.inputs) for n in opt.nodes)


@needs_dot
def test_hir_svg_shows_blocks(tmp_path):
    hir, _, _, _ = _stages()
    root = read_svg(draw_graph(hir, tmp_path / "hir.svg"))
    texts = svg_texts(root)
    assert "linear+bias+gelu" in texts and "linear+bias" in texts
    nodes = svg_nodes(root)
    blocks = [n for n in hir.nodes if n.op == "linear"]
    for n in blocks:
        assert gs.COLORS["hir"] in nodes[f"n{n.id}"]["fills"]
    assert "encoder" in svg_clusters(root)


@needs_dot
def test_lir_svg_shows_slots(tmp_path):
    _, _, _, lir = _stages()
    root = read_svg(draw_graph(lir, tmp_path / "lir.svg"))
    nodes = svg_nodes(root)
    p = lir.plan
    for nid, slot in p.assignments.items():
        info = nodes[f"n{nid}"]
        assert any(t.startswith(f"@{slot.offset} +{slot.size}B") for t in info["texts"]), info
        assert f"slot: offset {slot.offset}, {slot.size} B" in info["tooltip"]
    title = " ".join(svg_texts(root))
    assert f"arena {p.arena_size} B, lower bound {p.lower_bound} B" in title


@needs_dot
def test_svg_of_awkward_names_is_valid_xml(tmp_path):
    g = rlx.Graph('odd <name> & "quotes"')
    x = g.input("x", (3,))
    g.set_outputs([g.exp(x)])
    root = read_svg(draw_graph(g, tmp_path / "odd.svg"))
    assert any('odd <name> & "quotes"' in t for t in svg_texts(root))


# ------------------------------------------------------------------------------ plan PNG


def test_plan_png_signature_size_and_content(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    _, _, _, lir = _stages()
    path = draw_plan(lir, tmp_path / "plan.png")
    assert png_size(path) == (900, 520)
    pixels = matplotlib.image.imread(path)[..., :3]
    colours = {tuple(np.round(c, 2)) for c in pixels.reshape(-1, 3)[::7]}
    assert len(colours) > 10  # rectangles in several colours, not a blank canvas


def test_plan_svg_has_one_rect_per_buffer(tmp_path):
    _, _, _, lir = _stages()
    root = read_svg(draw_plan(lir, tmp_path / "plan.svg"))
    rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
    assert len(rects) == len(lir.plan.lifetimes) + 1  # + the frame of the activation panel


def test_draw_plan_needs_an_lir():
    _, _, opt, _ = _stages()
    with pytest.raises(rlx.RlxError, match="LIR"):
        draw_plan(opt, "x.png")
