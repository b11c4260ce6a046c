"""Cases for sources and elementwise ops; oracles are torch (float64) or NumPy written out."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64
from rlx.ops.kinds import ACTIVATION_KINDS

T = torch_f64
X = randn(3, 5, seed=1)
POS = np.abs(randn(3, 5, seed=2)) + 0.1

#: torch oracles of the activation kinds, generated from the rows (rlx.ops.kinds): a row's aten
#: name is the oracle (so a wrong name fails here); kinds without one are written out.
TORCH_ACT = {
    "gelu": lambda t: torch.nn.functional.gelu(t),
    "gelu_approx": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    **{k: getattr(torch.ops.aten, row.torch[0].removeprefix("aten.")) for k, row in ACTIVATION_KINDS.items() if row.torch},
}
ORACLE_ELSEWHERE = {"round"}  # half away from zero: its own cases below
assert set(TORCH_ACT) | ORACLE_ELSEWHERE == set(ACTIVATION_KINDS), "a new activation kind needs an oracle here"
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}

CASES = [
    OpCase("input", "f64", lambda g, x: g.apply("activation", x, kind="neg"), {"x": X}, lambda x: -x),
    OpCase("param", "f32", lambda g, w: w * 2.0, {"w": X.astype(np.float32)}, lambda w: w * 2, params=("w",)),
    OpCase("constant", "i64", lambda g, x: g.constant(np.arange(6).reshape(2, 3)) + x,
           {"x": np.ones((2, 3), np.int64)}, lambda x: np.arange(6).reshape(2, 3) + 1),
]
for kind, fn in TORCH_ACT.items():
    data = POS if kind in POSITIVE_ONLY else X
    CASES.append(OpCase("activation", kind, lambda g, x, k=kind: getattr(g, k)(x), {"x": data},
                        lambda x, fn=fn: fn(T(x)), rtol=1e-12, atol=1e-14))
CASES += [
    OpCase("activation", "round_half_away",
           lambda g, x: g.round(x), {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51])},
           lambda x: np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 0.0, -1.0])),
    OpCase("activation", "gelu_f32", lambda g, x: g.gelu(x), {"x": X.astype(np.float32)},
           lambda x: torch.nn.functional.gelu(T(x)), rtol=1e-6, atol=1e-7),
    OpCase("activation", "relu_int", lambda g, x: g.relu(x), {"x": np.array([-3, 0, 4], np.int32)},
           lambda x: np.maximum(x, 0)),
    OpCase("activation", "exp_c64", lambda g, x: g.exp(x), {"x": np.array([1 + 2j, -0.5j], np.complex64)},
           lambda x: np.exp(x.astype(np.complex128)), rtol=1e-6),
    OpCase("cast", "f64_to_i32_truncates", lambda g, x: g.cast(x, to="i32"),
           {"x": np.array([-2.7, -0.2, 0.0, 1.9, 3.5])}, lambda x: np.array([-2, 0, 0, 1, 3], np.int32)),
    OpCase("cast", "to_bool", lambda g, x: g.cast(x, to="bool"), {"x": np.array([0.0, -0.0, 2.0, np.nan])},
           lambda x: np.array([False, False, True, True])),
    OpCase("cast", "f32_to_bf16", lambda g, x: g.cast(x, to="bf16"), {"x": np.array([1.0, 3.140625, 1e-3], np.float32)},
           lambda x: torch.from_numpy(x).to(torch.bfloat16).double()),
    OpCase("cast", "i8_to_i4_keeps_low_bits", lambda g, x: g.cast(x, to="i4"), {"x": np.arange(-20, 20, 3, dtype=np.int8)},
           lambda x: ((x.astype(np.int64) + 8) % 16) - 8),
    OpCase("bitcast", "f32_to_i32", lambda g, x: g.bitcast(x, to="i32"),
           {"x": np.array([[1.0, -0.0, np.inf], [np.nan, 1e-40, -3.5]], np.float32)},
           lambda x: torch.from_numpy(x).view(torch.int32)),
    OpCase("bitcast", "bf16_bits_exact", lambda g, x: g.bitcast(x, to="i16"),
           {"x": np.array([1.0, -2.5, 3.0e38, 1e-39], np.float32).astype(__import__("ml_dtypes").bfloat16)},
           lambda x: torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).view(torch.int16)),
    OpCase("bitcast", "i4_to_u4_low_bits", lambda g, x: g.bitcast(x, to="u4"),
           {"x": np.arange(-8, 8).astype(__import__("ml_dtypes").int4)}, lambda x: x.astype(np.int64) & 0xF),
    OpCase("bitcast", "u8_to_bool_nonzero", lambda g, x: g.bitcast(x, to="bool"), {"x": np.array([0, 1, 2, 255], np.uint8)},
           lambda x: x != 0),
    OpCase("bitcast", "scalar_i64_to_f64", lambda g, x: g.bitcast(x, to="f64"), {"x": np.array(4607182418800017408, np.int64)},
           lambda x: np.array(1.0)),
]
for method, fn in {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                   "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
                   "pow": torch.pow}.items():
    lhs = np.abs(randn(2, 1, 4, seed=3)) + 0.5 if method == "pow" else randn(2, 1, 4, seed=3)
    CASES.append(OpCase("binary", f"{method}_broadcast", lambda g, a, b, m=method: getattr(g, m)(a, b),
                        {"a": lhs, "b": randn(3, 1, seed=4)}, lambda a, b, fn=fn: fn(T(a), T(b)), rtol=1e-12))
CASES += [
    OpCase("binary", "promote_i32_f32", lambda g, a, b: a + b,
           {"a": np.arange(4, dtype=np.int32), "b": np.full(4, 0.5, np.float32)},
           lambda a, b: (a.astype(np.float32) + b)),
    OpCase("binary", "promote_u8_i8", lambda g, a, b: a * b,
           {"a": np.array([200, 3], np.uint8), "b": np.array([-2, 5], np.int8)},
           lambda a, b: np.array([-400, 15], np.int16)),
    OpCase("binary", "int_div_truncates", lambda g, a, b: a / b,
           {"a": np.array([7, -7, 7, -7], np.int32), "b": np.array([2, 2, -2, -2], np.int32)},
           lambda a, b: np.array([3, -3, -3, 3], np.int32)),
    OpCase("binary", "fmax_fmin_ignore_nan", lambda g, a, b: [g.fmax(a, b), g.fmin(a, b)],
           {"a": np.array([np.nan, 1.0, np.nan]), "b": np.array([2.0, np.nan, np.nan])},
           lambda a, b: [np.array([2.0, 1.0, np.nan]), np.array([2.0, 1.0, np.nan])]),
    OpCase("binary", "max_min_propagate_nan", lambda g, a, b: [g.maximum(a, b), g.minimum(a, b)],
           {"a": np.array([np.nan, 1.0, 3.0]), "b": np.array([2.0, np.nan, -1.0])},
           lambda a, b: [torch.maximum(T(a), T(b)), torch.minimum(T(a), T(b))]),
    OpCase("binary", "scalar_rsub", lambda g, a: 1.0 - a, {"a": X.astype(np.float32)}, lambda a: 1.0 - a),
]
for op, fn in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}.items():
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    CASES.append(OpCase("compare", op, lambda g, a, b, op=op: getattr(g, op)(a, b),
                        {"a": a, "b": np.array([2.0, 2.0, 2.0])}, lambda a, b, fn=fn: fn(a, b)))
CASES += [
    OpCase("where", "broadcast3", lambda g, c, a, b: g.where(c, a, b),
           {"c": np.array([[True], [False]]), "a": randn(2, 3, seed=5), "b": randn(3, seed=6)},
           lambda c, a, b: np.where(c, a, b)),
    OpCase("where", "float_cond_promotes", lambda g, c, a, b: g.where(c, a, b),
           {"c": np.array([0.0, 1.0, 2.0]), "a": np.array([1, 2, 3], np.int32), "b": np.array([0.5, 0.5, 0.5], np.float32)},
           lambda c, a, b: np.array([0.5, 2.0, 3.0], np.float32)),
]

SHAPE_ERRORS = [
    ShapeErrorCase("input", "negative_dim", lambda g: g.input("x", (2, -1))),
    ShapeErrorCase("param", "bad_symbol", lambda g: g.param("w", ("1x", 3))),
    ShapeErrorCase("constant", "wrong_declared_type", lambda g: g.append(
        "constant", (), {"value": np.zeros(2, np.float32)}, type=__import__("rlx").TensorType((3,), "f32"))),
    ShapeErrorCase("activation", "gelu_on_int", lambda g: g.gelu(g.input("x", (2,), "i32"))),
    ShapeErrorCase("activation", "sin_on_c64", lambda g: g.sin(g.input("x", (2,), "c64"))),
    ShapeErrorCase("cast", "wrong_arity", lambda g: g.append("cast", [], {"to": "f32"})),
    ShapeErrorCase("bitcast", "width_differs", lambda g: g.bitcast(g.input("x", (2,), "f32"), to="i16"), match="32 bits"),
    ShapeErrorCase("bitcast", "sub_byte_vs_byte", lambda g: g.bitcast(g.input("x", (2,), "i4"), to="i8"), match="4 bits"),
    ShapeErrorCase("binary", "no_broadcast", lambda g: g.add(g.input("a", (2, 3)), g.input("b", (4,))), match="broadcast"),
    ShapeErrorCase("binary", "symbol_vs_static", lambda g: g.add(g.input("a", ("n", 3)), g.input("b", (4, 3)))),
    ShapeErrorCase("compare", "no_broadcast", lambda g: g.lt(g.input("a", (2,)), g.input("b", (3,)))),
    ShapeErrorCase("where", "no_broadcast", lambda g: g.where(g.input("c", (5,), "bool"), g.input("a", (2,)), g.input("b", (2,)))),
]

