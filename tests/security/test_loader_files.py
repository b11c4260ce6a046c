"""rlx.load refuses what is not a regular file, before opening it can block."""

from __future__ import annotations

import os

from security.isolate import run_cases

CHILDREN = os.path.join(os.path.dirname(__file__), "children.py")


def test_fifo_directory_and_missing_files_are_format_errors(tmp_path):
    fifo = str(tmp_path / "m.rlx")
    os.mkfifo(fifo)
    cases = {"fifo": fifo, "directory": str(tmp_path), "missing": str(tmp_path / "none.rlx"), "device": "/dev/zero"}
    outcomes = run_cases(CHILDREN, "rlx_load", [[p] for p in cases.values()], wall=30)
    for (label, p), out in zip(cases.items(), outcomes):
        assert out.exited, (label, out.how)  # a hang would be killed by the alarm
        assert out.is_a("FormatError") and p in out.message, (label, out)
