"""torch converters for math the MIR has no single op for, composed from existing ops with torch's
numerics: ``log1p`` / ``expm1`` (accurate near 0), ``atan2``, ``hypot``, ``round`` (half to even, with
``decimals``), ``any`` / ``all``, ``sort`` / ``argsort`` (one full-length ``top_k``), ``histc`` and the
``empty`` family (deterministic zeros: torch leaves the memory uninitialised)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.frontends.torch.context import _axis, _conv, _Ctx, _reshape, _target_name
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


def _float(cx: _Ctx, x: Value) -> Value:
    return cx.cast(x, cx.out_dtype())


@_conv("aten.log1p.default")
def _log1p(cx, node, x):
    """log(1 + x) as log(u) * x / (u - 1) with u = 1 + x (exact to an ulp near 0, where log(u) alone is not)."""
    g, x = cx.g, _float(cx, x)
    one = cx.scalar(1, x.dtype)
    u = x + one
    ratio = g.binary(g.activation(u, kind="log") * x, u - one, op="div")
    exact = g.binary(g.eq(u, one), g.eq(x, cx.scalar(math.inf, x.dtype)), op="add")  # tiny x, and +inf
    return g.where(exact, x, ratio)


@_conv("aten.expm1.default")
def _expm1(cx, node, x):
    """exp(x) - 1 as (u - 1) * x / log(u) with u = exp(x) (exact near 0); -1 and +inf at the ends."""
    g, x = cx.g, _float(cx, x)
    one = cx.scalar(1, x.dtype)
    u = g.activation(x, kind="exp")
    ratio = g.binary((u - one) * x, g.activation(u, kind="log"), op="div")
    out = g.where(g.eq(u, one), x, ratio)
    out = g.where(g.eq(u, cx.scalar(0, x.dtype)), -one, out)
    return g.where(g.eq(u, cx.scalar(math.inf, x.dtype)), u, out)


@_conv("aten.atan2.default")
def _atan2(cx, node, y, x):
    """atan2 from atan of the smaller-over-larger ratio (no loss for tiny x), placed in its quadrant."""
    g = cx.g
    dtype = cx.out_dtype()
    y, x = cx.cast(y, dtype), cx.cast(x, dtype)
    zero, half_pi, pi = cx.scalar(0, dtype), cx.scalar(math.pi / 2, dtype), cx.scalar(math.pi, dtype)
    ay, ax = g.activation(y, kind="abs"), g.activation(x, kind="abs")
    steep = g.gt(ay, ax)
    one = cx.scalar(1, dtype)

    def negative(v: Value) -> Value:  # v < 0, -0.0 included (1 / -0.0 = -inf)
        return g.lt(g.where(g.eq(v, zero), g.binary(one, v, op="div"), v), zero)

    x_neg = negative(x)
    sign_y = g.where(negative(y), -one, one)
    flat = g.activation(g.binary(y, x, op="div"), kind="atan")  # |y| <= |x|
    flat = g.where(x_neg, flat + sign_y * pi, flat)
    upright = sign_y * half_pi - g.activation(g.binary(x, y, op="div"), kind="atan")
    both_zero = g.binary(g.eq(x, zero), g.eq(y, zero), op="mul")
    origin = g.where(x_neg, sign_y * pi, y * zero)  # atan2(±0, -0) = ±pi, atan2(±0, +0) = ±0
    both_inf = g.binary(g.eq(ax, cx.scalar(math.inf, dtype)), g.eq(ay, cx.scalar(math.inf, dtype)), op="mul")
    corner = sign_y * g.where(x_neg, cx.scalar(3 * math.pi / 4, dtype), cx.scalar(math.pi / 4, dtype))
    out = g.where(steep, upright, flat)
    out = g.where(both_zero, origin, out)
    return g.where(both_inf, corner, out)


@_conv("aten.hypot.default")
def _hypot(cx, node, a, b):
    """sqrt(a^2 + b^2) scaled by the larger magnitude (no overflow or underflow of the squares)."""
    g = cx.g
    dtype = cx.out_dtype()
    a, b = g.activation(cx.cast(a, dtype), kind="abs"), g.activation(cx.cast(b, dtype), kind="abs")
    hi, lo = g.binary(a, b, op="max"), g.binary(a, b, op="min")
    zero = cx.scalar(0, dtype)
    safe = g.where(g.eq(hi, zero), cx.scalar(1, dtype), hi)
    r = g.binary(lo, safe, op="div")
    out = hi * g.activation(cx.scalar(1, dtype) + r * r, kind="sqrt")
    inf = cx.scalar(math.inf, dtype)
    return g.where(g.binary(g.eq(a, inf), g.eq(b, inf), op="add"), inf, out)  # hypot(inf, nan) = inf


@_conv("aten.isnan.default", "aten.isinf.default", "aten.isfinite.default", "aten.isposinf.default",
       "aten.isneginf.default")
def _is_class(cx, node, x):
    """Float classification by comparisons (NaN is the one value unequal to itself); ints are finite."""
    g, name = cx.g, _target_name(node.target)
    finite_test = name == "aten.isfinite.default"
    if not x.dtype.is_float:
        return g.eq(x, x) if finite_test else g.ne(x, x)
    inf = cx.scalar(math.inf, x.dtype)
    if name == "aten.isnan.default":
        return g.ne(x, x)
    if name == "aten.isposinf.default":
        return g.eq(x, inf)
    if name == "aten.isneginf.default":
        return g.eq(x, -inf)
    infinite = g.eq(g.activation(x, kind="abs"), inf)
    if not finite_test:
        return infinite
    return g.binary(g.eq(x, x), g.eq(infinite, cx.scalar(False, DType.BOOL)), op="mul")


@_conv("aten.round.default")
def _round(cx, node, x):
    return cx.g.unary_math(x, kind="round_even")  # torch rounds half to even; ints are unchanged


@_conv("aten.round.decimals")
def _round_decimals(cx, node, x, decimals=0):
    """torch's order: x * 10^d rounded half to even, then / 10^d (negative d: divide first, multiply back)."""
    g, dtype = cx.g, x.dtype
    ten = cx.scalar(np.asarray(10.0 ** abs(int(decimals)), dtype.numpy), dtype)
    if decimals >= 0:
        return g.binary(g.unary_math(x * ten, kind="round_even"), ten, op="div")
    return g.unary_math(g.binary(x, ten, op="div"), kind="round_even") * ten


