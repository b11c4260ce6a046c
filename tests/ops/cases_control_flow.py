"""Cases for the control-flow ops (if_, while_, scan); oracles are Python loops / ifs written out in NumPy."""

from __future__ import annotations

import numpy as np

import rlx
from opcases import OpCase, ShapeErrorCase, randn, sub

X3 = randn(3, seed=11)
W3 = randn(3, seed=12)


# ---------------------------------------------------------------------------------- if_
def _branches(shape=(3,)):
    sig = [("a", shape, "f64"), ("b", shape, "f64")]
    then_b = sub("then", sig, lambda h, a, b: h.sin(a) * b)
    else_b = sub("else", sig, lambda h, a, b: a * a - b)
    return then_b, else_b


def _build_if(g, p, x, w):
    t, e = _branches(x.shape)  # bodies on the operands' dims (symbolic ones too: tests/ops/test_symbolic_walk.py)
    return g.if_([p, x, w], then_branch=t, else_branch=e)


def _oracle_if(p, x, w):
    if p != 0:
        return np.sin(x) * w
    return x * x - w


# -------------------------------------------------------------------------------- while_
def _build_while(g, x, n):
    sig = [("x", x.shape, "f64"), ("i", (), "i32")]
    cond = sub("cond", sig, lambda h, x, i: h.lt(i, h.scalar(3, rlx.i32)))
    body = sub("body", sig, lambda h, x, i: [x * 1.5 + h.sin(x), i + h.scalar(1, rlx.i32)])
    return g.while_([x, n], cond=cond, body=body, max_iterations=10)


def _oracle_while(x, n):
    i = int(n)
    for _ in range(10):
        if not i < 3:
            break
        x, i = x * 1.5 + np.sin(x), i + 1
    return x


def _build_while_count(g, x):
    sig = [("x", x.shape, "f64"), ("i", (), "i32")]
    cond = sub("cond", sig, lambda h, x, i: h.lt(h.sum(x), h.scalar(40.0, rlx.f64)))
    body = sub("body", sig, lambda h, x, i: [x * 2.0, i + h.scalar(1, rlx.i32)])
    return g.while_([x, g.constant(np.array(0, np.int32))], cond=cond, body=body, output=1)


def _oracle_while_count(x):
    i = 0
    while x.sum() < 40.0:
        x, i = x * 2.0, i + 1
    return np.array(i, np.int32)


# ---------------------------------------------------------------------------------- scan
H = randn(2, 3, seed=13)
W = randn(3, 3, seed=14) * 0.5
XS = randn(4, 2, 3, seed=15)


def _rnn_body(h=(2, 3), w=(3, 3)):
    sig = [("h", h, "f64"), ("w", w, "f64"), ("x", h, "f64")]
    return sub("cell", sig, lambda g, h, w, x: g.tanh(g.matmul(h, w) + x))


def _build_scan(**attrs):
    def build(g, h, w, xs):
        return g.scan(h, w, xs, body=_rnn_body(h.shape, w.shape), length=4, num_bcast=1, num_xs=1, **attrs)

    return build


def _oracle_scan(save=False, reverse=False, rows=None):
    def oracle(h, w, xs):
        traj = [None] * 4
        for t in (range(3, -1, -1) if reverse else range(4)):
            h = np.tanh(h @ w + xs[t])
            traj[t] = h
        if not save:
            return h
        return np.stack([traj[t] for t in (rows if rows is not None else range(4))])

    return oracle


def _build_scan_no_xs(g, c):
    body = sub("halve", [("c", (2,), "f64")], lambda h, c: c * 0.5 + h.cos(c))
    return g.scan(c, body=body, length=3)


def _oracle_scan_no_xs(c):
    for _ in range(3):
        c = c * 0.5 + np.cos(c)
    return c


