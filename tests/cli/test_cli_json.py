"""--json on inspect / optimize / plan / run: the documented schema (docs/cli.md), checked
field by field, and values computed independently (NumPy, hand-counted FLOPs)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import rlx

from .conftest import mlp_graph, reference_output, run_cli

TENSOR = {"name": str, "shape": list, "dtype": str}
SUMMARY = {"parameters": int, "flops": int, "macs": int, "weight_bytes": int, "activation_bytes": int, "by_kind": list}


def _doc(res, schema: str) -> dict:
    assert res.rc == 0, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == f"rlx.{schema}" and doc["version"] == 1
    return doc


def _fields(obj: dict, spec: dict) -> None:
    for key, typ in spec.items():
        assert key in obj, key
        assert isinstance(obj[key], typ), (key, obj[key])


def _mlp_counts() -> tuple[int, int]:
    """Parameters and MACs of the conftest MLP, by hand: x[4,8] @ w1[8,16], then @ w2[16,3]."""
    return 8 * 16 + 16 + 16 * 3 + 3, 4 * 16 * 8 + 4 * 3 * 16


def test_inspect_json(files):
    doc = _doc(run_cli("inspect", "--json", files["mlp"]), "inspect")
    _fields(doc, {"file": str, "stage": str, "name": str, "nodes": int, "fingerprint": str, "saved_weight_bytes": int,
                  "inputs": list, "params": list, "outputs": list, "summary": dict})
    g = mlp_graph()
    assert doc["stage"] == "mir" and doc["nodes"] == len(g) and doc["fingerprint"] == rlx.fingerprint(g)
    for e in doc["inputs"] + doc["params"]:
        _fields(e, TENSOR)
    assert [e["name"] for e in doc["params"]] == ["w1", "b1", "w2", "b2"] and all(e["saved"] for e in doc["params"])
    assert doc["inputs"] == [{"name": "x", "shape": [4, 8], "dtype": "f32"}]
    assert doc["outputs"][0]["shape"] == [4, 3]
    s = doc["summary"]
    _fields(s, SUMMARY)
    params, macs = _mlp_counts()
    assert s["parameters"] == params and s["macs"] == macs
    assert s["weight_bytes"] == 4 * params == doc["saved_weight_bytes"]
    matmul = next(r for r in s["by_kind"] if r["kind"] == "matmul")
    assert matmul == {"kind": "matmul", "count": 2, "flops": 2 * macs, "macs": macs}
    assert s["flops"] >= 2 * macs
    assert sum(r["count"] for r in s["by_kind"]) == len(g)


def test_inspect_json_text_parses_back(files):
    doc = _doc(run_cli("inspect", "--json", "--text", files["mlp"]), "inspect")
    assert rlx.parse(doc["text"]) == mlp_graph()


def test_optimize_json(files, tmp_path):
    out = tmp_path / "o.rlx"
    doc = _doc(run_cli("optimize", "--json", files["hir"], "-o", out, "--policy", "fusable"), "optimize")
    _fields(doc, {"file": str, "output": str, "backend": str, "nodes_before": int, "nodes_after": int, "fingerprint": str,
                  "passes": list, "fused": dict, "missed": list, "summary": dict})
    g = rlx.load(out)
    assert doc["fingerprint"] == rlx.fingerprint(g) and doc["nodes_after"] == len(g)
    assert doc["fused"].get("fused_matmul_bias_act") == 2
    assert doc["summary"]["macs"] == _mlp_counts()[1]
    for p in doc["passes"]:
        _fields(p, {"pass": str, "stats": dict})


def test_plan_json(files, tmp_path):
    out = tmp_path / "p.rlx"
    doc = _doc(run_cli("plan", "--json", files["mlp"], "-o", out, "--top", "3"), "plan")
    lir = rlx.load(out)
    p = lir.plan
    assert (doc["arena_bytes"], doc["lower_bound_bytes"], doc["alignment"]) == (p.arena_size, p.lower_bound, p.alignment)
    assert doc["fingerprint"] == lir.fingerprint()
    assert len(doc["buffers"]) == 3 and doc["buffer_count"] >= 3
    sizes = [b["bytes"] for b in doc["buffers"]]
    assert sizes == sorted(sizes, reverse=True)
    for b in doc["buffers"]:
        _fields(b, {"node": int, "op": str, "kind": str, "offset": int, "bytes": int})
        assert b["kind"] == ("weight" if b["op"] in ("param", "constant") else "activation")
        assert p.assignments[b["node"]].size == b["bytes"]


def test_run_json_with_latency(files):
    doc = _doc(run_cli("run", "--json", files["mlp"], "-i", f"x={files['x']}", "--repeat", "5", "--warmup", "2"), "run")
    want = reference_output(files)
    (o,) = doc["outputs"]
    assert o["shape"] == [4, 3] and o["dtype"] == "float32"
    np.testing.assert_allclose([o["min"], o["max"], o["mean"]], [want.min(), want.max(), want.mean()], rtol=1e-5)
    lat = doc["latency"]
    assert lat["repeat"] == 5 and lat["warmup"] == 2
    assert 0 < lat["min_s"] <= lat["p10_s"] <= lat["median_s"] <= lat["p90_s"]
    assert doc["binding"] == {} and doc["written"] is None and "profile" not in doc


def test_conformance_json_counts_the_onnx_cases():
    pytest.importorskip("onnx")
    from onnx.backend.test.loader import load_model_tests

    names = sorted(t.name for t in load_model_tests(kind="node") if re.search("test_relu|test_abs", t.name))
    doc = _doc(run_cli("conformance", "--json", "-k", "test_relu|test_abs"), "conformance")
    assert doc["cases"] == len(names) > 0
    assert doc["passed"] + doc["failed"] + doc["unsupported"] == doc["cases"]
    assert doc["passed"] >= 1 and len(doc["not_passed"]) == doc["cases"] - doc["passed"]