def _any_all(cx: _Ctx, node: Any, x: Value, dims: Any, keepdim: bool) -> Value:
    op = "max" if _target_name(node.target).startswith("aten.any") else "min"
    rank = len(x.shape)
    truth = x if x.dtype is DType.BOOL else cx.g.ne(x, cx.scalar(0, x.dtype))
    flags = cx.cast(truth, DType.U8)
    if rank == 0:
        return cx.cast(flags, cx.out_dtype())
    if dims is None or (isinstance(dims, Sequence) and len(dims) == 0):
        axes = list(range(rank))
    else:
        axes = sorted({_axis(d, rank) for d in ([dims] if isinstance(dims, int) else dims)})
    return cx.cast(cx.g.reduce(flags, op=op, axes=axes, keep_dim=bool(keepdim)), cx.out_dtype())


@_conv("aten.any.default", "aten.all.default")
def _any_all_default(cx, node, x):
    return _any_all(cx, node, x, None, False)


@_conv("aten.any.dim", "aten.any.dims", "aten.all.dim", "aten.all.dims")
def _any_all_dims(cx, node, x, dim=None, keepdim=False):
    return _any_all(cx, node, x, dim, keepdim)


def _sorted(cx: _Ctx, x: Value, dim: int, descending: bool) -> tuple[Value, Value]:
    """(values, indices) along ``dim``: a top_k over the whole axis (stable: ties keep their order,
    NaN sorts as the largest value, as in torch)."""
    if len(x.shape) == 0:
        return x, cx.g.constant(np.asarray(0, np.int64))
    axis = _axis(dim, len(x.shape))
    n = cx.static(x.shape[axis], "sorted axis size")
    key = cx.cast(x, DType.U8) if x.dtype is DType.BOOL else x
    values, indices = cx.g.top_k(key, k=n, axis=axis, largest=bool(descending), output="both")
    return cx.cast(values, x.dtype), indices


