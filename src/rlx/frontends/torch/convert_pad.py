"""torch converters for padding (``constant_pad_nd``, ``pad`` in every mode, reflection / replication /
circular pads) and vector norms (``linalg_vector_norm``, ``norm``).

A pad is, per padded axis, a gather with a constant index vector (negative pads crop): out-of-range
positions are clamped for ``replicate``, mirrored for ``reflect``, wrapped for ``circular``, and masked
to the fill value for ``constant``. So every mode works with symbolic sizes on the other axes and
differentiates through gather / where.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.frontends.torch.context import _axis, _conv, _Ctx, _target_name
from rlx.ir.graph import Value


def _source_positions(n: int, left: int, right: int, mode: str) -> np.ndarray:
    """For each output position along one axis, the input position it reads (any int for constant)."""
    pos = np.arange(-left, n + right, dtype=np.int64)
    if mode == "reflect":
        if max(left, right) >= n:
            raise ValueError(f"reflect padding {max(left, right)} must be smaller than the axis size {n}")
        period = 2 * (n - 1) if n > 1 else 1
        pos = np.abs(pos) % period
        return np.where(pos >= n, period - pos, pos)
    if mode == "replicate":
        return np.clip(pos, 0, n - 1)
    if mode == "circular":
        return pos % n
    return pos


def _pad_axis(cx: _Ctx, x: Value, axis: int, left: int, right: int, mode: str, value: Any) -> Value:
    if left == 0 and right == 0:
        return x
    n = cx.static(x.shape[axis], "padded axis size")
    pos = _source_positions(n, left, right, mode)
    inside = (pos >= 0) & (pos < n)
    y = cx.g.gather(x, cx.g.constant(np.clip(pos, 0, max(n - 1, 0))), axis=axis)
    if mode != "constant" or inside.all():
        return y
    mask = cx.g.constant(inside.reshape([-1 if i == axis else 1 for i in range(len(x.shape))]))
    return cx.g.where(mask, y, cx.scalar(value, x.dtype))


def _pad(cx: _Ctx, x: Value, pad: Sequence[Any], mode: str, value: Any = 0.0) -> Value:
    """torch's pad list: (left, right) pairs from the last axis backwards."""
    amounts = [cx.static(p, "pad amount") for p in pad]
    rank = len(x.shape)
    for k in range(len(amounts) // 2):
        x = _pad_axis(cx, x, rank - 1 - k, amounts[2 * k], amounts[2 * k + 1], mode, 0.0 if value is None else value)
    return x


@_conv("aten.constant_pad_nd.default")
def _constant_pad_nd(cx, node, x, pad, value=0):
    return _pad(cx, x, pad, "constant", value)


@_conv("aten.pad.default")
def _pad_any(cx, node, x, pad, mode="constant", value=None):
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise cx.fail(f"pad mode {mode!r} is not supported")
    return _pad(cx, x, pad, mode, value)


for _dims in (1, 2, 3):
    _conv(f"aten.reflection_pad{_dims}d.default")(lambda cx, node, x, padding: _pad(cx, x, padding, "reflect"))
    _conv(f"aten.replication_pad{_dims}d.default")(lambda cx, node, x, padding: _pad(cx, x, padding, "replicate"))
_conv("aten._pad_circular.default")(lambda cx, node, x, padding: _pad(cx, x, padding, "circular"))


# ------------------------------------------------------------------------------- norms
def _norm(cx: _Ctx, x: Value, p: float, dims: Any, keepdim: bool) -> Value:
    """sum(|x|^p)^(1/p) over dims (all when None / empty), with the 0, 1, 2 and ±inf special cases."""
    rank = len(x.shape)
    x = cx.cast(x, cx.out_dtype())
    axes = list(range(rank)) if dims is None or (isinstance(dims, Sequence) and not dims) else \
        sorted({_axis(a, rank) for a in ([dims] if isinstance(dims, int) else dims)})
    g, keep = cx.g, bool(keepdim)
    if p == 2:
        return g.sqrt(g.reduce(x * x, op="sum", axes=axes, keep_dim=keep))
    a = g.abs(x)
    if math.isinf(p):
        return g.reduce(a, op="max" if p > 0 else "min", axes=axes, keep_dim=keep)
    if p == 0:
        return g.reduce(g.cast(g.ne(x, cx.scalar(0, x.dtype)), to=x.dtype), op="sum", axes=axes, keep_dim=keep)
    if p == 1:
        return g.reduce(a, op="sum", axes=axes, keep_dim=keep)
    s = g.reduce(g.binary(a, cx.scalar(p, x.dtype), op="pow"), op="sum", axes=axes, keep_dim=keep)
    return g.binary(s, cx.scalar(1.0 / p, x.dtype), op="pow")


@_conv("aten.linalg_vector_norm.default")
def _linalg_vector_norm(cx, node, x, ord=2, dim=None, keepdim=False, dtype=None):
    return _norm(cx, x, float(ord), dim, keepdim)


@_conv("aten.norm.ScalarOpt_dim", "aten.norm.Scalar", "aten.norm.ScalarOpt_dim_dtype")
def _torch_norm(cx, node, x, p=2, dim=None, keepdim=False, **kwargs):
    if _target_name(node.target) == "aten.norm.Scalar":
        dim = None
    return _norm(cx, x, 2.0 if p is None else float(p), dim, keepdim)

