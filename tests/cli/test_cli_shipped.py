"""Models as shipped: dynamic dims fixed before the import (``--dim``, ``--input-shape``), value-dependent
models run through ``rlx.onnx.import_runnable`` and refused with a pointer to ``rlx run`` elsewhere, errors
that keep their class and name the file, and the shipped silero-vad against onnxruntime."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tests.cli.conftest import assert_one_line_error, run_cli

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

SILERO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "silero_vad", "silero_vad.onnx")
W = np.random.default_rng(3).standard_normal((12, 5)).astype(np.float32)


def _save(nodes, inputs, outputs, inits, path) -> str:
    model = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """dyn: x [batch, 3, 4] -> Flatten -> MatMul W (Flatten needs a static batch); sym: x [batch, 3, 12] -> MatMul W;
    anon: dyn with anonymous dims; value: Reshape(x, shape input)."""
    d = tmp_path_factory.mktemp("shipped")
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1, name="flat"),
             helper.make_node("MatMul", ["f", "W"], ["y"], name="proj")]
    init = [helper.make_tensor("W", TensorProto.FLOAT, W.shape, W.ravel())]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    dyn = _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])], out, init, d / "dyn.onnx")
    sym = _save(nodes[1:], [helper.make_tensor_value_info("f", TensorProto.FLOAT, ["batch", 3, 12])], out, init,
                d / "sym.onnx")
    anon_x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, None])
    anon = _save(nodes, [anon_x], out, init, d / "anon.onnx")
    value = _save([helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape_by_input"),
                   helper.make_node("Relu", ["r"], ["y"], name="act")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                   helper.make_tensor_value_info("shape", TensorProto.INT64, [2])], out, [], d / "value.onnx")
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "x26.npy", x.reshape(2, 12)[:, :6].copy())
    np.save(d / "shape.npy", np.array([3, 4], np.int64))
    return {"dir": d, "dyn": dyn, "sym": sym, "anon": anon, "value": value, "x": x}


def _json(res) -> dict:
    assert res.rc == 0, res.err
    return json.loads(res.out)


def test_inspect_shows_symbolic_shapes(models):
    doc = _json(run_cli("inspect", models["sym"], "--json"))
    assert doc["inputs"][0]["shape"] == ["batch", 3, 12] and doc["outputs"][0]["shape"] == ["batch", 3, 5]
    doc = _json(run_cli("inspect", models["sym"], "--dim", "batch=2", "--json"))
    assert doc["inputs"][0]["shape"] == [2, 3, 12] and doc["outputs"][0]["shape"] == [2, 3, 5]


@pytest.mark.parametrize("cmd", ["plan", "inspect", "optimize", "draw"])
def test_dim_applies_before_the_import(models, cmd, tmp_path):
    """Flatten of [batch, 3, 4] needs no static batch to import; --dim batch=4 makes every shape static."""
    extra = {"optimize": ["-o", tmp_path / "o.rlx"], "draw": ["-o", tmp_path / "g.html"]}.get(cmd, [])
    res = run_cli(cmd, models["dyn"], "--dim", "batch=4", *extra)
    assert res.rc == 0, res.err
    if cmd == "inspect":
        doc = _json(run_cli("inspect", models["dyn"], "--dim", "batch=4", "--json"))
        assert doc["inputs"][0]["shape"] == [4, 3, 4] and doc["outputs"][0]["shape"] == [4, 5]


def test_plan_json_with_dim_is_static(models):
    doc = _json(run_cli("plan", models["dyn"], "--dim", "batch=4", "--json"))
    assert doc["arena_bytes"] > 0


def test_input_shape_fixes_anonymous_dims(models):
    doc = _json(run_cli("inspect", models["anon"], "--dim", "x_d0=2", "--dim", "x_d2=4", "--json"))
    assert doc["inputs"][0]["shape"] == [2, 3, 4]
    doc = _json(run_cli("inspect", models["anon"], "--input-shape", "x=2,3,4", "--json"))
    assert doc["inputs"][0]["shape"] == [2, 3, 4] and doc["outputs"][0]["shape"] == [2, 5]
    assert _json(run_cli("plan", models["anon"], "--input-shape", "x=2,3,4", "--json"))["arena_bytes"] > 0


def test_wrong_input_name_lists_the_inputs(models):
    assert_one_line_error(run_cli("plan", models["dyn"], "--input-shape", "z=1,3,4"),
                          "no input 'z'", "x [batch, 3, 4]", "dyn.onnx")
    assert_one_line_error(run_cli("run", models["dyn"], "--input", f"z={models['dir'] / 'x.npy'}"),
                          "no input 'z'", "x [batch, 3, 4]")
    assert_one_line_error(run_cli("inspect", models["dyn"], "--dim", "nope=3"), "nope", "batch")
    assert_one_line_error(run_cli("plan", models["dyn"], "--input-shape", "x=2,9,4"), "dim 1 is 9")


def test_run_dynamic_model_matches_onnxruntime(models):
    doc = _json(run_cli("run", models["dyn"], "--input", f"x={models['dir'] / 'x.npy'}", "--compare", "onnxruntime",
                        "--json"))
    assert doc["outputs"][0]["shape"] == [2, 5]
    assert doc["compare"]["outputs"][0]["max_abs_diff"] < 1e-4
    np.testing.assert_allclose(doc["outputs"][0]["mean"], float((models["x"].reshape(2, 12) @ W).mean()), rtol=1e-5)


def test_value_dependent_model_runs_as_shipped(models):
    d = models["dir"]
    doc = _json(run_cli("run", models["value"], "--input", f"x={d / 'x26.npy'}", "--input", f"shape={d / 'shape.npy'}",
                        "--compare", "onnxruntime", "--json"))
    assert doc["outputs"][0]["shape"] == [3, 4]
    assert doc["compare"]["outputs"][0]["max_abs_diff"] == 0.0
    assert doc["outputs"][0]["max"] == pytest.approx(float(np.maximum(np.load(d / "x26.npy"), 0).max()))


@pytest.mark.parametrize("cmd", ["inspect", "plan", "draw"])
def test_value_dependent_model_points_to_run(models, cmd, tmp_path):
    extra = ["-o", tmp_path / "g.html"] if cmd == "draw" else []
    res = run_cli(cmd, models["value"], *extra)
    assert_one_line_error(res, "value.onnx", "reshape_by_input", "rlx run")
    assert "internal error" not in res.err


def test_errors_keep_their_class_and_attributes(models):
    """The CLI's reader prefixes the file and re-raises the same exception (NeedsStatic has extra arguments)."""
    from rlx.cli import common
    from rlx.frontends.onnx.import_context import NeedsStatic

    with pytest.raises(NeedsStatic) as info:
        common.load_model(models["value"])
    assert info.value.inputs == frozenset({"shape"})
    assert str(info.value).startswith(models["value"] + ": ")


