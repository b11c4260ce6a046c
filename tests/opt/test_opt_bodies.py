"""The optimizer recurses into graph-valued attributes (control-flow bodies, custom_fn bodies)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from ops.cases_control_flow import CASES, XS, H, W, sub
from opt.opt_util import assert_same_outputs, op_counts
from rlx.ir.verify import verify
from rlx.opt import CSE, DCE, Pass, PassError, PassResult, optimize, run_passes


def _input_sig(h: rlx.Graph) -> list[tuple[str, object]]:
    return [(n.attrs["name"], n.type) for n in h.nodes if n.op == "input"]


def _body_of(g: rlx.Graph, op: str, attr: str) -> rlx.Graph:
    (node,) = [n for n in g.nodes if n.op == op]
    return node.attrs[attr]


# ------------------------------------------------------------------------------ scan
def _scan_graph():
    sig = [("h", (2, 3), "f64"), ("w", (3, 3), "f64"), ("x", (2, 3), "f64")]

    def cell(b, h, w, x):
        m1 = b.matmul(h, w)
        m2 = b.matmul(h, w)  # repeated subexpression: CSE merges it with m1
        b.exp(m1 * 3.0)  # dead branch: DCE drops it
        return b.tanh((m1 + m2) * 0.5 + x)

    body = sub("messy_cell", sig, cell)
    g = rlx.Graph("scan_outer")
    h, w, xs = g.input("h", (2, 3), "f64"), g.input("w", (3, 3), "f64"), g.input("xs", (4, 2, 3), "f64")
    g.set_outputs([g.scan(h, w, xs, body=body, length=4, num_bcast=1, num_xs=1)])
    return g


def test_scan_body_cse_and_dce():
    g = _scan_graph()
    before = _body_of(g, "scan", "body")
    opt, report = optimize(g)
    verify(opt)
    after = _body_of(opt, "scan", "body")
    assert len(after.nodes) < len(before.nodes)
    assert op_counts(before)["matmul"] == 2 and op_counts(after).get("matmul", 0) == 1
    assert "exp" not in op_counts(after)
    assert _input_sig(after) == _input_sig(before)
    assert [after.nodes[i].type for i in after.output_ids] == [before.nodes[i].type for i in before.output_ids]
    (scan_node,) = [n for n in opt.nodes if n.op == "scan"]
    assert scan_node.type == next(n for n in g.nodes if n.op == "scan").type
    # the original graph is untouched
    assert _body_of(g, "scan", "body") is before and op_counts(before)["matmul"] == 2
    want = rlx.run(g, {"h": H, "w": W, "xs": XS})
    got = rlx.run(opt, {"h": H, "w": W, "xs": XS})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    # the report has a nested report per body, and totals including bodies
    key = f"%{scan_node.id}.body"
    assert set(report.bodies) == {key}
    sub_report = report.bodies[key]
    assert sub_report.nodes_before == len(before.nodes) and sub_report.nodes_after == len(after.nodes)
    assert sub_report.applied["cse"]["merged"] >= 1 and sub_report.applied["dce"]["removed"] >= 1
    assert report.applied_total["cse"]["merged"] >= 1
    assert report.total_nodes_after == len(opt.nodes) + len(after.nodes)
    assert report.total("matmul") == report.count("matmul") + 1
    assert f"body {key}:" in str(report)


def test_run_passes_records_bodies():
    g = _scan_graph()
    res = run_passes(g, [CSE, DCE])
    (key,) = res.bodies
    assert key[1] == "body" and res.graph.nodes[key[0]].op == "scan"
    assert res.bodies[key].graph is res.graph.nodes[key[0]].attrs["body"]
    assert res.bodies[key].source is g.nodes[key[0]].attrs["body"]
    off = run_passes(g, [CSE, DCE], bodies=False)
    assert off.bodies == {} and _body_of(off.graph, "scan", "body") is _body_of(g, "scan", "body")


# -------------------------------------------------------------------------------- if_
def _if_graph():
    sig = [("x", (2, 4), "f32"), ("w", (4, 8), "f32"), ("b", (8,), "f32")]
    then_b = sub("then", sig, lambda h, x, w, b: h.activation(h.matmul(x, w) + b, kind="gelu"))
    else_b = sub("else", sig, lambda h, x, w, b: h.matmul(x, w) - b)
    g = rlx.Graph("if_outer")
    p = g.input("p", (), "bool")
    x, w, b = g.input("x", (2, 4), "f32"), g.input("w", (4, 8), "f32"), g.input("b", (8,), "f32")
    g.set_outputs([g.if_([p, x, w, b], then_branch=then_b, else_branch=else_b)])
    return g


def test_if_branch_gets_fused():
    g = _if_graph()
    opt, report = optimize(g)
    verify(opt)
    then_b = _body_of(opt, "if_", "then_branch")
    assert op_counts(then_b).get("fused_matmul_bias_act", 0) == 1 and "matmul" not in op_counts(then_b)
    assert _input_sig(then_b) == _input_sig(_body_of(g, "if_", "then_branch"))
    assert report.total("fused_matmul_bias_act") == 1 and report.count("fused_matmul_bias_act") == 0
    for p in (True, False):
        feed = {"p": np.array(p), "x": np.ones((2, 4), np.float32) * 0.3,
                "w": np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), "b": np.arange(8, dtype=np.float32) * 0.1}
        np.testing.assert_allclose(rlx.run(opt, feed)[0], rlx.run(g, feed)[0], rtol=1e-5, atol=1e-6)


def test_backend_claims_apply_inside_bodies():
    opt, _ = optimize(_if_graph(), backend=["matmul"])  # fused_matmul_bias_act not claimed
    assert "fused_matmul_bias_act" not in op_counts(_body_of(opt, "if_", "then_branch"))


# ------------------------------------------------------------------- unused inputs
def test_unused_body_inputs_are_kept():
    sig = [("a", (3,), "f64"), ("unused", (2,), "f64"), ("c", (3,), "f64")]
    t = sub("t", sig, lambda h, a, u, c: h.exp(a) + h.exp(a))
    e = sub("e", sig, lambda h, a, u, c: c * 1.0)
    g = rlx.Graph("g")
    p, a, u, c = g.input("p", (), "bool"), g.input("a", (3,), "f64"), g.input("u", (2,), "f64"), g.input("c", (3,), "f64")
    g.set_outputs([g.if_([p, a, u, c], then_branch=t, else_branch=e)])
    # even a DCE configured to drop leaves keeps a body's inputs
    opt, _ = optimize(g, [CSE, DCE.with_options(keep_leaves=False)])
    for attr, old in (("then_branch", t), ("else_branch", e)):
        new = _body_of(opt, "if_", attr)
        assert _input_sig(new) == _input_sig(old)
    assert len(_body_of(opt, "if_", "then_branch").nodes) < len(t.nodes)
    assert_same_outputs(g, opt)


def test_pass_that_drops_a_body_input_is_rejected():
    def drop_leaves(h):
        from rlx.opt import dce

        return dce(h, keep_leaves=False)

    sig = [("a", (3,), "f64"), ("unused", (3,), "f64")]
    body = sub("b", sig, lambda h, a, u: h.sin(a))
    g = rlx.Graph("g")
    p, a = g.input("p", (), "bool"), g.input("a", (3,), "f64")
    g.set_outputs([g.if_([p, a, a], then_branch=body, else_branch=body)])
    with pytest.raises(PassError, match="inputs or outputs"):
        run_passes(g, [Pass("drop", drop_leaves)])


def test_shared_body_optimized_once():
    calls = []

    def counting(h):
        calls.append(h.name)
        return PassResult(h)

    sig = [("a", (3,), "f64")]
    body = sub("shared", sig, lambda h, a: h.sin(a))
    g = rlx.Graph("g")
    p, a = g.input("p", (), "bool"), g.input("a", (3,), "f64")
    g.set_outputs([g.if_([p, a], then_branch=body, else_branch=body)])
    run_passes(g, [Pass("count", counting)])
    assert calls == ["g", "shared"]


# ----------------------------------------------------------------- every op case
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}-{c.name}")
def test_control_flow_cases_survive_optimize(case):
    g = rlx.Graph(case.name)
    args = [g.input(k, v.shape, rlx.DType.of(v.dtype)) for k, v in case.feed.items()]
    g.set_outputs([case.build(g, *args)])
    opt, _ = optimize(g)
    verify(opt)
    want, got = rlx.run(g, case.feed), rlx.run(opt, case.feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
