"""Every ```python and ```bash block of the README runs as written, with only the extras it names.

Blocks run in a scratch directory holding the files the snippets name (``model.rlx`` with
its weights, ``x.npy``, ``model.onnx``, ``dynamic.rlx`` with a symbolic ``batch``, the shipped
``tests/fixtures/silero_vad/silero_vad.onnx``), with ``rlx`` and ``python`` on ``PATH`` running
this checkout. A block preceded by ``<!-- readme-test: skip REASON -->`` is skipped (setup
blocks that create a virtual environment and install packages); one preceded by
``<!-- readme-test: extras NAME ... -->`` (``none`` for NumPy only) runs with every optional
package of the other extras made absent (imports fail as if not installed), so the extra the
README names for a block is all it needs.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"(?:<!--\s*readme-test:\s*(?P<kind>skip|extras)(?P<arg>[^>]*)-->\s*\n)?```(?P<lang>python|bash)\n"
                    r"(?P<body>.*?)```", re.S)
#: the importable top-level modules each extra installs (pyproject.toml's optional dependencies)
EXTRAS = {"onnx": ("onnx", "onnxruntime", "onnxscript"), "jax": ("jax", "jaxlib"),
          "torch": ("torch", "torchvision", "transformers", "timm"), "viz": ("rich", "matplotlib"),
          "safetensors": ("safetensors",), "gguf": ("gguf",), "openvino": ("openvino",)}
#: imported at interpreter start (first on PYTHONPATH): the modules named in RLX_README_ABSENT fail to import
SITECUSTOMIZE = """
import importlib.util, os, sys
_ABSENT = frozenset(filter(None, os.environ.get("RLX_README_ABSENT", "").split(",")))
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
if _ABSENT:
    sys.meta_path.insert(0, _Absent())
    _find_spec = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: (
        None if name.split(".")[0] in _ABSENT else _find_spec(name, package))
"""


def readme_blocks() -> list[tuple[str, str, str | None, int, tuple[str, ...] | None]]:
    """(lang, body, skip reason, line, extras) per block; extras None when the block names none."""
    text = README.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("body"))
        kind, arg = m.group("kind"), (m.group("arg") or "").strip()
        skip = (arg or "marked skip") if kind == "skip" else None
        extras = tuple(e for e in arg.split() if e != "none") if kind == "extras" else None
        out.append((m.group("lang"), m.group("body"), skip, line, extras))
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
    fixture = d / "tests" / "fixtures" / "silero_vad"
    fixture.mkdir(parents=True)
    shutil.copy(README.parent / "tests" / "fixtures" / "silero_vad" / "silero_vad.onnx", fixture / "silero_vad.onnx")
    bindir = d / "bin"
    bindir.mkdir()
    for name, run in (("rlx", "-m rlx.cli"), ("python", "")):
        shim = bindir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {run} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    site = d / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    src = str(Path(rlx.__file__).resolve().parents[1])
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "RLX_PLAIN": "1",
           "PYTHONPATH": os.pathsep.join([str(site), src, os.environ.get("PYTHONPATH", "")]), "MPLBACKEND": "Agg"}
    return d, env


def test_readme_has_runnable_blocks():
    blocks = readme_blocks()
    assert sum(skip is None for _, _, skip, _, _ in blocks) >= 3
    assert all(extras is not None for _, _, skip, _, extras in blocks if skip is None), "every runnable block names its extras"
    assert all(set(extras) <= set(EXTRAS) for *_, extras in blocks if extras), "an extra the README names is not known"


def test_an_absent_extra_is_absent(scratch):
    """The scaffolding itself: with the onnx extra absent, ``import onnx`` fails and find_spec says no."""
    d, env = scratch
    code = "import importlib.util, sys\ntry:\n    import onnx\nexcept ModuleNotFoundError:\n    pass\nelse:\n    sys.exit(3)\n" \
           "sys.exit(0 if importlib.util.find_spec('onnxruntime') is None else 4)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=d, env={**env, "RLX_README_ABSENT": "onnx,onnxruntime"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_block_runs(index, scratch):
    lang, body, skip, line, extras = readme_blocks()[index]
    if skip is not None:
        pytest.skip(f"README line {line}: {skip}")
    if "graph.svg" in body or "-o graph.png" in body:
        if shutil.which("dot") is None:
            pytest.skip("Graphviz dot is not installed")
    d, env = scratch
    absent = sorted(m for extra, mods in EXTRAS.items() if extra not in (extras or ()) for m in mods)
    env = {**env, "RLX_README_ABSENT": ",".join(absent)}
    argv = [sys.executable, "-c", body] if lang == "python" else ["bash", "-euo", "pipefail", "-c", body]
    proc = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, (f"README block at line {line} ({lang}, extras {extras or 'none'}) failed:\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