CASES = [
    OpCase("if_", "then_taken", _build_if, {"p": np.array(True), "x": X3, "w": W3}, _oracle_if, rtol=1e-12),
    OpCase("if_", "else_taken", _build_if, {"p": np.array(False), "x": X3, "w": W3}, _oracle_if, rtol=1e-12),
    OpCase("if_", "int_pred", _build_if, {"p": np.array(0, np.int32), "x": X3, "w": W3}, _oracle_if, rtol=1e-12),
    OpCase("while_", "bounded", _build_while, {"x": X3, "n": np.array(1, np.int32)}, _oracle_while, rtol=1e-12),
    OpCase("while_", "unbounded_counter", _build_while_count, {"x": np.abs(X3) + 0.5}, _oracle_while_count),
    OpCase("scan", "rnn_final", _build_scan(), {"h": H, "w": W, "xs": XS}, _oracle_scan(), rtol=1e-12),
    OpCase("scan", "trajectory", _build_scan(save_trajectory=True), {"h": H, "w": W, "xs": XS}, _oracle_scan(True), rtol=1e-12),
    OpCase("scan", "reverse", _build_scan(save_trajectory=True, reverse=True), {"h": H, "w": W, "xs": XS},
           _oracle_scan(True, True), rtol=1e-12),
    OpCase("scan", "reverse_final", _build_scan(reverse=True), {"h": H, "w": W, "xs": XS}, _oracle_scan(False, True), rtol=1e-12),
    OpCase("scan", "checkpoints_f32", _build_scan(save_trajectory=True, num_checkpoints=2),
           {"h": H.astype(np.float32), "w": W.astype(np.float32), "xs": XS.astype(np.float32)},
           _oracle_scan(True, rows=[1, 3]), rtol=1e-5, atol=1e-6),
    OpCase("scan", "no_xs", _build_scan_no_xs, {"c": randn(2, seed=16)}, _oracle_scan_no_xs, rtol=1e-12),
]
# the f32 checkpoint case needs an f32 body
CASES[-2].build = lambda g, h, w, xs: g.scan(
    h, w, xs, length=4, num_bcast=1, num_xs=1, save_trajectory=True, num_checkpoints=2,
    body=sub("cell32", [("h", (2, 3), "f32"), ("w", (3, 3), "f32"), ("x", (2, 3), "f32")],
             lambda b, h, w, x: b.tanh(b.matmul(h, w) + x)))


def _bad_if_types(g):
    x = g.input("x", (3,), "f64")
    t = sub("t", [("a", (3,), "f64")], lambda h, a: a)
    e = sub("e", [("a", (3,), "f64")], lambda h, a: h.cast(a, to="f32"))
    return g.if_([g.constant(np.array(True)), x], then_branch=t, else_branch=e)


def _bad_if_pred(g):
    x = g.input("x", (3,), "f64")
    t = sub("t", [("a", (3,), "f64")], lambda h, a: a)
    return g.if_([g.constant(np.array([True, False])), x], then_branch=t, else_branch=t)


def _bad_if_arity(g):
    x = g.input("x", (3,), "f64")
    t = sub("t", [("a", (3,), "f64"), ("b", (3,), "f64")], lambda h, a, b: a)
    return g.if_([g.constant(np.array(True)), x], then_branch=t, else_branch=t)


def _bad_while_body(g):
    x = g.input("x", (3,), "f64")
    cond = sub("c", [("x", (3,), "f64")], lambda h, x: h.lt(h.sum(x), h.scalar(1.0, rlx.f64)))
    body = sub("b", [("x", (3,), "f64")], lambda h, x: h.sum(x))
    return g.while_([x], cond=cond, body=body)


def _bad_scan_length(g):
    h0 = g.input("h", (2, 3), "f64")
    xs = g.input("xs", (5, 2, 3), "f64")
    body = sub("b", [("h", (2, 3), "f64"), ("x", (2, 3), "f64")], lambda b, h, x: h + x)
    return g.scan(h0, xs, body=body, length=4, num_xs=1)


def _bad_scan_carry(g):
    h0 = g.input("h", (2, 3), "f64")
    body = sub("b", [("h", (2, 3), "f64")], lambda b, h: b.sum(h))
    return g.scan(h0, body=body, length=4)


SHAPE_ERRORS = [
    ShapeErrorCase("if_", "branch_types_differ", _bad_if_types, "same type"),
    ShapeErrorCase("if_", "non_scalar_pred", _bad_if_pred, "one element"),
    ShapeErrorCase("if_", "capture_count", _bad_if_arity, "takes 2 inputs"),
    ShapeErrorCase("while_", "body_changes_type", _bad_while_body, "body output 0"),
    ShapeErrorCase("scan", "xs_length", _bad_scan_length, "leading axis of length 4"),
    ShapeErrorCase("scan", "body_changes_carry", _bad_scan_carry, "the carry is"),
]
