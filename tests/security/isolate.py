"""Run hostile-input cases in child processes with wall-time, CPU-time and memory limits.

A crash, hang or runaway allocation in the code under test then fails one case (its
:class:`Outcome` says how the child ended) instead of killing or stalling the test run.
:func:`run_cases` starts one fresh interpreter that imports the case module once and forks a
limited child per case; :func:`run_command` runs one command line under the same limits.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MEMORY = 4 << 30  # address space of one case (numpy / rlx; torch needs more, pass memory=)
CPU_SECONDS = 60
WALL_SECONDS = 120

_RUNNER = r"""
import importlib.util, json, os, resource, signal, sys
spec = importlib.util.spec_from_file_location("isolated_cases", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
fn = getattr(mod, sys.argv[2])
mem, cpu, wall = map(int, sys.argv[3:6])
for args in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        signal.alarm(wall)
        try:
            out = {"value": fn(*args)}
        except BaseException as exc:
            out = {"raised": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:4000]}
        os.write(w, json.dumps(out, default=repr).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": status, "out": data.decode("utf-8", "replace")}), flush=True)
"""


@dataclass
class Outcome:
    """How one isolated case ended: ``exited`` is False for a signal (crash, time or memory kill)."""

    exited: bool
    how: str
    value: Any = None
    raised: list[str] = field(default_factory=list)  # the exception's class and its bases, by name
    message: str = ""

    @property
    def error(self) -> str | None:
        return self.raised[0] if self.raised else None

    def is_a(self, name: str) -> bool:
        return name in self.raised


def _describe(status: int) -> tuple[bool, str]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return False, f"killed by {signal.Signals(sig).name}"
    code = os.WEXITSTATUS(status)
    return code == 0, f"exit {code}"


def run_cases(module_file: str, function: str, cases: Sequence[Sequence[Any]], *, memory: int = MEMORY,
              cpu: int = CPU_SECONDS, wall: int = WALL_SECONDS) -> list[Outcome]:
    """``function(*args)`` from ``module_file`` for each JSON-able ``args``, each in its own limited child."""
    budget = wall * len(cases) + 120
    proc = subprocess.run([sys.executable, "-c", _RUNNER, os.fspath(module_file), function, str(memory), str(cpu), str(wall)],
                          input=json.dumps([list(a) for a in cases]), capture_output=True, text=True, timeout=budget, check=False)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"status"')]
    if proc.returncode != 0 or len(lines) != len(cases):
        raise AssertionError(f"case runner failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    outcomes = []
    for line in lines:
        exited, how = _describe(line["status"])
        out = json.loads(line["out"]) if line["out"] else {}
        outcomes.append(Outcome(exited, how, out.get("value"), out.get("raised", []), out.get("message", "")))
    return outcomes


def _limits(memory: int, cpu: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))

    return apply


def run_command(argv: Sequence[str], *, memory: int = MEMORY, cpu: int = CPU_SECONDS, wall: int = WALL_SECONDS,
                cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``argv`` under the limits; a hang past ``wall`` seconds raises AssertionError."""
    try:
        return subprocess.run(list(map(str, argv)), capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})},
                              timeout=wall, preexec_fn=_limits(memory, cpu), check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{argv!r} hung for more than {wall} s") from None
