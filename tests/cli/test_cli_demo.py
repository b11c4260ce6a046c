"""rlx demo end to end in a subprocess: the printed figures and the files it writes."""

from __future__ import annotations

import re
import shutil
import time

import pytest

import rlx

from .conftest import run_cli
from .pictures import png_size, read_svg, svg_texts


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    t0 = time.perf_counter()
    res = run_cli("demo", "--out", out, timeout=300)
    return res, out, time.perf_counter() - t0


def test_demo_exits_cleanly_and_fast(demo):
    res, _, seconds = demo
    assert res.rc == 0, res.err[-3000:]
    assert "Traceback" not in res.err
    assert seconds < 60


def test_demo_loss_falls_tenfold(demo):
    res, _, _ = demo
    m = re.search(r"loss: ([0-9.e+-]+) -> ([0-9.e+-]+) \(([0-9.]+)x lower\) in (\d+) steps", res.out)
    assert m, res.out
    first, last, steps = float(m.group(1)), float(m.group(2)), int(m.group(4))
    assert steps <= 200 and first / last >= 10


def test_demo_fingerprints_equal(demo):
    res, out, _ = demo
    m = re.search(r"fingerprint: ([0-9a-f]{16}) saved, ([0-9a-f]{16}) reloaded: equal; outputs identical", res.out)
    assert m and m.group(1) == m.group(2), res.out
    lir = rlx.load(out / "tiny_transformer.lir.rlx")
    assert lir.fingerprint().startswith(m.group(1))


def test_demo_plan_and_fusion_figures(demo):
    res, out, _ = demo
    m = re.search(r"arena: (\d+) B, lower bound: (\d+) B \((\d+\.\d+)x\)", res.out)
    assert m, res.out
    arena, lower = int(m.group(1)), int(m.group(2))
    assert arena >= lower > 0
    lir = rlx.load(out / "tiny_transformer.lir.rlx")
    assert (lir.plan.arena_size, lir.plan.lower_bound) == (arena, lower)
    assert "fusion report:" in res.out
    m = re.search(r"fusion: (\d+) -> (\d+) nodes, (\d+) fused ops", res.out)
    assert m and int(m.group(3)) > 0 and int(m.group(2)) <= int(m.group(1))
    assert re.search(r"max \|arena - reference\| = [0-9.e+-]+", res.out)


def test_demo_pictures(demo):
    _, out, _ = demo
    w, h = png_size(out / "tiny_transformer.plan.png")
    assert w > 0 and h > 0
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed")
    for stage, expect in (("hir", "swiglu"), ("mir", "fused_swiglu"), ("lir", "fused_swiglu")):
        texts = svg_texts(read_svg(out / f"tiny_transformer.{stage}.svg"))
        assert any(t.startswith(expect) for t in texts), (stage, texts[:20])


def test_demo_files_work_with_the_other_commands(demo):
    _, out, _ = demo
    res = run_cli("run", out / "tiny_transformer.lir.rlx", "--input", f"x={out / 'x.npy'}")
    assert res.rc == 0 and "[2, 8, 16]" in res.out
