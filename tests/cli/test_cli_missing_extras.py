"""A missing optional package is one line naming the feature, the package and the extra to install
(``rlx: error: <feature> needs <package>: pip install "rlx[<extra>]"``), never a traceback or an
"internal error". Each case runs in a fresh interpreter with the package hidden (``sys.modules[name] = None``
makes every ``import name`` fail as if it were not installed)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from tests.cli.conftest import Result, mlp_graph, mlp_params

import rlx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_hidden(hidden: list[str], *argv: str, cwd: str) -> Result:
    code = ("import sys\n"
            f"for m in {hidden!r}: sys.modules[m] = None\n"
            "from rlx.cli import main\n"
            f"sys.exit(main({[str(a) for a in argv]!r}))\n")
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("extras")
    rlx.save(mlp_graph(), d / "mlp.rlx", params=mlp_params())
    np.save(d / "x.npy", np.ones((4, 8), np.float32))
    (d / "model.onnx").write_bytes(b"\x08\x07")  # never read: the check comes first
    (d / "prog.pt2").write_bytes(b"PK")
    return d


SLOW = pytest.mark.slow  # one fresh interpreter each: the default suite keeps one case per extra kind
CASES = [
    pytest.param(["onnx"], ["inspect", "model.onnx"], 'reading ONNX needs onnx: pip install "rlx[onnx]"', id="inspect onnx"),
    pytest.param(["onnx"], ["conformance"], 'rlx conformance needs onnx: pip install "rlx[onnx]"', id="conformance onnx",
                 marks=SLOW),
    pytest.param(["torch"], ["inspect", "prog.pt2"], 'reading .pt2 programs needs torch: pip install "rlx[torch]"',
                 id="inspect torch"),
    pytest.param(["torch"], ["run", "mlp.rlx", "--input", "x=x.npy", "--backend", "torch"],
                 'rlx run --backend torch needs torch: pip install "rlx[torch]"', id="run torch", marks=SLOW),
    pytest.param(["jax", "jaxlib"], ["run", "mlp.rlx", "--input", "x=x.npy", "--backend", "jax"],
                 'rlx run --backend jax needs jax: pip install "rlx[jax]"', id="run jax"),
    pytest.param(["onnxruntime"], ["run", "mlp.rlx", "--input", "x=x.npy", "--backend", "onnxruntime"],
                 'rlx run --backend onnxruntime needs onnxruntime: pip install "rlx[onnx]"', id="run onnxruntime", marks=SLOW),
    pytest.param(["matplotlib"], ["draw", "mlp.rlx", "--plan", "-o", "plan.png"], 'needs matplotlib: pip install "rlx[viz]"',
                 id="draw matplotlib"),
]


@pytest.mark.parametrize(("hidden", "argv", "message"), CASES)
def test_missing_package_is_one_line(work, hidden, argv, message):
    res = run_hidden(hidden, *argv, cwd=str(work))
    assert res.rc == 1, (res.out, res.err)
    assert len(res.err_lines) == 1 and res.err_lines[0].startswith("rlx: error: "), res.err
    assert message in res.err_lines[0], res.err
    assert "internal error" not in res.err and "Traceback" not in res.err


@pytest.mark.slow
def test_without_rich_the_commands_still_print(work):
    res = run_hidden(["rich"], "inspect", "mlp.rlx", "--brief", cwd=str(work))
    assert res.rc == 0 and "cli_mlp" in res.out, res.err


@pytest.mark.parametrize(("module", "extra"), [("gguf", "gguf"), ("openvino", "openvino"), ("safetensors", "safetensors")])
def test_every_optional_package_names_its_extra(module, extra):
    from rlx.cli.common import OPTIONAL_PACKAGES, MissingDependency

    assert OPTIONAL_PACKAGES[module][1] == extra
    assert str(MissingDependency("a feature", module)) == f'a feature needs {module}: pip install "rlx[{extra}]"'


def test_python_dash_m_rlx(work):
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    proc = subprocess.run([sys.executable, "-m", "rlx", "inspect", "mlp.rlx", "--brief"], capture_output=True, text=True,
                          cwd=str(work), env=env, timeout=120, check=False)
    assert proc.returncode == 0 and "cli_mlp" in proc.stdout, proc.stderr
