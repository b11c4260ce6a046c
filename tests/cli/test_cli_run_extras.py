"""rlx run: --repeat statistics, --profile, --compare onnxruntime / torch, every registered
backend, and symbolic dims fixed by --dim or by the .npy inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx

from .conftest import assert_one_line_error, reference_output, run_cli
from .test_cli_convert import _onnx_model


def _json(res) -> dict:
    assert res.rc == 0, res.err
    return json.loads(res.out)


def test_profile_covers_every_computing_node(files):
    doc = _json(run_cli("run", "--json", files["mlp"], "-i", f"x={files['x']}", "--profile", "--top", "3"))
    prof = doc["profile"]
    assert prof["backend"] == "numpy"
    g = rlx.load(files["mlp"])
    computing = [n for n in g.nodes if n.op not in ("input", "param")]
    assert sum(k["count"] for k in prof["by_kind"]) == len(computing)
    assert {k["kind"] for k in prof["by_kind"]} >= {"matmul", "add", "gelu"}
    assert len(prof["nodes"]) == 3 and all(r["seconds"] >= 0 for r in prof["nodes"])
    secs = [r["seconds"] for r in prof["nodes"]]
    assert secs == sorted(secs, reverse=True)
    text = run_cli("run", files["mlp"], "-i", f"x={files['x']}", "--profile", "--repeat", "3", env={"RLX_PLAIN": "1"})
    assert text.rc == 0 and "time by op kind" in text.out and "slowest nodes" in text.out and "median" in text.out


def test_every_registered_backend_is_offered_and_agrees(files):
    from rlx.cli.cmd_run import backend_names

    names = backend_names()
    assert "numpy" in names and "reference" in names
    res = run_cli("run", "--help")
    for name in names:
        assert name in res.out
    want = reference_output(files)
    for name in names:
        if name not in ("numpy", "reference", "jax"):
            continue  # other registered backends may need hardware or packages this machine lacks
        if name == "jax":
            pytest.importorskip("jax")
        doc = _json(run_cli("run", "--json", files["mlp"], "-i", f"x={files['x']}", "--backend", name))
        np.testing.assert_allclose(doc["outputs"][0]["mean"], want.mean(), rtol=1e-5)
    bad = run_cli("run", files["mlp"], "-i", f"x={files['x']}", "--backend", "nosuch")
    assert bad.rc == 2 and "numpy" in bad.err


def test_compare_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(5)
    src = tmp_path / "tiny.onnx"
    _onnx_model(src, rng)
    np.save(tmp_path / "x.npy", rng.standard_normal((3, 8)).astype(np.float32))
    doc = _json(run_cli("run", "--json", src, "-i", f"x={tmp_path / 'x.npy'}", "--compare", "onnxruntime", "--repeat", "3"))
    cmp = doc["compare"]
    assert cmp["peer"] == "onnxruntime" and cmp["outputs"][0]["shape_equal"]
    assert cmp["outputs"][0]["max_abs_diff"] < 1e-5
    assert cmp["latency"]["repeat"] == 3 and cmp["speedup"] > 0
    converted = tmp_path / "tiny.rlx"
    assert run_cli("convert", src, "-o", converted).rc == 0
    assert_one_line_error(run_cli("run", converted, "-i", f"x={tmp_path / 'x.npy'}", "--compare", "onnxruntime"),
                          "--compare onnxruntime=MODEL.onnx")
    again = _json(run_cli("run", "--json", converted, "-i", f"x={tmp_path / 'x.npy'}", "--compare", f"onnxruntime={src}"))
    assert again["compare"]["outputs"][0]["max_abs_diff"] < 1e-5


def test_compare_torch(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh()).eval()
    x = torch.randn(2, 6)
    ep = torch.export.export(net, (x,))
    torch.export.save(ep, str(tmp_path / "net.pt2"))
    (name,) = ep.graph_signature.user_inputs
    np.save(tmp_path / "x.npy", x.numpy())
    doc = _json(run_cli("run", "--json", tmp_path / "net.pt2", "-i", f"{name}={tmp_path / 'x.npy'}", "--compare", "torch"))
    (row,) = doc["compare"]["outputs"]
    assert row["shape_equal"] and row["max_abs_diff"] < 1e-5
    assert abs(doc["outputs"][0]["mean"] - float(net(x).mean())) < 1e-5


def _dynamic(tmp_path):
    g = rlx.Graph("dyn")
    g.set_outputs([g.gelu(g.input("x", ("batch", 4)) @ g.param("w", (4, 3)))])
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    rlx.save(g, tmp_path / "dyn.rlx", params={"w": w})
    return g, w


def test_dim_fixes_symbols_and_inputs_give_sizes(tmp_path):
    g, w = _dynamic(tmp_path)
    doc = _json(run_cli("plan", "--json", tmp_path / "dyn.rlx", "--dim", "batch=5"))
    assert doc["summary"]["macs"] == 5 * 4 * 3 and doc["buffers"]
    assert run_cli("plan", tmp_path / "dyn.rlx", "-o", tmp_path / "p5.rlx", "--dim", "batch=5").rc == 0
    assert list(rlx.load(tmp_path / "p5.rlx").graph.inputs()["x"].shape) == [5, 4]
    x = np.random.default_rng(1).standard_normal((7, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    doc = _json(run_cli("run", "--json", tmp_path / "dyn.rlx", "-i", f"x={tmp_path / 'x.npy'}"))
    assert doc["binding"] == {"batch": 7} and doc["outputs"][0]["shape"] == [7, 3]
    (want,) = rlx.run(g, {"x": x}, {"w": w})
    np.testing.assert_allclose(doc["outputs"][0]["mean"], want.mean(), rtol=1e-5)
    assert_one_line_error(run_cli("plan", tmp_path / "dyn.rlx", "--dim", "seq=3"), "no symbolic dim 'seq'", "batch")
    bad = run_cli("plan", tmp_path / "dyn.rlx", "--dim", "batch=x")
    assert bad.rc == 2 and "--dim batch" in bad.err


def test_trace_file_has_a_node_event_per_node(files, tmp_path):
    out = tmp_path / "run.trace.json"
    res = run_cli("run", files["mlp"], "-i", f"x={files['x']}", "--trace", out)
    assert res.rc == 0, res.err
    doc = json.loads(out.read_text())
    nodes = {ev["args"]["node"] for ev in doc["traceEvents"] if ev.get("cat") == "node"}
    assert nodes == {n.id for n in rlx.load(files["mlp"]).nodes}
    assert_one_line_error(run_cli("run", files["mlp"], "-i", f"x={files['x']}", "--trace", tmp_path / "t.txt"), "t.txt")


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_trace_on_other_backends_is_per_node(files, tmp_path, backend):
    pytest.importorskip(backend)
    out = tmp_path / f"{backend}.trace.json"
    res = run_cli("run", files["mlp"], "-i", f"x={files['x']}", "--backend", backend, "--trace", out, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert "per-node trace" in res.out
    doc = json.loads(out.read_text())
    assert doc["metadata"]["backend"] == backend and doc["metadata"]["per_node"] is True
    nodes = [ev["args"]["node"] for ev in doc["traceEvents"] if ev.get("cat") == "node"]
    assert nodes == [n.id for n in rlx.load(files["mlp"]).nodes]
