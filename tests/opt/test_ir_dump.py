"""Pipeline dumps (rlx.ir.dump): every stage's text and each pass's diff.

The diffs are checked by applying them, in order, to the lowered MIR text with a patcher
written here: the result must be the optimized graph's text, which must parse back to the
graph rlx.optimize returned.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import rlx
from rlx.ir.dump import dump_to

sys.path.insert(0, str(Path(__file__).parents[1] / "hir"))
from test_hir_lowering import section9

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _patch(text: str, diff: str) -> str:
    old = text.splitlines()
    out: list[str] = []
    pos = 0
    lines = diff.splitlines()[2:]  # skip the ---/+++ header
    i = 0
    while i < len(lines):
        m = HUNK.match(lines[i])
        assert m, lines[i]
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out.extend(old[pos:start])
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][0], lines[i][1:]
            if tag == " ":
                assert old[pos] == body
                out.append(body)
                pos += 1
            elif tag == "-":
                assert old[pos] == body
                pos += 1
            else:
                out.append(body)
            i += 1
    out.extend(old[pos:])
    return "\n".join(out)


def test_stages_and_pass_diffs_reconstruct_the_pipeline(tmp_path):
    m = rlx.define("s9", section9)
    with dump_to(tmp_path):
        mir = m.lower_to_mir(rlx.FusionPolicy.FUSABLE)
        opt, _ = rlx.optimize(mir)
        lir = rlx.plan(opt)
    files = sorted(os.listdir(tmp_path))
    assert files[0] == "00-hir.txt" and files[1] == "01-mir-fusable.txt" and "index.txt" in files
    assert rlx.parse((tmp_path / "00-hir.txt").read_text()) == m.graph
    text = (tmp_path / "01-mir-fusable.txt").read_text().rstrip("\n")
    assert rlx.parse(text) == mir
    diffs = [f for f in files if f.endswith(".diff")]
    assert diffs, files
    for name in diffs:
        text = _patch(text, (tmp_path / name).read_text())
    (optimized,) = [f for f in files if f.endswith("-optimized.txt")]
    assert text == (tmp_path / optimized).read_text().rstrip("\n")
    assert rlx.parse(text) == opt
    (lir_file,) = [f for f in files if f.endswith("-lir.txt")]
    assert f"arena_size={lir.plan.arena_size}" in (tmp_path / lir_file).read_text()
    index = (tmp_path / "index.txt").read_text().splitlines()
    passes = [ln for ln in index if ln.startswith("pass ")]
    assert len(passes) >= len(diffs) and all(("(" in ln) == ("no change" not in ln) for ln in passes)


def test_nothing_is_written_outside_a_dump_block(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RLX_IR_DUMP", raising=False)
    rlx.optimize(rlx.define("s9", section9).lower_to_mir())
    assert os.listdir(tmp_path) == []


def test_environment_variable_dumps_each_graph_in_its_folder(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1] / 'hir')!r})
        import rlx
        from test_hir_lowering import section9
        rlx.plan(rlx.optimize(rlx.define("s9", section9).lower_to_mir())[0])
    """)
    env = {**os.environ, "RLX_IR_DUMP": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    files = os.listdir(tmp_path / "s9")
    assert "index.txt" in files and any(f.endswith("-lir.txt") for f in files)
