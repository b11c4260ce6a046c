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


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_trace_file_has_one_event_per_node_and_the_arena_track(tmp_path, backend):
    if backend == "jax":
        pytest.importorskip("jax")
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
    assert doc["metadata"]["backend"] == backend


def test_unknown_backend_is_an_error():
    with pytest.raises(rlx.RlxError, match="traceable backends"):
        trace_run(_mlp(), *_feed(), backend="nonexistent")
