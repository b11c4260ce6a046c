"""torch converters for ``torch.linalg`` and the legacy factorization ops: each ATen op becomes the
:mod:`rlx.ops.linalg_decomp` op computing it (pinv, cholesky_inverse / cholesky_solve and solve compose
them). The ``_ex`` variants' ``info`` output is zeros: a matrix the kernel cannot factor raises at run time
instead (the ``_linalg_check_errors`` node torch adds after them carries no data and is dropped). Outputs
torch computes only for its backward (``_linalg_det``'s LU, ``_linalg_solve_ex``'s LU / pivots) are not
converted; a graph that reads them is refused naming the output."""

from __future__ import annotations

import numpy as np

from rlx.frontends.torch.context import _conv, _Ctx
from rlx.ir.graph import Value


def _mT(cx: _Ctx, x: Value) -> Value:
    r = len(x.shape)
    return cx.g.transpose(x, perm=[*range(r - 2), r - 1, r - 2])


def _info(cx: _Ctx, batch) -> Value:
    return cx.g.constant(np.zeros(tuple(cx.static(d, "batch dim") for d in batch), np.int32))


def _only_values(node, index: int) -> bool:
    """Every user of the multi-output ``node`` reads output ``index`` (the values): vectors need not be computed."""
    import operator

    return bool(node.users) and all(u.target is operator.getitem and u.args[1] == index for u in node.users)


@_conv("aten._linalg_check_errors.default")
def _check_errors(cx, node, *args, **kwargs):
    return None


@_conv("aten.linalg_inv_ex.default")
def _inv_ex(cx, node, a, check_errors=False):
    return cx.g.matrix_inverse(a), _info(cx, a.shape[:-2])


@_conv("aten.linalg_cholesky_ex.default")
def _cholesky_ex(cx, node, a, upper=False, check_errors=False):
    return cx.g.cholesky(a, upper=bool(upper)), _info(cx, a.shape[:-2])


@_conv("aten.cholesky.default")
def _cholesky(cx, node, a, upper=False):
    return cx.g.cholesky(a, upper=bool(upper))


def _cholesky_solve_of(cx: _Ctx, b: Value, factor: Value, upper: bool) -> Value:
    """X with (L·Lᵀ)·X = B: two triangular solves with the factor (upper: A = Uᵀ·U)."""
    g = cx.g
    if upper:
        y = g.solve_triangular(_mT(cx, factor), b, upper=False)
        return g.solve_triangular(factor, y, upper=True)
    y = g.solve_triangular(factor, b, upper=False)
    return g.solve_triangular(_mT(cx, factor), y, upper=True)


@_conv("aten.cholesky_solve.default")
def _cholesky_solve(cx, node, b, factor, upper=False):
    return _cholesky_solve_of(cx, b, factor, bool(upper))


@_conv("aten.cholesky_inverse.default")
def _cholesky_inverse(cx, node, factor, upper=False):
    n = cx.static(factor.shape[-1], "matrix size")
    eye = cx.g.constant(np.eye(n, dtype=factor.dtype.numpy))
    return _cholesky_solve_of(cx, eye, factor, bool(upper))


@_conv("aten._linalg_det.default")
def _det(cx, node, a):
    return cx.g.det(a), None, None


@_conv("aten._linalg_slogdet.default")
def _slogdet(cx, node, a):
    sign, logabs = cx.g.slogdet(a)
    return sign, logabs, None, None


@_conv("aten._linalg_eigh.default")
def _eigh(cx, node, a, UPLO="L", compute_v=True):
    lower = str(UPLO).upper() == "L"
    if not compute_v or _only_values(node, 0):
        return cx.g.eigh(a, lower=lower), None
    w, v = cx.g.eigh(a, lower=lower, output="both")
    return w, v


@_conv("aten.linalg_eig.default")
def _eig(cx, node, a):
    if _only_values(node, 0):
        return cx.g.eig(a), None
    w, v = cx.g.eig(a, output="both")
    return w, v


@_conv("aten._linalg_svd.default")
def _svd(cx, node, a, full_matrices=False, compute_uv=True, driver=None):
    if not compute_uv or _only_values(node, 1):
        return None, cx.g.svd(a), None
    u, s, vh = cx.g.svd(a, full_matrices=bool(full_matrices), output="both")
    return u, s, vh


@_conv("aten.linalg_qr.default")
def _qr(cx, node, a, mode="reduced"):
    if mode == "r":
        _, r = cx.g.qr(a)
        return cx.g.constant(np.zeros(0, a.dtype.numpy)), r
    if mode not in ("reduced", "complete"):
        raise cx.fail(f"qr mode {mode!r} is not one of reduced / complete / r")
    q, r = cx.g.qr(a, mode=mode)
    return q, r


@_conv("aten.geqrf.default")
def _geqrf(cx, node, a):
    qr, tau = cx.g.geqrf(a)
    return qr, tau


@_conv("aten.linalg_householder_product.default")
def _householder(cx, node, a, tau):
    return cx.g.householder_product(a, tau)


@_conv("aten.ormqr.default")
def _ormqr(cx, node, a, tau, c, left=True, transpose=False):
    return cx.g.ormqr(a, tau, c, left=bool(left), transpose=bool(transpose))


def _lu_factor_of(cx: _Ctx, a: Value, pivot: bool):
    if not pivot:
        raise cx.fail("LU without pivoting (pivot=False) is not supported (torch runs it on CUDA only)")
    lu, piv = cx.g.lu_factor(a)
    return lu, piv


