"""JAX lowerings of the factorization family (rlx.ops.linalg_decomp) and the complex parts
(rlx.ops.complex_parts), through ``jnp.linalg`` / ``jax.lax.linalg`` / ``jax.scipy.linalg``.

Same contract as :mod:`rlx.backends.jax.lowering`. Differences from the NumPy reference, by design:
a singular or indefinite matrix gives inf / NaN instead of RlxError (no host round trip to raise), and
eigen- / singular vectors may differ from the reference by a sign per vector (a different LAPACK
path; the decompositions they form are the same). ``ldl_factor`` / ``ldl_solve`` have no JAX routine:
their NumPy kernels (LAPACK sytrf / sytrs) run on the host through ``jax.pure_callback``, as ``geqrf``'s
(:data:`HOST`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rlx.backends.jax.table import jnp_dtype, lowering
from rlx.ir.opdef import get_op

HOST: dict[str, str] = {
    **dict.fromkeys(("ldl_factor", "ldl_solve"),
                    "Bunch-Kaufman LDLᵀ (LAPACK sytrf / sytrs, whose pivot layout the op defines) has no JAX routine: "
                    "the NumPy kernel runs on the host"),
    "geqrf": "JAX's geqrf is private (jax._src): LAPACK geqrf runs on the host through the NumPy kernel",
}


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _broadcast_batch(a, b):
    lead = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, lead + a.shape[-2:]), jnp.broadcast_to(b, lead + b.shape[-2:])


@lowering("matrix_inverse")
def _inverse(args, attrs, out):
    return jnp.linalg.inv(args[0])


@lowering("det")
def _det(args, attrs, out):
    return jnp.linalg.det(args[0])


@lowering("slogdet")
def _slogdet(args, attrs, out):
    sign, logabs = jnp.linalg.slogdet(args[0])
    return sign, logabs


@lowering("cholesky")
def _cholesky(args, attrs, out):
    lo = lax.linalg.cholesky(args[0], symmetrize_input=False)  # reads the lower triangle, as LAPACK potrf
    return _mT(lo) if attrs["upper"] else lo


@lowering("eigh")
def _eigh(args, attrs, out):
    a = args[0] if attrs["lower"] else _mT(args[0])  # the upper triangle read is the lower one of Aᵀ
    if attrs["output"] == "values":
        return jnp.linalg.eigvalsh(a, UPLO="L", symmetrize_input=False)
    w, v = jnp.linalg.eigh(a, UPLO="L", symmetrize_input=False)
    return w, v


@lowering("eig")
def _eig(args, attrs, out):
    if attrs["output"] == "values":
        return jnp.linalg.eigvals(args[0]).astype(jnp_dtype(out.dtype))
    w, v = jnp.linalg.eig(args[0])
    return w.astype(jnp_dtype(out[0].dtype)), v.astype(jnp_dtype(out[1].dtype))


@lowering("svd")
def _svd(args, attrs, out):
    if attrs["output"] == "values":
        return jnp.linalg.svd(args[0], compute_uv=False)
    u, s, vh = jnp.linalg.svd(args[0], full_matrices=attrs["full_matrices"])
    return u, s, vh


@lowering("qr")
def _qr(args, attrs, out):
    q, r = jnp.linalg.qr(args[0], mode=attrs["mode"])
    return q, r


@lowering("householder_product")
def _householder(args, attrs, out):
    a, tau = args
    if a.shape[-1] == 0:
        return a
    return lax.linalg.householder_product(a, tau)


@lowering("ormqr")
def _ormqr(args, attrs, out):
    """op(Q)·C or C·op(Q) with Q the M x M product of the reflectors (zero-padded to M of them)."""
    a, tau, c = args
    m = a.shape[-2]
    k = min(a.shape[-1], m)
    square = jnp.zeros((*a.shape[:-2], m, m), a.dtype).at[..., :, :k].set(a[..., :, :k])
    scales = jnp.zeros((*tau.shape[:-1], m), tau.dtype).at[..., : tau.shape[-1]].set(tau)
    q = lax.linalg.householder_product(square, scales) if m else square
    if attrs["transpose"]:
        q = _mT(q)
    return jnp.matmul(q, c) if attrs["left"] else jnp.matmul(c, q)


@lowering("lu_factor")
def _lu_factor(args, attrs, out):
    lu, piv, _perm = lax.linalg.lu(args[0])
    return lu, (piv + 1).astype(jnp_dtype(out[1].dtype))


@lowering("lu_unpack")
def _lu_unpack(args, attrs, out):
    lu, piv = args
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    upper = jnp.triu(lu[..., :k, :])
    perm = lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, m)
    p = _mT(jnp.take(jnp.eye(m, dtype=lu.dtype), perm, axis=0))  # A = P·L·U: P[perm[j], j] = 1
    return p, lower, upper


def _batched_lu_solve(lu, perm, b, trans: int):
    lu, b = _broadcast_batch(lu, b)
    perm = jnp.broadcast_to(perm, lu.shape[:-1])
    if trans == 0:
        pb = jnp.take_along_axis(b, perm[..., None], axis=-2)
        y = lax.linalg.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
    y = lax.linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True)
    z = lax.linalg.triangular_solve(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
    inv = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, inv[..., None], axis=-2)


@lowering("lu_solve")
def _lu_solve(args, attrs, out):
    lu, piv, b = args
    if 0 in lu.shape or 0 in b.shape:
        return jnp.zeros(tuple(out.shape), jnp_dtype(out.dtype))
    if attrs["left"]:
        return _batched_lu_solve(lu, _perm(lu, piv), b, 1 if attrs["adjoint"] else 0)
    return _mT(_batched_lu_solve(lu, _perm(lu, piv), _mT(b), 0 if attrs["adjoint"] else 1))


def _perm(lu, piv):
    return lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, lu.shape[-1])


@lowering("solve_triangular")
def _solve_triangular(args, attrs, out):
    a, b = _broadcast_batch(*args)
    if 0 in a.shape or 0 in b.shape:
        return jnp.zeros(tuple(out.shape), jnp_dtype(out.dtype))
    return lax.linalg.triangular_solve(a, b, left_side=attrs["left"], lower=not attrs["upper"],
                                       unit_diagonal=attrs["unitriangular"])


@lowering("matrix_exp")
def _matrix_exp(args, attrs, out):
    a = args[0]
    return a if a.shape[-1] == 0 else jax.scipy.linalg.expm(a)


@lowering("complex")
def _complex(args, attrs, out):
    re, im = jnp.broadcast_arrays(*args)
    return lax.complex(re, im)


@lowering("view_as_real")
def _view_as_real(args, attrs, out):
    z = args[0]
    return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1)


@lowering("view_as_complex")
def _view_as_complex(args, attrs, out):
    x = args[0]
    return lax.complex(x[..., 0], x[..., 1])


_WIDE = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.uint64))


def _host(name: str):
    """The op's NumPy kernel on the host (several results allowed). 64-bit values cross the callback as
    uint32 pairs: jax runs callbacks on a thread where the executable's scoped x64 mode is off (as
    :func:`rlx.backends.jax.lowering_ext.host_lowering` does)."""
    op = get_op(name)

    def lower(args, attrs, out):
        many = isinstance(out, tuple)
        outs = out if many else (out,)
        wide = [np.dtype(a.dtype) in _WIDE for a in args]
        kinds = [np.dtype(a.dtype) for a in args]
        sent = [lax.bitcast_convert_type(a, jnp.uint32) if w else a for a, w in zip(args, wide)]
        out_wide = [t.dtype.numpy in _WIDE for t in outs]
        shapes = tuple(jax.ShapeDtypeStruct((*t.shape, 2), jnp.uint32) if w else jax.ShapeDtypeStruct(tuple(t.shape), jnp_dtype(t.dtype))
                       for t, w in zip(outs, out_wide))

        def kernel(*arrays):
            vals = [np.ascontiguousarray(a).view(k).reshape(a.shape[:-1]) if w else np.asarray(a)
                    for a, w, k in zip(arrays, wide, kinds)]
            r = op.kernel(vals, attrs, out)
            rs = [np.ascontiguousarray(np.asarray(x, t.dtype.numpy)) for x, t in zip(r if many else (r,), outs)]
            return tuple(x.view(np.uint32).reshape(sh.shape) if w else x for x, w, sh in zip(rs, out_wide, shapes))

        res = jax.pure_callback(kernel, shapes, *sent)
        res = [lax.bitcast_convert_type(x, t.dtype.numpy) if w else x for x, t, w in zip(res, outs, out_wide)]
        return tuple(res) if many else res[0]

    return lower


for _name in HOST:
    lowering(_name)(_host(_name))
