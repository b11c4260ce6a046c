"""Zoo session summary: one row per model checked (import time, relative errors, gradient error)."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    try:
        from models.test_zoo import REPORTS
    except ImportError:
        return
    if not REPORTS:
        return
    terminalreporter.write_sep("-", "model zoo")
    terminalreporter.write_line(f"{'model':<16}{'import s':>10}{'run rel':>12}{'compiled rel':>14}{'grad rel':>12}")
    for name, r in REPORTS.items():
        grad = f"{r['grad']:.1e}" if "grad" in r else "-"
        cells = [f"{r[k]:.1e}" if k in r else "fail" for k in ("run", "compiled")]
        terminalreporter.write_line(f"{name:<16}{r['import_s']:>10.1f}{cells[0]:>12}{cells[1]:>14}{grad:>12}")
