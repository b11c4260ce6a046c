"""ONNX MatMul / Gemm / Einsum / Det converters."""

from __future__ import annotations

from collections import Counter

import numpy as np

from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _broadcast_to, _cast, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
)


@converter("MatMul")
def _matmul(cx, node, ins, attrs):
    a, b = ins
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if a_vec:
        a = _reshape(cx, a, [1, *a.shape])
    if b_vec:
        b = _reshape(cx, b, [*b.shape, 1])
    y = cx.g.matmul(a, b)
    if a_vec or b_vec:
        shape = list(y.shape)
        if b_vec:
            shape.pop(-1)
        if a_vec:
            shape.pop(-2 if not b_vec else -1)
        y = _reshape(cx, y, shape)
    return y


@converter("Gemm")
def _gemm(cx, node, ins, attrs):
    a, b = ins[0], ins[1]
    if attrs.get("transA", 0):
        a = cx.g.transpose(a, perm=[1, 0])
    if attrs.get("transB", 0):
        b = cx.g.transpose(b, perm=[1, 0])
    y = cx.g.matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = y * cx.scalar(alpha, y)
    if len(ins) > 2 and ins[2] is not None:
        c = ins[2]
        if beta != 1.0:
            c = c * cx.scalar(beta, c)
        y = y + c
    return y


def _diagonal(cx, eq: str, t: str, v: Value) -> tuple[str, Value]:
    """A term with a repeated index (``ii``) as its diagonal: the repeated axes moved last, flattened and
    gathered at the flat positions of (j, j, ...), so the index appears once (at the end)."""
    while len(set(t)) != len(t):
        c = next(ch for ch in t if t.count(ch) > 1)
        pos = [i for i, ch in enumerate(t) if ch == c]
        sizes = {v.shape[i] for i in pos}
        if any(not isinstance(d, int) for d in sizes):  # equal only for some sizes: decided on the fed shapes
            raise NeedsShapes(f"Einsum {eq!r}: the axes of the repeated index {c!r} are symbolic: {v.shape!r}")
        if len(sizes) != 1:
            raise OnnxFormatError(f"Einsum {eq!r}: the axes of the repeated index {c!r} differ or are symbolic: {v.shape!r}")
        n, k = int(next(iter(sizes))), len(pos)
        keep = [i for i in range(len(t)) if i not in pos]
        if keep + pos != list(range(len(t))):
            v = cx.g.transpose(v, perm=keep + pos)
        v = _reshape(cx, v, [*(v.shape[i] for i in range(len(keep))), n ** k])
        step = sum(n ** j for j in range(k))
        v = cx.g.gather(v, cx.const(np.arange(n, dtype=np.int64) * step), axis=len(keep))
        t = "".join(t[i] for i in keep) + c
    return t, v


