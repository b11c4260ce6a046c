"""rlx.to_upstream_json: the importer's tables inverted; import(export(g)) == g, and upstream fixtures come back.

The walk exports every op case of every family (tests/ops) and every HIR block case
(tests/hir): each graph either comes back from the importer with the same fingerprint and
runs to the case's independent oracle, or raises rlx.ExportError naming the node and op.
Every upstream variant the importer's tables map must occur in some round-tripped document.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import rlx
from opcases import collect
from rlx.frontends.upstream import reader as up

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "upstream")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hir"))
from hir_cases import all_cases  # noqa: E402

OP_CASES = collect().cases
HIR_CASES = all_cases()


def fixture(name: str) -> dict:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def variants(doc, out: set[str] | None = None) -> set[str]:
    """Every op variant named in a document: the key of each node's op (HIR ``Mir`` wrappers opened)."""
    out = set() if out is None else out
    if isinstance(doc, dict):
        if {"id", "op", "inputs", "shape"} <= set(doc):
            op = doc["op"]
            name = op if isinstance(op, str) else next(iter(op))
            if name == "Mir":
                inner = op["Mir"]
                name = inner if isinstance(inner, str) else next(iter(inner))
            out.add(name)
        for v in doc.values():
            variants(v, out)
    elif isinstance(doc, list):
        for v in doc:
            variants(v, out)
    return out


def assert_close(got, want, rtol, atol):
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), b, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, b)


#: MIR ops that are also upstream HIR variants but have no HIR block case: their op cases, built at stage HIR.
HIR_ONLY_AS_MIR = ("rope", "dequant_matmul", "gated_delta_net")


def hir_module(case) -> rlx.GraphModule:
    def build(h):
        return case.build(h, **{k: (h.param if k in case.params else h.input)(k, a.shape, rlx.DType.of(a.dtype))
                                for k, a in case.feed.items()})

    return rlx.define(case.id.replace("-", "_"), build)


def _export_all():
    """(round-tripped MIR variants, HIR variants, refusals) over the op and HIR case registries."""
    mir_seen, hir_seen, refused = set(), set(), []
    for case in OP_CASES:
        g, _ = case.graph()
        try:
            text = rlx.to_upstream_json(g)
        except rlx.ExportError as exc:
            refused.append((case.id, {n.op for n in g.nodes}, str(exc)))
            continue
        back = rlx.from_upstream_json(text)
        rlx.verify(back)
        assert rlx.fingerprint(back) == rlx.fingerprint(g), case.id
        inputs, params = case.split_feed()
        assert_close(rlx.run(back, inputs, params), case.expected(), case.rtol, case.atol)
        mir_seen |= variants(json.loads(text))
    hir = [(c.id, c.module(), c.feed(), c.oracle and (lambda c=c: c.oracle(**c.arrays)), 1e-4, 1e-5) for c in HIR_CASES]
    hir += [(c.id, hir_module(c), c.split_feed(), c.expected, c.rtol, c.atol) for c in OP_CASES if c.op in HIR_ONLY_AS_MIR]
    for case_id, m, (inputs, params), oracle, rtol, atol in hir:
        try:
            text = rlx.to_upstream_json(m)
        except rlx.ExportError as exc:
            refused.append((case_id, {n.op for n in m.graph.nodes}, str(exc)))
            continue
        back = rlx.from_upstream_json(text)
        assert isinstance(back, rlx.GraphModule) and back.fusion_policy is m.fusion_policy
        assert rlx.fingerprint(back.graph) == rlx.fingerprint(m.graph), case_id
        if oracle is not None:
            want = oracle()
            assert_close(rlx.run(back.graph, inputs, params), list(want) if isinstance(want, (tuple, list)) else [want],
                         rtol, atol)
        doc = json.loads(text)
        hir_seen |= {next(iter(n["op"])) if isinstance(n["op"], dict) else n["op"] for n in doc["nodes"]}
    return mir_seen, hir_seen, refused


@pytest.fixture(scope="module")
def exported():
    return _export_all()


def test_every_mapped_mir_variant_round_trips(exported):
    mir_seen, _, _ = exported
    missing = set(up.MIR_OPS) - mir_seen - {"Custom"}  # Custom: test_custom_op_round_trips
    assert not missing, f"upstream variants no op case round-trips: {sorted(missing)}"


def test_every_mapped_hir_variant_round_trips(exported):
    _, hir_seen, _ = exported
    missing = set(up.HIR_OPS) - hir_seen - {"Constant", "Mir"}
    assert not missing, f"upstream HIR variants no HIR case round-trips: {sorted(missing)}"


def test_refusals_are_typed_and_name_an_op_of_the_graph(exported):
    _, _, refused = exported
    assert len(refused) > 50, "the op cases using rlx-only ops must be refused"
    for case_id, ops, message in refused:
        assert " node %" in message and any(f"({op})" in message for op in ops), (case_id, message)
    refused_ops = {op for _, ops, _ in refused for op in ops}
    assert {"split", "unary_math", "binary_ext"} <= refused_ops


@pytest.mark.parametrize("op", sorted(up.RLX_ONLY))
def test_rlx_only_ops_raise_naming_the_op(op):
    case = next((c for c in OP_CASES if c.op == op), None)
    if case is None:
        pytest.skip(f"{op} has no op case of its own")
    g, _ = case.graph()
    with pytest.raises(rlx.ExportError, match=r"node %\d+ \(\w+\): no upstream rlx-ir 0\.2\.1 form") as info:
        rlx.to_upstream_json(g)
    node = g.nodes[int(str(info.value).split("node %")[1].split()[0])]
    assert node.op in up.RLX_ONLY or node.num_results > 1, str(info.value)  # the first node with no upstream form


