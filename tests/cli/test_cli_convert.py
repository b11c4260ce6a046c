"""rlx convert: an ONNX model and a torch.export program (.pt2) to .rlx, then run."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

from .conftest import assert_one_line_error, run_cli


def _onnx_model(path, rng):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = (rng.standard_normal((8, 5)) * 0.5).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "tiny_onnx",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return w, b


def test_convert_onnx_then_run(tmp_path):
    rng = np.random.default_rng(3)
    src, dst = tmp_path / "tiny.onnx", tmp_path / "tiny.rlx"
    w, b = _onnx_model(src, rng)
    res = run_cli("convert", src, "-o", dst, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert f"wrote {dst}" in res.out
    g, params = rlx.load(dst, with_params=True)
    assert g.stage is rlx.GraphStage.MIR and len(params) >= 1
    assert rlx.fingerprint(g)[:16] in res.out
    x = rng.standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npz"
    (name,) = g.inputs()
    assert run_cli("run", dst, "--input", f"{name}={tmp_path / 'x.npy'}", "-o", out).rc == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["output_0"], np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_onnx_files_are_read_directly(tmp_path):
    src = tmp_path / "tiny.onnx"
    _onnx_model(src, np.random.default_rng(4))
    res = run_cli("inspect", "--brief", src)
    assert res.rc == 0 and "tiny_onnx" in res.out


def test_convert_pt2_then_run(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).eval()
    example = torch.randn(5, 6)
    src, dst = tmp_path / "seq.pt2", tmp_path / "seq.rlx"
    torch.export.save(torch.export.export(module, (example,)), str(src))
    res = run_cli("convert", src, "-o", dst)
    assert res.rc == 0, res.err
    g, params = rlx.load(dst, with_params=True)
    assert len(g.params()) == 4 and set(params) == set(g.params())
    (name,) = g.inputs()
    (got,) = rlx.run(g, {name: example.numpy()}, params)
    with torch.no_grad():
        np.testing.assert_allclose(got, module(example).numpy(), rtol=1e-5, atol=1e-6)


def test_convert_rejects_other_formats(files, tmp_path):
    assert_one_line_error(run_cli("convert", files["mlp"], "-o", tmp_path / "o.rlx"), ".onnx", ".pt2")


def test_convert_corrupt_onnx(tmp_path):
    pytest.importorskip("onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf \xff\xfe")
    assert_one_line_error(run_cli("convert", bad, "-o", tmp_path / "o.rlx"), "bad.onnx")


def test_convert_corrupt_pt2(tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK not a zip")
    assert_one_line_error(run_cli("convert", bad, "-o", tmp_path / "o.rlx"), "bad.pt2")


def test_convert_missing_source(tmp_path):
    assert_one_line_error(run_cli("convert", tmp_path / "none.onnx", "-o", tmp_path / "o.rlx"), "none.onnx", "no such file")

