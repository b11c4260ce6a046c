"""ONNX mutation fuzzing of ``rlx.onnx.import_model``: only ``rlx.RlxError`` may escape; no crash, no hang.

The cases (see ``onnx_fuzz.py``) run in child processes with memory and time limits; a
crash or a hang is charged to its case. ``RLX_FUZZ_CASES`` sets the number of cases
(default 1500), ``RLX_FUZZ_START`` the first case index (cases are reproducible by index:
``python tests/backends/onnx_fuzz.py --case N``).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnx")

from backends import onnx_fuzz

N_CASES = int(os.environ.get("RLX_FUZZ_CASES", "1500"))
START = int(os.environ.get("RLX_FUZZ_START", "0"))


def test_mutated_models_raise_only_rlx_errors(tmp_path):
    base = onnx_fuzz.make_base_dir(str(tmp_path / "base"))
    report = onnx_fuzz.run(N_CASES, base, start=START, jobs=2)
    assert report.total == N_CASES, report.outcomes
    assert report.bad() == 0, f"{dict(report.outcomes)}:\n" + "\n".join(report.failures[:30])
    assert report.outcomes["imported"] > N_CASES // 20  # the mutations leave many models valid: converters run too


def test_seeds_are_the_shipped_models():
    assert len(onnx_fuzz.seed_paths()) >= 100
