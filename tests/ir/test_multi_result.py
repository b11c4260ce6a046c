"""Multi-result nodes: representation, text and JSON (format v2) round trips, verifier rules,
passes, the planner (one buffer per result), both executors, autodiff with unused results.

Oracles are NumPy slicing / sorting written out here (gradients through multi-result nodes:
tests/autodiff/test_multi_result_grad.py).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest

import rlx
from rlx.lir import check as check_plan
from rlx.lir import plan
from rlx.opt.cleanup import cse, dce

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
X = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)


def _pieces() -> rlx.Graph:
    g = rlx.Graph("pieces")
    x = g.input("x", (3, 7))
    a, b, c = g.split(x, axis=1, sizes=[2, 4, 1], name="cut")
    vals, idx = g.top_k(b, k=2, output="both")
    g.set_outputs([a * 2.0, vals, idx, c])
    return g


def _expected(x: np.ndarray) -> list[np.ndarray]:
    b = x[:, 2:6]
    order = np.argsort(-b, axis=1, kind="stable")[:, :2]
    return [x[:, :2] * 2, np.take_along_axis(b, order, axis=1), order.astype(np.int64), x[:, 6:]]


def test_layout_values_and_results():
    g = _pieces()
    a, b, c = g.results(1)
    assert [v.id for v in (a, b, c)] == [1, 2, 3]
    assert [v.index for v in (a, b, c)] == [0, 1, 2]
    assert b.producer is g.nodes[1] and b.node.op == "result" and b.node.inputs == (1,)
    assert [tuple(v.shape) for v in (a, b, c)] == [(3, 2), (3, 4), (3, 1)]
    assert g.nodes[1].num_results == 3 and g.results(3) == (a, b, c)
    vals, idx = g.results(4)
    assert vals.dtype == rlx.f32 and idx.dtype == rlx.i64
    # a one-piece split is an ordinary one-result node, still built as a 1-tuple
    h = rlx.Graph("one")
    (whole,) = h.split(h.input("x", (4,)), sizes=[4])
    assert whole.node.num_results == 1 and len(h) == 2


def test_reference_and_arena_match_numpy():
    g = _pieces()
    want = _expected(X)
    for got in (rlx.run(g, {"x": X}), rlx.compile(g).run({"x": X}), rlx.compile(g, outputs="arena").run({"x": X})):
        for w, o in zip(want, got):
            np.testing.assert_array_equal(o, w)


def test_planner_gives_each_result_its_own_buffer():
    g = rlx.Graph("p")
    x = g.input("x", (4, 8))
    parts = g.split(g.exp(x), axis=1, sizes=[2, 2, 4])
    g.set_outputs([g.sum(p) for p in parts])
    lir = plan(g)
    check_plan(lir)
    slots = [lir.plan.assignments[v.id] for v in parts]
    spans = sorted((s.offset, s.offset + s.size) for s in slots)
    assert all(e <= s for (_, e), (s, _) in itertools.pairwise(spans)), f"results overlap: {spans}"
    x48 = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    got = rlx.compile(g, inputs="arena").run({"x": x48})
    e = np.exp(x48.astype(np.float64))
    np.testing.assert_allclose(got, [e[:, :2].sum(), e[:, 2:4].sum(), e[:, 4:].sum()], rtol=1e-6)


def test_text_round_trip_with_result_names():
    g = _pieces()
    g.append("result", [1], {"index": 2}, name="tail")
    text = str(g)
    assert '%1, %2, %3 = split(%0) {axis=1, sizes=[2, 4, 1]} : [3, 2] f32, [3, 4] f32, [3, 1] f32 name="cut" ' \
           'result_names=[null, "tail"]' in text
    assert "= result" not in text
    back = rlx.parse(text)
    assert back == g and str(back) == text and back.nodes[3].name == "tail"


@pytest.mark.parametrize("bad, match", [
    ("%1, %3 = split", "result 1 of node %1 must be %2"),
    (": [3, 2] f32, [3, 4] f32, [3, 1] f32 name", None),  # replaced below: one type too few
])
def test_text_errors(bad, match):
    text = str(_pieces())
    if match is None:
        text = text.replace(": [3, 2] f32, [3, 4] f32, [3, 1] f32 name", ": [3, 2] f32, [3, 4] f32 name")
        match = "3 result.s. listed but 2 type.s. given"
    else:
        text = text.replace("%1, %2, %3 = split", bad)
    with pytest.raises(rlx.ParseError, match=match):
        rlx.parse(text)


def test_json_v2_round_trip_and_fingerprint():
    g = _pieces()
    doc = json.loads(rlx.to_json(g))
    assert doc["version"] == 2
    split = doc["nodes"][1]
    assert split["results"] == [{"shape": [3, 4], "dtype": "f32"}, {"shape": [3, 1], "dtype": "f32"}]
    assert doc["nodes"][2] == {"id": 2, "op": "result", "inputs": [1], "attrs": {"index": 1}, "shape": [3, 4], "dtype": "f32"}
    back = rlx.from_json(rlx.to_json(g))
    assert back == g and rlx.fingerprint(back) == rlx.fingerprint(g)
    h = _pieces()
    h2 = rlx.Graph("pieces")
    x = h2.input("x", (3, 7))
    h2.split(x, axis=1, sizes=[2, 3, 2], name="cut")
    assert rlx.fingerprint(h) != rlx.fingerprint(h2)


def _load_doc(doc: dict):
    return rlx.from_json(json.dumps(doc))


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["nodes"][1].update(results=[]), r"nodes\[1\]\.results: expected a non-empty list"),
    (lambda d: d["nodes"][1].update(results=[{"shape": [3, 4]}]), r"nodes\[1\]\.results\[0\]: expected an object"),
    (lambda d: d["nodes"][1]["results"][0].update(dtype="f99"), r"nodes\[1\]\.results\[0\]\.dtype"),
    (lambda d: d["nodes"][2].update(shape=[3, 5]), r"nodes\[2\].*result 1 of node %1 is \[3, 4\] f32"),
    (lambda d: d["nodes"].pop(2), r"nodes\[2\]\.id: expected id 2"),
    (lambda d: d["nodes"][2].update(op="activation", attrs={"kind": "relu"}),
     r"nodes\[2\]: node 2 must be result 1 of the multi-result node before it"),
    (lambda d: d["nodes"][1].pop("results"), r"nodes\[2\].*result 1 of node %1 does not exist"),
])
def test_json_errors_are_format_errors(mutate, match):
    doc = json.loads(rlx.to_json(_pieces()))
    mutate(doc)
    with pytest.raises(rlx.FormatError, match=match):
        _load_doc(doc)


def test_v2_fixture_loads_and_runs():
    g = rlx.load(os.path.join(FIXTURES, "multi_result_v2.rlx"))
    assert g == _pieces()
    for w, o in zip(_expected(X), rlx.run(g, {"x": X})):
        np.testing.assert_array_equal(o, w)


def test_verifier_rules():
    g = _pieces()
    nodes = g.nodes
    import dataclasses

    bad = rlx.Graph("bad")
    for n in nodes:
        bad._nodes.append(n)
    bad._nodes[2] = dataclasses.replace(nodes[2], type=rlx.TensorType((3, 5), "f32"))
    bad.set_outputs([0])
    with pytest.raises(rlx.VerifyError, match=r"node %2 \(result\): stored type \[3, 5\] f32 differs from result 1 of node %1"):
        rlx.verify(bad)
    bad._nodes[2] = nodes[2]
    bad._nodes[1] = dataclasses.replace(nodes[1], extra_types=nodes[1].extra_types[:1])
    with pytest.raises(rlx.VerifyError, match=r"stored result types .* differ|has 2 result\(s\), so it has no result 2"):
        rlx.verify(bad)
    lone = rlx.Graph("lone")
    x = lone.input("x", (2,))
    with pytest.raises(rlx.RlxError, match="result 1 of node %0 does not exist"):
        lone.append("result", [x], {"index": 1})


def test_dce_and_cse_keep_results_together():
    g = rlx.Graph("passes")
    x = g.input("x", (3, 7))
    _, b1, _ = g.split(x, axis=1, sizes=[2, 4, 1])
    _, b2, c2 = g.split(x, axis=1, sizes=[2, 4, 1])  # the same node again
    g.set_outputs([b1 + b2, c2])
    merged = cse(g).graph
    rlx.verify(merged)
    assert sum(n.op == "split" for n in merged.nodes) == 1
    slim = dce(merged).graph
    rlx.verify(slim)
    assert [n.op for n in slim.nodes].count("result") == 2  # the unused result 0 and results stay
    want = [X[:, 2:6] * 2, X[:, 6:]]
    for graph in (g, merged, slim, rlx.optimize(g)[0]):
        for w, o in zip(want, rlx.run(graph, {"x": X})):
            np.testing.assert_allclose(o, w, rtol=1e-6)


def test_vmap_of_a_multi_result_node_matches_a_loop():
    g = rlx.Graph("v")
    x = g.input("x", (3, 7))
    _, b, c = g.split(x, axis=1, sizes=[2, 4, 1])
    vals, idx = g.top_k(b, k=2, output="both")
    g.set_outputs([vals, idx, c])
    batched = rlx.vmap(g, {"x": 0}, batch_size=2)
    xs = np.stack([X, X[::-1] * 2])
    got = rlx.run(batched, {"x": xs})
    for k in range(2):
        for o, w in zip(got, rlx.run(g, {"x": xs[k]})):
            np.testing.assert_array_equal(o[k], w)
