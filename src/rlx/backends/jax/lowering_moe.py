"""JAX lowerings of the MoE family (rlx.ops.moe). Same contract as :mod:`rlx.backends.jax.lowering`.

``grouped_matmul`` is lowered on the device (gather each token's expert, batched matvec). The packed
expert ops decode GGUF K-quant / NVFP4 bytes with the NumPy reference kernels on the host
(:data:`rlx.backends.jax.lowering_ext.HOST`, one reason each).

Difference from the reference: an expert id outside ``[0, E)`` gives NaN rows (float) instead of
raising ``RlxError`` (no host round trip to raise), like ``gather``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlx.backends.jax.lowering import compute_dtype, lowering, matmul_precision
from rlx.backends.jax.lowering_ext import HOST, host_lowering

_HOST_MOE = {
    "dequant_grouped_matmul": "GGUF K-quant (ggml block layouts) and NVFP4 expert stacks are decoded by the NumPy "
    "kernel on the host (exact ggml f32 arithmetic); a device decoder is future work",
    "dequant_moe_weights": "decodes GGUF K-quant / NVFP4 byte blocks with the NumPy kernel on the host (exact ggml f32 "
    "arithmetic); a device decoder is future work",
}


def _vmap_lead(fn, args, nb: int):
    for _ in range(nb):
        fn = jax.vmap(fn)
    return fn(*args)


@lowering("grouped_matmul")
def _grouped_matmul(args, attrs, out):
    dt = compute_dtype(out.dtype)

    def one(x, w, idx):
        e = w.shape[0]
        ids = jnp.trunc(idx).astype(jnp.int32) if jnp.issubdtype(idx.dtype, jnp.floating) else idx.astype(jnp.int32)
        ids = jnp.where((ids < 0) | (ids >= e), e, ids)  # out of range -> fill
        wt = jnp.take(w.astype(dt), ids, axis=0, mode="fill", fill_value=jnp.nan)  # [M, K, N]
        return jnp.einsum("mk,mkn->mn", x.astype(dt), wt, precision=matmul_precision())

    return _vmap_lead(one, list(args), attrs["batch_dims"])


for _name, _why in _HOST_MOE.items():
    HOST[_name] = _why
    lowering(_name)(host_lowering(_name))
