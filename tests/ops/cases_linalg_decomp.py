"""Cases for the factorizations and solvers (rlx.ops.linalg_decomp) and the complex parts
(rlx.ops.complex_parts). Oracles: torch.linalg / torch (LAPACK through MKL), independent of NumPy's
LAPACK that the kernels call. Outputs that are unique only up to signs (eigen- and singular vectors)
are checked through what they determine: the reconstruction V·diag(w)·Vᵀ, U·diag(S)·Vh, A·V - V·diag(w)
and the orthonormality of the vectors."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64


def _spd(*lead, n=4, seed=0, dtype=np.float64):
    a = randn(*lead, n, n, seed=seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _sym(*lead, n=4, seed=0):
    a = randn(*lead, n, n, seed=seed)
    return a + np.swapaxes(a, -1, -2)


def _mT(g, x):
    r = len(x.shape)
    return g.transpose(x, perm=[*range(r - 2), r - 1, r - 2])


def _row(g, v):
    """[..., K] -> [..., 1, K] (scales the columns of a matrix it multiplies)."""
    return g.reshape(v, new_shape=[*v.shape[:-1], 1, v.shape[-1]])


def _in(g, name, shape, dtype="f64"):
    return g.input(name, shape, dtype)


A = randn(4, 4, seed=1) + 4 * np.eye(4)
AB = randn(2, 3, 3, seed=2) + 3 * np.eye(3)
A32 = (randn(3, 5, 5, seed=3) + 5 * np.eye(5)).astype(np.float32)
SPD = _spd(n=4, seed=4)
SPDB = _spd(2, n=3, seed=5)
SYM = _sym(2, n=4, seed=6)
R = randn(5, 3, seed=7)
RW = randn(2, 3, 5, seed=8)
QR_A, QR_TAU = (t.numpy() for t in torch.geqrf(T(R)))


def _lu_feed(a):
    lu, piv = torch.linalg.lu_factor(T(a))
    return {"lu": lu.numpy(), "p": piv.numpy()}


def _ldl_feed(a):
    ld, piv = torch.linalg.ldl_factor(T(a))
    return {"ld": ld.numpy(), "p": piv.numpy()}


CASES = [
    # ---------------------------------------------------------------------------- inverse / det / slogdet
    OpCase("matrix_inverse", "f64", lambda g, a: g.matrix_inverse(a), {"a": A}, lambda a: torch.linalg.inv(T(a)),
           rtol=1e-10, atol=1e-12),
    OpCase("matrix_inverse", "batched", lambda g, a: g.matrix_inverse(a), {"a": AB}, lambda a: torch.linalg.inv(T(a)),
           rtol=1e-10, atol=1e-12),
    OpCase("matrix_inverse", "f32", lambda g, a: g.matrix_inverse(a), {"a": A32},
           lambda a: torch.linalg.inv(torch.from_numpy(a)), rtol=1e-4, atol=1e-6),
    OpCase("det", "f64", lambda g, a: g.det(a), {"a": A}, lambda a: torch.linalg.det(T(a)), rtol=1e-10),
    OpCase("det", "batched", lambda g, a: g.det(a), {"a": AB}, lambda a: torch.linalg.det(T(a)), rtol=1e-10),
    OpCase("det", "empty_matrix_is_one", lambda g, a: g.det(a), {"a": np.zeros((2, 0, 0))},
           lambda a: torch.linalg.det(T(a))),
    OpCase("slogdet", "batched", lambda g, a: g.slogdet(a), {"a": np.stack([A, -A[[1, 0, 2, 3]]])},
           lambda a: tuple(torch.linalg.slogdet(T(a))), rtol=1e-10),
    OpCase("slogdet", "logabsdet_only", lambda g, a: g.slogdet(a)[1], {"a": AB},
           lambda a: torch.linalg.slogdet(T(a))[1], rtol=1e-10),
    # ---------------------------------------------------------------------------- cholesky
    OpCase("cholesky", "lower", lambda g, a: g.cholesky(a), {"a": SPD}, lambda a: torch.linalg.cholesky(T(a)), rtol=1e-10),
    OpCase("cholesky", "upper_batched", lambda g, a: g.cholesky(a, upper=True), {"a": SPDB},
           lambda a: torch.linalg.cholesky(T(a), upper=True), rtol=1e-10),
    # ---------------------------------------------------------------------------- eigh / eig / svd
    OpCase("eigh", "values_and_reconstruction",
           lambda g, a: (lambda w, v: (w, g.matmul(v * _row(g, w), _mT(g, v)), g.matmul(_mT(g, v), v)))(*g.eigh(a, output="both")),
           {"a": SYM}, lambda a: (torch.linalg.eigvalsh(T(a)), T(a), np.broadcast_to(np.eye(4), a.shape)),
           rtol=1e-9, atol=1e-10),
    OpCase("eigh", "upper_triangle_read", lambda g, a: g.eigh(a, lower=False, output="values"),
           {"a": np.triu(SYM)}, lambda a: torch.linalg.eigvalsh(T(a), UPLO="U"), rtol=1e-9, atol=1e-10),
    OpCase("eig", "values_and_eigen_equation",
           lambda g, a: (lambda w, v: (w, g.matmul(g.cast(a, w.dtype), v) - v * _row(g, w)))(*g.eig(a, output="both")),
           {"a": AB}, lambda a: (torch.linalg.eigvals(T(a)), np.zeros(a.shape, np.complex128)), rtol=1e-9, atol=1e-10),
    OpCase("eig", "values_f32_give_c64", lambda g, a: g.eig(a, output="values"), {"a": A32},
           lambda a: torch.linalg.eigvals(torch.from_numpy(a)), rtol=1e-4, atol=1e-5),
    OpCase("svd", "values_and_reconstruction",
           lambda g, a: (lambda u, s, vh: (s, g.matmul(u * _row(g, s), vh), g.matmul(_mT(g, u), u)))(*g.svd(a, output="both")),
           {"a": RW}, lambda a: (torch.linalg.svdvals(T(a)), T(a), np.broadcast_to(np.eye(3), (2, 3, 3))),
           rtol=1e-9, atol=1e-10),
    OpCase("svd", "full_matrices_orthogonal",
           lambda g, a: (lambda u, s, vh: (g.matmul(u, _mT(g, u)), g.matmul(vh, _mT(g, vh))))(*g.svd(a, full_matrices=True, output="both")),
           {"a": R}, lambda a: (np.eye(5), np.eye(3)), rtol=1e-9, atol=1e-10),
    OpCase("svd", "values_only", lambda g, a: g.svd(a, output="values"), {"a": R}, lambda a: torch.linalg.svdvals(T(a)),
           rtol=1e-10),
    # ---------------------------------------------------------------------------- qr / geqrf / householder / ormqr
    OpCase("qr", "reduced_tall", lambda g, a: g.qr(a), {"a": R}, lambda a: tuple(torch.linalg.qr(T(a))), rtol=1e-9, atol=1e-12),
    OpCase("qr", "complete_wide_batched", lambda g, a: g.qr(a, mode="complete"), {"a": RW},
           lambda a: tuple(torch.linalg.qr(T(a), mode="complete")), rtol=1e-9, atol=1e-12),
    OpCase("geqrf", "square_batched", lambda g, a: g.geqrf(a), {"a": AB}, lambda a: tuple(torch.geqrf(T(a))), rtol=1e-9,
           atol=1e-12),
    OpCase("geqrf", "tall", lambda g, a: g.geqrf(a), {"a": R}, lambda a: tuple(torch.geqrf(T(a))), rtol=1e-9, atol=1e-12),
    OpCase("householder_product", "geqrf_reflectors", lambda g, a, t: g.householder_product(a, t), {"a": QR_A, "t": QR_TAU},
           lambda a, t: torch.linalg.householder_product(T(a), T(t)), rtol=1e-9, atol=1e-12),
    OpCase("ormqr", "left_transpose", lambda g, a, t, c: g.ormqr(a, t, c, transpose=True),
           {"a": QR_A, "t": QR_TAU, "c": randn(5, 2, seed=9)},
           lambda a, t, c: torch.ormqr(T(a), T(t), T(c), transpose=True), rtol=1e-9, atol=1e-12),
    OpCase("ormqr", "right", lambda g, a, t, c: g.ormqr(a, t, c, left=False), {"a": QR_A, "t": QR_TAU, "c": randn(2, 5, seed=10)},
           lambda a, t, c: torch.ormqr(T(a), T(t), T(c), left=False), rtol=1e-9, atol=1e-12),
    # ---------------------------------------------------------------------------- LU
    OpCase("lu_factor", "batched", lambda g, a: g.lu_factor(a), {"a": AB}, lambda a: tuple(torch.linalg.lu_factor(T(a))),
           rtol=1e-10),
    OpCase("lu_factor", "wide", lambda g, a: g.lu_factor(a), {"a": RW}, lambda a: tuple(torch.linalg.lu_factor(T(a))),
           rtol=1e-10),
    OpCase("lu_unpack", "wide", lambda g, lu, p: g.lu_unpack(lu, p), _lu_feed(RW),
           lambda lu, p: tuple(torch.lu_unpack(T(lu), torch.from_numpy(p))), rtol=1e-10, atol=1e-12),
    OpCase("lu_unpack", "tall", lambda g, lu, p: g.lu_unpack(lu, p), _lu_feed(R),
           lambda lu, p: tuple(torch.lu_unpack(T(lu), torch.from_numpy(p))), rtol=1e-10, atol=1e-12),
    OpCase("lu_solve", "left_broadcast_b", lambda g, lu, p, b: g.lu_solve(lu, p, b), {**_lu_feed(AB), "b": randn(3, 2, seed=11)},
           lambda lu, p, b: torch.linalg.lu_solve(T(lu), torch.from_numpy(p), T(b)), rtol=1e-10),
    OpCase("lu_solve", "right_adjoint", lambda g, lu, p, b: g.lu_solve(lu, p, b, left=False, adjoint=True),
           {**_lu_feed(A), "b": randn(2, 4, seed=12)},
           lambda lu, p, b: torch.linalg.lu_solve(T(lu), torch.from_numpy(p), T(b), left=False, adjoint=True), rtol=1e-10),
    # ---------------------------------------------------------------------------- triangular
    OpCase("solve_triangular", "upper_left", lambda g, a, b: g.solve_triangular(a, b, upper=True),
           {"a": A, "b": randn(4, 3, seed=13)}, lambda a, b: torch.linalg.solve_triangular(T(a), T(b), upper=True), rtol=1e-10),
    OpCase("solve_triangular", "lower_right_unit_batched", lambda g, a, b: g.solve_triangular(a, b, upper=False, left=False,
                                                                                             unitriangular=True),
           {"a": AB, "b": randn(2, 5, 3, seed=14)},
           lambda a, b: torch.linalg.solve_triangular(T(a), T(b), upper=False, left=False, unitriangular=True), rtol=1e-10),
    OpCase("solve_triangular", "a_broadcast_over_b_batch", lambda g, a, b: g.solve_triangular(a, b, upper=True),
           {"a": AB[0], "b": randn(2, 3, 2, seed=25)}, lambda a, b: torch.linalg.solve_triangular(T(a), T(b), upper=True),
           rtol=1e-10),
    # ---------------------------------------------------------------------------- LDLᵀ
    OpCase("ldl_factor", "symmetric_indefinite", lambda g, a: g.ldl_factor(a), {"a": SYM},
           lambda a: tuple(torch.linalg.ldl_factor(T(a))), rtol=1e-10, atol=1e-12),
    OpCase("ldl_solve", "ldl_factors", lambda g, ld, p, b: g.ldl_solve(ld, p, b), {**_ldl_feed(SYM), "b": randn(2, 4, 2, seed=15)},
           lambda ld, p, b: torch.linalg.ldl_solve(T(ld), torch.from_numpy(p), T(b)), rtol=1e-9),
    # ---------------------------------------------------------------------------- matrix_exp
    OpCase("matrix_exp", "batched", lambda g, a: g.matrix_exp(a), {"a": AB * 0.5}, lambda a: torch.linalg.matrix_exp(T(a)),
           rtol=1e-10),
    OpCase("matrix_exp", "f32", lambda g, a: g.matrix_exp(a), {"a": A32 * 0.2},
           lambda a: torch.linalg.matrix_exp(torch.from_numpy(a)), rtol=1e-4, atol=1e-5),
    # ---------------------------------------------------------------------------- complex parts
    OpCase("complex", "broadcast_f64", lambda g, re, im: g.complex(re, im), {"re": randn(2, 3, seed=16), "im": randn(3, seed=17)},
           lambda re, im: torch.complex(*torch.broadcast_tensors(T(re), T(im)))),
    OpCase("complex", "infinite_parts_stay", lambda g, re, im: g.complex(re, im),
           {"re": np.array([np.inf, 1.0, np.nan], np.float32), "im": np.array([0.0, -np.inf, 2.0], np.float32)},
           lambda re, im: torch.complex(torch.from_numpy(re), torch.from_numpy(im))),
    OpCase("view_as_real", "c128", lambda g, re, im: g.view_as_real(g.complex(re, im)),
           {"re": randn(2, 3, seed=18), "im": randn(2, 3, seed=19)},
           lambda re, im: torch.view_as_real(torch.complex(T(re), T(im)))),
    OpCase("view_as_complex", "f64", lambda g, x: g.view_as_complex(x), {"x": randn(3, 2, seed=20)},
           lambda x: torch.view_as_complex(T(x))),
    # real results, so that the complex rules are gradient-checked (a loss must be real)
    OpCase("complex", "parts_round_trip", lambda g, re, im: g.view_as_real(g.complex(re, im) * g.complex(im, re)),
           {"re": randn(2, 3, seed=22), "im": randn(3, seed=23)},
           lambda re, im: torch.view_as_real(torch.complex(*torch.broadcast_tensors(T(re), T(im)))
                                             * torch.complex(*torch.broadcast_tensors(T(im), T(re))))),
    OpCase("view_as_complex", "squared", lambda g, x: g.view_as_real(g.view_as_complex(x) * g.view_as_complex(x)),
           {"x": randn(3, 2, seed=24)}, lambda x: torch.view_as_real(torch.view_as_complex(T(x)) ** 2)),
]

SHAPE_ERRORS = [
    ShapeErrorCase("matrix_inverse", "not_square", lambda g: g.matrix_inverse(_in(g, "a", (3, 4))), match="square"),
    ShapeErrorCase("det", "vector", lambda g: g.det(_in(g, "a", (3,))), match="matrices"),
    ShapeErrorCase("slogdet", "int", lambda g: g.slogdet(_in(g, "a", (3, 3), "i64")), match="f32 or f64"),
    ShapeErrorCase("cholesky", "f16", lambda g: g.cholesky(_in(g, "a", (3, 3), "f16")), match="f32 or f64"),
    ShapeErrorCase("eigh", "not_square", lambda g: g.eigh(_in(g, "a", (2, 3))), match="square"),
    ShapeErrorCase("eig", "complex_input", lambda g: g.eig(_in(g, "a", (3, 3), "c64")), match="f32 or f64"),
    ShapeErrorCase("svd", "vector", lambda g: g.svd(_in(g, "a", (3,)))),
    ShapeErrorCase("qr", "vector", lambda g: g.qr(_in(g, "a", (3,)))),
    ShapeErrorCase("geqrf", "int", lambda g: g.geqrf(_in(g, "a", (3, 3), "i32"))),
    ShapeErrorCase("householder_product", "wide", lambda g: g.householder_product(_in(g, "a", (2, 3)), _in(g, "t", (2,))),
                   match="M >= N"),
    ShapeErrorCase("ormqr", "rows", lambda g: g.ormqr(_in(g, "a", (4, 3)), _in(g, "t", (3,)), _in(g, "c", (3, 2))), match="rows"),
    ShapeErrorCase("lu_factor", "int", lambda g: g.lu_factor(_in(g, "a", (3, 3), "i64"))),
    ShapeErrorCase("lu_unpack", "float_pivots", lambda g: g.lu_unpack(_in(g, "a", (3, 3)), _in(g, "p", (3,))), match="integer"),
    ShapeErrorCase("lu_solve", "rows", lambda g: g.lu_solve(_in(g, "a", (3, 3)), _in(g, "p", (3,), "i32"), _in(g, "b", (4, 1))),
                   match="rows"),
    ShapeErrorCase("solve_triangular", "batch", lambda g: g.solve_triangular(_in(g, "a", (2, 3, 3)), _in(g, "b", (4, 3, 1)),
                                                                            upper=True), match="broadcast"),
    ShapeErrorCase("ldl_factor", "not_square", lambda g: g.ldl_factor(_in(g, "a", (3, 2))), match="square"),
    ShapeErrorCase("ldl_solve", "dtype", lambda g: g.ldl_solve(_in(g, "a", (3, 3)), _in(g, "p", (3,), "i32"),
                                                               _in(g, "b", (3, 1), "f32")), match="dtype"),
    ShapeErrorCase("matrix_exp", "not_square", lambda g: g.matrix_exp(_in(g, "a", (3, 2))), match="square"),
    ShapeErrorCase("complex", "mixed_dtypes", lambda g: g.complex(_in(g, "a", (3,), "f32"), _in(g, "b", (3,)))),
    ShapeErrorCase("view_as_real", "real_input", lambda g: g.view_as_real(_in(g, "a", (3,)))),
    ShapeErrorCase("view_as_complex", "last_axis_3", lambda g: g.view_as_complex(_in(g, "a", (3, 3))), match="size 2"),
]
