"""Cases for the indexing family; oracles are torch float64 or NumPy written out."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64
X = randn(3, 4, seed=21)
IDX = np.array([[0, 2, 1, 0], [2, 2, 0, 1]], np.int64)

CASES = [
    OpCase("arg_reduce", "argmax_keep", lambda g, x: g.arg_reduce(x, op="argmax", axis=1), {"x": X},
           lambda x: torch.argmax(T(x), dim=1, keepdim=True)),
    OpCase("arg_reduce", "argmin_neg_axis_drop", lambda g, x: g.arg_reduce(x, op="argmin", axis=-2, keep_dim=False), {"x": X},
           lambda x: torch.argmin(T(x), dim=0)),
    OpCase("arg_reduce", "select_last_ties", lambda g, x: g.arg_reduce(x, op="argmax", axis=0, select_last=True),
           {"x": np.array([1.0, 3.0, 3.0, 0.0])}, lambda x: np.array([2])),
    OpCase("topk_indices", "largest", lambda g, x: g.topk_indices(x, k=2, axis=-1), {"x": X},
           lambda x: torch.topk(T(x), 2, dim=-1).indices),
    OpCase("topk_indices", "smallest_ties_stable", lambda g, x: g.topk_indices(x, k=3, axis=0, largest=False),
           {"x": np.array([2.0, 1.0, 1.0, 0.0])}, lambda x: np.array([3, 1, 2])),
    OpCase("cumulative", "sum", lambda g, x: g.cumulative(x, op="sum", axis=1), {"x": X},
           lambda x: torch.cumsum(T(x), 1), rtol=1e-12),
    OpCase("cumulative", "sum_exclusive_reverse", lambda g, x: g.cumulative(x, op="sum", axis=0, exclusive=True, reverse=True),
           {"x": np.array([1.0, 2.0, 3.0, 4.0])}, lambda x: np.array([9.0, 7.0, 4.0, 0.0])),
    OpCase("cumulative", "prod_int", lambda g, x: g.cumulative(x, op="prod", axis=-1),
           {"x": np.array([[1, 2, 3], [4, 5, 6]], np.int32)}, lambda x: np.array([[1, 2, 6], [4, 20, 120]], np.int32)),
    OpCase("gather_elements", "axis0", lambda g, x, i: g.gather_elements(x, i, axis=0), {"x": X, "i": IDX},
           lambda x, i: torch.gather(T(x), 0, torch.from_numpy(i)), differentiable=("x",)),
    OpCase("gather_elements", "axis1_negative_idx_smaller", lambda g, x, i: g.gather_elements(x, i, axis=1),
           {"x": X, "i": np.array([[-1], [0]], np.int64)}, lambda x, i: np.array([[x[0, 3]], [x[1, 0]]]), differentiable=("x",)),
    OpCase("scatter_elements", "none", lambda g, x, i, u: g.scatter_elements(x, i, u, axis=1),
           {"x": X, "i": np.array([[3, 0], [1, 2], [0, 1]], np.int64), "u": randn(3, 2, seed=22)},
           lambda x, i, u: T(x).scatter(1, torch.from_numpy(i), T(u)), differentiable=("x", "u")),
    OpCase("scatter_elements", "add_duplicates", lambda g, x, i, u: g.scatter_elements(x, i, u, axis=0, reduction="add"),
           {"x": np.zeros(3), "i": np.array([1, 1, 2], np.int64), "u": np.array([1.0, 2.0, 3.0])},
           lambda x, i, u: np.array([0.0, 3.0, 3.0]), differentiable=("x", "u")),
    OpCase("scatter_elements", "max", lambda g, x, i, u: g.scatter_elements(x, i, u, axis=0, reduction="max"),
           {"x": np.array([1.0, 5.0]), "i": np.array([0, 1, 0], np.int64), "u": np.array([4.0, 2.0, 3.0])},
           lambda x, i, u: np.array([4.0, 5.0]), differentiable=()),
]

SHAPE_ERRORS = [
    ShapeErrorCase("arg_reduce", "bad_axis", lambda g: g.arg_reduce(g.input("x", (2, 3)), op="argmax", axis=2)),
    ShapeErrorCase("topk_indices", "k_too_big", lambda g: g.topk_indices(g.input("x", (2, 3)), k=4)),
    ShapeErrorCase("cumulative", "on_bool", lambda g: g.cumulative(g.input("x", (2,), "bool"), op="sum")),
    ShapeErrorCase("gather_elements", "rank_mismatch", lambda g: g.gather_elements(g.input("x", (2, 3)), g.input("i", (2,), "i64"))),
    ShapeErrorCase("scatter_elements", "updates_shape", lambda g: g.scatter_elements(
        g.input("x", (2, 3)), g.input("i", (2, 2), "i64"), g.input("u", (2, 3)))),
]
