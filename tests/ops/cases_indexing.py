"""Cases for the indexing family, including every cumsum / cumsum_backward case (docs/semantics.md#numerics, #backward-ops: both
are the op cumulative, the backward one with reverse flipped); oracles are torch float64 (torch.cumsum
and its autograd) or NumPy written out. top_k (the former topk_indices) cases: cases_numerics.py."""

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
    OpCase("cumulative", "sum", lambda g, x: g.cumulative(x, op="sum", axis=1), {"x": X},
           lambda x: torch.cumsum(T(x), 1), rtol=1e-12),
    OpCase("cumulative", "sum_exclusive_reverse", lambda g, x: g.cumulative(x, op="sum", axis=0, exclusive=True, reverse=True),
           {"x": np.array([1.0, 2.0, 3.0, 4.0])}, lambda x: np.array([9.0, 7.0, 4.0, 0.0])),
    OpCase("cumulative", "prod_int", lambda g, x: g.cumulative(x, op="prod", axis=-1),
           {"x": np.array([[1, 2, 3], [4, 5, 6]], np.int32)}, lambda x: np.array([[1, 2, 6], [4, 20, 120]], np.int32)),
    OpCase("cumulative", "prod_exclusive_reverse", lambda g, x: g.cumprod(x, axis=0, exclusive=True, reverse=True),
           {"x": np.array([2.0, 3.0, 4.0])}, lambda x: np.array([12.0, 4.0, 1.0]), differentiable=()),
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
    ShapeErrorCase("cumulative", "on_bool", lambda g: g.cumulative(g.input("x", (2,), "bool"), op="sum")),
    ShapeErrorCase("cumulative", "bool_cumsum", lambda g: g.cumsum(g.input("x", (3,), "bool"))),
    ShapeErrorCase("cumulative", "axis", lambda g: g.cumsum(g.input("x", (3,)), axis=2)),
    ShapeErrorCase("cumulative", "scalar", lambda g: g.cumulative(g.input("x", ()))),
    ShapeErrorCase("gather_elements", "rank_mismatch", lambda g: g.gather_elements(g.input("x", (2, 3)), g.input("i", (2,), "i64"))),
    ShapeErrorCase("scatter_elements", "updates_shape", lambda g: g.scatter_elements(
        g.input("x", (2, 3)), g.input("i", (2, 2), "i64"), g.input("u", (2, 3)))),
]


# ------------------------------------- cumsum / cumsum_backward (docs/semantics.md#backward-ops names) as cumulative(op="sum")
def _torch_cumsum(x, axis, exclusive=False, reverse=False):
    t = x if isinstance(x, torch.Tensor) else T(x)
    if reverse:
        t = torch.flip(t, (axis,))
    c = torch.cumsum(t, axis)
    if exclusive:
        c = c - t
    return torch.flip(c, (axis,)) if reverse else c


def _torch_cumsum_vjp(dy, axis, exclusive=False, reverse=False):
    x = torch.zeros(dy.shape, dtype=torch.float64, requires_grad=True)
    _torch_cumsum(x, axis, exclusive, reverse).backward(T(dy))
    return x.grad


XC = randn(3, 5, seed=14)
ZC = (np.random.default_rng(1).standard_normal((3, 8)) + 1j * np.random.default_rng(2).standard_normal((3, 8))).astype(np.complex64)
for exclusive in (False, True):
    for reverse in (False, True):
        tag = f"{'exclusive' if exclusive else 'inclusive'}{'_reverse' if reverse else ''}"
        CASES.append(OpCase("cumulative", f"cumsum_{tag}",
                            lambda g, x, e=exclusive, r=reverse: g.cumsum(x, axis=1, exclusive=e, reverse=r), {"x": XC},
                            lambda x, e=exclusive, r=reverse: _torch_cumsum(x, 1, e, r), rtol=1e-12, atol=1e-12))
        # the former cumsum_backward(reverse=r): the transpose, i.e. the same op with reverse flipped
        CASES.append(OpCase("cumulative", f"cumsum_backward_{tag}",
                            lambda g, d, e=exclusive, r=reverse: g.cumulative(d, op="sum", axis=-1, exclusive=e, reverse=not r), {"d": XC},
                            lambda d, e=exclusive, r=reverse: _torch_cumsum_vjp(d, 1, e, r), rtol=1e-12, atol=1e-12))
CASES += [
    OpCase("cumulative", "cumsum_axis0_int32", lambda g, x: g.cumsum(x, axis=0), {"x": np.arange(12, dtype=np.int32).reshape(4, 3)},
           lambda x: torch.cumsum(torch.from_numpy(x), 0).to(torch.int32)),
    OpCase("cumulative", "cumsum_c64_default_last_axis", lambda g, x: g.cumsum(x), {"x": ZC},
           lambda x: np.cumsum(x.astype(np.complex128), axis=-1), rtol=1e-5, atol=1e-5),
    OpCase("cumulative", "cumsum_backward_axis0_f32", lambda g, d: g.cumulative(d, axis=0, reverse=True), {"d": XC.astype(np.float32)},
           lambda d: _torch_cumsum_vjp(d, 0), rtol=1e-6, atol=1e-6),
]
