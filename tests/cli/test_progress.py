"""Progress: a spinner on a terminal, nothing when stderr is not one or with --quiet."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from rlx.cli import progress

from .conftest import run_cli


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_step_draws_on_a_terminal_only():
    tty = _Tty()
    with progress.step("optimizing 12 nodes", stream=tty):
        pass
    assert "optimizing 12 nodes" in tty.getvalue()
    pipe = io.StringIO()
    with progress.step("optimizing", stream=pipe):
        pass
    assert pipe.getvalue() == ""
    progress.set_quiet(True)
    try:
        quiet = _Tty()
        with progress.step("optimizing", stream=quiet):
            pass
        assert quiet.getvalue() == ""
    finally:
        progress.set_quiet(False)


def test_piped_commands_print_no_progress(files, tmp_path):
    res = run_cli("optimize", files["hir"], "-o", tmp_path / "o.rlx")
    assert res.rc == 0 and res.err == ""


def _stderr_on_a_pty(argv: list[str]) -> str:
    main, child = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "rlx.cli", *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=child, timeout=120, check=False)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_gets_a_spinner_unless_quiet(files, tmp_path):
    shown = _stderr_on_a_pty(["optimize", str(files["hir"]), "-o", str(tmp_path / "a.rlx")])
    assert "reading" in shown or "optimizing" in shown
    assert _stderr_on_a_pty(["--quiet", "optimize", str(files["hir"]), "-o", str(tmp_path / "b.rlx")]) == ""
