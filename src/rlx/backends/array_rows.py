"""Lowering rows the torch and JAX lowerings share, written once against an array namespace.

``xp`` is the backend's :class:`rlx.ops.kinds.ArrayNamespace` (torch or jax.numpy, NumPy
spellings: ``reshape``, ``broadcast_to``, ``mean(x, axis=, keepdims=)``, ``sqrt``) with two
extras each backend names: ``permute(x, perm)``, ``slice_axis(x, axis, start, length)``,
``concat(parts, axis)``, ``cast_all(args, out)`` (operands cast to the result's compute dtype),
``prod(x, axis=, keepdims=, dtype=)`` over a tuple of axes, ``full_like_shape(shape, value, like)``
(a filled array of ``like``'s dtype and device), ``rlx_dtype(x)`` (the tensor's rlx element type), and
``astype(x, to)`` / ``bitcast(x, to)`` (convert / reinterpret the bits as the rlx type ``to``).
A row is ``row(xp, args, attrs, out)``; :func:`bind` gives the ``(args, attrs, out)`` form the
lowering tables hold. The semantics are the ops' own (registry docstrings); the rows only spell
them once for both array libraries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ops.reduction import reduce_axes, reduce_identity


def reshape(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    return xp.reshape(args[0], tuple(out.shape))


def transpose(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    perm = attrs["perm"] if attrs["perm"] is not None else tuple(range(args[0].ndim - 1, -1, -1))
    return xp.permute(args[0], tuple(perm))


def narrow(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """An out-of-bounds slice raises as the reference does (checked before the library call)."""
    x = args[0]
    axis, start, length = attrs["axis"] % x.ndim, attrs["start"], attrs["length"]
    if start + length > x.shape[axis]:
        raise RlxError(f"narrow: slice [{start}, {start + length}) is out of bounds for axis {axis} of size {x.shape[axis]}")
    return xp.slice_axis(x, axis, start, length)


def expand(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    return xp.broadcast_to(args[0], tuple(out.shape))


def concat(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    parts = xp.cast_all(args, out)
    return xp.concat(parts, attrs["axis"] % parts[0].ndim)


def minmax_reduce(xp: Any, x: Any, axes: tuple[int, ...], keep: bool, op: str) -> Any:
    """max / min (NaN-propagating, np.max) or fmax / fmin (NaN-ignoring, np.fmax.reduce) over ``axes``;
    an empty reduction gives the identity, as the ``reduce`` op documents."""
    dtype = xp.rlx_dtype(x)
    identity = reduce_identity(op, dtype.numpy)
    if any(x.shape[a] == 0 for a in axes):
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else [d for i, d in enumerate(x.shape) if i not in axes]
        return xp.full_like_shape(shape, identity, x)
    high = op in ("max", "fmax")
    if dtype.is_bool:
        return (xp.any if high else xp.all)(x, axis=axes, keepdims=keep)
    extreme = xp.amax if high else xp.amin
    if not dtype.is_float or op in ("max", "min"):
        return extreme(x, axis=axes, keepdims=keep)
    nan = xp.isnan(x)
    r = extreme(xp.where(nan, xp.full_like_shape((), identity, x), x), axis=axes, keepdims=keep)
    return xp.where(xp.all(nan, axis=axes, keepdims=keep), xp.full_like_shape((), float("nan"), x), r)


def bitcast(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``bitcast`` op: bool travels as u8, and any nonzero byte reads back as True."""
    x, to = args[0], attrs["to"]
    if xp.rlx_dtype(x).is_bool:
        x = xp.astype(x, DType.U8)
    if to.is_bool:
        return xp.bitcast(x, DType.U8) != 0
    return xp.bitcast(x, to)


def reduce(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``reduce`` op: the dtype is kept (integer sum / prod wrap in the input type)."""
    x, op, keep = args[0], attrs["op"], attrs["keep_dim"]
    axes = tuple(reduce_axes(attrs["axes"], x.ndim))
    if not axes:
        return x
    if op == "sum":
        return xp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    if op == "prod":
        return xp.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)
    if op == "mean":
        return xp.mean(x, axis=axes, keepdims=keep)
    return minmax_reduce(xp, x, axes, keep, op)


SHAPE_ROWS: dict[str, Callable[..., Any]] = {"reshape": reshape, "transpose": transpose, "narrow": narrow, "expand": expand,
                                             "concat": concat}


def bind(row: Callable[..., Any], xp: Any) -> Callable[[list[Any], Mapping[str, Any], Any], Any]:
    """``row`` with its namespace bound: the ``fn(args, attrs, out)`` form of a lowering table."""
    def lowered(args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
        return row(xp, args, attrs, out)

    lowered.__name__ = lowered.__qualname__ = row.__name__
    return lowered


def along(xp: Any, v: Any, axis: int, rank: int) -> Any:
    """A per-channel vector shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    return xp.reshape(v, [-1 if i == axis else 1 for i in range(rank)])


def standardize(xp: Any, x: Any, axes: Any, eps: Any) -> Any:
    """(x - mean) / sqrt(var + eps) over ``axes``, the two-pass variance of the reference kernels."""
    mu = xp.mean(x, axis=axes, keepdims=True)
    d = x - mu
    var = xp.mean(d * d, axis=axes, keepdims=True)
    return d / xp.sqrt(var + eps)
