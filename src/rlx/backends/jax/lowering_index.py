"""JAX lowerings of ``advanced_index`` / ``advanced_index_put`` (:mod:`rlx.ops.advanced_index`).

``jax.numpy`` indexing follows NumPy's advanced-indexing layout rule, so the key is the reference
kernel's key with jax arrays. Out-of-range indices raise the reference's :class:`RlxError`: each
op checks its indices on the device and hands one flag (and the first bad index) to the host
through ``jax.pure_callback``; the callback's zero result is added to the indices, so XLA cannot
drop or reorder the check. The executable turns the runtime error back into the RlxError
(:func:`rlx_error_of`). Overwriting with duplicate indices keeps the last update in C order, as
NumPy assignment (XLA's scatter order is unspecified), through a max-scatter of update numbers.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from rlx.backends.jax.lowering import lowering
from rlx.ir.errors import RlxError
from rlx.ops.advanced_index import full_pattern

_MARK = "rlx index error: "


def _raise_if_bad(op, bad, value, axis, size):
    if bool(bad):
        raise RlxError(f"{_MARK}{op}: index {int(value)} is out of range for axis {int(axis)} of size {int(size)}")
    return np.zeros((), np.int32)


def _checked(i, axis: int, n: int, op: str):
    """``i`` wrapped to [0, n), with the host-side range check folded in as a data dependency."""
    bad = (i < -n) | (i >= n)
    first = jnp.where(bad, i, 0).reshape(-1)[jnp.argmax(bad.reshape(-1))] if i.size else jnp.zeros((), i.dtype)
    info = jnp.clip(first, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(jnp.int32)
    zero = jax.pure_callback(functools.partial(_raise_if_bad, op), jax.ShapeDtypeStruct((), jnp.int32), jnp.any(bad), info,
                             np.int32(axis), np.int32(n))
    i = i + zero.astype(i.dtype)
    return jnp.where(i < 0, i + n, i)


def _key(x, idx, pattern: str, op: str) -> tuple:
    key, it, axis = [], iter(idx), 0
    for c in full_pattern(pattern, x.ndim):
        if c == "n":
            key.append(None)
            continue
        key.append(slice(None) if c == ":" else _checked(next(it), axis, x.shape[axis], op))
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


def rlx_error_of(exc: Exception) -> RlxError | None:
    """The RlxError an index check raised inside a jitted program, recovered from jax's runtime error."""
    text = str(exc)
    at = text.find(_MARK)
    if at < 0:
        return None
    return RlxError(text[at + len(_MARK):].splitlines()[0])
