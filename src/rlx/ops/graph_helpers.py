"""Graph-building helpers for derivative rules and decompositions.

They sit in ``ops`` (below ``autodiff`` in the layering, docs/architecture.md) so that op
modules can build subgraphs with them; :mod:`rlx.autodiff.rules` re-exports them and offers
them as rule-context methods.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError
from rlx.ir.graph import Graph, Value
from rlx.ir.shape import Dim, Shape


def const(g: Graph, value: float, dtype: DType) -> Value:
    """A rank-0 constant of ``dtype``."""
    return g.constant(np.array(value, dtype=np.float32 if dtype.is_low_precision_float else dtype.numpy), dtype=dtype)


def cast(g: Graph, v: Value, dtype: DType) -> Value:
    """``v`` in ``dtype`` (no node when it already is)."""
    return v if v.dtype == dtype else g.cast(v, to=dtype)


def shape_attr(shape: Sequence[Dim], what: str) -> list[int]:
    """Dims as an ``ints`` attribute for reshape: one symbolic dim becomes -1, more is an error."""
    syms = [i for i, d in enumerate(shape) if isinstance(d, str)]
    if len(syms) > 1:
        raise AutodiffError(f"{what}: cannot express a reshape to {Shape(shape)!r} with more than one symbolic dim")
    return [-1 if isinstance(d, str) else int(d) for d in shape]


def reshape(g: Graph, v: Value, shape: Sequence[Dim]) -> Value:
    """Reshape ``v`` to ``shape`` (no node when equal)."""
    if tuple(v.shape) == tuple(shape):
        return v
    return g.reshape(v, new_shape=shape_attr(shape, "reshape"))


def broadcast_to(g: Graph, v: Value, shape: Sequence[Dim]) -> Value:
    """Broadcast ``v`` to ``shape`` (NumPy rules). Uses ``expand`` for static targets."""
    if tuple(v.shape) == tuple(shape):
        return v
    lead = len(shape) - len(v.shape)
    target: list[int] = []
    for i, d in enumerate(shape):
        if isinstance(d, int):
            target.append(d)
        elif i >= lead and v.shape[i - lead] == d:
            target.append(-1)
        else:
            raise AutodiffError(f"cannot broadcast {v.shape!r} to the symbolic shape {Shape(shape)!r}")
    return g.expand(v, target_shape=target)


def broadcast_like(g: Graph, v: Value, like: Value) -> Value:
    """Broadcast ``v`` to ``like``'s shape; works for symbolic dims (``where(c, v, v)``)."""
    if tuple(v.shape) == tuple(like.shape):
        return v
    if Shape(like.shape).is_static:
        return broadcast_to(g, v, like.shape)
    cond = like if like.dtype.is_bool else g.cast(like, to=DType.BOOL)
    return g.where(cond, v, v)  # both branches equal: only the broadcast shape matters


def zeros_like(g: Graph, like: Value, dtype: DType | None = None) -> Value:
    """Zeros of ``like``'s shape (NaN-safe: never ``like * 0``)."""
    dtype = dtype or like.dtype
    if Shape(like.shape).is_static:
        arr = np.zeros(tuple(like.shape), dtype=np.float32 if dtype.is_low_precision_float else dtype.numpy)
        return g.constant(arr, dtype=dtype)
    return broadcast_like(g, const(g, 0.0, dtype), like)