@converter("Einsum")
def _einsum(cx, node, ins, attrs):
    eq = attrs["equation"].replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ins):
        raise OnnxUnsupported(f"Einsum {eq!r}: {len(terms)} terms for {len(ins)} operands")
    letters = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq)
    ell: list[str] = []

    def expand(term: str, rank: int) -> str:
        if "..." not in term:
            return term
        n = rank - (len(term) - 3)
        while len(ell) < n:
            ell.insert(0, next(letters))
        return term.replace("...", "".join(ell[len(ell) - n:]))

    terms = [expand(t, len(v.shape)) for t, v in zip(terms, ins)]
    if not _:
        counts = Counter("".join(terms))
        out = "".join(ell) + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    else:
        out = rhs.replace("...", "".join(ell))
    for t, v in zip(terms, ins):
        if len(t) != len(v.shape):
            raise OnnxUnsupported(f"Einsum {eq!r}: term {t!r} does not match rank {len(v.shape)}")
    operands = [_diagonal(cx, eq, t, v) for t, v in zip(terms, ins)]

    def reduce_unused(t: str, v: Value, keep: str) -> tuple[str, Value]:
        drop = [i for i, c in enumerate(t) if c not in keep]
        if drop:
            v = cx.g.reduce(v, op="sum", axes=drop, keep_dim=False)
            t = "".join(c for c in t if c in keep)
        return t, v

    t0, v0 = operands[0]
    rest = "".join(t for t, _v in operands[1:]) + out
    t0, v0 = reduce_unused(t0, v0, rest)
    for k in range(1, len(operands)):
        t1, v1 = operands[k]
        later = "".join(t for t, _v in operands[k + 1:]) + out
        t1, v1 = reduce_unused(t1, v1, t0 + later)
        batch = [c for c in t0 if c in t1 and c in later]
        contract = [c for c in t0 if c in t1 and c not in later]
        v0 = cx.g.dot_general(v0, v1, lhs_contracting=[t0.index(c) for c in contract], rhs_contracting=[t1.index(c) for c in contract],
                              lhs_batch=[t0.index(c) for c in batch], rhs_batch=[t1.index(c) for c in batch])
        t0 = "".join(batch) + "".join(c for c in t0 if c not in t1) + "".join(c for c in t1 if c not in t0)
    t0, v0 = reduce_unused(t0, v0, out)
    if t0 != out:
        if sorted(t0) != sorted(out):
            raise OnnxUnsupported(f"Einsum {eq!r}: output {out!r} not expressible")
        v0 = cx.g.transpose(v0, perm=[t0.index(c) for c in out])
    return v0


@converter("Det")
def _det(cx, node, ins, attrs):
    """Determinant of [..., M, M] by Gaussian elimination with partial pivoting, unrolled over the M
    static columns in f64: the product of the pivots, negated per row swap (a zero pivot gives 0)."""
    x = ins[0]
    shape = _static_shape(x)
    if len(shape) < 2 or shape[-1] != shape[-2] or not x.dtype.is_float:
        raise OnnxFormatError(f"Det needs a float [..., M, M] tensor, got {x.dtype} {shape}")
    m, lead = shape[-1], shape[:-2]
    cx.unroll(m, "the Det elimination steps")
    a = _cast(cx, x, DType.F64)
    det = cx.const(np.ones(lead))
    rows = np.arange(m).reshape([1] * len(lead) + [m])
    for k in range(m):
        col = _reshape(cx, cx.g.narrow(cx.g.narrow(a, axis=-1, start=k, length=1), axis=-2, start=k, length=m - k), [*lead, m - k])
        kk = cx.const(np.int64(k))
        p = cx.g.arg_reduce(cx.g.abs(col), op="argmax", axis=-1, keep_dim=True) + kk  # the pivot row [..., 1]
        perm = cx.g.where(cx.const(rows == k), p, cx.g.where(cx.g.eq(cx.const(rows), p), kk, cx.const(rows)))  # [..., M]
        a = cx.g.gather_elements(a, _broadcast_to(cx, _reshape(cx, perm, [*lead, m, 1]), shape), axis=len(shape) - 2)
        swapped = _reshape(cx, cx.g.ne(p, kk), lead)
        pivot = _reshape(cx, cx.g.narrow(cx.g.narrow(a, axis=-1, start=k, length=1), axis=-2, start=k, length=1), lead)
        det = det * pivot * cx.g.where(swapped, cx.scalar(-1.0, det), cx.scalar(1.0, det))
        if k == m - 1:
            break
        safe = cx.g.where(cx.g.eq(pivot, cx.scalar(0.0, pivot)), cx.scalar(1.0, pivot), pivot)
        top, below = cx.g.narrow(a, axis=-2, start=k, length=1), cx.g.narrow(a, axis=-2, start=k + 1, length=m - k - 1)
        factor = cx.g.narrow(below, axis=-1, start=k, length=1) / _reshape(cx, safe, [*lead, 1, 1])
        a = cx.g.concat([cx.g.narrow(a, axis=-2, start=0, length=k + 1), below - factor * top], axis=len(shape) - 2)
    return _cast(cx, det, x.dtype)
