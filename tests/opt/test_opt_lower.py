"""Lowering and legalization passes (rlx.opt.lower): control flow, dot_general, rewrite_for_backend."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import randn, sub
from ops.cases_control_flow import CASES
from rlx.ir.errors import RlxError
from rlx.ir.opdef import OpDef
from rlx.ir.shape import TensorType
from rlx.ir.verify import verify
from rlx.opt import DCE, PassError, run_passes
from rlx.opt.legalize import legalize_for_backend, unclaimed
from rlx.opt.lower import (
    LOWER_CONTROL_FLOW,
    LOWER_DOT_GENERAL,
    eager_unsafe_ops,
    lower_dot_general,
    rewrite_for_backend,
    rewrite_pass,
)

CF = {"if_", "while_", "scan"}
#: a small backend: arithmetic, matmul and the ops the lowerings emit
BASIC = frozenset({"matmul", "binary", "activation", "where", "reduce", "compare", "cast", "reshape", "transpose",
                   "narrow", "concat"})


def deep_ops(g: rlx.Graph) -> set[str]:
    """Every op of ``g`` and of its bodies."""
    found: set[str] = set()
    for n in g.nodes:
        found.add(n.op)
        for v in n.attrs.values():
            if isinstance(v, rlx.Graph):
                found |= deep_ops(v)
    return found


def lowered(g: rlx.Graph, *passes):
    """Run ``passes`` (default: lower control flow) with the verifier after every pass."""
    res = run_passes(g, list(passes) or [LOWER_CONTROL_FLOW], check=True)
    verify(res.graph)
    return res


def assert_same(before: rlx.Graph, after: rlx.Graph, feeds, rtol=1e-12, atol=1e-12):
    for feed in feeds:
        want = rlx.run(before, feed)
        got = rlx.run(after, feed)
        assert len(got) == len(want)
        for w, o in zip(want, got):
            assert w.shape == o.shape and w.dtype == o.dtype
            np.testing.assert_allclose(o, w, rtol=rtol, atol=atol)


def assert_outputs_mapped(res, before: rlx.Graph):
    assert [res.id_map[o] for o in before.output_ids] == list(res.graph.output_ids)


def graph_of(build, **inputs):
    """A graph with inputs (name -> (shape, dtype)) and the outputs ``build(g, **values)`` returns."""
    g = rlx.Graph("t")
    vals = {k: g.input(k, s, d) for k, (s, d) in inputs.items()}
    out = build(g, **vals)
    g.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    return g


X = randn(3, seed=1)
Y = randn(3, seed=2)


# ------------------------------------------------------------------------------------- if_
def _branches(names=("a", "b")):
    sig = [(names[0], (3,), "f64"), (names[1], (3,), "f64")]
    return (sub("then", sig, lambda h, a, b: h.sin(a) * b),
            sub("else", sig, lambda h, a, b: a * a - b))


@pytest.mark.parametrize("shape,dtype,values", [
    ((), "bool", [True, False]),
    ((1,), "bool", [[True], [False]]),
    ((), "f32", [0.0, 0.5, -0.0, np.nan, -3.0]),
    ((1, 1), "f64", [[[0.0]], [[1e-30]]]),
    ((), "i32", [0, 7, -1]),
])
def test_if_lowers_to_where_with_bool_predicate(shape, dtype, values):
    t, e = _branches(("q", "p"))  # branch input names differ from the captures: bound by position
    g = graph_of(lambda g, p, x, w: g.if_([p, x, w], then_branch=t, else_branch=e),
                 p=(shape, dtype), x=((3,), "f64"), w=((3,), "f64"))
    res = lowered(g)
    ops = deep_ops(res.graph)
    assert not ops & CF and "where" in ops
    assert "expand" not in ops  # the one-element predicate broadcasts in where
    (where,) = [n for n in res.graph.nodes if n.op == "where"]
    assert res.graph.nodes[where.inputs[0]].type == TensorType((), "bool")
    assert_outputs_mapped(res, g)
    assert res.log[0].stats == {"lowered_if": 1}
    feeds = [{"p": np.array(v, dtype=rlx.DType.of(dtype).numpy), "x": X, "w": Y} for v in values]
    assert_same(g, res.graph, feeds)


def test_if_captures_bound_positionally_and_unused_capture():
    sig = [("u", (3,), "f64"), ("v", (2,), "f64"), ("w", (3,), "f64")]
    t = sub("t", sig, lambda h, u, v, w: u - w)          # ignores v
    e = sub("e", sig, lambda h, u, v, w: w * h.sum(v))
    g = graph_of(lambda g, p, a, b, c: g.if_([p, c, b, a], then_branch=t, else_branch=e),
                 p=((), "bool"), a=((3,), "f64"), b=((2,), "f64"), c=((3,), "f64"))
    res = lowered(g, LOWER_CONTROL_FLOW, DCE)
    assert not deep_ops(res.graph) & CF
    feeds = [{"p": np.array(v), "a": X, "b": np.array([0.5, 2.0]), "c": Y} for v in (True, False)]
    assert_same(g, res.graph, feeds)


def test_if_keeps_name_and_provenance():
    t, e = _branches()
    g = rlx.Graph("named")
    p, x, w = g.input("p", (), "bool"), g.input("x", (3,), "f64"), g.input("w", (3,), "f64")
    g.set_outputs([g.if_([p, x, w], then_branch=t, else_branch=e, name="choice")])
    res = lowered(g)
    out = res.graph.nodes[res.graph.output_ids[0]]
    assert out.op == "where" and out.name == "choice" and "lower_control_flow" in out.prov.passes


# ------------------------------------------------------------------------------ purity
def _gather_branches():
    sig = [("tab", (4,), "f64"), ("i", (), "i32")]
    then_b = sub("lookup", sig, lambda h, tab, i: h.gather(tab, i, axis=0))
    else_b = sub("default", sig, lambda h, tab, i: h.sum(tab))
    return then_b, else_b


def _guarded_gather():
    """if i < 4: tab[i] else sum(tab): safe structured, fails when both branches run."""
    t, e = _gather_branches()

    def build(g, tab, i):
        return g.if_([g.lt(i, g.scalar(4, rlx.i32)), tab, i], then_branch=t, else_branch=e)

    return graph_of(build, tab=((4,), "f64"), i=((), "i32"))


def test_only_pure_keeps_an_if_whose_branch_can_fail():
    g = _guarded_gather()
    bad = {"tab": np.arange(4.0), "i": np.array(9, np.int32)}
    want = rlx.run(g, bad)[0]
    assert want == 6.0
    eager = lowered(g).graph
    assert "if_" not in deep_ops(eager)
    with pytest.raises(RlxError, match="out of range"):
        rlx.run(eager, bad)  # the untaken branch now runs
    assert_same(g, eager, [{"tab": np.arange(4.0), "i": np.array(2, np.int32)}])
    res = lowered(g, LOWER_CONTROL_FLOW.with_options(only_pure=True))
    assert [n.op for n in res.graph.nodes].count("if_") == 1
    assert res.log[0].stats == {"kept_if_impure": 1}
    assert rlx.run(res.graph, bad)[0] == 6.0


def test_eager_unsafe_ops(temporary_op):
    t, e = _gather_branches()
    assert eager_unsafe_ops(t) == ["gather"] and eager_unsafe_ops(e) == []
    h = sub("s", [("l", (5,), "f32")], lambda h, l: h.sample(l, seed=3))
    assert eager_unsafe_ops(h) == ["sample"]
    temporary_op(OpDef(name="opaque_t", family="custom", arity=1, operands=("x",), infer=lambda ins, a: ins[0],
                       kernel=lambda args, a, out: args[0], doc="test"))
    assert eager_unsafe_ops(sub("c", [("x", (2,), "f64")], lambda h, x: h.opaque_t(x))) == ["opaque_t"]
    rlx.custom_op("opaque_c", infer=lambda ins, a: ins[0], kernel=lambda args, a, out: args[0])
    try:
        assert eager_unsafe_ops(sub("c", [("x", (2,), "f64")], lambda h, x: h.opaque_c(x) + 1.0)) == ["opaque_c"]
    finally:
        rlx.unregister_custom_op("opaque_c")
    # nested: an unbounded loop inside a branch may not terminate
    wsig = [("x", (), "f64")]
    loop = sub("loop", wsig, lambda h, x: h.while_([x], cond=sub("c", wsig, lambda b, x: b.gt(x, b.scalar(0.0, rlx.f64))),
                                                   body=sub("b", wsig, lambda b, x: x - 1.0)))
    assert eager_unsafe_ops(loop) == ["while_ (unbounded)"]


# -------------------------------------------------------------------------------- while_
def _counter_loop(bound, limit=3):
    sig = [("x", (3,), "f64"), ("i", (), "i32")]
    cond = sub("cond", sig, lambda h, x, i: h.lt(i, h.scalar(limit, rlx.i32)))
    body = sub("body", sig, lambda h, x, i: [x * 1.5 + h.sin(x), i + h.scalar(1, rlx.i32)])
    return cond, body


@pytest.mark.parametrize("bound", [0, 1, 4, 6])
def test_while_bounded_unroll(bound):
    cond, body = _counter_loop(bound)

    def build(g, x, n):
        kw = {"cond": cond, "body": body, "max_iterations": bound}
        return list(g.while_([x, n], output=None, **kw))  # one node, both carried values

    g = graph_of(build, x=((3,), "f64"), n=((), "i32"))
    res = lowered(g)
    assert not deep_ops(res.graph) & CF
    stats = res.log[0].stats
    assert stats["lowered_while"] == 1 and "shared_while" not in stats  # one unroll for both results
    assert_outputs_mapped(res, g)
    # start counters: loop ends early (3 - n < bound), exactly at the bound, past it, or never starts
    feeds = [{"x": X, "n": np.array(n, np.int32)} for n in (-4, 0, 1, 2, 3, 10)]
    assert_same(g, res.graph, feeds)
    if bound:  # the bound bites for n = -4: fewer iterations than the unbounded loop would run
        a = rlx.run(res.graph, feeds[0])[1]
        assert a == -4 + bound


def test_while_vector_condition_and_float_cond():
    sig = [("x", (2,), "f64")]
    cond = sub("c", sig, lambda h, x: h.lt(x, h.scalar(5.0, rlx.f64)))  # continue while every element < 5
    body = sub("b", sig, lambda h, x: x + h.abs(x) + 0.25)
    fcond = sub("fc", sig, lambda h, x: h.sum(5.0 - x))  # numeric: continue while != 0
    g = graph_of(lambda g, x: [g.while_([x], cond=cond, body=body, max_iterations=8),
                               g.while_([x], cond=fcond, body=body, max_iterations=3)], x=((2,), "f64"))
    res = lowered(g)
    assert not deep_ops(res.graph) & CF
    assert_same(g, res.graph, [{"x": np.array(v)} for v in ([0.1, 0.2], [4.9, -3.0], [6.0, 0.0], [2.5, 2.5])])


def test_unbounded_while_stays_and_its_body_is_lowered():
    sig = [("x", (3,), "f64")]
    t = sub("t", sig, lambda h, x: x * 2.0)
    e = sub("e", sig, lambda h, x: x + 1.0)
    cond = sub("c", sig, lambda h, x: h.lt(h.sum(x), h.scalar(40.0, rlx.f64)))
    body = sub("b", sig, lambda h, x: h.if_([h.gt(h.sum(x), h.scalar(3.0, rlx.f64)), x], then_branch=t, else_branch=e))
    g = graph_of(lambda g, x: g.while_([x], cond=cond, body=body), x=((3,), "f64"))
    res = lowered(g)
    (node,) = [n for n in res.graph.nodes if n.op == "while_"]
    assert "if_" not in deep_ops(node.attrs["body"]) and "where" in deep_ops(node.attrs["body"])
    assert res.log[0].stats == {"kept_while_unbounded": 1, "lowered_if": 1}
    assert_same(g, res.graph, [{"x": np.abs(X) + 0.5}, {"x": np.array([0.0, 0.1, 0.2])}])


def test_max_unroll_keeps_long_loops():
    cond, body = _counter_loop(50)
    g = graph_of(lambda g, x, n: g.while_([x, n], cond=cond, body=body, max_iterations=50), x=((3,), "f64"), n=((), "i32"))
    res = lowered(g, LOWER_CONTROL_FLOW.with_options(max_unroll=10))
    assert "while_" in deep_ops(res.graph) and res.log[0].stats == {"kept_while_too_long": 1}


# ---------------------------------------------------------------------------------- scan
@pytest.mark.parametrize("case", [c for c in CASES if c.op in ("scan", "if_") or c.name == "bounded"], ids=lambda c: c.id)
def test_control_flow_cases_match_their_oracle(case):
    g, _ = case.graph()
    res = lowered(g, LOWER_CONTROL_FLOW, DCE)
    assert not deep_ops(res.graph) & CF
    inputs, params = case.split_feed()
    got = rlx.run(res.graph, inputs, params)
    for w, o in zip(case.expected(), got):
        np.testing.assert_allclose(o, w, rtol=case.rtol, atol=case.atol)
    assert_same(g, res.graph, [inputs], rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("kw", [
    {}, {"save_trajectory": True}, {"reverse": True}, {"save_trajectory": True, "reverse": True},
    {"save_trajectory": True, "num_checkpoints": 2}, {"save_trajectory": True, "num_checkpoints": 3},
    {"save_trajectory": True, "num_checkpoints": 5},
])
def test_scan_unrolled(kw):
    body = sub("cell", [("c", (2,), "f64"), ("s", (), "f64"), ("x", (2,), "f64")], lambda h, c, s, x: h.tanh(c * s + x))
    g = graph_of(lambda g, c, s, xs: g.scan(c, s, xs, body=body, length=5, num_bcast=1, num_xs=1, **kw),
                 c=((2,), "f64"), s=((), "f64"), xs=((5, 2), "f64"))
    res = lowered(g)
    assert not deep_ops(res.graph) & CF and res.log[0].stats == {"lowered_scan": 1}
    assert_outputs_mapped(res, g)
    feeds = [{"c": randn(2, seed=k), "s": np.array(0.5 * k - 1.0), "xs": randn(5, 2, seed=10 + k)} for k in range(3)]
    assert_same(g, res.graph, feeds)


# ------------------------------------------------------------------------------- nesting
def test_nested_control_flow():
    csig = [("c", (2,), "f64"), ("x", (2,), "f64")]
    t = sub("t", csig, lambda h, c, x: c + x)
    e = sub("e", csig, lambda h, c, x: c * x)
    # scan whose body holds an if_ on the step input
    step = sub("step", csig, lambda h, c, x: h.if_([h.gt(h.sum(x), h.scalar(0.0, rlx.f64)), c, x],
                                                   then_branch=t, else_branch=e))
    wsig = [("c", (2,), "f64"), ("i", (), "i32")]
    loop_c = sub("lc", wsig, lambda h, c, i: h.lt(i, h.scalar(2, rlx.i32)))
    loop_b = sub("lb", wsig, lambda h, c, i: [h.tanh(c) + 0.5, i + h.scalar(1, rlx.i32)])
    # an if_ whose then-branch holds a bounded while_ and whose else-branch holds a scan
    then_b = sub("tb", csig, lambda h, c, x: h.while_([c, h.constant(np.array(0, np.int32))], cond=loop_c, body=loop_b,
                                                      max_iterations=4))
    xs_sig = [("c", (2,), "f64"), ("x", (2,), "f64")]
    else_b = sub("eb", xs_sig, lambda h, c, x: h.scan(c, h.reshape(h.concat([x, x, x], axis=0), new_shape=[3, 2]),
                                                     body=step, length=3, num_xs=1))

    def build(g, p, c, x, xs):
        s = g.scan(c, xs, body=step, length=4, num_xs=1, save_trajectory=True)
        return [s, g.if_([p, c, x], then_branch=then_b, else_branch=else_b)]

    g = graph_of(build, p=((), "bool"), c=((2,), "f64"), x=((2,), "f64"), xs=((4, 2), "f64"))
    res = lowered(g, LOWER_CONTROL_FLOW, DCE)
    assert not deep_ops(res.graph) & CF
    feeds = [{"p": np.array(p), "c": randn(2, seed=k), "x": randn(2, seed=20 + k), "xs": randn(4, 2, seed=30 + k)}
             for k, p in enumerate([True, False, True, False])]
    assert_same(g, res.graph, feeds)


def test_only_pure_propagates_through_nesting():
    inner_t, inner_e = _gather_branches()
    sig = [("tab", (4,), "f64"), ("i", (), "i32")]
    # outer then-branch: a structured if_ guarding the gather; outer else: harmless
    outer_t = sub("ot", sig, lambda h, tab, i: h.if_([h.lt(i, h.scalar(4, rlx.i32)), tab, i], then_branch=inner_t,
                                                     else_branch=inner_e))
    outer_e = sub("oe", sig, lambda h, tab, i: h.max(tab))
    g = graph_of(lambda g, p, tab, i: g.if_([p, tab, i], then_branch=outer_t, else_branch=outer_e),
                 p=((), "bool"), tab=((4,), "f64"), i=((), "i32"))
    res = lowered(g, LOWER_CONTROL_FLOW.with_options(only_pure=True))
    assert [n.op for n in res.graph.nodes].count("if_") == 1  # the outer if_ stays: its branch may gather
    assert res.log[0].stats == {"kept_if_impure": 2}
    bad = {"p": np.array(False), "tab": np.arange(4.0), "i": np.array(7, np.int32)}
    assert_same(g, res.graph, [bad, {**bad, "p": np.array(True)}, {**bad, "i": np.array(1, np.int32)}])


# --------------------------------------------------------------------------- dot_general
@pytest.mark.parametrize("shapes,attrs", [
    (((3, 4), (4, 5)), {"lhs_contracting": [1], "rhs_contracting": [0]}),
    (((4, 3), (5, 4)), {"lhs_contracting": [0], "rhs_contracting": [1]}),
    (((2, 3, 4), (2, 4, 5)), {"lhs_contracting": [2], "rhs_contracting": [1], "lhs_batch": [0], "rhs_batch": [0]}),
    (((3, 2, 4, 6), (4, 6, 2, 5)), {"lhs_contracting": [2, 3], "rhs_contracting": [0, 1], "lhs_batch": [1], "rhs_batch": [2]}),
    (((4,), (4,)), {"lhs_contracting": [0], "rhs_contracting": [0]}),
    (((3,), (5,)), {"lhs_contracting": [], "rhs_contracting": []}),
])
def test_lower_dot_general(shapes, attrs):
    g = graph_of(lambda g, a, b: g.dot_general(a, b, **attrs), a=(shapes[0], "f64"), b=(shapes[1], "f64"))
    res = lowered(g, LOWER_DOT_GENERAL)
    assert "dot_general" not in deep_ops(res.graph) and res.log[0].stats == {"lowered_dot_general": 1}
    assert_outputs_mapped(res, g)
    feeds = [{"a": randn(*shapes[0], seed=k), "b": randn(*shapes[1], seed=k + 5)} for k in range(2)]
    assert_same(g, res.graph, feeds, rtol=1e-12, atol=1e-12)


def test_lower_dot_general_in_a_body():
    body = sub("cell", [("c", (2, 3), "f64"), ("w", (3, 3), "f64")],
               lambda h, c, w: h.tanh(h.dot_general(c, w, lhs_contracting=[1], rhs_contracting=[1])))
    g = graph_of(lambda g, c, w: g.scan(c, w, body=body, length=3, num_bcast=1), c=((2, 3), "f64"), w=((3, 3), "f64"))
    res = lower_dot_general(g)
    assert "dot_general" not in deep_ops(res.graph) and "scan" in deep_ops(res.graph)
    verify(res.graph)
    assert_same(g, res.graph, [{"c": randn(2, 3, seed=1), "w": randn(3, 3, seed=2)}])


# ------------------------------------------------------------------- rewrite_for_backend
def _mixed_graph():
    """A fused op, a dot_general, an if_, a bounded while_ and a scan."""
    t, e = (sub(n, [("a", (2, 4), "f64")], f) for n, f in (("t", lambda h, a: h.relu(a)), ("e", lambda h, a: a * -0.5)))
    wsig = [("h", (2, 4), "f64"), ("i", (), "i32")]
    cond = sub("c", wsig, lambda h, x, i: h.lt(i, h.scalar(2, rlx.i32)))
    body = sub("b", wsig, lambda h, x, i: [h.tanh(x), i + h.scalar(1, rlx.i32)])
    cell = sub("cell", [("h", (2, 4), "f64"), ("x", (2, 4), "f64")], lambda h, c, x: c * 0.5 + x)

    def build(g, x, w, b, p, xs):
        y = g.apply("fused_matmul_bias_act", x, w, b, activation="gelu")
        z = g.dot_general(y, w, lhs_contracting=[1], rhs_contracting=[1])  # [2,4] x [4,4]^T
        z = g.if_([p, z], then_branch=t, else_branch=e)
        z = g.while_([z, g.constant(np.array(0, np.int32))], cond=cond, body=body, max_iterations=3)
        return g.scan(z, xs, body=cell, length=3, num_xs=1)

    g = graph_of(build, x=((2, 4), "f64"), w=((4, 4), "f64"), b=((4,), "f64"), p=((), "bool"), xs=((3, 2, 4), "f64"))
    feeds = [{"x": randn(2, 4, seed=k), "w": randn(4, 4, seed=k + 1), "b": randn(4, seed=k + 2), "p": np.array(k % 2 == 0),
              "xs": randn(3, 2, 4, seed=k + 3)} for k in range(3)]
    return g, feeds


def test_rewrite_for_backend_reaches_a_basic_claim_set():
    g, feeds = _mixed_graph()
    claims = BASIC | {"constant"}
    assert {op for _, op in legalize_for_backend(g, claims)} == {"fused_matmul_bias_act", "dot_general", "if_", "while_", "scan"}
    res = run_passes(g, [rewrite_pass(claims)], check=True)
    out = res.graph
    assert legalize_for_backend(out, claims) == [] and deep_ops(out) <= claims | {"input"}
    stats = res.log[0].stats
    assert stats["unfused"] == 1 and stats["lowered_dot_general"] == 1 and stats["unsupported"] == 0
    assert stats["lowered_if"] == 1 and stats["lowered_while"] == 1 and stats["lowered_scan"] == 1
    assert_outputs_mapped(res, g)
    assert_same(g, out, feeds, rtol=1e-10, atol=1e-12)


def test_rewrite_keeps_claimed_ops_and_rewrites_inside_their_bodies():
    g, feeds = _mixed_graph()
    claims = BASIC | {"scan", "dot_general"}
    res = rewrite_for_backend(g, claims)
    ops = {n.op for n in res.graph.nodes}
    assert "scan" in ops and "dot_general" in ops and not ops & {"if_", "while_", "fused_matmul_bias_act"}
    assert legalize_for_backend(res.graph, claims) == []
    assert_same(g, res.graph, feeds, rtol=1e-10, atol=1e-12)
    # a claimed scan whose body holds an unclaimed dot_general: the body is rewritten, the scan stays
    body = sub("cell", [("c", (2, 3), "f64"), ("w", (3, 3), "f64")],
               lambda h, c, w: h.dot_general(c, w, lhs_contracting=[1], rhs_contracting=[0]))
    g2 = graph_of(lambda g, c, w: g.scan(c, w, body=body, length=2, num_bcast=1), c=((2, 3), "f64"), w=((3, 3), "f64"))
    res2 = run_passes(g2, [rewrite_pass(BASIC | {"scan"})], check=True)
    assert [n.op for n in res2.graph.nodes].count("scan") == 1 and "dot_general" not in deep_ops(res2.graph)
    assert_same(g2, res2.graph, [{"c": randn(2, 3, seed=3), "w": randn(3, 3, seed=4)}])


def test_rewrite_strict_names_what_is_left():
    sig = [("x", (3,), "f64")]
    loop = {"cond": sub("c", sig, lambda h, x: h.lt(h.sum(x), h.scalar(9.0, rlx.f64))),
            "body": sub("b", sig, lambda h, x: x * 2.0)}

    def build(g, x, i):
        y = g.gather(x, i, axis=0) + g.gather(x * 2.0, i, axis=0)
        return g.while_([x + g.sum(y)], **loop)

    g = graph_of(build, x=((3,), "f64"), i=((2,), "i32"))
    with pytest.raises(PassError) as err:
        rewrite_for_backend(g, BASIC, strict=True)
    msg = str(err.value)
    assert "gather x2" in msg and "while_ x1" in msg and "max_iterations" in msg
    res = rewrite_for_backend(g, BASIC)  # not strict: reported
    left = legalize_for_backend(res.graph, BASIC)
    assert sorted(op for _, op in left) == ["gather", "gather", "while_"] and res.stats["unsupported"] == 3
    assert left == unclaimed(res.graph, BASIC)
    with pytest.raises(PassError, match=r"rewrite_for_backend.*gather x2"):
        run_passes(g, [rewrite_pass(BASIC)], check=True)


def test_rewrite_reports_ops_inside_claimed_bodies_and_impure_if():
    t, e = _gather_branches()
    g = graph_of(lambda g, p, tab, i: g.if_([p, tab, i], then_branch=t, else_branch=e),
                 p=((), "bool"), tab=((4,), "f64"), i=((), "i32"))
    left = legalize_for_backend(g, BASIC | {"if_"})
    assert left == [(g.output_ids[0], "gather")]  # inside the if_: reported at the if_ node
    with pytest.raises(PassError, match=r"if_ x1.*only_pure"):
        rewrite_for_backend(g, BASIC | {"gather"}, strict=True, only_pure=True)
    res = rewrite_for_backend(g, BASIC | {"gather"}, strict=True)
    assert not deep_ops(res.graph) & CF


def test_rewrite_with_empty_claims_and_legal_graphs_is_a_no_op():
    g, _ = _mixed_graph()
    assert rewrite_for_backend(g, ()).graph is g and legalize_for_backend(g, ()) == []
    h = graph_of(lambda g, a, b: g.matmul(a, b) + 1.0, a=((2, 2), "f64"), b=((2, 2), "f64"))
    res = rewrite_for_backend(h, BASIC, strict=True)
    assert res.graph is h and res.id_map is None


def test_rewrite_decompose_hook_and_custom_fn(temporary_op):
    def decompose(g, ops, attrs):
        return ops[0] * 2.0 + 1.0

    temporary_op(OpDef(name="twice_plus_one", family="test", arity=1, operands=("x",), infer=lambda ins, a: ins[0],
                       kernel=lambda args, a, out: args[0] * 2.0 + 1.0, decompose=decompose, doc="test"))
    body = sub("f", [("a", (3,), "f64"), ("b", (3,), "f64")], lambda h, a, b: h.exp(a) - b)
    g = graph_of(lambda g, x, y: g.custom_fn([g.twice_plus_one(x), y], body=body), x=((3,), "f64"), y=((3,), "f64"))
    res = run_passes(g, [rewrite_pass(BASIC)], check=True)
    assert deep_ops(res.graph) <= BASIC | {"input", "constant"}
    assert res.log[0].stats["decomposed"] == 1 and "unfused" not in res.log[0].stats
    assert res.log[0].stats["inlined_custom_fn"] == 1
    assert_same(g, res.graph, [{"x": X, "y": Y}])
