"""Linear algebra ops: ``matmul`` (batched, broadcasting) and ``dot_general`` (XLA contraction).

Both promote their operand dtypes along the commutative lattice of :mod:`rlx.ir.dtype`
(upstream keeps the left operand's dtype) and reject bool operands. Both are *blas* ops:
fusion boundaries for the optimizer.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes, normalize_axis
from rlx.ops.common import promote_args, require_dim
from rlx.ops.cost import dot_general_macs, last_dim_macs
from rlx.ops.facts import ALL_NATIVE


def _contraction_dtype(a: TensorType, b: TensorType) -> DType:
    if a.dtype.is_bool or b.dtype.is_bool:
        raise ShapeError(f"operands must be numeric, got {a.dtype} and {b.dtype}")
    return DType.promote(a.dtype, b.dtype)


# ----------------------------------------------------------------------------- matmul


def _matmul_type(ins: list[TensorType], attrs) -> TensorType:
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"both operands need rank >= 2 (no 1-D promotion), got {a.shape!r} and {b.shape!r}")
    require_dim(b.shape[-2], a.shape[-1], f"contracted dim K of {a.shape!r} @ {b.shape!r}")
    batch = broadcast_shapes(Shape(a.shape[:-2]), Shape(b.shape[:-2]))
    return TensorType(Shape((*batch, a.shape[-2], b.shape[-1])), _contraction_dtype(a, b))


def _matmul_vjp(ctx, node, ct):
    """da = ct @ bᵀ, db = aᵀ @ ct, summed over broadcast batch axes (rules: rlx.autodiff.rules)."""
    g = ctx.graph
    a, b = ctx.operands(node)
    da = ctx.unbroadcast(g.matmul(ct, ctx.transpose_last2(b)), a) if ctx.wants(node, 0) else None
    db = ctx.unbroadcast(g.matmul(ctx.transpose_last2(a), ct), b) if ctx.wants(node, 1) else None
    return [da, db]


def _matmul_jvp(ctx, node, tangents):
    g = ctx.graph
    a, b = ctx.operands(node)
    ta, tb = tangents
    parts = [g.matmul(ta, b) if ta is not None else None, g.matmul(a, tb) if tb is not None else None]
    present = [p for p in parts if p is not None]
    return present[0] if len(present) == 1 else present[0] + present[1]


def _matmul_kernel(args, attrs, out_type, out=None):
    return np.matmul(*promote_args(args, out_type.dtype), out=out)


defop(
    name="matmul", macs=last_dim_macs, native_on=ALL_NATIVE, precision="compute", family="linalg", arity=2, operands=("a", "b"),
    infer=_matmul_type,
    kernel=_matmul_kernel, kernel_into=_matmul_kernel,
    flags={"blas", "complex_ad"},
    vjp=_matmul_vjp, jvp=_matmul_jvp, batch=lambda ctx, node, operands, batched: ctx.apply_broadcasting(node, operands, batched),
    doc="Batched matrix product a [..., M, K] @ b [..., K, N] -> [..., M, N] (np.matmul). "
    "Both ranks must be >= 2 (no 1-D promotion). The batch prefixes broadcast like NumPy, "
    "symbolic dims included (a symbol matches itself or 1). K must be the same static size "
    "or the same symbol. The result dtype is the promotion of both operand dtypes "
    "(upstream: lhs dtype). Weights are stored [in, out] and used as x @ W. Differentiable on c64 too "
    "(holomorphic; JAX's convention).",
)


# ------------------------------------------------------------------------ dot_general


def _axes(axes: Sequence[int], rank: int, what: str) -> list[int]:
    out = [normalize_axis(a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {list(axes)} repeats an axis")
    return out


def _dot_general_axes(ins: list[TensorType], attrs) -> tuple[list[int], list[int], list[int], list[int]]:
    """Normalized (lhs_batch, lhs_contracting, rhs_batch, rhs_contracting), checked."""
    lhs, rhs = ins
    lr, rr = len(lhs.shape), len(rhs.shape)
    lb = _axes(attrs["lhs_batch"], lr, "lhs_batch axis")
    lc = _axes(attrs["lhs_contracting"], lr, "lhs_contracting axis")
    rb = _axes(attrs["rhs_batch"], rr, "rhs_batch axis")
    rc = _axes(attrs["rhs_contracting"], rr, "rhs_contracting axis")
    if len(lb) != len(rb):
        raise ShapeError(f"lhs_batch {list(attrs['lhs_batch'])} and rhs_batch {list(attrs['rhs_batch'])} differ in length")
    if len(lc) != len(rc):
        raise ShapeError(
            f"lhs_contracting {list(attrs['lhs_contracting'])} and rhs_contracting {list(attrs['rhs_contracting'])} differ in length"
        )
    if set(lb) & set(lc):
        raise ShapeError(f"lhs axes {sorted(set(lb) & set(lc))} are both batch and contracting")
    if set(rb) & set(rc):
        raise ShapeError(f"rhs axes {sorted(set(rb) & set(rc))} are both batch and contracting")
    for kind, la, ra in (("batch", lb, rb), ("contracting", lc, rc)):
        for i, j in zip(la, ra):
            require_dim(rhs.shape[j], lhs.shape[i], f"{kind} dim pair (lhs axis {i}, rhs axis {j})")
    return lb, lc, rb, rc


def _dot_general_type(ins: list[TensorType], attrs) -> TensorType:
    lhs, rhs = ins
    lb, lc, rb, rc = _dot_general_axes(ins, attrs)
    lfree = [i for i in range(len(lhs.shape)) if i not in lb and i not in lc]
    rfree = [j for j in range(len(rhs.shape)) if j not in rb and j not in rc]
    dims = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in lfree] + [rhs.shape[j] for j in rfree]
    return TensorType(Shape(dims), _contraction_dtype(lhs, rhs))


def _dot_general_kernel(args, attrs, out):
    lhs, rhs = promote_args(args, out.dtype)
    ins = [TensorType(Shape(a.shape), DType.of(a.dtype)) for a in (lhs, rhs)]
    lb, lc, rb, rc = _dot_general_axes(ins, attrs)
    letters = iter(string.ascii_letters)
    lsub = [next(letters) for _ in range(lhs.ndim)]
    rsub = [next(letters) for _ in range(rhs.ndim)]
    for i, j in zip(lb + lc, rb + rc):
        rsub[j] = lsub[i]
    lfree = [lsub[i] for i in range(lhs.ndim) if i not in lb and i not in lc]
    rfree = [rsub[j] for j in range(rhs.ndim) if j not in rb and j not in rc]
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join([lsub[i] for i in lb] + lfree + rfree)}"
    return np.einsum(spec, lhs, rhs)


defop(
    name="dot_general", macs=dot_general_macs, precision="compute", family="linalg", arity=2, operands=("lhs", "rhs"),
    attrs={
        "lhs_contracting": AttrSpec("ints", doc="lhs axes summed over, paired positionally with rhs_contracting"),
        "rhs_contracting": AttrSpec("ints", doc="rhs axes summed over"),
        "lhs_batch": AttrSpec("ints", default=(), doc="lhs batch axes, paired positionally with rhs_batch"),
        "rhs_batch": AttrSpec("ints", default=(), doc="rhs batch axes"),
    },
    infer=_dot_general_type, kernel=_dot_general_kernel, flags={"blas"},
    doc="XLA DotGeneral. Batch axes pair up positionally (equal sizes, no broadcasting), as "
    "do contracting axes; an axis may not be both. Output dims = lhs batch dims (in "
    "lhs_batch order) + lhs free dims (ascending axis order) + rhs free dims (ascending). "
    "Negative axes count from the end. Empty contracting lists give an outer product. "
    "The result dtype is the promotion of both operand dtypes (upstream: lhs dtype). "
    "Reference: np.einsum built from the axis lists. Upstream has no shape inference "
    "for this op; rlx infers and checks it fully.",
)
