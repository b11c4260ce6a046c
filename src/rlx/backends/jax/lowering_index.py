"""JAX lowerings of ``advanced_index`` / ``advanced_index_put`` (:mod:`rlx.ops.advanced_index`).

``jax.numpy`` indexing follows NumPy's advanced-indexing layout rule, so the key is the reference
kernel's key with jax arrays. Out-of-range indices raise the reference's :class:`RlxError`
(:mod:`rlx.backends.jax.index_checks`). Overwriting with duplicate indices keeps the last update in C order, as
NumPy assignment (XLA's scatter order is unspecified), through a max-scatter of update numbers.
"""

from __future__ import annotations

import jax.numpy as jnp

from rlx.backends.jax.index_checks import checked_index
from rlx.backends.jax.table import lowering
from rlx.ops.advanced_index import full_pattern


def _key(x, idx, pattern: str, op: str) -> tuple:
    key, it, axis = [], iter(idx), 0
    for c in full_pattern(pattern, x.ndim):
        if c == "n":
            key.append(None)
            continue
        key.append(slice(None) if c == ":" else checked_index(next(it), x.shape[axis], op, axis=axis))
        axis += 1
    return tuple(key)


@lowering("advanced_index")
def _advanced_index(args, attrs, out):
    x = args[0]
    return x[_key(x, args[1:], attrs["pattern"], "advanced_index")]


@lowering("advanced_index_put")
def _advanced_index_put(args, attrs, out):
    x, values = args[0], args[1]
    key = _key(x, args[2:], attrs["pattern"], "advanced_index_put")
    vals = jnp.broadcast_to(values, x[key].shape)
    if attrs["accumulate"]:
        return x.at[key].add(vals)
    order = jnp.arange(vals.size, dtype=jnp.int32).reshape(vals.shape)
    winner = jnp.full(x.shape, -1, jnp.int32).at[key].max(order)
    picked = jnp.take(vals.reshape(-1), jnp.maximum(winner, 0))
    return jnp.where(winner >= 0, picked, x)
