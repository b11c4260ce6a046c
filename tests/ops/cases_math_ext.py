"""Cases for unary_math and binary_ext; oracles are torch float64 or NumPy written out."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64
from rlx.ops.kinds import UNARY_MATH_KINDS

T = torch_f64
X = randn(3, 4, seed=11)
UNIT = np.tanh(randn(3, 4, seed=12)) * 0.9
BIG = np.abs(randn(3, 4, seed=13)) + 1.1

#: inputs inside each kind's domain; the torch oracle is the row's aten name (rlx.ops.kinds)
DATA = {"floor": X * 3, "ceil": X * 3, "trunc": X * 3, "asin": UNIT, "acos": UNIT, "atanh": UNIT, "acosh": BIG}
TORCH_UNARY = {k: (getattr(torch.ops.aten, row.torch[0].removeprefix("aten.")), DATA.get(k, X))
               for k, row in UNARY_MATH_KINDS.items() if row.torch}
assert set(TORCH_UNARY) | {"round_even"} == set(UNARY_MATH_KINDS), "a new unary_math kind needs an oracle here"
PIECEWISE_CONSTANT = {k for k, row in UNARY_MATH_KINDS.items() if row.times_grad is None}  # zero derivative
CASES = [
    OpCase("unary_math", kind, lambda g, x, k=kind: g.unary_math(x, kind=k), {"x": data},
           lambda x, fn=fn: fn(T(x)), rtol=1e-12, atol=1e-14,
           differentiable=() if kind in PIECEWISE_CONSTANT else None)
    for kind, (fn, data) in TORCH_UNARY.items()
]
CASES += [
    OpCase("unary_math", "round_even", lambda g, x: g.unary_math(x, kind="round_even"),
           {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49])}, lambda x: np.array([-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 0.0]),
           differentiable=()),
    OpCase("unary_math", "sign_int", lambda g, x: g.unary_math(x, kind="sign"), {"x": np.array([-3, 0, 4], np.int32)},
           lambda x: np.array([-1, 0, 1], np.int32)),
    OpCase("binary_ext", "mod_float", lambda g, a, b: g.binary_ext(a, b, op="mod"),
           {"a": np.array([5.5, -5.5, 5.5, -5.5]), "b": np.array([2.0, 2.0, -2.0, -2.0])},
           lambda a, b: np.array([1.5, 0.5, -0.5, -1.5])),
    OpCase("binary_ext", "fmod_float", lambda g, a, b: g.binary_ext(a, b, op="fmod"),
           {"a": np.array([5.5, -5.5, 5.5, -5.5]), "b": np.array([2.0, 2.0, -2.0, -2.0])},
           lambda a, b: np.array([1.5, -1.5, 1.5, -1.5])),
    OpCase("binary_ext", "mod_int_broadcast", lambda g, a, b: g.binary_ext(a, b, op="mod"),
           {"a": np.array([[7], [-7]], np.int32), "b": np.array([3, -3, 0], np.int32)},
           lambda a, b: np.array([[1, -2, 0], [2, -1, 0]], np.int32)),
    OpCase("binary_ext", "xor_int", lambda g, a, b: g.binary_ext(a, b, op="bitwise_xor"),
           {"a": np.array([12, 5], np.int32), "b": np.array([10, 5], np.int32)}, lambda a, b: np.array([6, 0], np.int32)),
    OpCase("binary_ext", "and_or_int", lambda g, a, b: [g.binary_ext(a, b, op="bitwise_and"), g.binary_ext(a, b, op="bitwise_or")],
           {"a": np.array([12, 5], np.int64), "b": np.array([10, 3], np.int64)},
           lambda a, b: [np.array([8, 1], np.int64), np.array([14, 7], np.int64)]),
    OpCase("binary_ext", "shifts_u8", lambda g, a, b: [g.binary_ext(a, b, op="shift_left"), g.binary_ext(a, b, op="shift_right")],
           {"a": np.array([16, 4, 1], np.uint8), "b": np.array([1, 2, 8], np.uint8)},
           lambda a, b: [np.array([32, 16, 0], np.uint8), np.array([8, 1, 0], np.uint8)]),
]

SHAPE_ERRORS = [
    ShapeErrorCase("unary_math", "erf_on_int", lambda g: g.unary_math(g.input("x", (2,), "i32"), kind="erf")),
    ShapeErrorCase("unary_math", "on_bool", lambda g: g.unary_math(g.input("x", (2,), "bool"), kind="floor")),
    ShapeErrorCase("binary_ext", "shift_on_float", lambda g: g.binary_ext(g.input("a", (2,)), g.input("b", (2,)), op="shift_left")),
    ShapeErrorCase("binary_ext", "no_broadcast", lambda g: g.binary_ext(g.input("a", (2,)), g.input("b", (3,)), op="mod")),
]
