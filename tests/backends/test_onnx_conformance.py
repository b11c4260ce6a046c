"""The ONNX node suite as shipped, against docs/onnx_conformance.md.

Fast (CI): every 16th case in name order runs, and each one the report lists as passed must
still pass. Slow (``-m slow``): the full suite (1,884 cases, about a minute on one core) must
pass at least the report's ``Baseline: N passed`` and render to exactly the committed report,
so the figures in it are current (regenerate with
``python -m rlx.frontends.onnx.conformance --write docs/onnx_conformance.md``).
"""

from __future__ import annotations

import os
import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from rlx.frontends.onnx import conformance

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "docs", "onnx_conformance.md")
SAMPLE_EVERY = 16


def _report() -> str:
    with open(REPORT, encoding="utf-8") as fh:
        return fh.read()


def _not_passed_in_report() -> set[str]:
    text = _report().split("## Cases not passed", 1)[1]
    return {m.group(1) for m in re.finditer(r"^\| (test_\w+) \|", text, re.M)}


@pytest.fixture(scope="module")
def all_cases():
    return sorted(conformance.load_cases(), key=lambda c: c.name)


def test_full_node_suite_is_loaded(all_cases):
    assert len(all_cases) >= 1884


def test_sampled_cases_the_report_passes_still_pass(all_cases):
    known_bad = _not_passed_in_report()
    sample = [c for c in all_cases[::SAMPLE_EVERY] if c.name not in known_bad]
    assert len(sample) > 80
    results = conformance.run_all(sample)
    lost = [(r.name, r.status, r.reason) for r in results if r.status != "passed"]
    assert not lost, lost


def test_report_categorises_every_case_not_passed():
    text = _report()
    by_reason = text.split("## Not passed, by reason", 1)[1].split("## By op type", 1)[0]
    total = sum(int(n) for n in re.findall(r"^\| [^|]+ \| (\d+) \|$", by_reason, re.M))
    m = re.search(r"\*\*(\d+) passed / (\d+) failed / (\d+) unsupported of (\d+) cases", text)
    passed, failed, unsupported, cases = map(int, m.groups())
    assert passed + failed + unsupported == cases and failed + unsupported == total == len(_not_passed_in_report())
    assert "static-shape requirement" not in by_reason  # every shape-like input is value-specialised
    assert passed >= 1577


@pytest.mark.slow
def test_full_suite_matches_the_report(all_cases):
    results = conformance.run_all(all_cases, jobs=min(2, os.cpu_count() or 1))
    counts = conformance.summarize(results)
    assert counts["passed"] >= conformance.baseline(REPORT)
    assert conformance.render(results) == _report(), "regenerate docs/onnx_conformance.md"


#: what the 140 model tests may still refuse: string tensors only (rlx has no string element type)
MODEL_TEST_LIMITS = re.compile(r"string tensors")


def test_onnx_shipped_model_tests():
    """onnx's pytorch-converted, pytorch-operator and simple model tests, as shipped."""
    cases = [c for kind in ("pytorch-converted", "pytorch-operator", "simple") for c in conformance.load_model_tests_of(kind)]
    assert len(cases) >= 140
    results = conformance.run_all(cases)
    left = [(r.name, r.reason) for r in results if r.status != "passed" and not MODEL_TEST_LIMITS.search(r.reason)]
    assert not left, left
    assert sum(r.status == "passed" for r in results) >= 134
