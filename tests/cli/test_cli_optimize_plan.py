"""rlx optimize and rlx plan: fusion report, saved results, arena against the lower bound."""

from __future__ import annotations

import re

import numpy as np

import rlx

from .conftest import assert_one_line_error, run_cli


def test_optimize_fuses_and_saves_with_weights(files, tmp_path):
    out = tmp_path / "opt.rlx"
    res = run_cli("optimize", files["hir"], "-o", out, "--policy", "fusable")
    assert res.rc == 0, res.err
    assert "fusion report:" in res.out and "fuse_matmul_bias_act" in res.out
    g, params = rlx.load(out, with_params=True)
    assert g.stage is rlx.GraphStage.MIR
    assert sum(n.op == "fused_matmul_bias_act" for n in g.nodes) == 2
    assert set(params) == {"w1", "b1", "w2", "b2"}
    x = np.load(files["x"])
    (got,) = rlx.run(g, {"x": x}, params)
    (want,) = rlx.run(rlx.load(files["hir"]), {"x": x}, files["params"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert f"fingerprint {rlx.fingerprint(g)[:16]}" in res.out


def test_optimize_requires_output(files):
    res = run_cli("optimize", files["mlp"])
    assert res.rc == 2 and "-o" in res.err


def test_optimize_into_missing_directory(files, tmp_path):
    assert_one_line_error(run_cli("optimize", files["mlp"], "-o", tmp_path / "no" / "such" / "o.rlx"), "does not exist")


def test_plan_prints_arena_and_lower_bound(files, tmp_path):
    out = tmp_path / "planned.rlx"
    res = run_cli("plan", files["mlp"], "--alignment", "128", "-o", out, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    m = re.search(r"arena: (\d+) B, lower bound: (\d+) B \((\d+\.\d+)x\); plan checked", res.out)
    assert m, res.out
    arena, lower = int(m.group(1)), int(m.group(2))
    lir, params = rlx.load(out, with_params=True)
    assert isinstance(lir, rlx.LirModule)
    assert (lir.plan.arena_size, lir.plan.lower_bound, lir.plan.alignment) == (arena, lower, 128)
    assert arena >= lower > 0
    assert set(params) == {"w1", "b1", "w2", "b2"}
    assert "largest buffers" in res.out and f"fingerprint {lir.fingerprint()[:16]}" in res.out


def test_plan_of_a_planned_file_and_optimize_flag(files, tmp_path):
    out = tmp_path / "p.rlx"
    assert run_cli("plan", files["hir"], "--optimize", "-o", out).rc == 0
    res = run_cli("plan", out)
    assert res.rc == 0 and "plan checked" in res.out
    assert_one_line_error(run_cli("plan", out, "--optimize"), "already planned")
    assert_one_line_error(run_cli("plan", out, "--alignment", "128"), "already planned")


def test_plan_rejects_a_bad_alignment(files):
    assert_one_line_error(run_cli("plan", files["mlp"], "--alignment", "48"), "power of two")


def test_optimize_with_a_mixed_precision_policy(files, tmp_path):
    out = tmp_path / "amp.rlx"
    res = run_cli("optimize", files["mlp"], "-o", out, "--precision", "auto_mixed")
    assert res.rc == 0, res.err
    assert "auto_mixed_precision" in res.out
    g, params = rlx.load(out, with_params=True)
    assert {str(n.dtype) for n in g.nodes if n.op in ("matmul", "fused_matmul_bias_act")} == {"f16"}
    assert [o.dtype for o in g.outputs] == [o.dtype for o in rlx.load(files["mlp"]).outputs]
    x = np.load(files["x"])
    (got,) = rlx.run(g, {"x": x}, params)
    (want,) = rlx.run(rlx.load(files["mlp"]), {"x": x}, files["params"])
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    assert run_cli("optimize", files["mlp"], "-o", out, "--precision", "fastest").rc == 2
