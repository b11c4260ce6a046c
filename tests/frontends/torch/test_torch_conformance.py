"""docs/torch_conformance.md is the output of scripts/torch_conformance.py: regenerated here on a few ops
(slow: torch.export per sample), and the committed report must have the format the script writes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")

ROOT = Path(__file__).resolve().parents[3]
SUMMARY = re.compile(r"^\*\*(\d+) passed / (\d+) refused / (\d+) crashed / (\d+) wrong / (\d+) timed out of (\d+) samples "
                     r"\((\d+\.\d)% passed\) over (\d+) ops\.\*\*$", re.M)


def _script():
    spec = importlib.util.spec_from_file_location("torch_conformance", ROOT / "scripts" / "torch_conformance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _header(text: str) -> list[str]:
    return text.split("\n**", 1)[0].splitlines()


def test_compare_is_nan_dtype_and_magnitude_aware():
    tc = _script()
    assert tc.compare(np.array([1.0, np.nan], np.float32), np.array([1.0, np.nan], np.float32)) is None
    assert "dtype" in tc.compare(np.array([1], np.int32), np.array([1], np.int64))
    assert "shape" in tc.compare(np.zeros(2, np.float32), np.zeros(3, np.float32))
    assert tc.compare(np.array([1000.0, 0.05], np.float32), np.array([1000.0, 0.0501], np.float32)) is None  # magnitude
    assert tc.compare(np.array([1.0, 0.0], np.float32), np.array([1.0, 1e-3], np.float32)) is not None
    assert tc.compare(np.array([3], np.int64), np.array([4], np.int64)) is not None


@pytest.mark.slow
def test_report_regenerates_and_the_committed_one_is_current(tmp_path):
    tc = _script()
    out = tmp_path / "report.md"
    progress = tmp_path / "progress.jsonl"
    assert tc.main(["--ops", "abs,log1p,sort,empty_like", "--limit", "2", "--progress", str(progress), "--write", str(out)]) == 0
    text = out.read_text()
    found = SUMMARY.search(text)
    assert found and int(found[1]) == int(found[6]) > 0  # every sample of these ops passes
    assert "| empty_like | uninitialised memory |" in text
    committed = (ROOT / "docs" / "torch_conformance.md").read_text()
    assert _header(committed) == _header(text)  # same generator, same wording
    summary = SUMMARY.search(committed)
    assert summary, "docs/torch_conformance.md lacks the summary line the script writes"
    assert int(summary[4]) == 0, "a sample gives a wrong number without an error"


def test_mutated_inputs_are_compared_and_seeded_draws_are_random():
    from types import SimpleNamespace

    import torch

    tc = _script()
    F = torch.nn.functional
    gen = torch.Generator().manual_seed(0)
    x, mean, var = torch.randn(4, 3, 5, generator=gen), torch.randn(3, generator=gen), torch.rand(3, generator=gen) + 0.5
    bn = SimpleNamespace(name="bn", op=lambda x, m, v: F.batch_norm(x, m, v, training=True, momentum=0.3))
    assert tc.run_sample(bn, SimpleNamespace(input=x, args=[mean, var], kwargs={})) == ("pass", "")

    def seeded_dropout(x):  # as OpInfo's wrapper_set_seed: eager repeats itself, the numbers are torch's stream
        torch.manual_seed(42)
        return F.dropout(x, 0.5, training=True)

    status, detail = tc.run_sample(SimpleNamespace(name="drop", op=seeded_dropout), SimpleNamespace(input=x, args=[], kwargs={}))
    assert status == "random" and "dropout" in detail
