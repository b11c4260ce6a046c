"""rlx run: inputs from .npy, weights from the file, output summaries, -o out.npz, user errors."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import assert_one_line_error, reference_output, run_cli


@pytest.mark.parametrize("backend", ["numpy", "reference"])
def test_run_writes_npz_equal_to_reference(files, tmp_path, backend):
    out = tmp_path / "out.npz"
    res = run_cli("run", files["mlp"], "--input", f"x={files['x']}", "--backend", backend, "-o", out, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    want = reference_output(files)
    with np.load(out, allow_pickle=False) as z:
        assert list(z.keys()) == ["output_0"]
        np.testing.assert_allclose(z["output_0"], want, rtol=1e-5, atol=1e-6)
    row = next(line for line in res.out.splitlines() if line.startswith("output_0"))
    assert "[4, 3]" in row and "float32" in row
    assert f"{want.min():.6g}" in row and f"{want.max():.6g}" in row


def test_run_planned_and_hir_files(files, tmp_path):
    planned = tmp_path / "p.rlx"
    assert run_cli("plan", files["mlp"], "-o", planned).rc == 0
    out = tmp_path / "o"  # .npz is appended
    res = run_cli("run", planned, "-i", f"x={files['x']}", "-o", out)
    assert res.rc == 0, res.err
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_allclose(z["output_0"], reference_output(files), rtol=1e-5, atol=1e-6)
    assert run_cli("run", files["hir"], "--input", f"x={files['x']}").rc == 0


def test_param_override(files, tmp_path):
    zeros = tmp_path / "b2.npy"
    np.save(zeros, np.full((3,), 100.0, np.float32))
    out = tmp_path / "o.npz"
    assert run_cli("run", files["mlp"], "--input", f"x={files['x']}", "--param", f"b2={zeros}", "-o", out).rc == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["output_0"], reference_output(files) - files["params"]["b2"] + 100.0, rtol=1e-5)


def test_missing_input(files):
    assert_one_line_error(run_cli("run", files["mlp"]), "missing input", "x [4, 8] f32")


def test_unknown_input(files):
    assert_one_line_error(run_cli("run", files["mlp"], "--input", f"y={files['x']}"), "no input 'y'", "its inputs are x [4, 8]")


def test_input_file_missing(files, tmp_path):
    assert_one_line_error(run_cli("run", files["mlp"], "--input", f"x={tmp_path / 'none.npy'}"), "none.npy")


def test_wrong_input_shape(files, tmp_path):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 8), np.float32))
    assert_one_line_error(run_cli("run", files["mlp"], "--input", f"x={bad}"), "x")


def test_pickled_input_is_refused(files, tmp_path):
    bad = tmp_path / "obj.npy"
    np.save(bad, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert_one_line_error(run_cli("run", files["mlp"], "--input", f"x={bad}"), "obj.npy", "not a plain .npy array")


def test_npz_input_is_refused(files, tmp_path):
    bad = tmp_path / "a.npz"
    np.savez(bad, x=np.zeros((4, 8), np.float32))
    assert_one_line_error(run_cli("run", files["mlp"], "--input", f"x={bad}"), ".npz")


def test_missing_weights(files):
    assert_one_line_error(run_cli("run", files["bare"], "--input", f"x={files['x']}"), "no weights", "w1 [8, 16]")


def test_malformed_assignment_is_usage_error(files):
    res = run_cli("run", files["mlp"], "--input", "x")
    assert res.rc == 2 and "NAME=FILE.npy" in res.err and "Traceback" not in res.err
