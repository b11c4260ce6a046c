"""Control flow (if_, while_, scan): JSON round trips, the arena runtime, branches not taken,
recursive verification, gradients against finite differences, and a scan RNN that trains.

The per-op cases (verify, oracle, text round trip, autodiff and vmap checks) live in
``cases_control_flow.py`` and run through the generic runners."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from finite_diff import fd_gradient
from ops.cases_control_flow import CASES, sub
from rlx.ir.shape import Shape, TensorType

CF = [c for c in CASES if c.op in ("if_", "while_", "scan")]


@pytest.mark.parametrize("case", CF, ids=lambda c: c.id)
def test_json_round_trip(case):
    g, _ = case.graph()
    back = rlx.from_json(rlx.to_json(g))
    assert back == g
    assert str(back) == str(g)
    inputs, params = case.split_feed()
    for got, want in zip(rlx.run(back, inputs, params), rlx.run(g, inputs, params)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CF, ids=lambda c: c.id)
def test_arena_runtime_matches_reference(case):
    g, _ = case.graph()
    inputs, params = case.split_feed()
    exe = rlx.compile(g, backend="numpy")
    for _ in range(2):  # the executor is reusable
        got = exe.run(inputs, params)
        for a, w in zip(got, case.expected()):
            np.testing.assert_allclose(a, w, rtol=max(case.rtol, 1e-6), atol=case.atol)
    # bodies that ran were planned on their own, and each plan passes the independent checker
    assert exe.body_plans, "the arena executor should have run at least one body"
    for body_lir in exe.body_plans:
        body_lir.check()


def _guarded_lookup():
    """out = table[i] if i < n else 0, with the out-of-range gather only in the untaken branch."""
    g = rlx.Graph("guarded")
    table = g.input("table", (4,), "f64")
    i = g.input("i", (), "i64")
    sig = [("t", (4,), "f64"), ("i", (), "i64")]
    then_b = sub("lookup", sig, lambda h, t, i: h.gather(t, i))
    else_b = sub("fallback", sig, lambda h, t, i: h.constant(np.array(0.0)))
    pred = g.lt(i, g.scalar(4, rlx.i64))
    g.set_outputs([g.if_([pred, table, i], then_branch=then_b, else_branch=else_b)])
    return g


def test_untaken_branch_that_would_fail_is_not_run():
    g = _guarded_lookup()
    table = np.array([1.0, 2.0, 3.0, 4.0])
    exe = rlx.compile(g, backend="numpy")
    for run in (lambda f: rlx.run(g, f), exe.run):
        assert run({"table": table, "i": np.array(2)})[0] == 3.0
        assert run({"table": table, "i": np.array(9)})[0] == 0.0  # the gather at 9 would raise
    # the failing branch really fails when taken: proof that only the taken branch runs
    bad = rlx.Graph("bad")
    t = bad.input("table", (4,), "f64")
    i = bad.input("i", (), "i64")
    bad.set_outputs([bad.gather(t, i)])
    with pytest.raises(rlx.RlxError, match=r"(?i)range|bound"):
        rlx.run(bad, {"table": table, "i": np.array(9)})


def test_untaken_division_branch_not_run():
    """An integer branch whose kernel errors (division by zero promoted to an error by a guard)."""
    g = rlx.Graph("div")
    x = g.input("x", (), "f64")
    d = g.input("d", (), "f64")
    sig = [("x", (), "f64"), ("d", (), "f64")]
    then_b = sub("div", sig, lambda h, x, d: x / d)
    else_b = sub("inf", sig, lambda h, x, d: h.constant(np.array(np.inf)))
    g.set_outputs([g.if_([g.ne(d, g.scalar(0.0, rlx.f64)), x, d], then_branch=then_b, else_branch=else_b)])
    with np.errstate(divide="raise", invalid="raise"):
        assert rlx.run(g, {"x": np.array(1.0), "d": np.array(0.0)})[0] == np.inf
        assert rlx.run(g, {"x": np.array(1.0), "d": np.array(4.0)})[0] == 0.25


def test_verify_recurses_into_bodies():
    body = rlx.Graph("body")
    h = body.input("h", (2,), "f64")
    y = body.append("activation", [h], {"kind": "tanh"}, type=TensorType(Shape([3]), rlx.f64), check=False)  # wrong type
    z = body.append("reshape", [y], {"new_shape": [2]}, type=TensorType(Shape([2]), rlx.f64), check=False)
    body.set_outputs([z])
    g = rlx.Graph("outer")
    c = g.input("c", (2,), "f64")
    out = g.append("scan", [c], {"body": body, "length": 2}, type=TensorType(Shape([2]), rlx.f64), check=False)
    g.set_outputs([out])
    with pytest.raises(rlx.VerifyError, match=r"\(scan\)\.body: node %1 \(activation\): stored type"):
        rlx.verify(g)


def test_params_in_bodies_are_rejected():
    body = rlx.Graph("body")
    h = body.input("h", (2,), "f64")
    w = body.param("w", (2,), "f64")
    body.set_outputs([h * w])
    g = rlx.Graph("outer")
    with pytest.raises(rlx.ShapeError, match="params"):
        g.scan(g.input("c", (2,), "f64"), body=body, length=2)


def test_nested_control_flow_round_trips_and_runs():
    inner_t = sub("pos", [("h", (3,), "f64")], lambda b, h: h * 0.5)
    inner_e = sub("neg", [("h", (3,), "f64")], lambda b, h: h + 1.0)
    body = sub("step", [("h", (3,), "f64"), ("x", (3,), "f64")],
               lambda b, h, x: b.if_([b.gt(b.sum(x), b.scalar(0.0, rlx.f64)), h + x], then_branch=inner_t, else_branch=inner_e))
    g = rlx.Graph("nested")
    h0 = g.input("h", (3,), "f64")
    xs = g.input("xs", (5, 3), "f64")
    g.set_outputs([g.scan(h0, xs, body=body, length=5, num_xs=1, save_trajectory=True)])
    rlx.verify(g)
    assert rlx.parse(str(g)) == g
    assert rlx.from_json(rlx.to_json(g)) == g
    rng = np.random.default_rng(0)
    H, XS = rng.standard_normal(3), rng.standard_normal((5, 3))
    want, h = [], H
    for t in range(5):
        s = h + XS[t]
        h = s * 0.5 if XS[t].sum() > 0 else s + 1.0
        want.append(h)
    np.testing.assert_allclose(rlx.run(g, {"h": H, "xs": XS})[0], np.stack(want), rtol=1e-12)
    np.testing.assert_allclose(rlx.compile(g).run({"h": H, "xs": XS})[0], np.stack(want), rtol=1e-12)
    # gradients through the nested if_ inside the scan body
    loss = rlx.Graph("nested_loss")
    h0 = loss.input("h", (3,), "f64")
    xs = loss.input("xs", (5, 3), "f64")
    loss.set_outputs([loss.sum(loss.scan(h0, xs, body=body, length=5, num_xs=1, save_trajectory=True) ** 2.0)])
    _check_grads(loss, {"h": H, "xs": XS}, ["h", "xs"])


def _check_grads(g, feed, names):
    bwd = rlx.grad(g, names)
    rlx.verify(bwd)
    assert rlx.from_json(rlx.to_json(bwd)) == bwd
    got = rlx.run(bwd, {**feed, "d_output": np.array(1.0)})
    for name, gr in zip(names, got):
        np.testing.assert_allclose(gr, fd_gradient(g, feed, name), rtol=1e-5, atol=1e-7, err_msg=name)
    return got


def test_if_gradient_is_the_taken_branch_gradient():
    g = rlx.Graph("ifgrad")
    p = g.input("p", (), "bool")
    x = g.input("x", (3,), "f64")
    sig = [("a", (3,), "f64")]
    y = g.if_([p, x], then_branch=sub("t", sig, lambda h, a: h.sin(a)), else_branch=sub("e", sig, lambda h, a: a * a))
    g.set_outputs([g.sum(y)])
    x0 = np.array([0.3, -1.2, 2.0])
    bwd = rlx.grad(g, ["x"])
    assert any(n.op == "if_" for n in bwd.nodes), "the gradient stays structured"
    np.testing.assert_allclose(rlx.run(bwd, {"p": True, "x": x0, "d_output": np.array(1.0)})[0], np.cos(x0))
    np.testing.assert_allclose(rlx.run(bwd, {"p": False, "x": x0, "d_output": np.array(1.0)})[0], 2 * x0)


def test_scan_gradients_all_operands():
    rng = np.random.default_rng(1)
    for save in (False, True):
        for reverse in (False, True):
            g = rlx.Graph("scan_grad")
            h0 = g.input("h", (2, 3), "f64")
            w = g.input("w", (3, 3), "f64")
            xs = g.input("xs", (4, 2, 3), "f64")
            body = sub("cell", [("h", (2, 3), "f64"), ("w", (3, 3), "f64"), ("x", (2, 3), "f64")],
                       lambda b, h, w, x: b.tanh(b.matmul(h, w) + x * x))
            out = g.scan(h0, w, xs, body=body, length=4, num_bcast=1, num_xs=1, save_trajectory=save, reverse=reverse)
            g.set_outputs([g.sum(out * g.constant(rng.standard_normal(tuple(out.shape))))])
            feed = {"h": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 3)) * 0.5, "xs": rng.standard_normal((4, 2, 3))}
            _check_grads(g, feed, ["h", "w", "xs"])
            bwd = rlx.grad(g, ["h", "w", "xs"])
            assert sum(n.op == "scan" for n in bwd.nodes) >= 2, "the VJP is a reverse scan, not an unroll"


def test_while_gradient_with_static_bound_and_error_without():
    def build(bound):
        g = rlx.Graph("wgrad")
        x = g.input("x", (2,), "f64")
        sig = [("x", (2,), "f64")]
        cond = sub("c", sig, lambda h, x: h.lt(h.sum(h.abs(x)), h.scalar(10.0, rlx.f64)))
        body = sub("b", sig, lambda h, x: x * 1.7 + h.sin(x))
        g.set_outputs([g.sum(g.while_([x], cond=cond, body=body, max_iterations=bound) ** 2.0)])
        return g

    x0 = {"x": np.array([0.4, -0.9])}
    _check_grads(build(8), x0, ["x"])
    _check_grads(build(2), x0, ["x"])  # the bound stops the loop before cond does
    with pytest.raises(rlx.AutodiffError, match="max_iterations"):
        rlx.grad(build(None), ["x"])


def test_checkpointed_scan_gradient_matches_finite_differences():
    """Only the checkpoint rows (steps 1, 3, 4 of 5 with K = 3) carry a cotangent; the backward recomputes the rest."""
    g = rlx.Graph("ck")
    h0 = g.input("h", (2,), "f64")
    w = g.input("w", (2,), "f64")
    body = sub("b", [("h", (2,), "f64"), ("w", (2,), "f64")], lambda b, h, w: b.sin(h * w) + 0.1 * h)
    traj = g.scan(h0, w, body=body, length=5, save_trajectory=True, num_bcast=1, num_checkpoints=3)
    g.set_outputs([g.sum(traj * g.constant(np.arange(6.0).reshape(3, 2)))])
    h, wv = np.array([0.5, 1.0]), np.array([0.7, -1.2])
    rows = [h]
    for _ in range(5):
        rows.append(np.sin(rows[-1] * wv) + 0.1 * rows[-1])
    np.testing.assert_allclose(rlx.run(g, {"h": h, "w": wv})[0], sum(rows[1 + t] @ np.arange(6.0).reshape(3, 2)[j]
                                                                      for j, t in enumerate([1, 3, 4])))
    _check_grads(g, {"h": h, "w": wv}, ["h", "w"])


def test_while_shared_body_output_index():
    sig = [("x", (), "f64"), ("i", (), "i32")]
    cond = sub("c", sig, lambda h, x, i: h.lt(x, h.scalar(100.0, rlx.f64)))
    body = sub("b", sig, lambda h, x, i: [x * 3.0, i + h.scalar(1, rlx.i32)])
    g = rlx.Graph("two")
    x = g.input("x", (), "f64")
    zero = g.constant(np.array(0, np.int32))
    g.set_outputs([g.while_([x, zero], cond=cond, body=body, output=0), g.while_([x, zero], cond=cond, body=body, output=1)])
    val, count = rlx.run(g, {"x": np.array(2.0)})
    assert val == 162.0 and count == 4


def test_scan_rnn_trains():
    """A tanh RNN over a sequence (scan), trained with rlx.grad_with_loss + SGD: the loss falls."""
    rng = np.random.default_rng(0)
    T, B, D, H = 6, 8, 3, 5
    g = rlx.Graph("rnn")
    xs = g.input("xs", (T, B, D), "f64")
    y = g.input("y", (B, 1), "f64")
    wx = g.param("wx", (D, H), "f64")
    wh = g.param("wh", (H, H), "f64")
    wo = g.param("wo", (H, 1), "f64")
    cell = sub("cell", [("h", (B, H), "f64"), ("wh", (H, H), "f64"), ("wx", (D, H), "f64"), ("x", (B, D), "f64")],
               lambda b, h, wh, wx, x: b.tanh(b.matmul(h, wh) + b.matmul(x, wx)))
    h0 = g.constant(np.zeros((B, H)))
    hT = g.scan(h0, wh, wx, xs, body=cell, length=T, num_bcast=2, num_xs=1)
    err = g.matmul(hT, wo) - y
    g.set_outputs([g.mean(err * err)])
    bwd = rlx.grad_with_loss(g, ["wx", "wh", "wo"])
    exe = rlx.compile(bwd, backend="numpy")
    data = rng.standard_normal((T, B, D))
    target = np.tanh(data.sum(axis=(0, 2)))[:, None]
    params = {"wx": rng.standard_normal((D, H)) * 0.3, "wh": rng.standard_normal((H, H)) * 0.3, "wo": rng.standard_normal((H, 1)) * 0.3}
    losses = []
    for _ in range(60):
        loss, *grads = exe.run({"xs": data, "y": target, "d_output": np.array(1.0)}, params)
        losses.append(float(loss))
        params = {k: v - 0.2 * gr for (k, v), gr in zip(params.items(), grads)}
    assert losses[-1] < 0.5 * losses[0], losses
    assert all(np.isfinite(losses))
