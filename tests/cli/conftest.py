"""Fixtures for the command-line tests: model files on disk and a subprocess runner."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import rlx


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def run_cli(*args: str, cwd: str | None = None, env: dict | None = None, timeout: float = 120) -> Result:
    """``rlx ARGS`` through :func:`rlx.cli.main` in this process (stdout / stderr captured,
    ``env`` applied for the call): the same code path as ``python -m rlx.cli`` without a
    fresh interpreter per call. Tests that need a real process (a terminal, the console
    script, a blocked import) start one themselves; :func:`run_cli_process` does."""
    import contextlib
    import io

    from rlx.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in args])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Result(rc, out.getvalue(), err.getvalue())


def run_cli_process(*args: str, cwd: str | None = None, env: dict | None = None, timeout: float = 120) -> Result:
    """``python -m rlx.cli ARGS`` in a fresh process."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "rlx.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full_env, timeout=timeout, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(res: Result, *fragments: str) -> None:
    """Exit status 1, a single ``rlx: error:`` line on stderr naming ``fragments``, no traceback."""
    assert res.rc == 1, (res.rc, res.out, res.err)
    assert len(res.err_lines) == 1, res.err
    assert res.err_lines[0].startswith("rlx: error: "), res.err
    assert "Traceback" not in res.err
    for frag in fragments:
        assert frag in res.err_lines[0], (frag, res.err)


@pytest.fixture(scope="session")
def cli():
    return run_cli


def mlp_graph() -> rlx.Graph:
    g = rlx.Graph("cli_mlp")
    x = g.input("x", (4, 8))
    w1, b1 = g.param("w1", (8, 16)), g.param("b1", (16,))
    w2, b2 = g.param("w2", (16, 3)), g.param("b2", (3,))
    g.set_outputs([g.gelu(x @ w1 + b1) @ w2 + b2])
    return g


def mlp_params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(tuple(v.shape)) * 0.3).astype(np.float32) for n, v in mlp_graph().params().items()}


def hir_module() -> rlx.GraphModule:
    def build(h):
        x = h.input("x", (4, 8))
        with h.block("encoder"):
            y = h.linear(x, h.param("w1", (8, 16)), bias=h.param("b1", (16,)), activation="gelu")
        return h.linear(y, h.param("w2", (16, 3)), bias=h.param("b2", (3,)), name="head")

    return rlx.define("cli_hir", build)


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """Paths: a MIR file with weights, the same without weights, a HIR file with weights, an input .npy."""
    d = tmp_path_factory.mktemp("cli_files")
    params = mlp_params()
    paths = {"dir": d, "mlp": d / "mlp.rlx", "bare": d / "bare.rlx", "hir": d / "hir.rlx", "x": d / "x.npy",
             "params": params}
    rlx.save(mlp_graph(), paths["mlp"], params=params)
    rlx.save(mlp_graph(), paths["bare"])
    rlx.save(hir_module().graph, paths["hir"], params=params)
    np.save(paths["x"], np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
    return paths


def reference_output(files) -> np.ndarray:
    (want,) = rlx.run(mlp_graph(), {"x": np.load(files["x"])}, files["params"])
    return want
