"""Small helpers shared by the ONNX converters (axes, integer operands, reshape / broadcast / cast)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlx.frontends.onnx.import_context import Importer, NeedsShapes
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
)


def _axis(a: int, rank: int) -> int:
    if not -max(rank, 1) <= a < max(rank, 1):
        raise OnnxUnsupported(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0


def _ints(cx: Importer, node, idx: int, attr: str | None, attrs: dict, default=None):
    """An int list given as attribute (older opsets) or as a static input (newer)."""
    if attr is not None and attr in attrs:
        return [int(v) for v in attrs[attr]]
    if idx < len(node.input) and node.input[idx]:
        return [int(v) for v in np.asarray(cx.static(node.input[idx], attr or "operand")).reshape(-1)]
    return default


def _sizes(cx: Importer, node, idx: int, attrs: dict, default=None) -> list[Any] | None:
    """Like :func:`_ints` for an operand that may be a symbolic size (Reshape / Expand shapes, Slice bounds)."""
    if idx < len(node.input) and node.input[idx]:
        return cx.sizes(node.input[idx])
    return default


def _reshape(cx: Importer, v: Value, shape: Sequence[int]) -> Value:
    if tuple(v.shape) == tuple(shape):
        return v
    return cx.g.reshape(v, new_shape=[s if isinstance(s, str) else int(s) for s in shape])  # symbolic dims kept


def _static_shape(v: Value) -> list[int]:
    if not v.shape.is_static:
        raise NeedsShapes(f"a static shape is needed, got {v.shape!r}")
    return [int(d) for d in v.shape]


def _broadcast_to(cx: Importer, v: Value, shape: Sequence[int]) -> Value:
    if tuple(v.shape) == tuple(shape):
        return v
    return cx.g.expand(v, target_shape=list(shape))


def _cast(cx: Importer, v: Value, dtype: DType) -> Value:
    return v if v.dtype == dtype else cx.g.cast(v, to=dtype)


def _first(arr: np.ndarray, what: str) -> Any:
    """The single value of a scalar operand (a shape-[1] tensor too)."""
    flat = np.asarray(arr).reshape(-1)
    if flat.size != 1:
        raise OnnxFormatError(f"{what} must be one value, got {flat.size}")
    return flat[0]


def _in_f32(cx: Importer, x: Value, body: Callable[[Value], Value]) -> Value:
    """``body(x)``, an ONNX op composed of several MIR ops, computed in f32 for an f16 / bf16 ``x`` and
    rounded once (as rlx's own ops do: docs/semantics.md#conventions), not after every step."""
    if not x.dtype.is_low_precision_float:
        return body(x)
    return _cast(cx, body(_cast(cx, x, DType.F32)), x.dtype)
