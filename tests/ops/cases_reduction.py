"""Cases for reduce and softmax; oracles are torch (float64) or NumPy written out."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64
X = randn(2, 3, 4, 5, seed=21)

TORCH_REDUCE = {
    "sum": lambda t, dims, keep: torch.sum(t, dim=dims, keepdim=keep),
    "mean": lambda t, dims, keep: torch.mean(t, dim=dims, keepdim=keep),
    "max": lambda t, dims, keep: torch.amax(t, dim=dims, keepdim=keep),
    "min": lambda t, dims, keep: torch.amin(t, dim=dims, keepdim=keep),
    "prod": lambda t, dims, keep: _torch_prod(t, dims, keep),
}


def _torch_prod(t, dims, keep):
    for d in sorted((d % t.dim() for d in dims), reverse=True):
        t = torch.prod(t, dim=d, keepdim=keep)
    return t


CASES = []
for op, fn in TORCH_REDUCE.items():
    CASES += [
        OpCase("reduce", f"{op}_noncontiguous_axes", lambda g, x, op=op: g.reduce(x, op=op, axes=[0, 2], keep_dim=False), {"x": X},
               lambda x, fn=fn: fn(T(x), (0, 2), False), rtol=1e-12),
        OpCase("reduce", f"{op}_negative_axes_keep_dim", lambda g, x, op=op: getattr(g, op)(x, axes=[-1, 1], keep_dim=True), {"x": X},
               lambda x, fn=fn: fn(T(x), (3, 1), True), rtol=1e-12),
        OpCase("reduce", f"{op}_all_axes", lambda g, x, op=op: getattr(g, op)(x), {"x": randn(3, 4, seed=22)},
               lambda x, fn=fn: fn(T(x), (0, 1), False), rtol=1e-12),
    ]
CASES += [
    OpCase("reduce", "sum_f32", lambda g, x: g.sum(x, axes=[0]), {"x": X.astype(np.float32)},
           lambda x: torch.from_numpy(x).double().sum(0), rtol=1e-6, atol=1e-6),
    OpCase("reduce", "sum_i32_keeps_dtype", lambda g, x: g.sum(x, axes=[1]), {"x": np.arange(12, dtype=np.int32).reshape(3, 4)},
           lambda x: np.array([6, 22, 38], np.int32)),
    OpCase("reduce", "max_int", lambda g, x: g.max(x, axes=[0]), {"x": np.array([[1, -5], [-3, 2]], np.int64)},
           lambda x: np.array([1, 2], np.int64)),
    OpCase("reduce", "fmax_ignores_nan", lambda g, x: g.reduce(x, op="fmax", axes=[1]),
           {"x": np.array([[np.nan, 1.0, 3.0], [np.nan, np.nan, np.nan]])}, lambda x: np.array([3.0, np.nan])),
    OpCase("reduce", "max_min_propagate_nan", lambda g, x: [g.max(x, axes=[1]), g.min(x, axes=[0])],
           {"x": np.array([[np.nan, 1.0, 3.0], [2.0, -1.0, 0.5]])},
           lambda x: [torch.amax(T(x), dim=1), torch.amin(T(x), dim=0)]),
    OpCase("reduce", "min_bool_is_all", lambda g, x: g.min(x, axes=[1]), {"x": np.array([[True, True], [True, False]])},
           lambda x: np.array([True, False])),
    OpCase("reduce", "empty_axes_identity", lambda g, x: g.reduce(x, op="sum", axes=[]), {"x": randn(2, 3, seed=23)}, lambda x: x),
    OpCase("reduce", "max_of_empty_is_neg_inf", lambda g, x: g.max(x, axes=[1]), {"x": np.zeros((2, 0))},
           lambda x: np.full(2, -np.inf)),
    # softmax
    OpCase("softmax", "axis1", lambda g, x: g.softmax(x, axis=1), {"x": X}, lambda x: torch.softmax(T(x), dim=1), rtol=1e-12),
    OpCase("softmax", "default_last", lambda g, x: g.softmax(x), {"x": X}, lambda x: torch.softmax(T(x), dim=-1), rtol=1e-12),
    OpCase("softmax", "negative_axis", lambda g, x: g.softmax(x, axis=-3), {"x": X}, lambda x: torch.softmax(T(x), dim=1), rtol=1e-12),
    OpCase("softmax", "large_logits_stable", lambda g, x: g.softmax(x, axis=0), {"x": np.array([[1000.0, -1000.0], [999.0, -1001.0]])},
           lambda x: torch.softmax(T(x), dim=0), rtol=1e-12),
    OpCase("softmax", "f32", lambda g, x: g.softmax(x, axis=2), {"x": X.astype(np.float32)},
           lambda x: torch.softmax(torch.from_numpy(x).double(), dim=2), rtol=1e-5, atol=1e-7),
    OpCase("softmax", "neg_inf_masked", lambda g, x: g.softmax(x, axis=-1), {"x": np.array([[0.0, -np.inf, 1.0]])},
           lambda x: torch.softmax(T(x), dim=-1), rtol=1e-12),
]

SHAPE_ERRORS = [
    ShapeErrorCase("reduce", "duplicate_axes", lambda g: g.sum(g.input("x", (2, 3)), axes=[1, -1]), match="twice"),
    ShapeErrorCase("reduce", "axis_out_of_range", lambda g: g.reduce(g.input("x", (2, 3)), op="max", axes=[2]), match="out of range"),
    ShapeErrorCase("reduce", "mean_of_int", lambda g: g.mean(g.input("x", (2, 3), "i32"))),
    ShapeErrorCase("reduce", "sum_of_bool", lambda g: g.sum(g.input("x", (2, 3), "bool"))),
    ShapeErrorCase("softmax", "axis_out_of_range", lambda g: g.softmax(g.input("x", (2, 3)), axis=2)),
    ShapeErrorCase("softmax", "int_input", lambda g: g.softmax(g.input("x", (2, 3), "i64")), match="float"),
]