@_conv("aten.linalg_lu_factor_ex.default")
def _lu_factor_ex(cx, node, a, pivot=True, check_errors=False):
    lu, piv = _lu_factor_of(cx, a, pivot)
    return lu, piv, _info(cx, a.shape[:-2])


@_conv("aten.linalg_lu.default")
def _lu(cx, node, a, pivot=True):
    p, lo, up = cx.g.lu_unpack(*_lu_factor_of(cx, a, pivot))
    return p, lo, up


@_conv("aten.lu_unpack.default")
def _lu_unpack(cx, node, lu, pivots, unpack_data=True, unpack_pivots=True):
    p, lo, up = cx.g.lu_unpack(lu, pivots)
    empty = cx.g.constant(np.zeros(0, lu.dtype.numpy))
    return (p if unpack_pivots else empty), (lo if unpack_data else empty), (up if unpack_data else empty)


@_conv("aten.linalg_lu_solve.default")
def _lu_solve(cx, node, lu, pivots, b, left=True, adjoint=False):
    return cx.g.lu_solve(lu, pivots, b, left=bool(left), adjoint=bool(adjoint))


@_conv("aten._linalg_solve_ex.default")
def _solve_ex(cx, node, a, b, left=True, check_errors=False):
    """torch's rule: B is a vector (or a batch of them) when it is 1-D or A's shape without its last dim.
    Batch dims broadcast; X·A = B is Aᵀ·Xᵀ = Bᵀ. rlx's dense solves (differentiable) compute it."""
    g = cx.g
    vector = len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if not left:
        a = _mT(cx, a)
        b = b if vector else _mT(cx, b)
    core_b = 1 if vector else 2
    lead = [cx.static(d, "batch dim") for d in np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[: len(b.shape) - core_b]))]
    if list(a.shape[:-2]) != lead:
        a = g.expand(a, target_shape=[*lead, *a.shape[-2:]])
    if list(b.shape[: len(b.shape) - core_b]) != lead:
        b = g.expand(b, target_shape=[*lead, *b.shape[len(b.shape) - core_b:]])
    x = g.batched_dense_solve(a, b) if lead else g.dense_solve(a, b)
    if not left and not vector:
        x = _mT(cx, x)
    return x, None, None, _info(cx, lead)


@_conv("aten.linalg_solve_triangular.default")
def _solve_triangular(cx, node, a, b, upper, left=True, unitriangular=False):
    return cx.g.solve_triangular(a, b, upper=bool(upper), left=bool(left), unitriangular=bool(unitriangular))


@_conv("aten.triangular_solve.default")
def _triangular_solve(cx, node, b, a, upper=True, transpose=False, unitriangular=False):
    """Legacy ``triangular_solve(B, A)``: (X with op(A)·X = B, a copy of A); op = transpose or identity."""
    coeff = _mT(cx, a) if transpose else a
    x = cx.g.solve_triangular(coeff, b, upper=bool(upper) != bool(transpose), unitriangular=bool(unitriangular))
    return x, a


@_conv("aten.linalg_ldl_factor_ex.default")
def _ldl_factor_ex(cx, node, a, hermitian=False, check_errors=False):
    ld, piv = cx.g.ldl_factor(a)
    return ld, piv, _info(cx, a.shape[:-2])


@_conv("aten.linalg_ldl_solve.default")
def _ldl_solve(cx, node, ld, pivots, b, hermitian=False):
    return cx.g.ldl_solve(ld, pivots, b)


@_conv("aten.linalg_matrix_exp.default")
def _matrix_exp(cx, node, a):
    return cx.g.matrix_exp(a)


@_conv("aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_pinv.atol_rtol_float")
def _pinv(cx, node, a, atol=None, rtol=None, hermitian=False):
    """torch's definition: values (singular values, or |eigenvalues| when hermitian) at most
    max(atol, rtol·largest) count as zero; rtol defaults to eps·max(M, N) when atol is not given either,
    else to 0. The result is unique (sign choices of the vectors cancel)."""
    g, dt = cx.g, a.dtype
    m, n = (cx.static(d, "matrix dim") for d in a.shape[-2:])
    lead = list(a.shape[:-2])
    if min(m, n) == 0:
        return g.constant(np.zeros((*[cx.static(d, "batch dim") for d in lead], n, m), dt.numpy))
    if rtol is None:
        rtol = float(np.finfo(dt.numpy).eps) * max(m, n) if atol is None else 0.0
    if hermitian:
        w, v = g.eigh(a, output="both")
        mag = g.abs(w)
        largest = g.reduce(mag, op="max", axes=[-1], keep_dim=True)
        left, right = v, _mT(cx, v)
    else:
        u, w, vh = g.svd(a, output="both")
        mag = w
        largest = g.narrow(w, axis=-1, start=0, length=1)
        left, right = _mT(cx, vh), _mT(cx, u)
    tol = g.maximum(cx.cast(cx.tensor(0.0 if atol is None else atol, dt), dt), cx.cast(cx.tensor(rtol, dt), dt) * largest)
    kept = g.gt(mag, tol)
    one = cx.scalar(1.0, dt)
    inv = g.where(kept, one / g.where(kept, w, one), cx.scalar(0.0, dt))
    return g.matmul(left * g.reshape(inv, new_shape=[*inv.shape[:-1], 1, inv.shape[-1]]), right)
