"""Every file rlx writes survives a SIGKILL at any moment: the old complete file or the new one.

Each writer (rlx.save with its sidecar, the HTML viewer, DOT, the plan SVG, a trace, the binding
manifest with its weights, ``rlx run -o .npz``, ``rlx convert --to upstream-json``) rewrites its
file in a loop in a forked process that is killed 8 times at random moments (kill_writers.py);
the whole run is one limited child per writer (isolate.py). Also: a writer never removes another
writer's temporary file, and the helper leaves no temporary behind on an error.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlx.ir import atomic, fileio

from .isolate import run_cases

KILLS = os.path.join(os.path.dirname(__file__), "kill_writers.py")
WRITERS = ("save", "html", "dot", "plan_svg", "trace", "binding", "run_npz", "upstream_json")


def test_a_killed_writer_leaves_the_old_or_the_new_file(tmp_path):
    cases = []
    for i, name in enumerate(WRITERS):
        (tmp_path / name).mkdir()
        cases.append([name, str(tmp_path / name), 8, i])
    outcomes = run_cases(KILLS, "kill_writer", cases, wall=120)
    for name, o in zip(WRITERS, outcomes):
        assert o.exited and o.error is None, f"{name}: {o.how} {o.raised[:1]} {o.message[:500]}"
        assert o.value["old_or_new"] == 8 and o.value["writes"] > 0, (name, o.value)


def test_the_helper_replaces_whole_files_and_cleans_up_on_error(tmp_path):
    p = tmp_path / "f.txt"
    atomic.write_text(p, "old")
    with pytest.raises(KeyError):
        with atomic.atomic_open(p, "w") as f:
            f.write("half")
            raise KeyError
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(p) as tmp:
            open(tmp, "w").write("half")
            raise RuntimeError
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]
    with atomic.atomic_path(p) as tmp:
        open(tmp, "w").write("new")
    assert p.read_text() == "new" and os.listdir(tmp_path) == ["f.txt"]


def test_cleanup_removes_only_temporaries_of_writers_that_are_gone(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                              check=True)
        dead_pid = int(dead.stdout)
        assert fileio.is_temp_of(f"m.rlx.tmp-{dead_pid}-0123abcd", "m.rlx")
        assert not fileio.is_temp_of(f"m.rlx.tmp-{live.pid}-0123abcd", "m.rlx")  # a write in progress
        assert not fileio.is_temp_of(f"m.rlx.tmp-{os.getpid()}-0123abcd", "m.rlx")  # another thread's
        assert not fileio.is_temp_of(f"n.rlx.tmp-{dead_pid}-0123abcd", "m.rlx")
    finally:
        live.kill()
        live.wait()
