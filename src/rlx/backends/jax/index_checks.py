"""Out-of-range index checks inside jitted JAX programs: the reference's :class:`RlxError`, not NaN.

Every index-reading lowering (gather, gather_elements, scatter_elements, scatter_add,
gather_backward, the cross-entropy labels, expert ids, advanced indexing) passes its indices
through :func:`checked_index`: the device computes one flag (and the first bad index) and hands
it to the host through ``jax.pure_callback``, which raises when it is set; the callback's zero
result is added to the indices, so XLA can neither drop nor reorder the check. The executable
turns the runtime error back into the RlxError (:func:`rlx_error_of`). Cost: one host round trip
per index-reading node per run.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from rlx.ir.errors import RlxError
from rlx.ops.rows import index_error, out_of_range

_MARK = "rlx index error: "


def _raise_if_bad(op, bad, value, axis, size):
    if bool(bad):
        raise RlxError(_MARK + str(index_error(op, int(value), int(axis), int(size))))
    return np.zeros((), np.int32)


def checked_index(i, n: int, op: str, *, axis: int = 0, wrap: bool = True):
    """Integer indices ``i`` in ``[0, n)`` (``wrap``: ``[-n, 0)`` counts from the end, as NumPy), with
    the host-side range check folded in as a data dependency."""
    bad = out_of_range(jnp, i, n, wrap)
    first = jnp.where(bad, i, 0).reshape(-1)[jnp.argmax(bad.reshape(-1))] if i.size else jnp.zeros((), i.dtype)
    info = jnp.clip(first, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(jnp.int32)
    zero = jax.pure_callback(functools.partial(_raise_if_bad, op), jax.ShapeDtypeStruct((), jnp.int32), jnp.any(bad), info,
                             np.int32(axis), np.int32(n), vmap_method="sequential")
    i = i + zero.astype(i.dtype)
    return jnp.where(i < 0, i + n, i) if wrap else i


def from_empty_axis(checked, shape, dtype):
    """The result of reading ``checked`` (non-empty) indices from an empty axis: every index is out of
    range, so the check raises at run time. jnp.take would raise IndexError while tracing instead, and a
    result that did not read the indices would let XLA drop the check, so it is built from them."""
    return jnp.broadcast_to(checked.reshape(-1)[0].astype(dtype), tuple(shape))


def rlx_error_of(exc: Exception) -> RlxError | None:
    """The RlxError an index check raised inside a jitted program, recovered from jax's runtime error."""
    text = str(exc)
    at = text.find(_MARK)
    if at < 0:
        return None
    return RlxError(text[at + len(_MARK):].splitlines()[0])
