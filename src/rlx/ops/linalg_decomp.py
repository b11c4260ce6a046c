"""Matrix factorizations and solvers (torch.linalg's family): cholesky, matrix_inverse, det, slogdet, eigh, eig,
svd, qr, geqrf, householder_product, ormqr, lu_factor, lu_unpack, lu_solve, solve_triangular, ldl_factor,
ldl_solve, matrix_exp.

Every op works on stacks of matrices ``[..., M, N]`` (the leading dims are batch dims) of one real float
dtype (f32 / f64, computed in that precision as LAPACK does: torch's float32 results are float32 LAPACK
results). Kernels are NumPy's (``numpy.linalg``) or, where NumPy has no routine, the LAPACK routine itself
through ``scipy.linalg.lapack`` (imported on first use; the ``linalg`` extra), so factor layouts and pivot
conventions are LAPACK's, which are torch's: pivots are 1-based int32 row interchanges (``getrf`` /
``sytrf``), ``geqrf`` keeps the Householder vectors below R's diagonal.

Outputs that are not unique are LAPACK's choice and documented as such on the op: eigenvectors (eigh, eig)
and singular vectors (svd) are unique only up to a sign (a unit phase for eig) per vector; two LAPACK builds
(torch's MKL, NumPy's OpenBLAS) may pick different signs, so compare them through what they reconstruct.
A matrix the routine cannot factor (singular for inverse / lu_solve, not positive definite for cholesky)
raises :class:`rlx.RlxError` at run time instead of torch's ``info`` output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, RlxError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ir.symbolic import known_ge
from rlx.ops.common import linear_solve_jvp, refuse_rule

FAMILY = "linalg_decomp"


# ------------------------------------------------------------------------------------ type helpers
def _matrix(t: TensorType, what: str, square: bool = False) -> None:
    if not t.dtype.is_float or t.dtype.is_low_precision_float:
        raise ShapeError(f"{what} must be f32 or f64 (LAPACK precisions), got {t.dtype}")
    if len(t.shape) < 2:
        raise ShapeError(f"{what} must be a [..., M, N] stack of matrices, got rank {len(t.shape)}")
    if square and t.shape[-1] != t.shape[-2]:
        raise ShapeError(f"{what} must be square, got {t.shape!r}")


def _same_dtype(*pairs: tuple[TensorType, str]) -> None:
    dtypes = {t.dtype for t, _ in pairs}
    if len(dtypes) > 1:
        raise ShapeError("operands must share one dtype, got " + ", ".join(f"{w} {t.dtype}" for t, w in pairs))


def _static_batch(*ts: TensorType) -> tuple:
    """Broadcast of the batch dims (all but the last two) of several stacks, as torch does."""
    try:
        return tuple(broadcast_shapes(*[Shape(tuple(t.shape[:-2])) for t in ts]))
    except ShapeError as exc:
        raise ShapeError(f"batch dims {[list(t.shape[:-2]) for t in ts]} do not broadcast ({exc})") from None


def _min_dim(t: TensorType, what: str):
    """min(M, N) of t's matrices: static, or one symbol when both dims are it (or are known ordered)."""
    m, n = t.shape[-2], t.shape[-1]
    if isinstance(m, int) and isinstance(n, int):
        return min(m, n)
    if m == n or known_ge(n, m):
        return m
    if known_ge(m, n):
        return n
    raise ShapeError(f"{what} needs min(M, N) of {t.shape!r}: static dims, or equal / ordered symbols")


def _tt(dims, dtype: DType) -> TensorType:
    return TensorType(Shape(tuple(dims)), dtype)


def _complex_of(dtype: DType) -> DType:
    return DType.C128 if dtype is DType.F64 else DType.C64


# ------------------------------------------------------------------------------------ kernel helpers
def _lapack(name: str, a: np.ndarray) -> Callable[..., Any]:
    try:
        from scipy.linalg import get_lapack_funcs
    except ImportError:  # pragma: no cover - scipy is in the linalg extra
        raise RlxError(f"LAPACK routine {name} needs scipy (pip install 'rlx[linalg]')") from None
    return get_lapack_funcs((name,), (a,))[0]


