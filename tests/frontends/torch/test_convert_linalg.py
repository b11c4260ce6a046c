"""torch.linalg and the complex builders through the torch reader: torch eager is the oracle (float32, as the
OpInfo samples; batched stacks). Eigen- / singular vectors are compared through what they determine (their
signs are LAPACK-build specific); everything else, pivots and Householder vectors included, elementwise."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
from frontends.torch.helpers import Fn, _x, check, run_both  # noqa: E402


def _spd(*lead, n=4, seed=0):
    a = _x(*lead, n, n, scale=1.0, seed=seed)
    return a @ a.mT + n * torch.eye(n)


A = _x(2, 4, 4, scale=1.0, seed=1) + 4 * torch.eye(4)
B = _x(2, 4, 3, scale=1.0, seed=2)
TALL = _x(2, 5, 3, scale=1.0, seed=3)


def test_inverse_det_slogdet_and_the_effect_token_of_the_error_check():
    # linalg.inv exports linalg_inv_ex plus a with_effects(_linalg_check_errors) node threaded by a token
    check(Fn(lambda a: (torch.linalg.inv(a), torch.linalg.det(a), *torch.linalg.slogdet(a), torch.logdet(a @ a.mT))), A,
          rtol=1e-4, atol=1e-5)


def test_cholesky_family():
    s = _spd(2, seed=4)
    check(Fn(lambda s, b: (torch.linalg.cholesky(s), torch.linalg.cholesky(s, upper=True), torch.cholesky_inverse(torch.linalg.cholesky(s)),
                           torch.cholesky_solve(b, torch.linalg.cholesky(s, upper=True), upper=True),
                           torch.linalg.cholesky_ex(s).L)), s, B, rtol=1e-4, atol=1e-5)


def test_solve_vector_matrix_right_and_tensorsolve():
    v = _x(2, 4, scale=1.0, seed=5)
    check(Fn(lambda a, b, v: (torch.linalg.solve(a, b), torch.linalg.solve(a, v), torch.linalg.solve(a, b.mT, left=False),
                              torch.linalg.solve_ex(a, b).result)), A, B, v, rtol=1e-4, atol=1e-5)
    t = _x(2, 3, 6, scale=1.0, seed=6) + torch.eye(6).reshape(2, 3, 6)
    check(Fn(lambda t, r: torch.linalg.tensorsolve(t, r)), t, _x(2, 3, seed=7), rtol=1e-4, atol=1e-5)


def test_lu_family_pivots_are_torch_s():
    check(Fn(lambda a, b: (*torch.linalg.lu_factor(a), *torch.linalg.lu(a), torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
                           torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False, adjoint=True))), A, B,
          rtol=1e-4, atol=1e-5)
    check(Fn(lambda w: (*torch.linalg.lu_factor(w), *torch.lu_unpack(*torch.linalg.lu_factor(w)))), TALL.mT.contiguous(),
          rtol=1e-4, atol=1e-5)


def test_triangular_solves():
    check(Fn(lambda a, b: (torch.linalg.solve_triangular(a, b, upper=True), torch.linalg.solve_triangular(a, b.mT, upper=False, left=False,
                                                                                                       unitriangular=True),
                           *torch.triangular_solve(b, a, upper=False, transpose=True))), A, B, rtol=1e-4, atol=1e-5)


def test_qr_geqrf_householder_ormqr():
    check(Fn(lambda m, c: (*torch.linalg.qr(m), *torch.linalg.qr(m, mode="complete"), torch.linalg.qr(m, mode="r")[1],
                           *torch.geqrf(m), torch.linalg.householder_product(*torch.geqrf(m)),
                           torch.ormqr(*torch.geqrf(m), c, transpose=True))), TALL, _x(2, 5, 2, seed=8), rtol=1e-4, atol=1e-5)


def test_ldl_and_matrix_exp():
    s = _x(2, 4, 4, scale=1.0, seed=9)
    s = s + s.mT
    check(Fn(lambda s, b: (*torch.linalg.ldl_factor(s), torch.linalg.ldl_solve(*torch.linalg.ldl_factor(s), b),
                           torch.linalg.matrix_exp(0.3 * s))), s, B, rtol=1e-4, atol=1e-5)


def test_svd_values_rank_norms_and_pinv_are_unique():
    check(Fn(lambda m, s: (torch.linalg.svdvals(m), torch.linalg.matrix_rank(m), torch.linalg.norm(m, "nuc", dim=(-2, -1)),
                           torch.linalg.cond(m), torch.linalg.pinv(m), torch.linalg.pinv(s, hermitian=True), torch.pinverse(m),
                           torch.linalg.eigvalsh(s), torch.linalg.eigvals(A))), TALL, _spd(2, seed=10), rtol=2e-4, atol=1e-5)


def test_vectors_reconstruct_what_torch_decomposes():
    """U·diag(S)·Vh, V·diag(w)·Vᵀ and A·V = V·diag(w) from rlx's factors equal torch's input; the values
    equal torch's values."""
    s = _x(2, 4, 4, scale=1.0, seed=11)
    s = s + s.mT
    module = Fn(lambda m, s, a: (*torch.linalg.svd(m, full_matrices=False), *torch.linalg.eigh(s), *torch.linalg.eig(a)))
    with torch.no_grad():
        want = [t.numpy() for t in module(TALL, s, A)]
    for got in run_both(module, TALL, s, A):
        u, sv, vh, w, v, ew, ev = got
        np.testing.assert_allclose(sv, want[1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose((u * sv[..., None, :]) @ vh, TALL.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(w, want[3], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose((v * w[..., None, :]) @ v.swapaxes(-1, -2), s.numpy(), rtol=1e-4, atol=1e-4)
        assert ew.dtype == np.complex64 and ev.dtype == np.complex64
        np.testing.assert_allclose(ew, want[5], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(A.numpy() @ ev, ev * ew[..., None, :], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.abs(np.sum(ev.conj() * want[6], axis=-2)), 1.0, rtol=1e-4)  # same vectors up to a phase


def test_complex_builders_and_complex128():
    re, im = _x(3, 4, seed=12), _x(4, seed=13)
    check(Fn(lambda r, i: (torch.complex(r, i), torch.polar(r.abs(), i), torch.view_as_real(torch.complex(r, i) * 2),
                           torch.view_as_complex(torch.stack([r, r * 2], -1)), r.cdouble(), torch.complex(r.double(), r.double()))),
          re, im, rtol=1e-5, atol=1e-6)
    x = _x(64, seed=14)
    check(Fn(lambda x: torch.view_as_real(torch.stft(x, 16, return_complex=True, window=torch.hann_window(16)))), x,
          rtol=1e-4, atol=1e-4)


def test_singular_and_indefinite_matrices_raise_at_run_time():
    g, params = rlx.torch.import_module(Fn(torch.linalg.inv), (A,))
    with pytest.raises(rlx.RlxError, match=r"(?i)singular"):
        rlx.run(g, inputs=dict(zip(g.inputs(), [np.zeros((2, 4, 4), np.float32)])), params=params)
    g, params = rlx.torch.import_module(Fn(torch.linalg.cholesky), (_spd(seed=15),))
    with pytest.raises(rlx.RlxError, match="positive definite"):
        rlx.run(g, inputs=dict(zip(g.inputs(), [-np.eye(4, dtype=np.float32)])), params=params)


def test_lu_without_pivoting_is_refused_by_name():
    with pytest.raises(rlx.RlxError, match="pivot=False"):
        rlx.torch.import_module(Fn(lambda a: torch.linalg.lu_factor_ex(a, pivot=False)[0]), (A,))


def test_gradients_of_inverse_det_slogdet_cholesky_and_solve_match_torch_autograd():
    s, b = _spd(2, seed=16).double(), _x(2, 4, 3, scale=1.0, seed=17).double()
    a = A.double()

    def loss(a, s, b):
        return (torch.linalg.inv(a).sin().sum() + torch.linalg.det(a).sum() + torch.linalg.slogdet(a)[1].sum()
                + torch.linalg.cholesky(s).cos().sum() + torch.linalg.solve(a, b).pow(2).sum()
                + torch.linalg.solve(a, b.mT, left=False).sum() + torch.linalg.solve(a, b[..., 0]).sum())

    g, params = rlx.torch.import_module(Fn(loss), (a, s, b))
    names = list(g.inputs())
    bwd = rlx.grad_with_loss(g, wrt=names)
    got = rlx.run(bwd, {**dict(zip(names, [a.numpy(), s.numpy(), b.numpy()])), "d_output": np.array(1.0)}, params)
    leaves = [t.clone().requires_grad_(True) for t in (a, s, b)]
    want = torch.autograd.grad(loss(*leaves), leaves)
    want[1].tril_()  # rlx's cholesky reads the lower triangle only: an entry below the diagonal stands for two
    want = [w.numpy() for w in want]
    want[1] = want[1] + np.tril(want[1], -1)
    np.testing.assert_allclose(got[0], loss(a, s, b).item(), rtol=1e-12)
    for gr, w in zip(got[1:], want):
        np.testing.assert_allclose(gr, w, rtol=1e-8, atol=1e-10)
