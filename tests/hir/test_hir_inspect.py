"""Stage-aware dumps (docs/pipeline.md#text-dumps): HIR, MIR, diff and LIR, with op histograms."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_hir_lowering import section9

import rlx
from rlx.hir import inspect, inspect_graph_diff, inspect_hir, inspect_lir, inspect_mir, op_histogram, pretty_print, pretty_stats
from rlx.hir.inspect import format_bytes


@pytest.fixture
def s9():
    return rlx.define("s9", section9)


def test_hir_dump(s9):
    text = s9.inspect()
    lines = text.splitlines()
    assert lines[0] == "hir @s9 (11 nodes, 1 outputs, fusion=Direct)"
    assert lines[1] == "  block ops: param=7, input=1, linear=1, residual_rms_norm=1, swiglu=1"
    assert '  h0 [input "x"] = input("x") : [2, 8] f32' in lines
    assert '  h3 ["linear"] = linear+bias+gelu(h0, h1, h2) : [2, 8] f32' in lines
    assert '  h7 ["swiglu_ffn"] = swiglu(h3, h4, h5, h6) : [2, 8] f32' in lines
    assert lines[-2].endswith("← output") and lines[-1] == "  return h10"
    assert "fusion=Fusable" in s9.with_fusion_policy("fusable").inspect()
    assert inspect(s9.graph) == inspect_hir(s9.graph)


def test_mir_dump_histogram_and_provenance(s9):
    mir = s9.lower_to_mir()
    text = inspect_mir(mir)
    lines = text.splitlines()
    assert lines[0] == "mir @s9 {" and lines[-1] == "}"
    assert lines[1] == "  graph @s9 (14 nodes, 1 outputs, 3.5 KiB arena)"
    assert lines[2] == ("    op kinds: param=7, matmul=2, concat=1, fused_matmul_bias_act=1, fused_residual_rms_norm=1, "
                        "fused_swiglu=1, input=1")
    assert '    %3 ["linear"] = fused_matmul_bias_act[activation=gelu](%0, %1, %2) : [2, 8] f32  // hir=h3, "linear"' in lines
    assert '    %7 ["swiglu_ffn"] = concat[axis=1](%4, %5) : [8, 32] f32  // hir=h7, "swiglu_ffn"' in lines
    assert '    %1 [param "w"] = param("w") : [8, 8] f32  // hir=h1' in lines
    assert lines[-3].endswith('"residual_rms_norm"  ← output')
    assert inspect(mir) == text == inspect(s9.lower())
    assert pretty_print(mir).startswith(pretty_stats(mir) + "\n\n")
    assert op_histogram(mir)[0] == ("param", 7)


def test_fusable_histogram_counts_kinds(s9):
    hist = dict(op_histogram(s9.lower_to_mir("fusable")))
    assert hist == {"param": 7, "matmul": 4, "add": 2, "gelu": 1, "silu": 1, "mul": 1, "rms_norm": 1, "input": 1}


def test_graph_diff(s9):
    direct, fusable = s9.lower_to_mir(), s9.lower_to_mir("fusable")
    diff = inspect_graph_diff(fusable, direct)
    assert diff.splitlines() == [
        "diff: 18 → 14 nodes (1 → 1 outputs)",
        "op delta: add-2, concat+1, fused_matmul_bias_act+1, fused_residual_rms_norm+1, fused_swiglu+1, gelu-1, matmul-2, "
        "mul-1, rms_norm-1, silu-1",
    ]
    assert inspect_mir(direct, before=fusable).startswith(diff + "\nmir @s9 {")
    assert inspect_graph_diff(direct, direct).endswith("op delta: none")


def test_pass_history_is_shown():
    g = rlx.Graph("p")
    x = g.input("x", (2,))
    g.append("activation", [x], {"kind": "relu"}, prov=rlx.Provenance(3, "blk", ("cse", "dce")))
    g.set_outputs([1])
    assert '// hir=h3, "blk", pass=cse,dce  ← output' in pretty_print(g)


def test_lir_dump_is_duck_typed(s9):
    mir = s9.lower_to_mir()
    slot = SimpleNamespace
    plan = SimpleNamespace(
        arena_size=128, alignment=64, schedule=list(range(len(mir))),
        assignments={0: slot(offset=0, size=64), 3: slot(offset=64, size=64), 5: slot(offset=64, size=64)},
        view_aliases={5: SimpleNamespace(root=3, byte_offset=0)}, io={"inputs": [("x", 0)], "outputs": [13]},
        phases={0: "prologue", 3: "steady"})
    lir = SimpleNamespace(graph=mir, plan=plan, fingerprint=lambda: "ab" * 32)
    text = inspect_lir(lir)
    assert text.startswith("lir @s9 {\n  fingerprint: abababababababab\n  arena: 128 bytes (saved 64 vs 192 naive, align=64)")
    assert "  schedule: 14 nodes, 1 views" in text
    assert "  64\t64\t%5 sched=5 [view→%3+0]" in text
    assert "  64\t64\t%3 sched=3 steady" in text
    assert "  phases:\n    prologue: %0\n    steady: %3\n  io:\n    inputs: x=%0\n    outputs: %13" in text
    assert "  --- mir ---" in text and text.endswith("}")
    assert inspect(lir) == text
    assert rlx.GraphModule.from_lir(lir).inspect() == text


def test_format_bytes():
    sizes = (0, 1023, 1024, 3360, 5 * 2**20, 3 * 2**30)
    assert [format_bytes(n) for n in sizes] == ["0 B", "1023 B", "1.0 KiB", "3.3 KiB", "5.0 MiB", "3.0 GiB"]


def test_inspect_rejects_other_objects():
    with pytest.raises(rlx.RlxError, match="inspect expects"):
        inspect(42)


def test_real_lir_module(s9):
    lir_pkg = pytest.importorskip("rlx.lir")
    if not hasattr(lir_pkg, "plan"):
        pytest.skip("rlx.lir.plan not available")
    lir = lir_pkg.plan(s9.lower_to_mir(), alignment=64)
    text = inspect(lir)
    assert text.startswith(f"lir @s9 {{\n  fingerprint: {lir.fingerprint()[:16]}\n  arena: {lir.plan.arena_size} bytes")
    assert "  io:\n    inputs: x=%0\n    params: w=%1" in text
    assert 'hir=h3, "linear"' in text
    module = rlx.GraphModule.from_lir(lir)
    assert module.stage is rlx.GraphStage.LIR and module.inspect() == text
