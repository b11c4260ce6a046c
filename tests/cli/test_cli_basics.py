"""The rlx command: help, version, usage errors (exit 2), user errors (exit 1, one line), --debug, rich fallback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import assert_one_line_error, run_cli

SUBCOMMANDS = ("inspect", "optimize", "plan", "run", "convert", "draw", "conformance", "demo")


def test_help_lists_every_subcommand():
    res = run_cli("--help")
    assert res.rc == 0 and res.err == ""
    for name in SUBCOMMANDS:
        assert name in res.out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_subcommand_help(name):
    res = run_cli(name, "--help")
    assert res.rc == 0, res.err
    assert res.out.startswith(f"usage: rlx {name}")


def test_version():
    res = run_cli("--version")
    assert res.rc == 0 and res.out.strip().startswith("rlx ")


@pytest.mark.parametrize("argv", [(), ("frobnicate",), ("inspect",), ("optimize", "m.rlx"), ("plan", "m.rlx", "--alignment", "x"),
                                  ("run", "m.rlx", "--backend", "tpu"), ("demo", "--steps", "0"),
                                  ("draw", "m.rlx", "-o", "a.svg", "--stage", "xir")])
def test_usage_errors_exit_2(argv):
    res = run_cli(*argv)
    assert res.rc == 2, (res.rc, res.err)
    assert "usage: rlx" in res.err and "Traceback" not in res.err
    assert res.out == ""


def test_missing_file_is_one_line_exit_1(tmp_path):
    res = run_cli("inspect", tmp_path / "nope.rlx")
    assert_one_line_error(res, "nope.rlx", "no such file")
    assert res.out == ""


def test_corrupt_file_is_one_line_exit_1(tmp_path):
    bad = tmp_path / "bad.rlx"
    bad.write_text('{"format": "rlx-ir", "version": 1, "level": "mir", "kind": "graph", "nodes": 7}')
    assert_one_line_error(run_cli("inspect", bad))
    bad.write_bytes(b"\x00\x01 not json")
    assert_one_line_error(run_cli("plan", bad))


def test_debug_shows_the_traceback(tmp_path):
    res = run_cli("--debug", "inspect", tmp_path / "nope.rlx")
    assert res.rc == 1
    assert "Traceback (most recent call last)" in res.err
    assert res.err_lines[-1].startswith("rlx: error: ")
    res = run_cli("inspect", tmp_path / "nope.rlx", "--debug")  # also accepted after the subcommand
    assert res.rc == 1 and "Traceback" in res.err


def test_console_script_is_installed(files):
    script = os.path.join(os.path.dirname(sys.executable), "rlx")
    if not os.path.exists(script):
        pytest.skip("the rlx console script is not installed next to this Python")
    proc = subprocess.run([script, "inspect", "--brief", str(files["mlp"])], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "cli_mlp" in proc.stdout


def test_plain_tables_without_rich(files):
    """rich is optional: with it blocked, tables come out as plain aligned text."""
    code = ("import sys; sys.modules['rich'] = None; from rlx.cli import main; "
            f"sys.exit(main(['inspect', {str(files['mlp'])!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("stage"))
    assert set(lines[header + 1].replace(" ", "")) == {"-"}
    assert lines[header + 2].startswith("MIR") and "cli_mlp" in lines[header + 2]
    assert "┃" not in proc.stdout


def test_rlx_plain_env_forces_plain_text(files):
    res = run_cli("inspect", "--brief", files["mlp"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0 and "┃" not in res.out and "cli_mlp" in res.out
    res = run_cli("inspect", "--brief", files["mlp"], env={"RLX_PLAIN": ""})
    pytest.importorskip("rich")
    assert "┃" in res.out


def test_python_dash_m_runs_the_same_main(files):
    from .conftest import run_cli_process

    res = run_cli_process("inspect", "--brief", files["mlp"], env={"RLX_PLAIN": "1"})
    assert res.rc == 0 and res.out == run_cli("inspect", "--brief", files["mlp"], env={"RLX_PLAIN": "1"}).out
    assert run_cli_process("frobnicate").rc == 2