@pytest.mark.parametrize(("build", "pattern"), [
    (lambda g, x: g.top_k(x, 2, largest=False), r"\(top_k\): no upstream rlx-ir 0\.2\.1 form for largest=False"),
    (lambda g, x: g.layer_norm(x, g.param("w", (4,)), g.param("b", (4,)), eps=float("nan")),
     r"\(layer_norm\): .*nan .*upstream writes NaN"),
    (lambda g, x: g.split(x, [1, 3], axis=1)[0], r"\(split\): .*multi-result node"),
])
def test_attributes_upstream_cannot_express_are_refused(build, pattern):
    g = rlx.Graph("g")
    g.set_outputs([build(g, g.input("x", (2, 4)))])
    with pytest.raises(rlx.ExportError, match=pattern):
        rlx.to_upstream_json(g)


def test_hir_attention_with_a_score_scale_is_written_as_a_mir_op():
    """HirOp::Attention has no score_scale: the exporter falls back to Mir(Attention), which has it."""
    def build(h):
        q, k, v = (h.input(n, (1, 2, 3, 4)) for n in "qkv")
        return h.attention(q, k, v, num_heads=2, head_dim=4, score_scale=0.5)

    m = rlx.define("att", build)
    doc = json.loads(rlx.to_upstream_json(m))
    assert doc["nodes"][3]["op"]["Mir"]["Attention"]["score_scale"] == 0.5
    back = rlx.from_upstream_json(json.dumps(doc))
    assert rlx.fingerprint(back.graph) == rlx.fingerprint(m.graph)
    plain = rlx.define("att", lambda h: h.attention(*(h.input(n, (1, 2, 3, 4)) for n in "qkv"), num_heads=2, head_dim=4))
    assert "Attention" in json.loads(rlx.to_upstream_json(plain))["nodes"][3]["op"]  # the HIR variant when it suffices


def test_custom_op_round_trips():
    rlx.custom_op("upstream_export_twice", infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0] * 2)
    try:
        g = rlx.Graph("c")
        x = g.input("x", (3,))
        g.set_outputs([g.append("upstream_export_twice", [x], {})])
        doc = json.loads(rlx.to_upstream_json(g))
        assert doc["inner"]["nodes"][1]["op"] == {"Custom": {"name": "upstream_export_twice", "num_inputs": 1, "attrs": []}}
        back = rlx.from_upstream_json(json.dumps(doc))
        assert back == g
        np.testing.assert_array_equal(rlx.run(back, {"x": np.arange(3.0, dtype=np.float32)})[0], [0, 2, 4])
    finally:
        rlx.unregister_custom_op("upstream_export_twice")


# ------------------------------------------------------------------------------------ upstream fixtures


def _leaf_names(doc):
    """Upstream's leaf ``name: null`` means the leaf's own name (the importer reads it so; the exporter writes it)."""
    if isinstance(doc, dict):
        op = doc.get("op")
        if isinstance(op, dict) and ("Input" in op or "Param" in op) and doc.get("name") is None:
            doc["name"] = next(iter(op.values()))["name"]
        for v in doc.values():
            _leaf_names(v)
    elif isinstance(doc, list):
        for v in doc:
            _leaf_names(v)
    return doc


@pytest.mark.parametrize(("name", "key"), [("mlp_mir.json", None), ("control_flow_mir.json", "inner"),
                                            ("block_hir.json", None)])
def test_export_of_an_imported_fixture_reproduces_it(name, key):
    doc = fixture(name)
    got = json.loads(rlx.to_upstream_json(rlx.from_upstream_json(json.dumps(doc))))
    assert _leaf_names(got[key] if key else got) == _leaf_names(doc)


def test_dynamic_fixture_comes_back_equal():
    """Its float gather indices got an explicit cast on import; the export writes that cast and symbols as Dynamic ids."""
    g = rlx.from_upstream_json(json.dumps(fixture("dynamic_mir.json")))
    doc = json.loads(rlx.to_upstream_json(g))
    dims = [d for n in doc["inner"]["nodes"] for d in n["shape"]["dims"] if "Dynamic" in d]
    assert {d["Dynamic"] for d in dims} == {0, 1, 7}
    assert rlx.from_upstream_json(json.dumps(doc)) == g


def test_lir_module_exports_rlx_plan():
    doc = fixture("tanh_sum_lir.json")
    lir = rlx.from_upstream_json(json.dumps(doc))
    got = json.loads(rlx.to_upstream_json(lir))
    assert _leaf_names(got["mir"]) == _leaf_names(doc["mir"])
    buffers, plan = got["buffers"], lir.plan
    assert buffers["arena_size"] == plan.arena_size and buffers["alignment"] == doc["buffers"]["alignment"]
    assert buffers["schedule"] == list(plan.schedule)
    for vid, slot in buffers["assignments"].items():
        assert slot["offset"] + slot["size"] <= plan.arena_size and plan.assignments[int(vid)].size == slot["size"]
    assert buffers["io"] == doc["buffers"]["io"]
    again = rlx.from_upstream_json(json.dumps(got))
    assert again.graph == lir.graph


def test_other_symbols_get_fresh_dynamic_ids():
    g = rlx.Graph("s")
    x = g.input("x", ("n", "batch"))
    g.set_outputs([g.activation(x, "relu")])
    doc = json.loads(rlx.to_upstream_json(g))
    assert [d for d in doc["inner"]["nodes"][0]["shape"]["dims"]] == [{"Dynamic": 4}, {"Dynamic": 0}]
    assert rlx.from_upstream_json(json.dumps(doc)).inputs()["x"].shape == ("d4", "batch")


def test_not_exportable_objects():
    with pytest.raises(rlx.ExportError, match="takes a Graph, a GraphModule or an LirModule"):
        rlx.to_upstream_json(3)