@_conv("aten.sort.default")
def _sort(cx, node, x, dim=-1, descending=False):
    return _sorted(cx, x, dim, descending)


@_conv("aten.sort.stable")
def _sort_stable(cx, node, x, stable=None, dim=-1, descending=False):
    return _sorted(cx, x, dim, descending)


@_conv("aten.argsort.default")
def _argsort(cx, node, x, dim=-1, descending=False):
    return _sorted(cx, x, dim, descending)[1]


@_conv("aten.argsort.stable")
def _argsort_stable(cx, node, x, stable=None, dim=-1, descending=False):
    return _sorted(cx, x, dim, descending)[1]


@_conv("aten.histc.default")
def _histc(cx, node, x, bins=100, min=0, max=0):
    """Counts of x in ``bins`` equal bins over [min, max] (the data's range when min == max; the last
    bin closed; values outside or NaN dropped), as a one-hot sum: bins x elements of work."""
    g, dtype = cx.g, cx.out_dtype()
    bins = cx.static(bins, "histc bins")
    flat = _reshape(cx, cx.cast(x, dtype), [-1])
    if min == max:  # torch: the data's range, widened by 1 on each side when it is a single value
        lo = g.reduce(flat, op="min", axes=[0], keep_dim=False)
        hi = g.reduce(flat, op="max", axes=[0], keep_dim=False)
        same = g.eq(lo, hi)
        lo = g.where(same, lo - cx.scalar(1, dtype), lo)
        hi = g.where(same, hi + cx.scalar(1, dtype), hi)
    else:
        lo, hi = cx.scalar(min, dtype), cx.scalar(max, dtype)
    width = hi - lo
    pos = g.unary_math(g.binary((flat - lo) * cx.scalar(bins, dtype), width, op="div"), kind="floor")
    pos = g.where(g.eq(flat, hi), cx.scalar(bins - 1, dtype), pos)  # the last bin is closed
    inside = g.binary(g.ge(flat, lo), g.le(flat, hi), op="mul")
    pos = g.where(inside, pos, cx.scalar(-1, dtype))  # NaN compares false: dropped too
    edges = g.constant(np.arange(bins, dtype=dtype.numpy))
    onehot = cx.cast(g.eq(g.reshape(pos, new_shape=[-1, 1]), edges), dtype)
    return g.reduce(onehot, op="sum", axes=[0], keep_dim=False)


@_conv("aten.empty.memory_format", "aten.empty_permuted.default", "aten.empty_strided.default", "aten.new_empty.default",
       "aten.new_empty_strided.default", "aten.empty_like.default")
def _empty(cx, node, *args, **kwargs):
    """Zeros of the recorded shape: torch's values are unspecified, these are one deterministic choice."""
    dtype = cx.out_dtype()
    return cx.g.expand(cx.g.constant(np.zeros((), dtype.numpy)), target_shape=list(cx.out_shape()))


@_conv("aten.log2.default", "aten.log10.default", "aten.exp2.default")
def _log_base(cx, node, x):
    """log2 / log10 as log(x) / log(base), 2^x as exp(x * log 2): the MIR's natural log and exp, one rounding more."""
    g, x = cx.g, _float(cx, x)
    name = _target_name(node.target)
    if name == "aten.exp2.default":
        return g.activation(x * cx.scalar(math.log(2.0), x.dtype), kind="exp")
    return g.activation(x, kind="log") * cx.scalar(1 / math.log(2.0 if name == "aten.log2.default" else 10.0), x.dtype)


