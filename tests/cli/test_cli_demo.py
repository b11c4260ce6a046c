"""rlx demo end to end in one subprocess: the printed figures and the files it writes.

One test on purpose: the demo runs once, whatever pytest-xdist does with the module.
"""

from __future__ import annotations

import re
import resource
import shutil
import time

import rlx

from .conftest import run_cli, run_cli_process
from .pictures import png_size, read_svg, svg_texts


def _check_training(out: str) -> None:
    m = re.search(r"loss: ([0-9.e+-]+) -> ([0-9.e+-]+) \(([0-9.]+)x lower\) in (\d+) steps", out)
    assert m, out
    first, last, steps = float(m.group(1)), float(m.group(2)), int(m.group(4))
    assert steps <= 200 and first / last >= 10, (first, last, steps)


def _check_plan_and_fusion(out: str, lir: rlx.LirModule) -> None:
    m = re.search(r"arena: (\d+) B, lower bound: (\d+) B \((\d+\.\d+)x\)", out)
    assert m, out
    arena, lower = int(m.group(1)), int(m.group(2))
    assert arena >= lower > 0
    assert (lir.plan.arena_size, lir.plan.lower_bound) == (arena, lower)
    assert "fusion report:" in out
    m = re.search(r"fusion: (\d+) -> (\d+) nodes, (\d+) fused ops", out)
    assert m and int(m.group(3)) > 0 and int(m.group(2)) <= int(m.group(1)), out
    m = re.search(r"max \|arena - reference\| = ([0-9.e+-]+)", out)
    assert m and float(m.group(1)) < 1e-4


def _check_fingerprints(out: str, lir: rlx.LirModule) -> None:
    m = re.search(r"fingerprint: ([0-9a-f]{16}) saved, ([0-9a-f]{16}) reloaded: equal; outputs identical", out)
    assert m and m.group(1) == m.group(2), out
    assert lir.fingerprint().startswith(m.group(1))


def _check_pictures(d) -> None:
    w, h = png_size(d / "tiny_transformer.plan.png")
    assert w > 0 and h > 0
    viewer = (d / "tiny_transformer.html").read_text()
    assert viewer.startswith("<!DOCTYPE html>") and "fused_swiglu" in viewer
    if shutil.which("dot") is None:  # the demo then skips the graph pictures (and says so)
        return
    for stage, expect in (("hir", "swiglu"), ("mir", "fused_swiglu"), ("lir", "fused_swiglu")):
        texts = svg_texts(read_svg(d / f"tiny_transformer.{stage}.svg"))
        assert any(t.startswith(expect) for t in texts), (stage, texts[:20])


def test_demo_end_to_end(tmp_path):
    d = tmp_path / "demo"
    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_cli_process("demo", "--out", d, timeout=300)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, cpu = time.perf_counter() - t0, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    assert res.rc == 0, res.err[-3000:]
    assert "Traceback" not in res.err
    assert cpu < 60, cpu  # "under a minute": CPU time, so a busy test machine does not make it flaky
    assert seconds < 240, seconds
    lir = rlx.load(d / "tiny_transformer.lir.rlx")
    _check_training(res.out)
    _check_plan_and_fusion(res.out, lir)
    _check_fingerprints(res.out, lir)
    _check_pictures(d)
    again = run_cli("run", d / "tiny_transformer.lir.rlx", "--input", f"x={d / 'x.npy'}")
    assert again.rc == 0 and "[2, 8, 16]" in again.out
