"""Every ```python and ```bash block of the README runs as written.

Blocks run in a scratch directory holding the files the snippets name (``model.rlx`` with
its weights, ``x.npy``, ``model.onnx``, ``dynamic.rlx`` with a symbolic ``batch``), with ``rlx`` on ``PATH`` running this checkout. A
block preceded by ``<!-- readme-test: skip REASON -->`` is skipped (setup blocks that create
a virtual environment and install packages).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"(?:<!--\s*readme-test:\s*skip(?P<reason>[^>]*)-->\s*\n)?```(?P<lang>python|bash)\n(?P<body>.*?)```",
                    re.S)


def readme_blocks() -> list[tuple[str, str, str | None, int]]:
    text = README.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("body"))
        skip = m.group("reason").strip() or "marked skip" if m.group("reason") is not None else None
        out.append((m.group("lang"), m.group("body"), skip, line))
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory with the files the README's snippets use, and an ``rlx`` shim on PATH."""
    d = tmp_path_factory.mktemp("readme")

    def build(h):
        x = h.input("x", (2, 128))
        with h.block("encoder"):
            y = h.linear(x, h.param("w", (128, 128)), bias=h.param("b", (128,)), activation="gelu")
        return h.linear(y, h.param("head", (128, 16)), name="head")

    m = rlx.define("model", build)
    rng = np.random.default_rng(0)
    params = {n: (rng.standard_normal(tuple(v.shape)) * 0.1).astype(np.float32) for n, v in m.graph.params().items()}
    rlx.save(m, d / "model.rlx", params=params)
    np.save(d / "x.npy", rng.standard_normal((2, 128)).astype(np.float32))
    dyn = rlx.Graph("dynamic")
    dyn.set_outputs([dyn.gelu(dyn.input("x", ("batch", 128)) @ dyn.param("w", (128, 64)))])
    rlx.save(dyn, d / "dynamic.rlx")
    try:
        import onnx  # noqa: F401

        from rlx.onnx import export

        proto = export(m.lower_to_mir(), params)
        (d / "model.onnx").write_bytes(proto.SerializeToString())
    except ImportError:
        pass
    bindir = d / "bin"
    bindir.mkdir()
    shim = bindir / "rlx"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rlx.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    src = str(Path(rlx.__file__).resolve().parents[1])
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "RLX_PLAIN": "1",
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "MPLBACKEND": "Agg"}
    return d, env


def test_readme_has_runnable_blocks():
    blocks = readme_blocks()
    assert sum(skip is None for _, _, skip, _ in blocks) >= 3


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_block_runs(index, scratch):
    lang, body, skip, line = readme_blocks()[index]
    if skip is not None:
        pytest.skip(f"README line {line}: {skip}")
    if "graph.svg" in body or "-o graph.png" in body:
        import shutil

        if shutil.which("dot") is None:
            pytest.skip("Graphviz dot is not installed")
    d, env = scratch
    argv = [sys.executable, "-c", body] if lang == "python" else ["bash", "-euo", "pipefail", "-c", body]
    proc = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"README block at line {line} ({lang}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
