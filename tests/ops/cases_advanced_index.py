"""Cases for advanced_index / advanced_index_put (NumPy advanced indexing); oracles are torch float64
indexing and index_put, or NumPy indexing written out where torch has no form (new axes, duplicates)."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64
X = randn(4, 5, 3, seed=31)
I = np.array([[0], [3], [-1]], np.int64)  # [3, 1]: broadcasts against J
J = np.array([4, 0], np.int64)  # [2]


def _t(i):
    return torch.from_numpy(i)


def _add_rows(x, v, i, j):
    out = x.copy()
    for k in range(len(i)):
        out[i[k], :, j[k]] += v[k]
    return out


CASES = [
    OpCase("advanced_index", "two_adjacent_broadcast", lambda g, x, i, j: g.advanced_index([x, i, j], pattern="ii"),
           {"x": X, "i": I, "j": J}, lambda x, i, j: T(x)[_t(i), _t(j)], differentiable=("x",)),
    OpCase("advanced_index", "slice_between", lambda g, x, i, j: g.advanced_index([x, i, j], pattern="i:i"),
           {"x": X, "i": I, "j": np.array([2, -3], np.int64)}, lambda x, i, j: T(x)[_t(i), :, _t(j)], differentiable=("x",)),
    OpCase("advanced_index", "leading_slice", lambda g, x, i, j: g.advanced_index([x, i, j], pattern=":ii"),
           {"x": X, "i": J, "j": np.array([[1, 2]], np.int64)}, lambda x, i, j: T(x)[:, _t(i), _t(j)], differentiable=("x",)),
    OpCase("advanced_index", "new_axes", lambda g, x, i, j: g.advanced_index([x, i, j], pattern="nin:i"),
           {"x": X, "i": I, "j": np.array([0, 2], np.int64)}, lambda x, i, j: x[None, i, None, :, j], differentiable=("x",)),
    OpCase("advanced_index", "scalar_index", lambda g, x, i: g.advanced_index([x, i], pattern=":i"),
           {"x": X, "i": np.array(-2, np.int64)}, lambda x, i: T(x)[:, -2], differentiable=("x",)),
    OpCase("advanced_index", "int32_indices_int_data", lambda g, x, i: g.advanced_index([x, i], pattern="i"),
           {"x": np.arange(12, dtype=np.int32).reshape(4, 3), "i": np.array([[3, 0], [1, 1]], np.int32)},
           lambda x, i: x[i]),
    OpCase("advanced_index_put", "accumulate_duplicates", lambda g, x, v, i: g.advanced_index_put([x, v, i], pattern="i", accumulate=True),
           {"x": X, "v": randn(4, 5, 3, seed=32), "i": np.array([1, 3, 1, -3], np.int64)},
           lambda x, v, i: T(x).index_put((_t(i),), T(v), accumulate=True), differentiable=("x", "v")),
    OpCase("advanced_index_put", "overwrite_broadcast_values", lambda g, x, v, i, j: g.advanced_index_put([x, v, i, j], pattern="ii"),
           {"x": X, "v": randn(3, seed=33), "i": np.array([[0], [2]], np.int64), "j": np.array([1, 4], np.int64)},
           lambda x, v, i, j: T(x).index_put((_t(i), _t(j)), T(v)), differentiable=("x", "v")),
    OpCase("advanced_index_put", "overwrite_duplicates_last_wins",
           lambda g, x, v, i: g.advanced_index_put([x, v, i], pattern=":i"),
           {"x": X, "v": randn(4, 3, 3, seed=34), "i": np.array([2, 0, 2], np.int64)},
           lambda x, v, i: np.concatenate([v[:, 1:2], x[:, 1:2], v[:, 2:3], x[:, 3:]], axis=1),
           differentiable=("x", "v")),
    OpCase("advanced_index_put", "accumulate_slice_between",
           lambda g, x, v, i, j: g.advanced_index_put([x, v, i, j], pattern="i:i", accumulate=True),
           {"x": X, "v": randn(2, 5, seed=35), "i": np.array([3, 3], np.int64), "j": np.array([0, 0], np.int64)},
           _add_rows, differentiable=("x", "v")),
]

SHAPE_ERRORS = [
    ShapeErrorCase("advanced_index", "float_index", lambda g: g.advanced_index([g.input("x", (3, 2)), g.input("i", (2,))], pattern="i")),
    ShapeErrorCase("advanced_index", "too_many_positions",
                   lambda g: g.advanced_index([g.input("x", (3,)), g.input("i", (2,), "i64")], pattern=":i"), match="indexes 2 axes"),
    ShapeErrorCase("advanced_index", "count_mismatch",
                   lambda g: g.advanced_index([g.input("x", (3, 2)), g.input("i", (2,), "i64")], pattern="ii")),
    ShapeErrorCase("advanced_index", "bad_char",
                   lambda g: g.advanced_index([g.input("x", (3, 2)), g.input("i", (2,), "i64")], pattern="i."), match="only 'i'"),
    ShapeErrorCase("advanced_index", "no_broadcast",
                   lambda g: g.advanced_index([g.input("x", (3, 4)), g.input("i", (2,), "i64"), g.input("j", (3,), "i64")], pattern="ii")),
    ShapeErrorCase("advanced_index_put", "values_shape", lambda g: g.advanced_index_put(
        [g.input("x", (3, 4)), g.input("v", (3,)), g.input("i", (2,), "i64")], pattern="i")),
    ShapeErrorCase("advanced_index_put", "new_axis", lambda g: g.advanced_index_put(
        [g.input("x", (3, 4)), g.input("v", (2,)), g.input("i", (2,), "i64")], pattern="ni"), match="new axes"),
    ShapeErrorCase("advanced_index_put", "dtype", lambda g: g.advanced_index_put(
        [g.input("x", (3, 4)), g.input("v", (4,), "f64"), g.input("i", (2,), "i64")], pattern="i")),
]
