"""rlx inspect: the summary row, the io table and the stage's dump."""

from __future__ import annotations

import re

import rlx

from .conftest import assert_one_line_error, mlp_graph, run_cli


def test_inspect_mir_file(files):
    res = run_cli("inspect", "--full", files["mlp"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    out = res.out
    assert "MIR" in out and "cli_mlp" in out
    assert rlx.fingerprint(mlp_graph())[:16] in out
    for name in ("w1", "b1", "w2", "b2"):
        assert re.search(rf"^param\s+{name}\s", out, re.M), name
    assert "saved" in out and "missing" not in out
    assert "mir @cli_mlp {" in out and "op kinds:" in out  # the MIR dump


def test_inspect_reports_missing_weights(files):
    res = run_cli("inspect", files["bare"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0
    assert res.out.count("missing") == 4


def test_inspect_hir_file_shows_blocks(files):
    res = run_cli("inspect", "--full", files["hir"])
    assert res.rc == 0, res.err
    assert "HIR" in res.out and "block ops:" in res.out and "linear+bias+gelu" in res.out and '"encoder"' in res.out


def test_inspect_text_form_parses_back(files):
    res = run_cli("inspect", "--text", files["mlp"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0
    assert rlx.parse(res.out) == mlp_graph()


def test_inspect_default_is_a_bounded_summary(tmp_path):
    """A large graph is summarized, not dumped: the output does not grow with the node count."""
    g = rlx.Graph("wide")
    x = g.input("x", (2, 4))
    for i in range(400):
        x = g.relu(x + g.param(f"b{i}", (4,)))
    g.set_outputs([x])
    rlx.save(g, tmp_path / "wide.rlx")
    res = run_cli("inspect", tmp_path / "wide.rlx", env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert len(res.out.splitlines()) < 60
    assert "more inputs / params / outputs" in res.out and "relu" in res.out
    full = run_cli("inspect", "--full", tmp_path / "wide.rlx", env={"RLX_PLAIN": "1"})
    assert len(full.out.splitlines()) > 1200


def test_inspect_brief_is_one_table(files):
    res = run_cli("inspect", "--brief", files["mlp"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0
    assert "mir @" not in res.out and not re.search(r"^param\s+w1", res.out, re.M)


def test_inspect_directory_is_an_error(tmp_path):
    assert_one_line_error(run_cli("inspect", tmp_path), "directory")
