"""Shape ops: reshape, transpose, narrow, concat, expand, gather.

Every axis attribute accepts negative values (NumPy style); builders store the
normalized, non-negative form so that passes see one spelling. Index tensors are integer
tensors (upstream carries them as floats). Symbolic dims are expressions
(:mod:`rlx.ir.symbolic`), so sums, products and quotients of sizes flow through; a result
that depends on a fact the symbols do not decide raises :class:`rlx.ShapeError` naming both
expressions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import AutodiffError, RlxError, ShapeError
from rlx.ir.opdef import VARIADIC, defop
from rlx.ir.shape import Shape, TensorType, normalize_axis
from rlx.ir.symbolic import floordiv, known_ge
from rlx.ops import rows
from rlx.ops.common import axis_of, promote_args, same_type_identity, unmoved_axes
from rlx.ops.facts import VIEW
from rlx.ops.kinds import NUMPY


def _canon_axis(ins, attrs, key="axis", operand=0):
    """Store ``attrs[key]`` non-negative; leave bad values for the type rule to report."""
    try:
        return {**attrs, key: axis_of(attrs[key], ins[operand])}
    except ShapeError:
        return attrs


# ---------------------------------------------------------------------------- reshape
def _zero_size_hole(src, new):
    """The -1 of an empty reshape (no count to divide): the source dims the target does not
    name, when that leaves any (``[b, 5, 0] -> [-1, 0, 5]`` gives ``b``); else None (NumPy
    refuses a -1 in an empty static reshape)."""
    if src.is_static:
        return None
    rest = list(src)
    for d in new:
        if d != -1:
            if d not in rest:
                return None
            rest.remove(d)
    return math.prod(rest) if rest else None


def _reshape_type(ins, attrs):
    src, new = ins[0].shape, list(attrs["new_shape"])
    if any(d.__class__ is int and d < -1 for d in new):
        raise ShapeError(f"new_shape {new} has a negative entry other than -1")
    holes = [i for i, d in enumerate(new) if d == -1]
    if len(holes) > 1:
        raise ShapeError(f"new_shape {new} has more than one -1")
    known = math.prod(d for d in new if d != -1)
    numel = math.prod(src)
    out: list = list(new)
    if holes:
        inferred = floordiv(numel, known) if known != 0 else _zero_size_hole(src, new)
        if inferred is None or inferred * known != numel:
            raise ShapeError(f"cannot infer -1 in new_shape [{', '.join(map(str, new))}]: {numel} elements are not "
                             f"{'divisible' if src.is_static and known.__class__ is int else 'provably divisible'} by {known}")
        out[holes[0]] = inferred
    elif known != numel:
        raise ShapeError(f"cannot reshape {src!r} ({numel} elements) to [{', '.join(map(str, new))}] ({known} elements)")
    return TensorType(Shape(out), ins[0].dtype)


# Autodiff / vmap rules (contract: rlx.autodiff.rules), added with the autodiff issue because the
# matmul and reduce rules emit reshape / transpose / expand and second order needs their rules.
def _reshape_batch(ctx, node, operands, batched):
    return ctx.reshape(operands[0], [ctx.batch_size, *node.shape])


defop(
    name="reshape", work="none", precision="data_movement", family="shape", arity=1, operands=("x",),
    attrs={"new_shape": AttrSpec("sizes", doc="target dims (ints or symbolic); at most one -1 (inferred); 0 is a literal 0")},
    flags={"complex_ad", VIEW}, infer=_reshape_type, identity=same_type_identity,
    compose=lambda inner, outer: {"new_shape": list(outer["new_shape"])},  # the outer shape alone decides
    keeps_grid=lambda attrs, rank, protected, copies_only: unmoved_axes(protected),
    vjp=lambda ctx, node, ct: [ctx.reshape(ct, ctx.operand(node, 0).shape)],
    jvp=lambda ctx, node, tangents: ctx.graph.reshape(tangents[0], new_shape=node.attrs["new_shape"]),
    batch=_reshape_batch,
    kernel=lambda args, attrs, out: np.reshape(args[0], tuple(out.shape)),
    doc="C-order reshape (np.reshape). Target dims may be symbolic expressions. At most one -1, inferred "
    "as numel // prod(others); the sizes must divide (upstream does not check); with symbolic dims the "
    "element counts must be provably equal (``[b, s, 8] -> [-1, 8]`` gives ``b*s``), else ShapeError naming "
    "both counts. Other negatives are errors; 0 is a literal 0.",
)


# -------------------------------------------------------------------------- transpose
def _perm_of(ins, attrs) -> tuple[int, ...]:
    rank = len(ins[0].shape)
    perm = attrs["perm"]
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    if len(perm) != rank:
        raise ShapeError(f"perm {list(perm)} has {len(perm)} entries for rank {rank}")
    norm = tuple(normalize_axis(p, rank, "perm entry") for p in perm)
    if sorted(norm) != list(range(rank)):
        raise ShapeError(f"perm {list(perm)} is not a permutation of 0..{rank - 1}")
    return norm


def _transpose_canon(ins, attrs):
    try:
        return {**attrs, "perm": _perm_of(ins, attrs)}
    except ShapeError:
        return attrs


def _transpose_compose(inner: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """transpose(transpose(x, p1), p2) == transpose(x, p1[p2])."""
    p1, p2 = inner["perm"], outer["perm"]
    return {"perm": [p1[j] for j in p2]}


def _transpose_identity(attrs, ins, out, consts) -> int | None:
    return 0 if ins[0] == out and tuple(attrs["perm"]) == tuple(range(len(out.shape))) else None


def _transpose_keeps_grid(attrs, rank, protected, copies_only) -> bool:
    perm = list(range(rank))[::-1] if attrs["perm"] is None else [p % rank for p in attrs["perm"]]
    return all(perm[ax] == ax for ax in protected)


def _transpose_type(ins, attrs):
    perm = _perm_of(ins, attrs)
    return TensorType(Shape(ins[0].shape[p] for p in perm), ins[0].dtype)


defop(
    name="transpose", work="none", precision="data_movement", family="shape", arity=1, operands=("x",),
    attrs={"perm": AttrSpec("ints", default=None, doc="axis permutation; None reverses the axes")},
    canonicalize=_transpose_canon, flags={"complex_ad", VIEW}, infer=_transpose_type,
    identity=_transpose_identity, keeps_grid=_transpose_keeps_grid, compose=_transpose_compose,
    vjp=lambda ctx, node, ct: [ctx.graph.transpose(ct, perm=[int(i) for i in np.argsort(node.attrs["perm"])])],
    jvp=lambda ctx, node, tangents: ctx.graph.transpose(tangents[0], perm=node.attrs["perm"]),
    batch=lambda ctx, node, operands, batched: ctx.graph.transpose(operands[0], perm=[0, *(p + 1 for p in node.attrs["perm"])]),
    kernel=lambda args, attrs, out: np.transpose(args[0], attrs["perm"]),
    doc="np.transpose(x, perm). perm=None reverses the axes (NumPy); negative entries are allowed. "
    "Builders store the explicit, non-negative permutation.",
)


# ----------------------------------------------------------------------------- narrow
def _narrow_type(ins, attrs):
    shape = ins[0].shape
    axis = axis_of(attrs["axis"], ins[0])
    start, length = attrs["start"], attrs["length"]
    if known_ge(start, 0) is False or known_ge(length, 0) is False:
        raise ShapeError(f"start {start} and length {length} must be >= 0")
    dim = shape[axis]
    if known_ge(dim, start + length) is False:
        raise ShapeError(f"slice [{start}, {start + length}) is out of bounds for axis {axis} of size {dim}")
    return TensorType(Shape((*shape[:axis], length, *shape[axis + 1:])), ins[0].dtype)


def _narrow_kernel(args, attrs, out):
    x = args[0]
    axis, start, length = attrs["axis"] % x.ndim, attrs["start"], attrs["length"]
    if start + length > x.shape[axis]:
        raise RlxError(f"narrow: slice [{start}, {start + length}) is out of bounds for axis {axis} of size {x.shape[axis]}")
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, start + length)
    return x[tuple(index)]


def _zero_slab(ctx, x, axis, start, length, dtype):
    """Zeros shaped like x[..., start:start+length, ...] (symbolic dims off the axis are read from x)."""
    shape = [length if i == axis else d for i, d in enumerate(x.shape)]
    if Shape(shape).is_static:
        arr = np.zeros(shape, dtype=np.float32 if dtype.is_low_precision_float else dtype.numpy)
        return ctx.graph.constant(arr, dtype=dtype)
    return ctx.zeros_like(ctx.graph.narrow(x, axis, start, length), dtype)


def _narrow_vjp(ctx, node, ct):
    """Zero-pad the cotangent back to x's extent: concat(zeros, ct, zeros) along the axis; on a
    symbolic axis (pad size not expressible) gather_backward of the sliced rows. Contract: rlx.autodiff.rules."""
    g, x = ctx.graph, ctx.operand(node, 0)
    axis, start, length = node.attrs["axis"], node.attrs["start"], node.attrs["length"]
    rest = x.shape[axis] - start - length
    parts = [_zero_slab(ctx, x, axis, 0, start, ct.dtype)] if start else []
    parts.append(ct)
    if rest:
        parts.append(_zero_slab(ctx, x, axis, start + length, rest, ct.dtype))
    return [ct if len(parts) == 1 else g.concat(parts, axis=axis)]


defop(
    name="narrow", work="none", precision="data_movement", family="shape", arity=1, operands=("x",),
    attrs={"axis": AttrSpec("int"), "start": AttrSpec("size"), "length": AttrSpec("size")},
    aliases={"len": "length"},
    canonicalize=_canon_axis, flags={"complex_ad", VIEW}, infer=_narrow_type, kernel=_narrow_kernel, identity=same_type_identity,
    keeps_grid=lambda attrs, rank, protected, copies_only: not copies_only and attrs["axis"] % rank not in protected,
    vjp=_narrow_vjp,
    jvp=lambda ctx, node, tangents: ctx.graph.append("narrow", [tangents[0]], dict(node.attrs)),
    batch=lambda ctx, node, operands, batched: ctx.graph.append(
        "narrow", [operands[0]], {**dict(node.attrs), "axis": ctx.shift_axis(node.attrs["axis"])}),
    doc="x[..., start:start+length, ...] on `axis` (upstream attribute `len` is accepted as an alias). "
    "Negative axis allowed (stored non-negative); start, length >= 0 (ints or symbolic dims) and the slice "
    "must fit the axis (upstream does not check); where that depends on symbol sizes it is checked at run "
    "time (RlxError).",
)


# ----------------------------------------------------------------------------- concat
def _concat_type(ins, attrs):
    first = ins[0].shape
    if len(first) == 0:
        raise ShapeError("cannot concatenate rank-0 operands")
    axis = axis_of(attrs["axis"], ins[0])
    for i, t in enumerate(ins[1:], 1):
        if len(t.shape) != len(first):
            raise ShapeError(f"operand {i} has rank {len(t.shape)}, operand 0 has rank {len(first)}")
        for ax, (a, b) in enumerate(zip(first, t.shape)):
            if ax != axis and a != b:
                raise ShapeError(f"operand {i} has dim {b} on axis {ax}, operand 0 has {a} (only axis {axis} may differ)")
    total = sum(t.shape[axis] for t in ins)
    return TensorType(Shape((*first[:axis], total, *first[axis + 1:])), promote_all([t.dtype for t in ins]))


def _concat_vjp(ctx, node, ct):
    """One narrow of the cotangent per part (offsets and sizes may be symbolic). Contract: rlx.autodiff.rules."""
    axis, offset, grads = node.attrs["axis"], 0, []
    for i, x in enumerate(ctx.operands(node)):
        size = x.shape[axis]
        if not ctx.wants(node, i):
            grads.append(None)
        elif offset == 0 and size == ct.shape[axis]:
            grads.append(ct)
        else:
            grads.append(ctx.graph.narrow(ct, axis, offset, size))
        offset += size
    return grads


def _concat_jvp(ctx, node, tangents):
    parts = [t if t is not None else ctx.zeros_like(x, node.dtype) for x, t in zip(ctx.operands(node), tangents)]
    return ctx.graph.concat(parts, axis=node.attrs["axis"])


def _concat_batch(ctx, node, operands, batched):
    parts = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    return ctx.graph.concat(parts, axis=ctx.shift_axis(node.attrs["axis"]))


defop(
    name="concat", work="none", precision="data_movement", family="shape", arity=VARIADIC, operands=("parts",),
    attrs={"axis": AttrSpec("int", default=0)},
    canonicalize=_canon_axis, flags={"complex_ad"}, infer=_concat_type,
    identity=lambda attrs, ins, out, consts: 0 if len(ins) == 1 and ins[0] == out else None,
    keeps_grid=lambda attrs, rank, protected, copies_only: True,  # with one operand: a copy
    vjp=_concat_vjp, jvp=_concat_jvp, batch=_concat_batch,
    kernel=lambda args, attrs, out: np.concatenate(promote_args(args, out.dtype), axis=attrs["axis"] % args[0].ndim),
    doc="np.concatenate(parts, axis); variadic (>= 1 operand, passed as one list). Same rank, equal dims off "
    "the axis (upstream checks neither), dtypes promoted. Negative axis allowed (stored non-negative). On the "
    "axis the size is the sum of the parts' sizes, symbolic ones included (``s1 + s2``; upstream returns "
    "one of the symbols, which is wrong).",
)


# ----------------------------------------------------------------------------- expand
def _expand_type(ins, attrs):
    src, target = ins[0].shape, list(attrs["target_shape"])
    if len(target) < len(src):
        raise ShapeError(f"target_shape {target} has lower rank than the input {src!r}")
    padded = (1,) * (len(target) - len(src)) + tuple(src)
    lead = len(target) - len(src)
    out: list = []
    for i, (d, t) in enumerate(zip(padded, target)):
        if t == -1:
            if i < lead:
                raise ShapeError(f"target_shape {target}: -1 at axis {i} has no input dim to keep")
            out.append(d)
        elif t.__class__ is int and t < 0:
            raise ShapeError(f"target_shape {target} has a negative entry other than -1")
        elif d == 1 or d == t:
            out.append(t)
        else:
            raise ShapeError(f"cannot expand dim {d} to {t} at axis {i} (target_shape [{', '.join(map(str, target))}])")
    return TensorType(Shape(out), ins[0].dtype)


defop(
    name="expand", work="none", precision="data_movement", family="shape", arity=1, operands=("x",),
    attrs={"target_shape": AttrSpec("sizes", doc="result dims (ints or symbolic); -1 keeps the input dim")},
    flags={"complex_ad", VIEW}, infer=_expand_type, identity=same_type_identity,
    keeps_grid=lambda attrs, rank, protected, copies_only: unmoved_axes(protected),
    vjp=lambda ctx, node, ct: [ctx.unbroadcast(ct, ctx.operand(node, 0))],
    jvp=lambda ctx, node, tangents: ctx.graph.expand(tangents[0], target_shape=node.attrs["target_shape"]),
    batch=lambda ctx, node, operands, batched: ctx.graph.expand(
        ctx.align(operands[0], len(node.shape)), target_shape=[-1, *node.attrs["target_shape"]]),
    kernel=lambda args, attrs, out: np.broadcast_to(args[0], tuple(out.shape)).copy(),
    doc="np.broadcast_to after left-padding x with 1s. Target entries may be symbolic dims; an entry of -1 "
    "keeps the (aligned) input dim; other negatives are errors.",
)


# ----------------------------------------------------------------------------- gather
def _gather_type(ins, attrs):
    table, idx = ins
    if len(table.shape) == 0:
        raise ShapeError("table must have rank >= 1")
    if not idx.dtype.is_int:
        raise ShapeError(f"indices must be an integer tensor, got {idx.dtype}")
    axis = axis_of(attrs["axis"], table)
    return TensorType(Shape((*table.shape[:axis], *idx.shape, *table.shape[axis + 1:])), table.dtype)


def _gather_kernel(args, attrs, out):
    table = args[0]
    axis = attrs["axis"] % table.ndim
    return np.take(table, rows.checked_index(NUMPY, args[1].astype(np.int64), table.shape[axis], "gather", axis), axis=axis)


def per_example_indices(ctx, idx, axis: int, pre, post):
    """Batched gather indices ``[B, *ishape]`` (gathering on per-example ``axis``) as element
    indices ``[B, *pre, K, *post]`` (K = numel(ishape)) for gather_elements / scatter_elements on
    ``axis + 1``. Shared by the batch rules of gather and gather_backward (vmap with batched indices)."""
    ishape = list(idx.shape[1:])
    if not Shape(ishape).is_static or not Shape([*pre, *post]).is_static:
        raise AutodiffError(f"vmap of gather with batched indices needs static index and off-axis dims, got indices "
                            f"{Shape(ishape)!r} and table dims {Shape([*pre, *post])!r} around axis {axis}")
    k = math.prod(ishape)
    flat = ctx.reshape(idx, [idx.shape[0], *([1] * len(pre)), k, *([1] * len(post))])
    return ctx.graph.expand(flat, target_shape=[-1, *pre, k, *post])


def _gather_vjp(ctx, node, ct):
    """Scatter-add of the cotangent rows at the indices (gather_backward); None for the indices."""
    table, idx = ctx.operands(node)
    return [ctx.graph.gather_backward(ct, idx, axis=node.attrs["axis"], table_shape=list(table.shape)), None]


def _gather_batch(ctx, node, operands, batched):
    """Table batched only: gather on the shifted axis. Indices batched only: gather, then move the
    batch axis (it lands at ``axis``) to the front. Both: gather_elements with per-example indices."""
    g, (table, idx), axis = ctx.graph, operands, node.attrs["axis"]
    if not batched[1]:
        return g.gather(table, idx, axis=ctx.shift_axis(axis))
    if not batched[0]:
        out = g.gather(table, idx, axis=axis)
        rank = len(out.shape)
        return out if axis == 0 else g.transpose(out, perm=[axis, *range(axis), *range(axis + 1, rank)])
    pre, post = list(table.shape[1:axis + 1]), list(table.shape[axis + 2:])
    out = g.gather_elements(table, per_example_indices(ctx, idx, axis, pre, post), axis=ctx.shift_axis(axis))
    return ctx.reshape(out, [ctx.batch_size, *node.shape])


defop(
    name="gather", work="none", precision="data_movement", family="shape", arity=2, operands=("table", "indices"),
    attrs={"axis": AttrSpec("int", default=0)},
    canonicalize=_canon_axis, flags={"complex_ad", "eager_unsafe"}, infer=_gather_type, kernel=_gather_kernel,
    vjp=_gather_vjp,
    jvp=lambda ctx, node, tangents: None if tangents[0] is None else ctx.graph.gather(
        tangents[0], ctx.operand(node, 1), axis=node.attrs["axis"]),
    batch=_gather_batch,
    doc="np.take(table, indices, axis): result shape table.shape[:axis] + indices.shape + "
    "table.shape[axis+1:] (upstream's rule drops table.shape[:axis], wrong for axis > 0). Indices are an "
    "integer tensor (upstream: floats); negative indices wrap as in NumPy; an index outside [-n, n) raises "
    "RlxError at run time (upstream reads out of range). Negative axis allowed (stored non-negative).",
)
