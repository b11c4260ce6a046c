"""Zoo session summaries: one row per model checked (import time, relative errors, gradient error), and one
per ONNX round trip (node counts, relative errors)."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    _torch_summary(terminalreporter)
    _onnx_summary(terminalreporter)


def _torch_summary(terminalreporter):
    try:
        from models.test_zoo import REPORTS
    except ImportError:
        return
    if not REPORTS:
        return
    terminalreporter.write_sep("-", "model zoo")
    checks = ("run", "compiled", "jax", "torch", "onnx")
    terminalreporter.write_line(f"{'model':<16}{'import s':>10}" + "".join(f"{k:>10}" for k in checks) + f"{'grad':>10}")
    for name, r in REPORTS.items():
        grad = f"{r['grad']:.1e}" if "grad" in r else "-"
        cells = "".join(f"{r[k]:>10.1e}" if k in r else f"{'fail':>10}" for k in checks)
        terminalreporter.write_line(f"{name:<16}{r['import_s']:>10.1f}{cells}{grad:>10}")
    passing = sum(bool(r.get("every_check")) for r in REPORTS.values())
    terminalreporter.write_line(f"{passing} of {len(REPORTS)} rows pass every check")


def _onnx_summary(terminalreporter):
    try:
        from models.test_zoo_onnx import ROUND_TRIPS
    except ImportError:
        return
    if not ROUND_TRIPS:
        return
    terminalreporter.write_sep("-", "model zoo, ONNX round trip")
    terminalreporter.write_line(f"{'model':<16}{'mode':<13}{'torch nodes':>12}{'rlx nodes':>10}{'run rel':>10}{'re-export rel':>15}")
    for r in ROUND_TRIPS:
        terminalreporter.write_line(f"{r.name:<16}{r.mode:<13}{r.nodes[0]:>12}{r.nodes[1]:>10}{r.errors['run']:>10.1e}"
                                    f"{r.errors['reexport']:>15.1e}")
