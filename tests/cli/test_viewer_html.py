"""The interactive HTML viewer: self-contained (no network), the data it embeds, and — in
headless Chromium (Debian's ``chromium``) — a page that renders its nodes (DOM dump after
the script ran, and a screenshot whose pixels show the node colours)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import rlx
from rlx.viz import graph_svg as gs
from rlx.viz.html import to_html, viewer_data

from .conftest import hir_module, run_cli

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")


def _planned():
    m = hir_module()
    opt, _ = rlx.optimize(m.lower_to_mir(rlx.FusionPolicy.FUSABLE))
    return rlx.plan(opt)


def _embedded(html: str) -> dict:
    m = re.search(r'<script id="rlx-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def test_html_is_self_contained():
    html = to_html(_planned())
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace name, never fetched


def test_embedded_data_matches_the_graph():
    lir = _planned()
    data = _embedded(to_html(lir))
    g, p = lir.graph, lir.plan
    drawn = [n for n in g.nodes if n.op not in ("param", "constant")]
    assert [n["id"] for n in data["nodes"]] == [n.id for n in drawn]
    assert len(data["edges"]) == sum(1 for n in drawn for i in n.inputs if g.node(i).op not in ("param", "constant"))
    fused = next(n for n in g.nodes if n.op == "fused_matmul_bias_act")
    rows = dict(map(tuple, next(d for d in data["nodes"] if d["id"] == fused.id)["details"]))
    assert "pass=fuse_matmul_bias_act" in rows["provenance"]
    assert any(k.startswith("operand") and "param" in v for k, v in rows.items())  # its weights, listed with it
    assert rows["slot"] == f"offset {p.assignments[fused.id].offset}, {p.assignments[fused.id].size} B"
    kinds = {b["kind"] for b in data["plan"]["buffers"]}
    assert kinds == {"weight", "activation"} and data["plan"]["arena"] == p.arena_size
    ranks = {d["id"]: d["y"] for d in data["nodes"]}
    for n in drawn:
        for i in n.inputs:
            if i in ranks:
                assert ranks[i] < ranks[n.id]  # edges point down: the layout is layered


def test_large_graphs_open_collapsed():
    def build(h):
        x = h.input("x", (2, 8))
        for i in range(1 + gs.AUTO_COLLAPSE_NODES // 3):
            with h.block(f"layer{i}"):
                x = h.linear(x, h.param(f"w{i}", (8, 8)), bias=h.param(f"b{i}", (8,)), activation="gelu")
        return x

    mir = rlx.define("deep", build).lower_to_mir(rlx.FusionPolicy.FUSABLE)
    data = viewer_data(mir)
    assert data["collapsed"] and len(data["blocks"]) == 1 + gs.AUTO_COLLAPSE_NODES // 3
    assert not viewer_data(mir, collapse="none")["collapsed"]


def _chromium(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env={"HOME": str(tmp_path)})
    except subprocess.TimeoutExpired:
        pytest.skip("headless Chromium did not finish in 120 s")


@needs_chromium
def test_chromium_renders_the_nodes(files, tmp_path):
    page = tmp_path / "graph.html"
    res = run_cli("draw", files["hir"], "--stage", "lir", "-o", page)
    assert res.rc == 0, res.err
    data = _embedded(page.read_text())
    proc = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    dom = proc.stdout
    if "<body" not in dom:
        pytest.skip(f"headless Chromium printed no DOM: {proc.stderr[-500:]}")
    m = re.search(r'data-rendered="(\d+)"', dom)
    assert m, "the viewer's script did not run"
    assert int(m.group(1)) == len(data["nodes"])
    assert len(re.findall(r'<g class="node[ "]', dom)) == len(data["nodes"])
    assert len(re.findall(r'class="buf', dom)) == len(data["plan"]["buffers"])  # the memory timeline
    shot = tmp_path / "shot.png"
    _chromium([f"--screenshot={shot}", "--window-size=1280,800", page.as_uri()], tmp_path)
    if not shot.exists():
        pytest.skip("headless Chromium wrote no screenshot")
    from matplotlib.image import imread

    img = (imread(str(shot))[..., :3] * 255).round().astype(int)
    assert img.shape[:2] == (800, 1280)
    _, counts = np.unique(img.reshape(-1, 3), axis=0, return_counts=True)
    assert counts.max() < 0.97 * img.shape[0] * img.shape[1]  # not blank
    for kind in ("input", "fused"):
        want = np.array([int(gs.COLORS[kind][i:i + 2], 16) for i in (1, 3, 5)])
        near = np.abs(img - want).max(axis=-1) <= 3
        assert near.sum() > 200, f"no {kind} node pixels in the screenshot"