@_conv("aten.copysign.Tensor", "aten.copysign.Scalar")
def _copysign(cx, node, a, b):
    """|a| with the sign of b, -0.0 included (told apart by 1 / b = -inf)."""
    g, dtype = cx.g, cx.out_dtype()
    a = g.activation(cx.cast(a, dtype), kind="abs")
    b = cx.cast(b, dtype) if isinstance(b, Value) else cx.scalar(b, dtype)
    zero = cx.scalar(0, dtype)
    negative = g.lt(g.where(g.eq(b, zero), g.binary(cx.scalar(1, dtype), b, op="div"), b), zero)
    return g.where(negative, -a, a)  # a NaN b: its sign bit is not observable here; torch then follows the bit


@_conv("aten.ldexp.Tensor")
def _ldexp(cx, node, a, b):
    g, dtype = cx.g, cx.out_dtype()
    two = cx.scalar(2, dtype)
    return cx.cast(a, dtype) * g.binary(two, cx.cast(b, dtype), op="pow")


@_conv("aten.addmv.default")
def _addmv(cx, node, x, mat, vec, beta=1, alpha=1):
    """beta * x + alpha * (mat @ vec); beta = 0 ignores x (NaN included), as torch does."""
    g = cx.g
    prod = g.reshape(g.matmul(mat, g.reshape(vec, new_shape=[-1, 1])), new_shape=[-1])
    return _scaled_sum(cx, x, prod, beta, alpha)


@_conv("aten.addbmm.default")
def _addbmm(cx, node, x, b1, b2, beta=1, alpha=1):
    prod = cx.g.reduce(cx.g.matmul(b1, b2), op="sum", axes=[0], keep_dim=False)
    return _scaled_sum(cx, x, prod, beta, alpha)


def _scaled_sum(cx: _Ctx, x: Value, prod: Value, beta: Any, alpha: Any) -> Value:
    dtype = cx.out_dtype()
    prod = cx.cast(prod, dtype)
    if alpha != 1:
        prod = prod * cx.scalar(alpha, dtype)
    if beta == 0:
        return cx.g.expand(prod, target_shape=list(cx.out_shape())) if tuple(prod.shape) != cx.out_shape() else prod
    x = cx.cast(x, dtype)
    return (x if beta == 1 else x * cx.scalar(beta, dtype)) + prod


@_conv("aten.diagonal.default", "aten.diagonal_copy.default")
def _diagonal(cx, node, x, offset=0, dim1=0, dim2=1):
    """The (dim1, dim2) diagonal at ``offset``, moved last: the two axes moved to the end, flattened, one gather."""
    g = cx.g
    rank = len(x.shape)
    d1, d2 = _axis(dim1, rank), _axis(dim2, rank)
    n, m = cx.static(x.shape[d1], "diagonal axis size"), cx.static(x.shape[d2], "diagonal axis size")
    rest = [a for a in range(rank) if a not in (d1, d2)]
    moved = g.transpose(x, perm=[*rest, d1, d2])
    flat = _reshape(cx, moved, [*(x.shape[a] for a in rest), n * m])
    rows = np.arange(max(0, -offset), min(n, m - offset)) if min(n, m - offset) > max(0, -offset) else np.arange(0)
    index = (rows * m + rows + offset).astype(np.int64)
    return g.gather(flat, g.constant(index), axis=len(rest))


