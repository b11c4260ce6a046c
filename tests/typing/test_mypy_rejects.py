"""mypy sees the builders as the registry defines them: the typed example (check_builders.py) passes,
and every line of bad_builders.py marked ``# error: TEXT`` is reported with TEXT (a misspelt op, an
attribute of the wrong type or outside its choices, a multi-result builder taken as one Value)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _mypy(cache: Path, *files: Path) -> subprocess.CompletedProcess:
    """mypy on ``files`` with a cache of its own: the two tests run at once under xdist, and two mypy processes
    writing the repository's .mypy_cache together once ended in mypy's INTERNAL ERROR (exit 2)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
                           *map(str, files)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_typed_builder_example_passes(tmp_path):
    proc = _mypy(tmp_path, HERE / "check_builders.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_misspelt_ops_and_wrong_attributes_fail(tmp_path):
    bad = HERE / "bad_builders.py"
    want = {i: m.group(1).strip() for i, line in enumerate(bad.read_text().splitlines(), 1)
            if (m := re.search(r"# error: (.*)$", line))}
    assert len(want) >= 5
    proc = _mypy(tmp_path, bad)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = re.match(rf"{re.escape(str(bad.relative_to(ROOT)))}:(\d+): error: (.*)", line)
        if m:
            got.setdefault(int(m.group(1)), []).append(m.group(2))
    for lineno, text in want.items():
        assert any(text in e for e in got.get(lineno, [])), (lineno, text, got.get(lineno), proc.stdout[-2000:])
    assert set(got) == set(want), f"unexpected mypy errors: {proc.stdout[-2000:]}"
