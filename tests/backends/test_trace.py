"""Per-node traces (rlx.backends.trace) parse as Chrome / Perfetto trace JSON and agree with the plan."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import rlx
from rlx.backends.trace import trace_run, write_trace


def _mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (4, 8))
    h = g.relu(g.matmul(x, g.param("w", (8, 16))) + g.param("b", (16,)))
    g.set_outputs([g.reshape(g.matmul(h, g.param("w2", (16, 3))), (12,))])
    return g


def _feed():
    rng = np.random.default_rng(0)
    return ({"x": rng.standard_normal((4, 8)).astype(np.float32)},
            {"w": rng.standard_normal((8, 16)).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32),
             "w2": rng.standard_normal((16, 3)).astype(np.float32)})


_NEEDS = {"numpy": None, "jax": "jax", "torch": "torch", "onnxruntime": "onnxruntime"}


@pytest.mark.parametrize("backend", list(_NEEDS))
def test_trace_file_has_one_event_per_node_and_the_arena_track(tmp_path, backend):
    if _NEEDS[backend]:
        pytest.importorskip(_NEEDS[backend])
    g = _mlp()
    inputs, params = _feed()
    outs, doc = trace_run(g, inputs, params, backend=backend)
    (want,) = rlx.run(g, inputs=inputs, params=params)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    write_trace(doc, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    events = doc["traceEvents"]
    nodes = [e for e in events if e.get("cat") == "node"]
    assert [e["args"]["node"] for e in nodes] == [n.id for n in g.nodes]
    for a, b in itertools.pairwise(nodes):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3 and a["dur"] >= 0
    assert [e["name"] for e in events if e.get("cat") == "run"] == [f"{backend} executable run"]
    lir = rlx.plan(g)
    buffers = {e["args"]["node"]: e["args"] for e in events if e.get("cat") == "buffer"}
    roots = {i: s for i, s in lir.plan.assignments.items() if i in lir.plan.lifetimes}
    assert {i: (a["offset"], a["bytes"]) for i, a in buffers.items()} == {i: (s.offset, s.size) for i, s in roots.items()}
    live = [e["args"]["bytes"] for e in events if e.get("ph") == "C"]
    assert len(live) == len(g.nodes) and max(live) == lir.plan.lower_bound
    meta = doc["metadata"]
    assert meta["backend"] == backend and meta["per_node"] is True and meta["granularity"] == "node"
    assert meta["fallback_nodes"] == [] and not any("runner" in e["args"] for e in nodes)


def test_unknown_backend_is_an_error():
    with pytest.raises(rlx.RlxError, match="traceable backends"):
        trace_run(_mlp(), *_feed(), backend="nonexistent")


def _split_graph():
    g = rlx.Graph("split")
    x = g.input("x", (3, 5))
    a, b = g.split(g.relu(x), [2, 3], axis=1)
    g.set_outputs([g.exp(b), a * a])
    return g


@pytest.mark.parametrize("backend", list(_NEEDS))
def test_multi_result_nodes_are_one_event_each(backend):
    if _NEEDS[backend]:
        pytest.importorskip(_NEEDS[backend])
    g = _split_graph()
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    outs, doc = trace_run(g, {"x": x}, backend=backend, compiled_run=False)
    r = np.maximum(x, 0)
    np.testing.assert_allclose(outs[0], np.exp(r[:, 2:]), rtol=1e-5)
    np.testing.assert_allclose(outs[1], r[:, :2] ** 2, rtol=1e-6)
    nodes = [e for e in json.loads(json.dumps(doc))["traceEvents"] if e.get("cat") == "node"]
    assert [e["name"] for e in nodes] == [n.op for n in g.nodes]  # split once; its second result is a result event


def test_backend_without_a_per_node_runner_says_whole_graph():
    g = _mlp()
    inputs, params = _feed()
    outs, doc = trace_run(g, inputs, params, backend="auto")
    (want,) = rlx.run(g, inputs=inputs, params=params)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    doc = json.loads(json.dumps(doc))
    meta = doc["metadata"]
    assert meta["per_node"] is False and meta["granularity"] == "whole-graph" and "no per-node runner" in meta["reason"]
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "node"]
    assert [e["name"] for e in doc["traceEvents"] if e.get("cat") == "run"] == ["auto executable run"]


def test_node_with_no_standalone_onnx_form_runs_on_numpy_and_says_so():
    pytest.importorskip("onnxruntime")
    rlx.custom_op("trace_twice", infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0] * 2)
    try:
        g = rlx.Graph("c")
        x = g.input("x", (4,))
        t = g.append("trace_twice", [g.exp(x)], {})
        g.set_outputs([g.relu(t)])
        xv = np.linspace(-1, 1, 4).astype(np.float32)
        outs, doc = trace_run(g, {"x": xv}, backend="onnxruntime")
        np.testing.assert_allclose(outs[0], 2 * np.exp(xv), rtol=1e-6)
        meta = json.loads(json.dumps(doc))["metadata"]
        assert meta["per_node"] is True and [f["node"] for f in meta["fallback_nodes"]] == [t.id]
        assert "compiled_run" in meta and meta["compiled_run"].startswith("not run")  # the whole graph has no ONNX form
        runners = {e["args"]["node"]: e["args"].get("runner") for e in doc["traceEvents"] if e.get("cat") == "node"}
        assert runners == {0: None, 1: None, t.id: "numpy", t.id + 1: None}
    finally:
        rlx.unregister_custom_op("trace_twice")
