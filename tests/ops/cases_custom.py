"""Cases for ``custom_fn`` (rlx.ops.custom); oracles are the same functions written out in NumPy.

The custom derivative bodies here are the true derivatives, so the generic finite-difference
checks of tests/autodiff hold; tests/ops/test_custom_ops.py shows a custom VJP that differs
from the true derivative (straight-through) being used.
"""

from __future__ import annotations

import numpy as np

import rlx
from opcases import OpCase, ShapeErrorCase, randn, sub

X = randn(2, 3, seed=21)
W = randn(2, 3, seed=22)
V = randn(3, seed=23)
SIG = [("x", (2, 3), "f64"), ("w", (2, 3), "f64")]


# ------------------------------------------------------------------ body only (autodiff differentiates it)
def _build_plain(g, x, w):
    sig = [("x", x.shape, "f64"), ("w", w.shape, "f64")]  # the operands' dims, symbolic ones too
    return g.custom_fn([x, w], body=sub("body", sig, lambda h, a, b: h.sin(a) * b + a * a))


def _oracle_plain(x, w):
    return np.sin(x) * w + x * x


# ------------------------------------------------------------------ custom vjp / jvp bodies (the true derivatives)
def _bodies():
    body = sub("body", SIG, lambda h, x, w: h.exp(x) * w)
    # vjp: primals, then the specially named inputs (any order); primal_output is optional
    vjp = sub("vjp", [*SIG, ("primal_output", (2, 3), "f64"), ("d_output", (2, 3), "f64")],
              lambda h, x, w, y, d: [d * y, d * h.exp(x)])
    jvp = sub("jvp", [*SIG, ("tangent_0", (2, 3), "f64"), ("tangent_1", (2, 3), "f64"), ("primal_output", (2, 3), "f64")],
              lambda h, x, w, t0, t1, y: t0 * y + t1 * h.exp(x))
    return body, vjp, jvp


def _build_custom(g, x, w):
    body, vjp, jvp = _bodies()
    return g.custom_fn([x, w], body=body, vjp_body=vjp, jvp_body=jvp)


def _oracle_custom(x, w):
    return np.exp(x) * w


# ------------------------------------------------------------------ broadcast operand, vjp_body without primal_output
def _build_bcast(g, x, v):
    sig = [("x", (2, 3), "f64"), ("v", (3,), "f64")]
    body = sub("body", sig, lambda h, x, v: h.tanh(x) * v)
    vjp = sub("vjp", [*sig, ("d_output", (2, 3), "f64")],
              lambda h, x, v, d: [d * v * (1.0 - h.tanh(x) * h.tanh(x)), h.reduce(d * h.tanh(x), op="sum", axes=[0], keep_dim=False)])
    return g.custom_fn([x, v], body=body, vjp_body=vjp)


def _oracle_bcast(x, v):
    return np.tanh(x) * v


# ------------------------------------------------------------------ an int operand (no gradient)
def _build_int(g, x, n):
    sig = [("x", (2, 3), "f64"), ("n", (), "i32")]
    return g.custom_fn([x, n], body=sub("body", sig, lambda h, x, n: h.cos(x) * h.cast(n, to="f64")))


def _oracle_int(x, n):
    return np.cos(x) * float(n)


CASES = [
    OpCase("custom_fn", "body_only", _build_plain, {"x": X, "w": W}, _oracle_plain, rtol=1e-12, atol=1e-12),
    OpCase("custom_fn", "custom_vjp_jvp", _build_custom, {"x": X, "w": W}, _oracle_custom, rtol=1e-12, atol=1e-12),
    OpCase("custom_fn", "broadcast_operand_vjp", _build_bcast, {"x": X, "v": V}, _oracle_bcast, rtol=1e-12, atol=1e-12),
    OpCase("custom_fn", "int_operand", _build_int, {"x": X, "n": np.array(3, np.int32)}, _oracle_int, rtol=1e-12, atol=1e-12,
           differentiable=("x",)),
]


# ------------------------------------------------------------------ shape errors
def _bad_operand_type(g):
    x = g.input("x", (2, 3), "f32")
    return g.custom_fn([x], body=sub("body", [("x", (2, 3), "f64")], lambda h, x: x))


def _bad_arity(g):
    x = g.input("x", (2, 3), "f64")
    return g.custom_fn([x], body=sub("body", SIG, lambda h, x, w: x * w))


def _bad_outputs(g):
    x = g.input("x", (2, 3), "f64")
    return g.custom_fn([x], body=sub("body", SIG[:1], lambda h, x: [x, x]))


def _bad_vjp_no_seed(g):
    x = g.input("x", (2, 3), "f64")
    body = sub("body", SIG[:1], lambda h, x: h.sin(x))
    return g.custom_fn([x], body=body, vjp_body=sub("vjp", [*SIG[:1], ("ct", (2, 3), "f64")], lambda h, x, d: d))


def _bad_vjp_count(g):
    x, w = g.input("x", (2, 3), "f64"), g.input("w", (2, 3), "f64")
    body = sub("body", SIG, lambda h, x, w: x * w)
    return g.custom_fn([x, w], body=body, vjp_body=sub("vjp", [*SIG, ("d_output", (2, 3), "f64")], lambda h, x, w, d: d * w))


def _bad_vjp_grad_shape(g):
    x = g.input("x", (2, 3), "f64")
    body = sub("body", SIG[:1], lambda h, x: h.sin(x))
    vjp = sub("vjp", [*SIG[:1], ("d_output", (2, 3), "f64")], lambda h, x, d: h.sum(d))
    return g.custom_fn([x], body=body, vjp_body=vjp)


def _bad_jvp_tangent(g):
    x, w = g.input("x", (2, 3), "f64"), g.input("w", (2, 3), "f64")
    body = sub("body", SIG, lambda h, x, w: x * w)
    jvp = sub("jvp", [*SIG, ("tangent_0", (2, 3), "f64")], lambda h, x, w, t: t * w)
    return g.custom_fn([x, w], body=body, jvp_body=jvp)


def _bad_param(g):
    x = g.input("x", (2, 3), "f64")
    body = rlx.Graph("body")
    a = body.input("x", (2, 3), "f64")
    body.set_outputs([a * body.param("p", (2, 3), "f64")])
    return g.custom_fn([x], body=body)


SHAPE_ERRORS = [
    ShapeErrorCase("custom_fn", "operand_type", _bad_operand_type, "but operand 0 is"),
    ShapeErrorCase("custom_fn", "operand_count", _bad_arity, "takes 2 primal inputs, but 1"),
    ShapeErrorCase("custom_fn", "two_outputs", _bad_outputs, "exactly 1 output"),
    ShapeErrorCase("custom_fn", "vjp_without_d_output", _bad_vjp_no_seed, "'d_output'"),
    ShapeErrorCase("custom_fn", "vjp_gradient_count", _bad_vjp_count, "one gradient per operand"),
    ShapeErrorCase("custom_fn", "vjp_gradient_shape", _bad_vjp_grad_shape, "vjp_body gradient 0"),
    ShapeErrorCase("custom_fn", "jvp_missing_tangent", _bad_jvp_tangent, "'tangent_1'"),
    ShapeErrorCase("custom_fn", "body_with_param", _bad_param, "must not declare params"),
]
