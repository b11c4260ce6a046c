"""CI gate: the full ONNX node conformance run must not pass fewer cases than the committed baseline.

The baseline is the ``Baseline: N passed`` line of docs/onnx_conformance.md (regenerate it with
``python -m rlx.backends.onnx.conformance --write docs/onnx_conformance.md``). The full run
(1,884 cases) takes about 15 s on one core.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from rlx.backends.onnx import conformance

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "docs", "onnx_conformance.md")


@pytest.fixture(scope="module")
def results():
    return conformance.run_all(conformance.load_cases(), jobs=min(2, os.cpu_count() or 1))


def test_full_node_suite_is_loaded(results):
    assert len(results) >= 1884


def test_passed_count_does_not_drop_below_baseline(results):
    base = conformance.baseline(REPORT)
    assert base is not None, f"{REPORT} has no 'Baseline: N passed' line"
    counts = conformance.summarize(results)
    failed = sorted(r.name for r in results if r.status != "passed")
    assert counts["passed"] >= base, f"{counts['passed']} passed < baseline {base}; not passed: {failed[:50]}"


def test_at_least_seventy_percent_pass(results):
    counts = conformance.summarize(results)
    assert counts["passed"] >= 0.70 * len(results)


def test_report_renders(results):
    text = conformance.render(results)
    assert text.startswith("# ONNX backend-test conformance")
    assert "| Conv |" in text
