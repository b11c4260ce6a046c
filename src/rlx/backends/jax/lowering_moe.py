"""JAX lowerings of the MoE family (rlx.ops.moe). Same contract as :mod:`rlx.backends.jax.lowering`.

``grouped_matmul`` gathers each token's expert and runs a batched matvec on the device. The packed
expert ops decode GGUF K-quant / NVFP4 bytes on the device with the *same* decoder functions as the
NumPy reference (:mod:`rlx.ops.moe` writes them once for any array namespace; here ``jax.numpy``
with ``lax.bitcast_convert_type`` for the fp16 / f32 / int8 fields), so the decoded weights are the
reference's f32 values.

An expert id outside ``[0, E)`` raises the reference's ``RlxError`` (:mod:`.index_checks`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from rlx.backends.jax.index_checks import checked_index
from rlx.backends.jax.table import compute_dtype, lowering, matmul_precision
from rlx.ops.moe import dequant_experts

_BITCAST = {"f16": jnp.float16, "f32": jnp.float32, "i8": jnp.int8}


def _cast(b, kind: str):
    return lax.bitcast_convert_type(b, _BITCAST[kind])


def _vmap_lead(fn, args, nb: int):
    for _ in range(nb):
        fn = jax.vmap(fn)
    return fn(*args)


def _grouped(x, w, idx, dt):
    e = w.shape[0]
    ids = jnp.trunc(idx).astype(jnp.int32) if jnp.issubdtype(idx.dtype, jnp.floating) else idx.astype(jnp.int32)
    ids = checked_index(ids, e, "grouped_matmul expert index", wrap=False)
    wt = jnp.take(w.astype(dt), ids, axis=0, mode="fill", fill_value=jnp.nan)  # [M, K, N]
    return jnp.einsum("mk,mkn->mn", x.astype(dt), wt, precision=matmul_precision())


@lowering("grouped_matmul")
def _grouped_matmul(args, attrs, out):
    dt = compute_dtype(out.dtype)
    return _vmap_lead(lambda x, w, i: _grouped(x, w, i, dt), list(args), attrs["batch_dims"])


def _decode(packed, extra, scheme, k, n):
    return dequant_experts(packed, list(extra), scheme, k, n, xp=jnp, cast=_cast)


@lowering("dequant_moe_weights")
def _dequant_moe_weights(args, attrs, out):
    return _vmap_lead(lambda p, *extra: _decode(p, extra, attrs["scheme"], attrs["k"], attrs["n"]), list(args), attrs["batch_dims"])


@lowering("dequant_grouped_matmul")
def _dequant_grouped_matmul(args, attrs, out):
    dt = compute_dtype(out.dtype)

    def one(x, p, idx, *extra):
        w = _decode(p, extra, attrs["scheme"], x.shape[1], attrs["n"])
        return _grouped(x, w, idx, dt)

    return _vmap_lead(one, list(args), attrs["batch_dims"])
