"""rlx draw: graph pictures at each stage, the memory plan, user errors."""

from __future__ import annotations

import shutil

import pytest

import rlx

from .conftest import assert_one_line_error, run_cli
from .pictures import png_size, read_svg, svg_clusters, svg_nodes, svg_texts

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")


@needs_dot
@pytest.mark.parametrize("stage,expect", [(None, "linear+bias+gelu"), ("mir", "matmul"), ("opt", "fused_matmul_bias_act"),
                                          ("lir", "fused_matmul_bias_act")])
def test_draw_svg_at_each_stage(files, tmp_path, stage, expect):
    out = tmp_path / "g.svg"
    args = ["draw", files["hir"], "-o", out, "--policy", "fusable"] + (["--stage", stage] if stage else [])
    res = run_cli(*args)
    assert res.rc == 0, res.err
    assert f"wrote {out}" in res.out
    root = read_svg(out)
    texts = svg_texts(root)
    assert any(t.startswith(expect) for t in texts), texts
    assert "encoder" in svg_clusters(root)
    assert any(t.startswith("cli_hir") for t in texts)
    if stage == "lir":
        assert any(t.startswith("arena ") for t in texts)


@needs_dot
def test_draw_png_and_no_params(files, tmp_path):
    out = tmp_path / "g.png"
    assert run_cli("draw", files["mlp"], "-o", out).rc == 0
    w, h = png_size(out)
    assert w > 100 and h > 100
    svg = tmp_path / "g.svg"
    assert run_cli("draw", files["mlp"], "-o", svg, "--no-params").rc == 0
    nodes = svg_nodes(read_svg(svg))
    g = rlx.load(files["mlp"])
    assert not any(f"n{v.id}" in nodes for v in g.params().values())
    assert f"n{g.inputs()['x'].id}" in nodes


def test_draw_plan_png(files, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plan.png"
    res = run_cli("draw", files["mlp"], "--plan", "-o", out)
    assert res.rc == 0, res.err
    w, h = png_size(out)
    assert (w, h) == (900, 520)
    assert out.stat().st_size > 5000


def test_draw_dot_text_without_graphviz(files, tmp_path):
    out = tmp_path / "g.dot"
    res = run_cli("draw", files["mlp"], "-o", out, env={"PATH": str(tmp_path)})
    assert res.rc == 0, res.err
    assert out.read_text().startswith('digraph "cli_mlp"')


def test_draw_svg_without_graphviz_is_one_line(files, tmp_path):
    assert_one_line_error(run_cli("draw", files["mlp"], "-o", tmp_path / "g.svg", env={"PATH": str(tmp_path)}), "Graphviz", "dot")
    assert not (tmp_path / "g.svg").exists()


def test_draw_user_errors(files, tmp_path):
    assert_one_line_error(run_cli("draw", files["mlp"], "-o", tmp_path / "g.txt"), ".svg")
    assert_one_line_error(run_cli("draw", files["mlp"], "--plan", "-o", tmp_path / "p.dot"), ".png")
    assert_one_line_error(run_cli("draw", files["mlp"], "--stage", "hir", "-o", tmp_path / "g.dot"), "earlier stage HIR")
    assert_one_line_error(run_cli("draw", files["mlp"], "--plan", "--stage", "mir", "-o", tmp_path / "p.png"), "LIR")
    assert_one_line_error(run_cli("draw", files["mlp"], "-o", tmp_path / "none" / "g.svg"), "does not exist")