def _each(fn: Callable[..., tuple], arrays: list[np.ndarray], cores: list[int]) -> tuple[np.ndarray, ...]:
    """``fn`` on each batch element: ``arrays[i]`` has ``cores[i]`` core dims; batch dims broadcast."""
    lead = np.broadcast_shapes(*[a.shape[: a.ndim - c] for a, c in zip(arrays, cores)])
    arrays = [np.broadcast_to(a, lead + a.shape[a.ndim - c:]) for a, c in zip(arrays, cores)]
    results: list[list[np.ndarray]] | None = None
    for idx in np.ndindex(*lead) if lead else [()]:
        out = fn(*[np.array(a[idx]) for a in arrays])
        if results is None:
            results = [[] for _ in out]
        for acc, o in zip(results, out):
            acc.append(np.asarray(o))
    if results is None:  # an empty batch: one call on zeros gives the per-matrix shapes
        probe = fn(*[np.zeros(a.shape[len(lead):], a.dtype) for a in arrays])
        return tuple(np.zeros(lead + np.shape(p), np.asarray(p).dtype) for p in probe)
    return tuple(np.stack(r).reshape(lead + r[0].shape) for r in results)


def _checked(what: str, info: int) -> None:
    if info < 0:
        raise RlxError(f"{what}: LAPACK argument {-info} is invalid")