def test_silero_vad_as_shipped_matches_onnxruntime(tmp_path):
    """The shipped silero-vad (If on the sample rate, an LSTM) through `rlx run --compare onnxruntime --json`."""
    t = np.arange(512) / 16000
    x = (0.3 * np.sin(2 * np.pi * 220 * t))[None].astype(np.float32)
    for name, arr in {"x": x, "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}.items():
        np.save(tmp_path / f"{name}.npy", arr)
    doc = _json(run_cli("run", SILERO, "--input", f"input={tmp_path / 'x.npy'}", "--input", f"state={tmp_path / 'state.npy'}",
                        "--input", f"sr={tmp_path / 'sr.npy'}", "--compare", "onnxruntime", "--json"))
    sess = ort.InferenceSession(SILERO, providers=["CPUExecutionProvider"])
    want, _ = sess.run(None, {"input": x, "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)})
    assert doc["outputs"][0]["shape"] == list(want.shape)
    assert abs(doc["outputs"][0]["mean"] - float(want.mean())) < 1e-4
    assert all(r["max_abs_diff"] < 1e-4 for r in doc["compare"]["outputs"])
    assert_one_line_error(run_cli("inspect", SILERO), "silero_vad.onnx", "If_0", "--input-shape")


def test_value_specialises_the_import(models, tmp_path):
    """--value NAME=V imports with a shape-determining input fixed: inspect / plan / draw then work."""
    doc = _json(run_cli("inspect", models["value"], "--value", "shape=3,4", "--json"))
    assert [i["name"] for i in doc["inputs"]] == ["x"] and doc["outputs"][0]["shape"] == [3, 4]
    assert _json(run_cli("plan", models["value"], "--value", "shape=4,3", "--json"))["arena_bytes"] > 0
    assert_one_line_error(run_cli("inspect", models["value"], "--value", "nope=1"), "no input 'nope'", "shape [2]")
    assert_one_line_error(run_cli("inspect", models["value"], "--value", "shape=5,5"), "reshape_by_input")


def test_silero_vad_draws_once_its_sample_rate_is_fixed(tmp_path):
    page = tmp_path / "silero.html"
    res = run_cli("draw", SILERO, "--value", "sr=16000", "--input-shape", "input=1,512", "--input-shape", "state=2,1,128",
                  "-o", page)
    assert res.rc == 0, res.err
    html = page.read_text()
    assert "ONNX LSTM" in html and "ONNX Conv" in html


def test_value_dependent_model_on_the_reference_interpreter(models):
    """--backend reference (op by op) imports once with the fed values folded in, as the runnable does."""
    d = models["dir"]
    doc = _json(run_cli("run", models["value"], "--input", f"x={d / 'x26.npy'}", "--input", f"shape={d / 'shape.npy'}",
                        "--backend", "reference", "--compare", "onnxruntime", "--json"))
    assert doc["outputs"][0]["shape"] == [3, 4] and doc["compare"]["outputs"][0]["max_abs_diff"] == 0.0
