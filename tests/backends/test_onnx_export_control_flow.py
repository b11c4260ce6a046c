"""Control flow exported to ONNX: if_ → If, while_ → Loop, scan → Scan (and selective_scan /
gated_delta_net through their scan decomposition). Each model passes the full checker, runs in
onnxruntime equal to ``rlx.run``, and imports back into rlx equal again."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402
from opcases import sub  # noqa: E402
from ops.test_sequence_models import _mamba_block, _weights  # noqa: E402


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(*shape, seed=0, scale=1.0):
    return (_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _op_types(graph) -> list[str]:
    """Every ONNX op type in ``graph`` and its subgraphs."""
    ops = []
    for node in graph.node:
        ops.append(node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops += _op_types(a.g)
    return ops


def _close(got, want, rtol, atol):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _check(g, feeds_list, params=None, expect=(), rtol=1e-5, atol=1e-6):
    """Export once; for every feed: onnxruntime == rlx.run == the imported model under rlx.run."""
    proto = rlx.onnx.export(g, params)
    onnx.checker.check_model(proto, full_check=True)
    ops = _op_types(proto.graph)
    for op in expect:
        assert op in ops, (op, ops)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    back, bparams = rlx.onnx.import_model(proto)
    for feeds in feeds_list:
        want = rlx.run(g, feeds, params or {})
        _close(sess.run(None, feeds), want, rtol, atol)
        _close(rlx.run(back, feeds, bparams), want, rtol, atol)
    return proto


# ------------------------------------------------------------------------------------ if_
def _if_graph(pred_shape, pred_dtype):
    g = rlx.Graph("if_model")
    p = g.input("p", pred_shape, pred_dtype)
    x = g.input("x", (3,))
    w = g.param("w", (3,))
    sig = [("a", (3,), "f32"), ("b", (3,), "f32")]
    then_b = sub("then", sig, lambda h, a, b: h.sin(a) * b + h.scalar(1.0, rlx.f32))
    else_b = sub("else", sig, lambda h, a, b: a)  # a capture returned unchanged
    g.set_outputs([g.if_([p, x, w], then_branch=then_b, else_branch=else_b)])
    return g


@pytest.mark.parametrize("shape,dtype,values", [
    ((), "bool", [True, False]),
    ((), "i32", [0, -3]),
    ((), "f32", [0.0, 0.5, np.nan]),  # NaN != 0: then
    ((1,), "f32", [0.0, 2.0]),
    ((1, 1), "bool", [False, True]),
], ids=["bool", "i32", "f32_nan", "vec_f32", "mat_bool"])
def test_if_predicates_take_each_branch(shape, dtype, values):
    g = _if_graph(shape, dtype)
    feeds = [{"p": np.full(shape, v, dtype=np.dtype(rlx.DType.of(dtype).numpy)), "x": _f32(3, seed=1)} for v in values]
    _check(g, feeds, {"w": _f32(3, seed=2)}, expect=["If"])


# ---------------------------------------------------------------------------------- while_
_SIG = [("x", (3,), "f32"), ("i", (), "i32")]


def _counter_loop(bound, output=0, limit=3):
    g = rlx.Graph("while_model")
    x = g.input("x", (3,))
    n = g.input("n", (), "i32")
    cond = sub("cond", _SIG, lambda h, x, i: h.lt(i, h.scalar(limit, rlx.i32)))
    body = sub("body", _SIG, lambda h, x, i: [x * 1.5 + h.sin(x), i + h.scalar(1, rlx.i32)])
    carried = g.while_([x, n], cond=cond, body=body, max_iterations=bound, output=None)  # one node, two results
    g.set_outputs([carried[output], carried[1 - output]])
    return g


@pytest.mark.parametrize("bound", [None, 2, 10, 0], ids=["unbounded", "bound_hit", "bound_not_hit", "bound_zero"])
def test_while_counter(bound):
    g = _counter_loop(bound)
    feeds = [{"x": _f32(3, seed=3), "n": np.array(v, np.int32)} for v in (0, 2, 3, 7, -2)]  # 3, 7: zero iterations
    proto = _check(g, feeds, expect=["Loop"] if bound != 0 else ())
    # the two-result while_ node is one ONNX Loop
    assert _op_types(proto.graph).count("Loop") == (1 if bound != 0 else 0)


def test_while_vector_condition_means_all_and_data_dependent_exit():
    """cond is a [3] f32 vector (continue while every element != 0); three carried values, all results."""
    g = rlx.Graph("while_all")
    x = g.input("x", (3,))
    sig = [("x", (3,), "f32"), ("i", (), "i32"), ("s", (), "f32")]
    cond = sub("cond", sig, lambda h, x, i, s: h.cast(h.lt(x, h.scalar(20.0, rlx.f32)), to="f32"))
    body = sub("body", sig, lambda h, x, i, s: [x * 2.0, i + h.scalar(1, rlx.i32), s + h.sum(x)])
    init = [x, g.constant(np.array(0, np.int32)), g.constant(np.array(0.0, np.float32))]
    g.set_outputs(list(g.while_(init, cond=cond, body=body, output=None))[::-1])
    feeds = [{"x": np.array(v, np.float32)} for v in ([1.0, 0.5, 3.0], [30.0, 1.0, 1.0], [0.1, 19.0, 2.0])]
    _check(g, feeds, expect=["Loop", "ReduceSum"])


def test_while_cond_is_not_evaluated_past_the_bound():
    """cond gathers table[i]: rlx never tests it once max_iterations is reached (i == 4 would be
    out of range); the exported Loop tests the next condition only when another iteration may run."""
    g = rlx.Graph("guarded_loop")
    t = g.input("t", (4,))
    sig = [("t", (4,), "f32"), ("i", (), "i64"), ("acc", (), "f32")]
    cond = sub("cond", sig, lambda h, t, i, acc: h.gt(h.gather(t, i), h.scalar(0.0, rlx.f32)))
    body = sub("body", sig, lambda h, t, i, acc: [t, i + h.scalar(1, rlx.i64), acc + h.gather(t, i)])
    init = [t, g.constant(np.array(0, np.int64)), g.constant(np.array(0.0, np.float32))]
    g.set_outputs([g.while_(init, cond=cond, body=body, max_iterations=4, output=2)])
    feeds = [{"t": np.array(v, np.float32)} for v in ([1.0, 2.0, 3.0, 4.0], [1.0, -2.0, 3.0, 4.0], [-1.0, 2.0, 3.0, 4.0])]
    _check(g, feeds, expect=["Loop", "If"])


# ------------------------------------------------------------------------------------ scan
def _rnn_scan(**attrs):
    g = rlx.Graph("scan_model")
    h0 = g.input("h", (2, 3))
    w = g.param("w", (3, 3))
    xs = g.input("xs", (5, 2, 3))
    ys = g.input("ys", (5, 3))
    sig = [("h", (2, 3), "f32"), ("w", (3, 3), "f32"), ("b", (3,), "f32"), ("x", (2, 3), "f32"), ("y", (3,), "f32")]
    body = sub("cell", sig, lambda c, h, w, b, x, y: c.tanh(c.matmul(h, w) + x + b * y))
    bias = g.input("b", (3,))
    g.set_outputs([g.scan(h0, w, bias, xs, ys, body=body, length=5, num_bcast=2, num_xs=2, **attrs)])
    return g


@pytest.mark.parametrize("attrs", [
    {}, {"save_trajectory": True}, {"reverse": True}, {"reverse": True, "save_trajectory": True},
    {"save_trajectory": True, "num_checkpoints": 2}, {"save_trajectory": True, "num_checkpoints": 5},
], ids=["final", "trajectory", "reverse", "reverse_trajectory", "checkpoints", "checkpoints_all"])
def test_scan_bcasts_and_several_xs(attrs):
    g = _rnn_scan(**attrs)
    feeds = [{"h": _f32(2, 3, seed=4), "xs": _f32(5, 2, 3, seed=5), "ys": _f32(5, 3, seed=6), "b": _f32(3, seed=7)}]
    _check(g, feeds, {"w": _f32(3, 3, seed=8, scale=0.5)}, expect=["Scan"])


def test_scan_without_xs():
    g = rlx.Graph("scan_no_xs")
    c = g.input("c", (2,))
    body = sub("step", [("c", (2,), "f32")], lambda h, c: c * 0.5 + h.cos(c))
    g.set_outputs([g.scan(c, body=body, length=4, save_trajectory=True, reverse=True)])
    _check(g, [{"c": _f32(2, seed=9)}], expect=["Scan"])


# ---------------------------------------------------------------------------------- nesting
def test_if_inside_scan_body_and_loop_inside_if():
    """A scan whose step branches on the sign of x_t's sum; the else branch runs a while_."""
    g = rlx.Graph("nested")
    c0 = g.input("c", (3,))
    xs = g.input("xs", (4, 3))
    csig = [("c", (3,), "f32"), ("x", (3,), "f32")]
    wcond = sub("wcond", [("v", (3,), "f32")], lambda h, v: h.lt(h.sum(h.abs(v)), h.scalar(8.0, rlx.f32)))
    wbody = sub("wbody", [("v", (3,), "f32")], lambda h, v: h.abs(v) * 1.5 + h.scalar(0.25, rlx.f32))
    then_b = sub("pos", csig, lambda h, c, x: h.tanh(c + x))
    else_b = sub("neg", csig, lambda h, c, x: h.while_([c - x], cond=wcond, body=wbody, max_iterations=6))

    def step(h, c, x):
        return h.if_([h.gt(h.sum(x), h.scalar(0.0, rlx.f32)), c, x], then_branch=then_b, else_branch=else_b)

    body = sub("step", csig, step)
    g.set_outputs([g.scan(c0, xs, body=body, length=4, num_xs=1, save_trajectory=True)])
    _check(g, [{"c": _f32(3, seed=s), "xs": _f32(4, 3, seed=s + 1)} for s in (10, 20)], expect=["Scan", "If", "Loop"])