def _np(fn: Callable[..., Any], what: str, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except np.linalg.LinAlgError as exc:
        raise RlxError(f"{what}: {exc}") from None


# ------------------------------------------------------------------------------------ autodiff helpers
_NO_VJP = refuse_rule("no gradient rule: the factorization's derivative is not implemented (differentiate "
                  "matrix_inverse / det / slogdet / cholesky / solve instead)")


#: core (non-batch) rank of each operand of the ops whose operands' batch dims broadcast
_CORES = {"lu_solve": (2, 1, 2), "solve_triangular": (2, 2), "ldl_solve": (2, 1, 2), "ormqr": (2, 1, 2),
          "householder_product": (2, 1), "lu_unpack": (2, 1)}


def _lead_batch(ctx, node, operands, batched):
    """Every op here maps over leading batch dims, so the vmapped op is the op on the batched operands
    (an operand with fewer batch dims gets 1-axes after the new one, so the batch dims still line up)."""
    ins = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    cores = _CORES.get(node.op)
    if cores:
        lead = max(len(v.shape) - c for v, c in zip(ins, cores))
        ins = [ctx.reshape(v, [v.shape[0], *[1] * (lead - len(v.shape) + c), *v.shape[1:]]) if len(v.shape) - c < lead else v
               for v, c in zip(ins, cores)]
    out = ctx.graph.append(node.op, ins, dict(node.attrs))
    return ctx.graph.results(out) if node.extra_types else out


def _mT(ctx, v):
    return ctx.transpose_last2(v)


def _trace_of_product(ctx, x, y):
    """trace(x @ y) over the last two axes: sum(xᵀ ∘ y)."""
    return ctx.graph.reduce(_mT(ctx, x) * y, op="sum", axes=[-2, -1], keep_dim=False)


def _unsq2(ctx, v):
    return ctx.reshape(v, [*v.shape, 1, 1])


def _op(name: str, operands: tuple[str, ...], infer, kernel, doc: str, attrs=None, vjp=None, jvp=None) -> None:
    defop(name=name, family=FAMILY, arity=len(operands), operands=operands, attrs=attrs or {}, infer=infer,
          kernel=kernel, doc=doc, vjp=vjp or _NO_VJP, jvp=jvp or _NO_VJP, batch=_lead_batch,
          flags={"blas", "eager_unsafe"})


# ------------------------------------------------------------------------------------ matrix_inverse
def _square_type(ins, attrs):
    _matrix(ins[0], "A", square=True)
    return ins[0]


def _inverse_vjp(ctx, node, ct):
    y = ctx.output(node)
    yt = _mT(ctx, y)
    return [-ctx.graph.matmul(ctx.graph.matmul(yt, ct), yt)]


def _inverse_jvp(ctx, node, tangents):
    y = ctx.output(node)
    return -ctx.graph.matmul(ctx.graph.matmul(y, tangents[0]), y)


_op("matrix_inverse", ("a",), _square_type,
    lambda args, attrs, out: _np(np.linalg.inv, "matrix_inverse", args[0]),
    "A⁻¹ of each square matrix of A [..., N, N] (LAPACK getrf + getri through np.linalg.inv); a singular "
    "matrix raises RlxError at run time. Gradient -A⁻ᵀ·ct·A⁻ᵀ, tangent -A⁻¹·t·A⁻¹.",
    vjp=_inverse_vjp, jvp=_inverse_jvp)


# ------------------------------------------------------------------------------------ det / slogdet
def _det_type(ins, attrs):
    _matrix(ins[0], "A", square=True)
    return _tt(ins[0].shape[:-2], ins[0].dtype)


def _det_vjp(ctx, node, ct):
    a = ctx.operand(node, 0)
    inv_t = _mT(ctx, ctx.graph.matrix_inverse(a))
    return [_unsq2(ctx, ct * ctx.output(node)) * inv_t]


def _det_jvp(ctx, node, tangents):
    a = ctx.operand(node, 0)
    return ctx.output(node) * _trace_of_product(ctx, ctx.graph.matrix_inverse(a), tangents[0])


_op("det", ("a",), _det_type, lambda args, attrs, out: np.linalg.det(args[0]).astype(out.dtype.numpy),
    "Determinant of each square matrix of A [..., N, N] -> [...] (LU with partial pivoting; 1 for N = 0). "
    "Gradient ct·det·A⁻ᵀ (needs an invertible A), tangent det·trace(A⁻¹·t).",
    vjp=_det_vjp, jvp=_det_jvp)


def _slogdet_type(ins, attrs):
    _matrix(ins[0], "A", square=True)
    t = _tt(ins[0].shape[:-2], ins[0].dtype)
    return t, t


def _slogdet_kernel(args, attrs, out):
    sign, logabs = np.linalg.slogdet(args[0])
    return sign.astype(out[0].dtype.numpy), logabs.astype(out[1].dtype.numpy)


def _slogdet_vjp(ctx, node, ct):
    ct_log = ct[1]
    if ct_log is None:
        return [None]
    inv_t = _mT(ctx, ctx.graph.matrix_inverse(ctx.operand(node, 0)))
    return [_unsq2(ctx, ct_log) * inv_t]


def _slogdet_jvp(ctx, node, tangents):
    a = ctx.operand(node, 0)
    return None, _trace_of_product(ctx, ctx.graph.matrix_inverse(a), tangents[0])


_op("slogdet", ("a",), _slogdet_type, _slogdet_kernel,
    "(sign, log|det|) of each square matrix of A [..., N, N], both [...]: sign is -1, 0 or 1 (log|det| = -inf "
    "for a singular matrix). The sign is locally constant (no gradient); log|det| pulls back to ct·A⁻ᵀ.",
    vjp=_slogdet_vjp, jvp=_slogdet_jvp)


# ------------------------------------------------------------------------------------ cholesky
def _tril_mask(ctx, x, diagonal: float):
    n = x.shape[-1]
    if not isinstance(n, int):
        raise AutodiffError("cholesky derivative needs a static matrix size")
    mask = np.tril(np.ones((n, n)), -1) + diagonal * np.eye(n)
    return ctx.graph.constant(mask.astype(x.dtype.numpy))


def _phi(ctx, x):
    """The lower triangle of x with its diagonal halved (the Cholesky derivative's projection)."""
    return x * _tril_mask(ctx, x, 0.5)


def _cholesky_vjp(ctx, node, ct):
    """Only A's lower triangle is read, so an entry below the diagonal stands for itself and its mirror:
    the symmetric gradient G = (S + Sᵀ)/2 becomes tril(2G) with G's diagonal, i.e. Φ(S + Sᵀ)."""
    g = ctx.graph
    lo = ctx.output(node)
    if node.attrs["upper"]:
        lo, ct = _mT(ctx, lo), _mT(ctx, ct)
    linv = g.matrix_inverse(lo)
    s = g.matmul(g.matmul(_mT(ctx, linv), _phi(ctx, g.matmul(_mT(ctx, lo), ct))), linv)
    return [_phi(ctx, s + _mT(ctx, s))]


def _cholesky_jvp(ctx, node, tangents):
    g = ctx.graph
    lo = ctx.output(node)
    if node.attrs["upper"]:
        lo = _mT(ctx, lo)
    t = tangents[0]
    t = t * _tril_mask(ctx, t, 1.0) + _mT(ctx, t * _tril_mask(ctx, t, 0.0))  # the symmetric matrix the kernel reads
    linv = g.matrix_inverse(lo)
    d = g.matmul(lo, _phi(ctx, g.matmul(g.matmul(linv, t), _mT(ctx, linv))))
    return _mT(ctx, d) if node.attrs["upper"] else d


def _cholesky_kernel(args, attrs, out):
    lo = _np(np.linalg.cholesky, "cholesky (A must be symmetric positive definite)", args[0])
    return np.ascontiguousarray(np.swapaxes(lo, -1, -2)) if attrs["upper"] else lo


_op("cholesky", ("a",), _square_type, _cholesky_kernel,
    "Cholesky factor of each symmetric positive-definite matrix of A [..., N, N]: lower L with A = L·Lᵀ, or "
    "(upper) U = Lᵀ with A = Uᵀ·U. Reads the lower triangle (LAPACK potrf); a matrix that is not positive "
    "definite raises RlxError at run time. Gradient (of the lower triangle read): Φ(X) = tril(X) with the "
    "diagonal halved, S = L⁻ᵀ·Φ(Lᵀ·ct)·L⁻¹, dA = Φ(S + Sᵀ); tangent L·Φ(L⁻¹·T·L⁻ᵀ) with T the symmetric "
    "matrix of t's lower triangle.",
    attrs={"upper": AttrSpec("bool", default=False)}, vjp=_cholesky_vjp, jvp=_cholesky_jvp)


# ------------------------------------------------------------------------------------ eigh / eig
def _eigh_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A", square=True)
    w = _tt(t.shape[:-1], t.dtype)
    return (w, t) if attrs["output"] == "both" else w


def _eigh_kernel(args, attrs, out):
    uplo = "L" if attrs["lower"] else "U"
    if attrs["output"] == "values":
        return _np(np.linalg.eigvalsh, "eigh", args[0], UPLO=uplo)
    w, v = _np(np.linalg.eigh, "eigh", args[0], UPLO=uplo)
    return w, v


_OUTPUT = AttrSpec("str", default="values", choices=("both", "values"),
                   doc="values (default): the eigen- / singular values only; both: one node with every result")

_op("eigh", ("a",), _eigh_type, _eigh_kernel,
    "Eigen-decomposition of each symmetric matrix of A [..., N, N] (reads the lower triangle, or the upper "
    "with lower=False; LAPACK syevd): eigenvalues [..., N] ascending, and (output=both) orthonormal "
    "eigenvectors as the columns of [..., N, N]. Each eigenvector is unique only up to its sign (a basis of "
    "the eigenspace for a repeated eigenvalue): V·diag(w)·Vᵀ is what is determined.",
    attrs={"lower": AttrSpec("bool", default=True), "output": _OUTPUT})


def _eig_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A", square=True)
    c = _complex_of(t.dtype)
    w = _tt(t.shape[:-1], c)
    return (w, _tt(t.shape, c)) if attrs["output"] == "both" else w


def _eig_kernel(args, attrs, out):
    if attrs["output"] == "values":
        return _np(np.linalg.eigvals, "eig", args[0]).astype(out.dtype.numpy)
    w, v = _np(np.linalg.eig, "eig", args[0])
    return w.astype(out[0].dtype.numpy), v.astype(out[1].dtype.numpy)


_op("eig", ("a",), _eig_type, _eig_kernel,
    "Eigen-decomposition of each square real matrix of A [..., N, N] (LAPACK geev): complex eigenvalues "
    "[..., N] (c64 for f32, c128 for f64; in LAPACK's order, conjugate pairs adjacent) and (output=both) "
    "unit-norm right eigenvectors as columns. Each eigenvector is unique only up to a unit complex factor: "
    "A·V = V·diag(w) is what is determined.",
    attrs={"output": _OUTPUT})


# ------------------------------------------------------------------------------------ svd
def _svd_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A")
    m, n = t.shape[-2], t.shape[-1]
    k, lead = _min_dim(t, "svd"), tuple(t.shape[:-2])
    s = _tt((*lead, k), t.dtype)
    if attrs["output"] == "values":
        return s
    full = attrs["full_matrices"]
    return _tt((*lead, m, m if full else k), t.dtype), s, _tt((*lead, n if full else k, n), t.dtype)


def _svd_kernel(args, attrs, out):
    if attrs["output"] == "values":
        return _np(np.linalg.svd, "svd", args[0], compute_uv=False)
    u, s, vh = _np(np.linalg.svd, "svd", args[0], full_matrices=attrs["full_matrices"])
    return u, s, vh


_op("svd", ("a",), _svd_type, _svd_kernel,
    "Singular value decomposition A = U·diag(S)·Vh of each matrix of A [..., M, N] (LAPACK gesdd): S [..., K] "
    "descending (K = min(M, N)); with output=both also U [..., M, K] and Vh [..., K, N] (M and N columns / "
    "rows with full_matrices). Each singular-vector pair (u_i, v_i) is unique only up to a common sign (more "
    "freedom for repeated singular values): U·diag(S)·Vh is what is determined.",
    attrs={"full_matrices": AttrSpec("bool", default=False), "output": _OUTPUT})


# ------------------------------------------------------------------------------------ qr / geqrf / householder
def _qr_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A")
    m, n = t.shape[-2], t.shape[-1]
    lead, k = tuple(t.shape[:-2]), _min_dim(t, "qr")
    q = m if attrs["mode"] == "complete" else k
    return _tt((*lead, m, q), t.dtype), _tt((*lead, q, n), t.dtype)


def _qr_kernel(args, attrs, out):
    q, r = np.linalg.qr(args[0], mode=attrs["mode"])
    return q, r


_op("qr", ("a",), _qr_type, _qr_kernel,
    "QR decomposition A = Q·R of each matrix of A [..., M, N] by Householder reflections (LAPACK geqrf + orgqr, "
    "R's diagonal may be negative, as LAPACK and torch leave it): mode=reduced gives Q [..., M, K], R [..., K, N] "
    "(K = min(M, N)), complete Q [..., M, M], R [..., M, N].",
    attrs={"mode": AttrSpec("str", default="reduced", choices=("reduced", "complete"))})


def _geqrf_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A")
    return t, _tt((*t.shape[:-2], _min_dim(t, "geqrf")), t.dtype)


def _geqrf_one(a):
    qr, tau, _work, info = _lapack("geqrf", a)(a)
    _checked("geqrf", info)
    return qr, tau


_op("geqrf", ("a",), _geqrf_type, lambda args, attrs, out: _each(_geqrf_one, [args[0]], [2]),
    "LAPACK geqrf of each matrix of A [..., M, N]: R on and above the diagonal, the Householder vectors "
    "(unit leading entry implied) below it, and their scales tau [..., min(M, N)]; Q = H_1···H_k with "
    "H_i = I - tau_i·v_i·v_iᵀ (householder_product rebuilds it, ormqr applies it).")


def _householder_type(ins, attrs):
    a, tau = ins
    _matrix(a, "A")
    _same_dtype((a, "A"), (tau, "tau"))
    m, n = a.shape[-2], a.shape[-1]
    if isinstance(m, int) and isinstance(n, int) and m < n:
        raise ShapeError(f"householder_product needs M >= N, got {a.shape!r}")
    if len(tau.shape) != len(a.shape) - 1 or tuple(tau.shape[:-1]) != tuple(a.shape[:-2]):
        raise ShapeError(f"tau must be [..., K] with A's batch dims {list(a.shape[:-2])}, got {tau.shape!r}")
    if isinstance(tau.shape[-1], int) and isinstance(n, int) and tau.shape[-1] > n:
        raise ShapeError(f"tau has {tau.shape[-1]} scales, more than A's {n} columns")
    return a


def _orgqr_one(a, tau):
    if a.shape[-1] == 0:
        return (a,)
    q, _work, info = _lapack("orgqr", a)(a, tau)
    _checked("orgqr", info)
    return (q,)


_op("householder_product", ("a", "tau"), _householder_type,
    lambda args, attrs, out: _each(_orgqr_one, list(args), [2, 1])[0],
    "The first N columns of H_1···H_k (LAPACK orgqr), H_i = I - tau_i·v_i·v_iᵀ with v_i column i of A "
    "[..., M, N] below the diagonal and a unit entry on it; tau [..., K], K <= N <= M.")


def _ormqr_type(ins, attrs):
    a, tau, c = ins
    _matrix(a, "A")
    _matrix(c, "C")
    _same_dtype((a, "A"), (tau, "tau"), (c, "C"))
    m = a.shape[-2]
    side = c.shape[-2] if attrs["left"] else c.shape[-1]
    if side != m:
        raise ShapeError(f"ormqr: C {c.shape!r} must have {m} {'rows' if attrs['left'] else 'columns'} (A's rows)")
    if len(tau.shape) != len(a.shape) - 1:
        raise ShapeError(f"tau must be [..., K], got {tau.shape!r}")
    return c


def _ormqr_one(a, tau, c, left, transpose):
    m = a.shape[0]
    square = np.zeros((m, m), a.dtype)  # Q as an M x M product: the reflectors past k are identities
    square[:, : min(a.shape[1], m)] = a[:, :m]
    scales = np.zeros(m, a.dtype)
    scales[: tau.shape[0]] = tau
    q = _orgqr_one(square, scales)[0] if m else square
    if transpose:
        q = q.T
    return (q @ c if left else c @ q,)


_op("ormqr", ("a", "tau", "c"), _ormqr_type,
    lambda args, attrs, out: _each(lambda a, t, c: _ormqr_one(a, t, c, attrs["left"], attrs["transpose"]),
                                   list(args), [2, 1, 2])[0].astype(out.dtype.numpy),
    "op(Q)·C (left) or C·op(Q) with Q = H_1···H_k the M x M product of geqrf's reflectors in A [..., M, N] and "
    "tau [..., K], op = transpose or identity (LAPACK ormqr's result, formed as orgqr's Q times C).",
    attrs={"left": AttrSpec("bool", default=True), "transpose": AttrSpec("bool", default=False)})


# ------------------------------------------------------------------------------------ LU
def _lu_factor_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A")
    return t, _tt((*t.shape[:-2], _min_dim(t, "lu_factor")), DType.I32)


def _getrf_one(a):
    if 0 in a.shape:
        return a, np.zeros(0, np.int32)
    lu, piv, info = _lapack("getrf", a)(a)
    _checked("getrf", info)
    return lu, (piv + 1).astype(np.int32)


_op("lu_factor", ("a",), _lu_factor_type, lambda args, attrs, out: _each(_getrf_one, [args[0]], [2]),
    "LU factorization with partial pivoting (LAPACK getrf) of each matrix of A [..., M, N]: L (unit diagonal, "
    "below) and U (on and above) packed in one [..., M, N], and the 1-based row interchanges pivots "
    "[..., min(M, N)] i32 (row i was swapped with row pivots[i] - 1, in order). A = P·L·U; a singular matrix "
    "factors (U has a zero on its diagonal).")


def _lu_unpack_type(ins, attrs):
    lu, piv = ins
    _matrix(lu, "LU")
    if not piv.dtype.is_int:
        raise ShapeError(f"pivots must be an integer tensor, got {piv.dtype}")
    m, n = lu.shape[-2], lu.shape[-1]
    k, lead = _min_dim(lu, "lu_unpack"), tuple(lu.shape[:-2])
    return _tt((*lead, m, m), lu.dtype), _tt((*lead, m, k), lu.dtype), _tt((*lead, k, n), lu.dtype)


def _permutation(piv: np.ndarray, m: int, dtype) -> np.ndarray:
    perm = np.arange(m)
    for i, p in enumerate(piv):
        j = int(p) - 1
        if not 0 <= j < m:
            raise RlxError(f"lu_unpack: pivot {int(p)} is outside 1..{m}")
        perm[i], perm[j] = perm[j], perm[i]
    p_mat = np.zeros((m, m), dtype)
    p_mat[perm, np.arange(m)] = 1  # A = P·L·U: row perm[j] of A is row j of L·U
    return p_mat


def _lu_unpack_one(lu, piv):
    m, n = lu.shape
    k = min(m, n)
    lo = np.tril(lu[:, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    return _permutation(piv, m, lu.dtype), lo, np.triu(lu[:k, :])


_op("lu_unpack", ("lu", "pivots"), _lu_unpack_type, lambda args, attrs, out: _each(_lu_unpack_one, list(args), [2, 1]),
    "lu_factor's packed result unpacked: P [..., M, M] (the permutation of the pivots' row interchanges), "
    "L [..., M, K] (unit diagonal) and U [..., K, N], K = min(M, N), with A = P·L·U.")


def _solve_rhs_type(a: TensorType, b: TensorType, left: bool, what: str) -> TensorType:
    _matrix(b, "B")
    n = a.shape[-1]
    rows = b.shape[-2] if left else b.shape[-1]
    if rows != n:
        raise ShapeError(f"{what}: B {b.shape!r} must have {n} {'rows' if left else 'columns'}")
    return _tt((*_static_batch(a, b), *b.shape[-2:]), b.dtype)


def _lu_solve_type(ins, attrs):
    lu, piv, b = ins
    _matrix(lu, "LU", square=True)
    _same_dtype((lu, "LU"), (b, "B"))
    if not piv.dtype.is_int:
        raise ShapeError(f"pivots must be an integer tensor, got {piv.dtype}")
    return _solve_rhs_type(lu, b, attrs["left"], "lu_solve")


def _lu_solve_one(lu, piv, b, left, adjoint):
    from scipy.linalg import lu_solve

    if 0 in lu.shape or 0 in b.shape:
        return (np.zeros(b.shape, b.dtype),)
    factors = (lu, piv.astype(np.int64) - 1)
    if left:
        return (lu_solve(factors, b, trans=1 if adjoint else 0, check_finite=False),)
    return (lu_solve(factors, b.T, trans=0 if adjoint else 1, check_finite=False).T,)  # X·A = B: Aᵀ·Xᵀ = Bᵀ


_op("lu_solve", ("lu", "pivots", "b"), _lu_solve_type,
    lambda args, attrs, out: _each(lambda lu, p, b: _lu_solve_one(lu, p, b, attrs["left"], attrs["adjoint"]),
                                   list(args), [2, 1, 2])[0].astype(out.dtype.numpy),
    "Solve A·X = B (left) or X·A = B with A = P·L·U given by lu_factor's (LU [..., N, N], pivots [..., N]); "
    "adjoint solves with Aᵀ. B [..., N, K] (left) or [..., K, N]; batch dims broadcast (LAPACK getrs).",
    attrs={"left": AttrSpec("bool", default=True), "adjoint": AttrSpec("bool", default=False)})


# ------------------------------------------------------------------------------------ triangular solve
def _tri_type(ins, attrs):
    a, b = ins
    _matrix(a, "A", square=True)
    _same_dtype((a, "A"), (b, "B"))
    return _solve_rhs_type(a, b, attrs["left"], "solve_triangular")


def _tri_one(a, b, upper, left, unit):
    from scipy.linalg import solve_triangular

    if 0 in a.shape or 0 in b.shape:
        return (np.zeros(b.shape, b.dtype),)
    if left:
        return (solve_triangular(a, b, lower=not upper, unit_diagonal=unit, check_finite=False),)
    return (solve_triangular(a, b.T, trans="T", lower=not upper, unit_diagonal=unit, check_finite=False).T,)


def _tri_kernel(args, attrs, out):
    a, b = args
    with np.errstate(all="ignore"):  # a zero on the diagonal gives inf / NaN, as LAPACK trtrs and torch do
        x = _each(lambda a, b: _tri_one(a, b, attrs["upper"], attrs["left"], attrs["unitriangular"]), [a, b], [2, 2])
    return x[0].astype(out.dtype.numpy)


def _tri_mask(ctx, node, a):
    """A's entries the solve reads: its upper / lower triangle, without the diagonal when unitriangular."""
    n = a.shape[-1]
    if not isinstance(n, int):
        raise AutodiffError("solve_triangular derivative needs a static matrix size")
    unit = node.attrs["unitriangular"]
    mask = np.triu(np.ones((n, n)), 1 if unit else 0) if node.attrs["upper"] else np.tril(np.ones((n, n)), -1 if unit else 0)
    return a * ctx.graph.constant(mask.astype(a.dtype.numpy))


def _tri_vjp(ctx, node, ct):
    """left: A·X = B gives dB = A⁻ᵀ·ct, dA = -dB·Xᵀ; right: X·A = B gives dB = ct·A⁻ᵀ, dA = -Xᵀ·dB; dA
    keeps the triangle read."""
    g = ctx.graph
    a, b = ctx.operands(node)
    x = ctx.output(node)
    attrs = dict(node.attrs)
    db = g.solve_triangular(_mT(ctx, a), ct, **{**attrs, "upper": not attrs["upper"]})
    da = None
    if ctx.wants(node, 0):
        da = -(g.matmul(db, _mT(ctx, x)) if attrs["left"] else g.matmul(_mT(ctx, x), db))
        da = ctx.unbroadcast(_tri_mask(ctx, node, da), a)
    return [da, ctx.unbroadcast(db, b) if ctx.wants(node, 1) else None]


def _tri_jvp(ctx, node, tangents):
    g = ctx.graph
    a, _ = ctx.operands(node)

    def product(ta, x):
        return g.matmul(_tri_mask(ctx, node, ta), x) if node.attrs["left"] else g.matmul(x, _tri_mask(ctx, node, ta))

    return linear_solve_jvp(ctx, node, tangents, product, lambda rhs: g.solve_triangular(a, rhs, **dict(node.attrs)))


_op("solve_triangular", ("a", "b"), _tri_type, _tri_kernel,
    "Solve A·X = B (left) or X·A = B for triangular A [..., N, N] (upper or lower triangle read, the other "
    "ignored; unitriangular assumes ones on the diagonal) by substitution (LAPACK trtrs). B [..., N, K] (left) "
    "or [..., K, N]; batch dims broadcast. Gradient (left): dB = A⁻ᵀ·ct, dA = -dB·Xᵀ on the triangle read "
    "(right: dB = ct·A⁻ᵀ, dA = -Xᵀ·dB); tangent A⁻¹·(tB - tA·X).",
    attrs={"upper": AttrSpec("bool"), "left": AttrSpec("bool", default=True),
           "unitriangular": AttrSpec("bool", default=False)}, vjp=_tri_vjp, jvp=_tri_jvp)


# ------------------------------------------------------------------------------------ LDLᵀ
def _ldl_factor_type(ins, attrs):
    t = ins[0]
    _matrix(t, "A", square=True)
    return t, _tt(t.shape[:-1], DType.I32)


def _sytrf_one(a):
    if a.shape[0] == 0:
        return a, np.zeros(0, np.int32)
    ld, piv, info = _lapack("sytrf", a)(a, lower=1)
    _checked("sytrf", info)
    return np.tril(ld), piv.astype(np.int32)


_op("ldl_factor", ("a",), _ldl_factor_type, lambda args, attrs, out: _each(_sytrf_one, [args[0]], [2]),
    "Bunch-Kaufman LDLᵀ factorization of each symmetric matrix of A [..., N, N] (LAPACK sytrf, lower "
    "triangle): L (unit diagonal, below) and the 1x1 / 2x2 blocks of D packed in LD [..., N, N] (upper "
    "triangle zero), and LAPACK's 1-based pivots [..., N] i32 (negative pairs mark 2x2 blocks).")


def _ldl_solve_type(ins, attrs):
    ld, piv, b = ins
    _matrix(ld, "LD", square=True)
    _same_dtype((ld, "LD"), (b, "B"))
    if not piv.dtype.is_int:
        raise ShapeError(f"pivots must be an integer tensor, got {piv.dtype}")
    return _solve_rhs_type(ld, b, True, "ldl_solve")


def _sytrs_one(ld, piv, b):
    if 0 in ld.shape or 0 in b.shape:
        return (np.zeros(b.shape, b.dtype),)
    x, info = _lapack("sytrs", ld)(ld, piv.astype(np.int32), b, lower=1)
    _checked("sytrs", info)
    return (x,)


_op("ldl_solve", ("ld", "pivots", "b"), _ldl_solve_type,
    lambda args, attrs, out: _each(_sytrs_one, list(args), [2, 1, 2])[0].astype(out.dtype.numpy),
    "Solve A·X = B with ldl_factor's (LD [..., N, N], pivots [..., N]) of a symmetric A (LAPACK sytrs); "
    "B [..., N, K], batch dims broadcast.")


# ------------------------------------------------------------------------------------ matrix_exp
def _expm_kernel(args, attrs, out):
    from scipy.linalg import expm

    a = args[0]
    if a.shape[-1] == 0:
        return a.copy()
    return np.asarray(expm(a)).astype(out.dtype.numpy)


_op("matrix_exp", ("a",), _square_type, _expm_kernel,
    "exp(A) = Σ Aᵏ/k! of each square matrix of A [..., N, N] (scaling and squaring with a Padé approximant, "
    "scipy.linalg.expm; computed in A's precision).")
