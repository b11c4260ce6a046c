"""Cases for matmul and dot_general; oracles are torch float64 (matmul, einsum)."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, symbolic, torch_f64

T = torch_f64


CASES = [
    OpCase("matmul", "2d", lambda g, a, b: g.matmul(a, b), {"a": randn(3, 4, seed=1), "b": randn(4, 5, seed=2)},
           lambda a, b: torch.matmul(T(a), T(b)), rtol=1e-12),
    OpCase("matmul", "operator_f32", lambda g, a, b: a @ b,
           {"a": randn(2, 3, 4, dtype=np.float32, seed=3), "b": randn(2, 4, 5, dtype=np.float32, seed=4)},
           lambda a, b: torch.matmul(T(a), T(b)), rtol=1e-5, atol=1e-6),
    OpCase("matmul", "batch_broadcast", lambda g, a, b: g.matmul(a, b),
           {"a": randn(2, 1, 3, 4, seed=5), "b": randn(5, 4, 6, seed=6)},
           lambda a, b: torch.matmul(T(a), T(b)), rtol=1e-12),
    OpCase("matmul", "rhs_2d_weight", lambda g, x, w: g.matmul(x, w), {"x": randn(2, 3, 4, seed=7), "w": randn(4, 2, seed=8)},
           lambda x, w: torch.matmul(T(x), T(w)), rtol=1e-12, params=("w",)),
    OpCase("matmul", "lhs_2d", lambda g, a, b: g.matmul(a, b), {"a": randn(3, 4, seed=9), "b": randn(2, 2, 4, 5, seed=10)},
           lambda a, b: torch.matmul(T(a), T(b)), rtol=1e-12),
    OpCase("matmul", "promote_f32_f64", lambda g, a, b: g.matmul(a, b),
           {"a": randn(3, 4, dtype=np.float32, seed=11), "b": randn(4, 2, seed=12)},
           lambda a, b: torch.matmul(T(a), T(b)), rtol=1e-12),
    OpCase("matmul", "int32", lambda g, a, b: g.matmul(a, b),
           {"a": np.arange(12, dtype=np.int32).reshape(3, 4), "b": np.arange(8, dtype=np.int32).reshape(4, 2) - 3},
           lambda a, b: torch.matmul(torch.from_numpy(a), torch.from_numpy(b))),
    OpCase("matmul", "symbolic_dims",
           symbolic(lambda g, s, t: g.matmul(s, t), {"s": ("batch", 1, 3, "k"), "t": (4, "k", 2)}, ("batch", 4, 3, 2)),
           {"s": randn(2, 1, 3, 5, seed=13), "t": randn(4, 5, 2, seed=14)},
           lambda s, t: torch.matmul(T(s), T(t)), rtol=1e-12),
    OpCase("matmul", "symbolic_broadcast_against_1",
           symbolic(lambda g, s, t: g.matmul(s, t), {"s": ("n", 3, 4), "t": (1, 4, "m")}, ("n", 3, "m")),
           {"s": randn(2, 3, 4, seed=15), "t": randn(1, 4, 6, seed=16)},
           lambda s, t: torch.matmul(T(s), T(t)), rtol=1e-12),
]


def _einsum_case(name, spec, lshape, rshape, **attrs):
    return OpCase("dot_general", name, lambda g, lhs, rhs: g.dot_general(lhs, rhs, **attrs),
                  {"lhs": randn(*lshape, seed=len(name)), "rhs": randn(*rshape, seed=len(name) + 1)},
                  lambda lhs, rhs: torch.einsum(spec, T(lhs), T(rhs)), rtol=1e-12, atol=1e-12)


CASES += [
    _einsum_case("matmul_like", "mk,kn->mn", (3, 4), (4, 5), lhs_contracting=[1], rhs_contracting=[0]),
    _einsum_case("batched", "bmk,bkn->bmn", (2, 3, 4), (2, 4, 5),
                 lhs_contracting=[2], rhs_contracting=[1], lhs_batch=[0], rhs_batch=[0]),
    # batch dims first (in lhs_batch order), then lhs free ascending, then rhs free ascending
    _einsum_case("batch_order_and_free_dims", "kabm,bnkap->bamnp", (4, 2, 3, 5), (3, 6, 4, 2, 7),
                 lhs_contracting=[0], rhs_contracting=[2], lhs_batch=[2, 1], rhs_batch=[0, 3]),
    _einsum_case("two_contracting_axes", "ijk,kjl->il", (3, 4, 5), (5, 4, 2),
                 lhs_contracting=[2, 1], rhs_contracting=[0, 1]),
    _einsum_case("outer_product", "ij,k->ijk", (2, 3), (4,), lhs_contracting=[], rhs_contracting=[]),
    _einsum_case("negative_axes", "bmk,bnk->bmn", (2, 3, 4), (2, 5, 4),
                 lhs_contracting=[-1], rhs_contracting=[-1], lhs_batch=[0], rhs_batch=[-3]),
    OpCase("dot_general", "f32_promote_f64",
           lambda g, lhs, rhs: g.dot_general(lhs, rhs, lhs_contracting=[0], rhs_contracting=[0]),
           {"lhs": randn(4, 3, dtype=np.float32, seed=20), "rhs": randn(4, 2, seed=21)},
           lambda lhs, rhs: torch.einsum("km,kn->mn", T(lhs), T(rhs)), rtol=1e-12),
    OpCase("dot_general", "f32",
           lambda g, lhs, rhs: g.dot_general(lhs, rhs, lhs_contracting=[1], rhs_contracting=[1]),
           {"lhs": randn(3, 6, dtype=np.float32, seed=22), "rhs": randn(2, 6, dtype=np.float32, seed=23)},
           lambda lhs, rhs: torch.einsum("mk,nk->mn", T(lhs), T(rhs)), rtol=1e-5, atol=1e-6),
    OpCase("dot_general", "symbolic_dims",
           symbolic(lambda g, lhs, rhs: g.dot_general(lhs, rhs, lhs_contracting=[2], rhs_contracting=[1], lhs_batch=[0], rhs_batch=[0]),
                    {"lhs": ("b", "m", "k"), "rhs": ("b", "k", "n")}, ("b", "m", "n")),
           {"lhs": randn(2, 3, 4, seed=24), "rhs": randn(2, 4, 5, seed=25)},
           lambda lhs, rhs: torch.einsum("bmk,bkn->bmn", T(lhs), T(rhs)), rtol=1e-12),
]


def _dg(lshape, rshape, **attrs):
    return lambda g: g.dot_general(g.input("l", lshape), g.input("r", rshape), **attrs)


SHAPE_ERRORS = [
    ShapeErrorCase("matmul", "k_mismatch", lambda g: g.matmul(g.input("a", (3, 4)), g.input("b", (5, 2))), match="K"),
    ShapeErrorCase("matmul", "rank1", lambda g: g.matmul(g.input("a", (4,)), g.input("b", (4, 2))), match="rank >= 2"),
    ShapeErrorCase("matmul", "batch_no_broadcast",
                   lambda g: g.matmul(g.input("a", (2, 3, 4)), g.input("b", (3, 4, 5))), match="broadcast"),
    ShapeErrorCase("matmul", "k_symbol_mismatch",
                   lambda g: g.matmul(g.input("a", (3, "k")), g.input("b", ("j", 2)))),
    ShapeErrorCase("matmul", "bool", lambda g: g.matmul(g.input("a", (2, 2), "bool"), g.input("b", (2, 2), "bool"))),
    ShapeErrorCase("dot_general", "contracting_size", _dg((3, 4), (5, 2), lhs_contracting=[1], rhs_contracting=[0]),
                   match="contracting"),
    ShapeErrorCase("dot_general", "batch_size", _dg((2, 3, 4), (3, 4, 5), lhs_contracting=[2], rhs_contracting=[1],
                                                    lhs_batch=[0], rhs_batch=[0]), match="batch"),
    ShapeErrorCase("dot_general", "length_mismatch", _dg((3, 4), (4, 2), lhs_contracting=[1], rhs_contracting=[]),
                   match="length"),
    ShapeErrorCase("dot_general", "axis_out_of_range", _dg((3, 4), (4, 2), lhs_contracting=[2], rhs_contracting=[0]),
                   match="out of range"),
    ShapeErrorCase("dot_general", "batch_and_contracting", _dg((3, 4), (3, 4), lhs_contracting=[0], rhs_contracting=[0],
                                                               lhs_batch=[0], rhs_batch=[1]), match="both"),
    ShapeErrorCase("dot_general", "repeated_axis", _dg((3, 3), (3, 3), lhs_contracting=[0, 0], rhs_contracting=[0, 1]),
                   match="repeats"),
]