@_conv("aten.median.default", "aten.nanmedian.default")
def _median(cx, node, x):
    """The lower middle of the sorted values (torch's median); ``median`` is NaN when any value is, ``nanmedian``
    the lower middle of the values that are not NaN (sorting puts NaN last)."""
    g = cx.g
    flat = _reshape(cx, x, [-1])
    n = cx.static(flat.shape[0], "median size")
    if n == 0:
        raise cx.fail("median of an empty tensor")
    ordered = g.top_k(flat, k=n, axis=0, largest=False, output="values")
    if not x.dtype.is_float:
        return _reshape(cx, g.gather(ordered, g.constant(np.asarray((n - 1) // 2, np.int64)), axis=0), [])
    if _target_name(node.target) == "aten.median.default":
        middle = g.gather(ordered, g.constant(np.asarray((n - 1) // 2, np.int64)), axis=0)
        last = g.gather(ordered, g.constant(np.asarray(n - 1, np.int64)), axis=0)
        return g.where(g.ne(last, last), last, middle)
    valid = g.reduce(cx.cast(g.eq(flat, flat), DType.I64), op="sum", axes=[0], keep_dim=False)
    index = g.binary(valid - cx.scalar(1, DType.I64), cx.scalar(2, DType.I64), op="div")  # (m - 1) // 2, 0 when m = 0
    return g.gather(ordered, g.binary(index, cx.scalar(0, DType.I64), op="max"), axis=0)


@_conv("aten.median.dim", "aten.nanmedian.dim")
def _median_dim(cx, node, x, dim=0, keepdim=False):
    """(values, indices) of the lower middle along ``dim`` from one stable sort; ``median`` picks a row's first
    NaN when it has one (sorted NaNs come last, in their order), ``nanmedian`` the middle of the other values."""
    g = cx.g
    if len(x.shape) == 0:
        return x, g.constant(np.asarray(0, np.int64))
    axis = _axis(dim, len(x.shape))
    n = cx.static(x.shape[axis], "median axis size")
    values, indices = g.top_k(x, k=n, axis=axis, largest=False, output="both")
    if x.dtype.is_float:
        nans = g.reduce(cx.cast(g.ne(x, x), DType.I64), op="sum", axes=[axis], keep_dim=True)
        valid = cx.scalar(n, DType.I64) - nans
        if _target_name(node.target) == "aten.median.dim":
            pick = g.where(g.gt(nans, cx.scalar(0, DType.I64)), valid, cx.scalar((n - 1) // 2, DType.I64))
        else:
            pick = g.binary(g.binary(valid - cx.scalar(1, DType.I64), cx.scalar(2, DType.I64), op="div"),
                            cx.scalar(0, DType.I64), op="max")
    else:
        shape = [1] * len(x.shape)
        pick = g.constant(np.full(shape, (n - 1) // 2, np.int64))
    if not x.dtype.is_float or len(pick.shape) != len(x.shape):
        pick = g.expand(pick, target_shape=[1 if a == axis else d for a, d in enumerate(x.shape)])
    out_v = g.gather_elements(values, pick, axis=axis)
    out_i = g.gather_elements(indices, pick, axis=axis)
    if not keepdim:
        shape = [d for a, d in enumerate(x.shape) if a != axis]
        out_v, out_i = _reshape(cx, out_v, shape), _reshape(cx, out_i, shape)
    return out_v, out_i


@_conv("aten.outer.default", "aten.ger.default")
def _outer(cx, node, a, b):
    dtype = cx.out_dtype()
    return cx.g.reshape(cx.cast(a, dtype), new_shape=[-1, 1]) * cx.g.reshape(cx.cast(b, dtype), new_shape=[1, -1])


@_conv("aten.float_power.Tensor_Tensor", "aten.float_power.Tensor_Scalar", "aten.float_power.Scalar")
def _float_power(cx, node, a, b):
    """pow computed in float64 (torch.float_power's definition)."""
    dtype = cx.out_dtype()
    x = cx.cast(a, dtype) if isinstance(a, Value) else cx.scalar(a, dtype)
    y = cx.cast(b, dtype) if isinstance(b, Value) else cx.scalar(b, dtype)
    return cx.g.binary(x, y, op="pow")


def sign_of(numeric: Any) -> Any:
    """torch.sign: the numeric converter, and a bool tensor as itself (the kind row is float / int only)."""

    def convert(cx, node, x):
        return x if x.dtype is DType.BOOL else numeric(cx, node, x)

    return convert


@_conv("aten.cummax.default", "aten.cummin.default")
def _cummax(cx, node, x, dim):
    """(running extreme, its index) along ``dim`` as torch: a tie or a NaN moves the index to the newer
    position, and NaN, once seen, stays. Over an [n, n] prefix mask (n static): n^2 work per row."""
    g = cx.g
    if len(x.shape) == 0:
        return x, g.constant(np.asarray(0, np.int64))
    largest = _target_name(node.target) == "aten.cummax.default"
    axis = _axis(dim, len(x.shape))
    n = cx.static(x.shape[axis], "scanned axis size")
    rank = len(x.shape)
    perm = [a for a in range(rank) if a != axis] + [axis]
    moved = g.transpose(x, perm=perm) if axis != rank - 1 else x
    key = cx.cast(moved, DType.U8) if x.dtype is DType.BOOL else moved
    rows = g.reshape(key, new_shape=[*key.shape[:-1], 1, n])  # [..., 1 (i), n (j)]
    prefix = g.constant(np.tril(np.ones((n, n), bool)))  # j <= i
    if key.dtype.is_float:
        far = cx.scalar(-np.inf if largest else np.inf, key.dtype)
    else:
        info = np.iinfo(key.dtype.numpy)
        far = cx.scalar(info.min if largest else info.max, key.dtype)
    values = g.reduce(g.where(prefix, rows, far), op="max" if largest else "min", axes=[rank], keep_dim=True)  # [..., n, 1]
    hit = g.eq(rows, values)
    if key.dtype.is_float:
        hit = g.binary(hit, g.binary(g.ne(rows, rows), g.ne(values, values), op="mul"), op="add")
    hit = g.binary(hit, prefix, op="mul")
    positions = g.constant(np.arange(n, dtype=np.int64))
    index = g.reduce(g.where(hit, positions, cx.scalar(-1, DType.I64)), op="max", axes=[rank], keep_dim=False)
    values = g.reshape(values, new_shape=list(key.shape))
    if axis != rank - 1:
        back = [perm.index(a) for a in range(rank)]
        values, index = g.transpose(values, perm=back), g.transpose(index, perm=back)
    return cx.cast(values, x.dtype), index


@_conv("aten.kthvalue.default")
def _kthvalue(cx, node, x, k, dim=-1, keepdim=False):
    """(k-th smallest, its index) along ``dim``: position k - 1 of the stable ascending sort (NaN last)."""
    if len(x.shape) == 0:
        return x, cx.g.constant(np.asarray(0, np.int64))
    axis = _axis(dim, len(x.shape))
    values, indices = _sorted(cx, x, axis, False)
    pick = cx.g.constant(np.asarray([cx.static(k, "kthvalue k") - 1], np.int64))
    out = [cx.g.gather(v, pick, axis=axis) for v in (values, indices)]
    shape = [d for a, d in enumerate(x.shape) if a != axis] if not keepdim else [1 if a == axis else d for a, d in enumerate(x.shape)]
    return tuple(_reshape(cx, v, shape) for v in out)


@_conv("aten.searchsorted.Tensor", "aten.searchsorted.Scalar")
def _searchsorted(cx, node, seq, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points as counts: how many entries of the (sorted) last axis are < v (<= v for right);
    a NaN value goes after every number, as the sort order puts it. len x values work."""
    g = cx.g
    if sorter is not None:
        raise cx.fail("searchsorted with a sorter is not supported")
    right = right or side == "right"
    v = values if isinstance(values, Value) else cx.scalar(values, seq.dtype)
    dtype = DType.F64 if seq.dtype.is_float or v.dtype.is_float else DType.I64
    s, v = cx.cast(seq, dtype), cx.cast(v, dtype)
    if len(seq.shape) == 1:
        column = g.reshape(v, new_shape=[*v.shape, 1])
        row = s
    else:
        column = g.reshape(v, new_shape=[*v.shape, 1])
        row = g.reshape(s, new_shape=[*s.shape[:-1], 1, s.shape[-1]])
    before = g.le(row, column) if right else g.lt(row, column)
    if dtype.is_float:  # a NaN value sorts after every number (and after the NaNs for right)
        nan_v = g.ne(column, column)
        before = g.where(nan_v, cx.scalar(True, DType.BOOL) if right else g.eq(row, row), before)
    count = g.reduce(cx.cast(before, DType.I64), op="sum", axes=[len(column.shape) - 1], keep_dim=False)
    return cx.cast(count, cx.out_dtype())


@_conv("aten.bucketize.Tensor", "aten.bucketize.Scalar")
def _bucketize(cx, node, values, boundaries, *, out_int32=False, right=False):
    return _searchsorted(cx, node, boundaries, values, right=right)


@_conv("aten.signbit.default")
def _signbit(cx, node, x):
    """x < 0, -0.0 included (1 / -0.0 = -inf); ints and bools by value."""
    g = cx.g
    if x.dtype is DType.BOOL:
        return g.ne(x, x)
    zero = cx.scalar(0, x.dtype)
    if not x.dtype.is_float:
        return g.lt(x, zero)
    return g.lt(g.where(g.eq(x, zero), g.binary(cx.scalar(1, x.dtype), x, op="div"), x), zero)


@_conv("aten.angle.default")
def _angle(cx, node, x):
    """The argument of a real number: pi below 0, else 0 (NaN stays NaN)."""
    g, dtype = cx.g, cx.out_dtype()
    if x.dtype.is_complex:
        raise cx.fail("angle of a complex tensor is not supported")
    v = cx.cast(x, dtype)
    zero = cx.scalar(0, dtype)
    return g.where(g.lt(v, zero), cx.scalar(math.pi, dtype), v * zero)


@_conv("aten.isreal.default")
def _isreal(cx, node, x):
    if x.dtype.is_complex:
        raise cx.fail("isreal of a complex tensor is not supported")
    return cx.g.where(cx.scalar(True, DType.BOOL), cx.scalar(True, DType.BOOL), cx.g.eq(x, x))  # all True, x's shape


_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
            12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


@_conv("aten.lgamma.default")
def _lgamma(cx, node, x):
    """log|Gamma(x)| in float64: the Lanczos series (g = 7, 9 terms) for x >= 0.5, the reflection formula
    below; +inf at the poles (0, -1, -2 ...) and at +-inf."""
    g, out = cx.g, cx.out_dtype()
    v = cx.cast(x, DType.F64)

    def c(value: float) -> Value:
        return cx.scalar(value, DType.F64)

    def series(z1: Value) -> Value:  # lgamma(z1) for z1 >= 0.5
        z = z1 - c(1)
        a = c(_LANCZOS[0])
        for i, coef in enumerate(_LANCZOS[1:], start=1):
            a = a + g.binary(c(coef), z + c(i), op="div")
        t = z + c(7.5)
        return c(0.5 * math.log(2 * math.pi)) + (z + c(0.5)) * g.activation(t, kind="log") - t + g.activation(a, kind="log")

    small = g.lt(v, c(0.5))
    safe_hi = g.where(small, c(1), v)
    safe_lo = g.where(small, v, c(0))
    reflected = g.activation(g.binary(c(math.pi), g.activation(g.activation(safe_lo * c(math.pi), kind="sin"), kind="abs"),
                                      op="div"), kind="log") - series(c(1) - safe_lo)
    y = g.where(small, reflected, series(safe_hi))
    pole = g.binary(g.le(v, c(0)), g.eq(g.unary_math(v, kind="floor"), v), op="mul")
    infinite = g.eq(g.activation(v, kind="abs"), c(math.inf))
    y = g.where(g.binary(pole, infinite, op="add"), c(math.inf), y)
    return cx.cast(y, out)


@_conv("aten.digamma.default", "aten.polygamma.default")
def _digamma(cx, node, *args):
    """digamma in float64: psi(x) = psi(x + 10) - sum_{i<10} 1 / (x + i), the asymptotic series at x + 10;
    below 0 the reflection psi(1 - x) - pi / tan(pi frac(x)) (torch's); -inf at +0, NaN at negative integers.
    ``polygamma`` of order n >= 1: :func:`_polygamma`."""
    if _target_name(node.target) == "aten.polygamma.default":
        n, x = args
        if n != 0:
            return _polygamma(cx, int(n), x)
    else:
        (x,) = args
    g = cx.g
    v = cx.cast(x, DType.F64)

    def c(value: float) -> Value:
        return cx.scalar(value, DType.F64)

    def positive(y: Value) -> Value:
        shift = None
        for i in range(10):
            term = g.binary(c(1), y + c(i), op="div")
            shift = term if shift is None else shift + term
        z = y + c(10)
        inv2 = g.binary(c(1), z * z, op="div")
        tail = inv2 * (c(1 / 12) - inv2 * (c(1 / 120) - inv2 * (c(1 / 252) - inv2 * (c(1 / 240) - inv2 * c(1 / 132)))))
        return g.activation(z, kind="log") - g.binary(c(0.5), z, op="div") - tail - shift

    negative = g.lt(v, c(0))
    frac = v - g.unary_math(v, kind="trunc")
    reflected = positive(c(1) - g.where(negative, v, c(0))) - g.binary(
        c(math.pi), g.activation(c(math.pi) * g.where(negative, frac, c(0.5)), kind="tan"), op="div")
    y = g.where(negative, reflected, positive(g.where(negative, c(1), v)))
    zero = g.eq(v, c(0))
    y = g.where(zero, g.where(g.lt(g.binary(c(1), v, op="div"), c(0)), c(math.inf), c(-math.inf)), y)  # psi(+-0) = -+inf
    y = g.where(g.binary(negative, g.eq(frac, c(0)), op="mul"), c(math.nan), y)
    return cx.cast(y, cx.out_dtype())


@_conv("aten.erfc.default")
def _erfc(cx, node, x):
    """1 - erf(x) in float64 (absolute error ~1e-16: the relative error grows only where erfc is below ~1e-12)."""
    v = cx.cast(x, DType.F64)
    return cx.cast(cx.scalar(1, DType.F64) - cx.g.unary_math(v, kind="erf"), cx.out_dtype())


_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66)  # B2, B4, ... B10


def _polygamma(cx: _Ctx, n: int, x: Value) -> Value:
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) in float64: 20 terms of the Hurwitz sum (any sign of x, as
    torch's zeta sums them) and the Euler-Maclaurin tail at x + 20."""
    g = cx.g
    v = cx.cast(x, DType.F64)
    s_ = n + 1

    def c(value: float) -> Value:
        return cx.scalar(value, DType.F64)

    total = None
    for k in range(20):
        term = g.binary(v + c(k), c(-s_), op="pow")
        total = term if total is None else total + term
    z = v + c(20)
    tail = g.binary(g.binary(z, c(1 - s_), op="pow"), c(s_ - 1), op="div") + c(0.5) * g.binary(z, c(-s_), op="pow")
    rising, fact = 1.0, 1.0
    for j, b in enumerate(_BERNOULLI, start=1):
        rising *= (s_ + 2 * j - 2) * ((s_ + 2 * j - 3) if j > 1 else 1)
        fact *= (2 * j) * (2 * j - 1)
        tail = tail + c(b / fact * rising) * g.binary(z, c(-s_ - 2 * j + 1), op="pow")
    return cx.cast((total + tail) * c((-1) ** (n + 1) * math.factorial(n)), cx.out_dtype())
