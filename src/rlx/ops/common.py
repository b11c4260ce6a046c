"""Small helpers shared by op family modules (type rules and kernel utilities)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.dtype import DType, promote_all
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.graph import Node
from rlx.ir.shape import TensorType, broadcast_shapes, normalize_axis

#: The default epsilon of every normalisation (layer, RMS, group, batch norm and their fused and
#: backward forms), added inside the square root.
NORM_EPS = 1e-5


def broadcast_promoted(ins: list[TensorType]) -> TensorType:
    """NumPy broadcast of every operand, dtype joined in the promotion lattice."""
    return TensorType(broadcast_shapes(*(t.shape for t in ins)), promote_all([t.dtype for t in ins]))


def require_float(t: TensorType, what: str = "operand") -> None:
    if not (t.dtype.is_float or t.dtype.is_complex):
        raise ShapeError(f"{what} must be a float tensor, got {t.dtype}")


def require_rank(t: TensorType, ranks: Sequence[int] | int, what: str = "operand") -> None:
    allowed = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(t.shape) not in allowed:
        want = " or ".join(str(r) for r in allowed)
        raise ShapeError(f"{what} must have rank {want}, got {t.shape!r}")


def require_dim(actual: object, expected: object, what: str) -> None:
    """Static dims must match; symbolic dims must be the same symbol."""
    if actual != expected:
        raise ShapeError(f"{what}: expected {expected}, got {actual}")


def axis_of(axis: int, t: TensorType, what: str = "axis") -> int:
    return normalize_axis(axis, len(t.shape), what)


def along_axis(t: TensorType, attrs: Mapping[str, Any], op: str) -> int:
    """``attrs["axis"]`` normalised, for an op that works along one axis of a rank >= 1 operand."""
    if len(t.shape) == 0:
        raise ShapeError(f"{op} needs rank >= 1")
    return axis_of(attrs["axis"], t)


def compute_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype a reference kernel computes in for a tensor of ``dtype`` (narrow floats in f32)."""
    return np.dtype(np.float32) if dtype.is_low_precision_float else np.dtype(dtype.numpy)


def promote_args(args: list[np.ndarray], dtype: DType) -> list[np.ndarray]:
    """Cast kernel operands to the computation dtype (low-precision floats stay f32)."""
    target = compute_dtype(dtype)
    return [a.astype(target, copy=False) for a in args]


def fresh_into(into: Callable[..., Any]) -> Callable[..., Any]:
    """The reference kernel that is ``into`` (an op's ``kernel_into``) writing a fresh array of the compute
    dtype: where an op's NumPy kernel departs from the row for speed, ``rlx.run`` and the arena give the same bits."""

    def kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out_type: TensorType) -> np.ndarray:
        return into(args, attrs, out_type, np.empty(tuple(out_type.shape), compute_dtype(out_type.dtype)))

    return kernel


def dot_mean(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """mean(a·b) over ``axis`` of the real ``a`` (``b``: same shape, or a vector along the axis), that axis kept
    with size 1: dot products (np.vecdot, BLAS at memory speed) instead of add.reduce, which along a short
    last axis pays per row, and without an a·b temporary."""
    rows_a = np.moveaxis(a, axis, -1)
    m = np.expand_dims(np.asarray(np.vecdot(rows_a, np.moveaxis(b, axis, -1) if b.ndim > 1 else b)), axis)
    return np.divide(m, a.shape[axis], out=m)


# ------------------------------------------------------------------ rewrite facts (OpDef)
def same_type_identity(attrs, ins: list[TensorType], out: TensorType, consts) -> int | None:
    """``OpDef.identity`` of ops that change nothing when the result type is the operand's
    (cast, reshape, expand, narrow)."""
    return 0 if ins[0] == out else None


def bound_value(node: Node, params: Mapping[str, Any]) -> np.ndarray | None:
    """A constant node's value, or a param's value when ``params`` binds it (folded weights, an
    export's initializers); else None."""
    if node.op == "constant":
        return np.asarray(node.attrs["value"].array)
    if node.op == "param" and node.attrs["name"] in params:
        return np.asarray(params[node.attrs["name"]])
    return None


def all_equal(value: np.ndarray | None, element: float, max_size: int = 4096) -> bool:
    """Is ``value`` a non-empty numeric constant (at most ``max_size`` elements) every element of
    which equals ``element``?"""
    if value is None or value.size == 0 or value.size > max_size or value.dtype.kind not in "biufc":
        return False
    with np.errstate(all="ignore"):
        return bool(np.all(value.astype(np.complex128 if value.dtype.kind == "c" else np.float64) == element))


def unmoved_axes(protected: frozenset[int]) -> bool:
    """``OpDef.keeps_grid`` of ops that move elements between positions (reshape, expand): safe
    only under a single scale (no protected axis)."""
    return not protected


def refuse_rule(message: str) -> Callable[..., Any]:
    """A vjp / jvp rule that always raises; ``rule.refusal`` tells the registry-walk tests to expect that."""
    def rule(ctx: Any, node: Any, *_: Any) -> Any:
        raise AutodiffError(f"{node.op} (node %{node.id}): {message}")
    rule.refusal = message  # type: ignore[attr-defined]
    return rule


def broadcasting_batch(ctx: Any, node: Any, operands: list[Any], batched: list[bool]) -> Any:
    """The batch (vmap) rule of every broadcasting elementwise op: the op itself on the batched operands."""
    return ctx.apply_broadcasting(node, operands, batched)


def linear_solve_jvp(ctx: Any, node: Any, tangents: list[Any], product: Callable[[Any, Any], Any],
                     solve: Callable[[Any], Any]) -> Any:
    """The tangent of a linear solve X = A⁻¹·B: ``solve(tB - product(tA, X))``, where ``product`` is the op's
    A·X and ``solve`` the op itself on a new right-hand side (a missing tangent counts as zero)."""
    ta, tb = tangents
    rhs = tb
    if ta is not None:
        ax = product(ta, ctx.output(node))
        rhs = -ax if rhs is None else rhs - ax
    return solve(rhs)