# ------------------------------------------------------------------------- sequence models
def test_tiny_mamba_block_via_selective_scan():
    g = rlx.Graph("tiny_mamba")
    weights = {k: v.astype(np.float32) for k, v in _weights().items()}
    u = g.input("u", (2, 6, 4))
    w = {k: g.param(k, v.shape) for k, v in weights.items()}
    g.set_outputs([_mamba_block(g, u, w)])
    assert "selective_scan" in [n.op for n in g.nodes]
    _check(g, [{"u": _f32(2, 6, 4, seed=11)}], weights, expect=["Scan"], rtol=1e-4, atol=1e-5)


def test_gated_delta_net_layer():
    b, s, h, n = 1, 5, 2, 3
    g = rlx.Graph("gdn")
    x = g.input("x", (b, s, 4))
    st = g.input("state", (b, h, n, n))

    def unit(v):
        return v / g.sqrt(g.sum(v * v, axes=[3], keep_dim=True))

    def proj(name, width):
        return g.matmul(x, g.param(name, (4, width)))

    q, k = (unit(g.reshape(proj(nm, h * n), new_shape=[b, s, h, n])) for nm in ("wq", "wk"))
    v = g.reshape(proj("wv", h * n), new_shape=[b, s, h, n])
    decay = -g.log(g.exp(proj("wg", h)) + 1.0)  # -softplus: a log-decay
    beta = g.sigmoid(proj("wb", h))
    y = g.gated_delta_net(q, k, v, decay, beta, st, state_size=n, carry_state=True)
    fin = g.gated_delta_net(q, k, v, decay, beta, state_size=n, output="state")
    g.set_outputs([y, fin])
    params = {nm: _f32(4, wd, seed=i, scale=0.5) for i, (nm, wd) in enumerate([("wq", 6), ("wk", 6), ("wv", 6), ("wg", 2), ("wb", 2)])}
    _check(g, [{"x": _f32(b, s, 4, seed=12), "state": _f32(b, h, n, n, seed=13, scale=0.3)}], params,
           expect=["Scan"], rtol=1e-4, atol=1e-5)


def test_fused_op_inside_a_branch_is_unfused():
    """selective_scan inside an if_ branch: bodies are unfused when exported (a Scan inside an If)."""
    g = rlx.Graph("fused_in_branch")
    p = g.input("p", (), "bool")
    sig = [("x", (1, 4, 2), "f32"), ("d", (1, 4, 2), "f32"), ("a", (2, 3), "f32"), ("b", (1, 4, 3), "f32")]
    ins = [g.input(nm, shape, dt) for nm, shape, dt in sig]
    then_b = sub("ssm", sig, lambda h, x, d, a, b: h.selective_scan(x, d, a, b, b, state_size=3))
    else_b = sub("skip", sig, lambda h, x, d, a, b: x)
    g.set_outputs([g.if_([p, *ins], then_branch=then_b, else_branch=else_b)])
    feeds = {"x": _f32(1, 4, 2, seed=14), "d": np.abs(_f32(1, 4, 2, seed=15, scale=0.3)), "a": -np.abs(_f32(2, 3, seed=16)),
             "b": _f32(1, 4, 3, seed=17)}
    _check(g, [{"p": np.array(v), **feeds} for v in (True, False)], expect=["If", "Scan"])
