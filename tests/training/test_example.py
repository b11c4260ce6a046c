"""examples/finetune_gpt2.py runs end to end (a few steps) and its two curves agree."""

from __future__ import annotations

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_finetune_example_runs_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from models.zoo import torchvision_without_compiled_ops

    torchvision_without_compiled_ops()
    spec = importlib.util.spec_from_file_location("finetune_gpt2", os.path.join(ROOT, "examples", "finetune_gpt2.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    plot = tmp_path / "curves.png"
    out = mod.main(["--steps", "8", "--width", "32", "--plot", str(plot)])
    assert plot.stat().st_size > 1000
    assert len(out["rlx"]) == len(out["torch"]) == 8
    assert out["rlx"] == pytest.approx(out["torch"], rel=1e-4)
