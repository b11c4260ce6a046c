"""NumPy advanced indexing as two MIR ops: ``advanced_index`` (``x[key]``) and its scatter counterpart
``advanced_index_put`` (``x[key] = v`` / ``x[key] += v`` with duplicates accumulating, torch ``index_put``).

The key is described by the ``pattern`` attribute, one character per position of the index tuple:
``i`` an integer index tensor (the operands after ``x``, in order), ``:`` a full slice, ``n`` a new
axis (``None``); positions past the pattern are full slices. The index tensors broadcast together
(NumPy); their broadcast dims replace the indexed axes in place when every ``i`` is adjacent, and go
first otherwise (NumPy's rule, a ``n`` between two ``i`` breaks adjacency). Negative indices wrap;
an index outside ``[-n, n)`` raises :class:`RlxError` at run time. Bounded slices are ``narrow``
before the op (torch.export never emits them inside ``aten.index``).

:func:`layout` is the one statement of the result layout; the kernels, rules and the JAX / ONNX
lowerings all read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import VARIADIC, defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ops import rows
from rlx.ops.kinds import NUMPY

_PATTERN = AttrSpec("str", doc="one char per index position: 'i' index tensor, ':' full slice, 'n' new axis")


# ---------------------------------------------------------------------------- layout
def full_pattern(pattern: str, rank: int) -> str:
    """``pattern`` padded with full slices so that it consumes every axis of a rank-``rank`` x."""
    used = sum(c != "n" for c in pattern)
    if any(c not in "i:n" for c in pattern):
        raise ShapeError(f"index pattern {pattern!r}: only 'i', ':' and 'n' are allowed")
    if used > rank:
        raise ShapeError(f"index pattern {pattern!r} indexes {used} axes of a rank-{rank} tensor")
    return pattern + ":" * (rank - used)


def indexed_axes(pattern: str) -> list[int]:
    """The axes of x that index tensors address, in pattern order."""
    axes, axis = [], 0
    for c in pattern:
        if c == "i":
            axes.append(axis)
        if c != "n":
            axis += 1
    return axes


def layout(pattern: str, rank: int, nb: int) -> list[tuple[str, int]]:
    """The result's axes as labels: ("b", k) broadcast dim k of the indices, ("x", a) axis a of x
    kept by a slice, ("n", p) a new axis at pattern position p. ``nb`` is the broadcast rank."""
    full = full_pattern(pattern, rank)
    where = [p for p, c in enumerate(full) if c == "i"]
    adjacent = not where or where[-1] - where[0] + 1 == len(where)
    out: list[tuple[str, int]] = [] if adjacent else [("b", k) for k in range(nb)]
    axis = 0
    for p, c in enumerate(full):
        if c == "n":
            out.append(("n", p))
            continue
        if c == ":":
            out.append(("x", axis))
        elif adjacent and p == where[0]:
            out.extend(("b", k) for k in range(nb))
        axis += 1
    return out


def _index_shapes(ins: list[TensorType], pattern: str) -> tuple[str, Shape]:
    x, idx = ins[0], ins[1:]
    full = full_pattern(pattern, len(x.shape))
    if full.count("i") != len(idx):
        raise ShapeError(f"index pattern {pattern!r} has {full.count('i')} index positions but {len(idx)} index tensors are given")
    for t in idx:
        if not t.dtype.is_int:
            raise ShapeError(f"index tensors must be integer tensors, got {t.dtype}")
    return full, broadcast_shapes(*(t.shape for t in idx)) if idx else Shape(())


def result_shape(x: TensorType, bshape: Shape, pattern: str) -> Shape:
    dims = {"b": lambda k: bshape[k], "x": lambda a: x.shape[a], "n": lambda p: 1}
    return Shape([dims[kind](i) for kind, i in layout(pattern, len(x.shape), len(bshape))])


def _index_type(ins, attrs):
    _, bshape = _index_shapes(ins, attrs["pattern"])
    return TensorType(result_shape(ins[0], bshape, attrs["pattern"]), ins[0].dtype)


def checked_key(x: np.ndarray, idx: list[np.ndarray], pattern: str, op: str) -> tuple:
    """The NumPy index tuple, every index checked against its axis (negative ones wrapped)."""
    key: list[Any] = []
    it = iter(idx)
    axis = 0
    for c in full_pattern(pattern, x.ndim):
        if c == "n":
            key.append(None)
            continue
        if c == ":":
            key.append(slice(None))
        else:
            key.append(rows.checked_index(NUMPY, np.asarray(next(it)).astype(np.int64), x.shape[axis], op, axis))
        axis += 1
    return tuple(key)


def _index_kernel(args, attrs, out):
    x = args[0]
    return np.asarray(x[checked_key(x, list(args[1:]), attrs["pattern"], "advanced_index")])


def _without_new_axes(ctx, ct, pattern: str, rank: int, nb: int):
    """(cotangent, pattern) with the new axes summed away (size 1) and the rest laid out as the pattern
    without 'n' lays them out (dropping a new axis can make the index positions adjacent)."""
    if "n" not in pattern:
        return ct, pattern
    labels = layout(pattern, rank, nb)
    ct = ctx.graph.reduce(ct, op="sum", axes=[p for p, lab in enumerate(labels) if lab[0] == "n"], keep_dim=False)
    kept = [lab for lab in labels if lab[0] != "n"]
    bare = pattern.replace("n", "")
    return _transposed(ctx, ct, [kept.index(lab) for lab in layout(bare, rank, nb)]), bare


def _index_vjp(ctx, node, ct):
    x, *idx = ctx.operands(node)
    rank = len(x.shape)
    nb = len(node.shape) - len(layout(node.attrs["pattern"], rank, 0))
    ct, pattern = _without_new_axes(ctx, ct, node.attrs["pattern"], rank, nb)
    dx = ctx.graph.advanced_index_put([ctx.zeros_like(x), ct, *idx], pattern=pattern, accumulate=True)
    return [dx] + [None] * len(idx)


def _index_jvp(ctx, node, tangents):
    if tangents[0] is None:
        return None
    return ctx.graph.advanced_index([tangents[0], *ctx.operands(node)[1:]], pattern=node.attrs["pattern"])


# --------------------------------------------------------------------------- batching
def _arange_batch(ctx):
    """int64 [0, B) for the batch axis (a constant when B is static, an exclusive cumsum otherwise)."""
    if isinstance(ctx.batch_size, int):
        return ctx.graph.constant(np.arange(ctx.batch_size, dtype=np.int64))
    ones = ctx.materialize(ctx.graph.constant(np.array(1, np.int64)))
    return ctx.graph.cumulative(ones, op="sum", axis=0, exclusive=True)


def _batched_key(ctx, node, idx, batched_idx) -> tuple[str, list, int, int]:
    """(pattern, index operands, broadcast rank, per-example broadcast rank) of the op on a batched x:
    a leading full slice when no index is batched, else a leading arange index broadcast against them."""
    pattern = node.attrs["pattern"]
    per = [Shape(i.shape[1:]) if b else i.shape for i, b in zip(idx, batched_idx)]
    nb = len(broadcast_shapes(*per)) if per else 0
    if not any(batched_idx):
        return ":" + pattern, list(idx), nb, nb
    aligned = [ctx.align(i, nb) if b else i for i, b in zip(idx, batched_idx)]
    rows = ctx.reshape(_arange_batch(ctx), [ctx.batch_size, *([1] * nb)])
    return "i" + pattern, [rows, *aligned], nb + 1, nb


def _batched_perm(pattern: str, x_rank: int, nb: int, batched_pattern: str, batched_nb: int) -> list[int]:
    """Permutation taking the batched op's result to [B, *per-example result] (labels of :func:`layout`)."""
    got = layout(batched_pattern, x_rank + 1, batched_nb)
    lift = batched_nb - nb  # 0: the batch is a sliced x axis; 1: it is broadcast dim 0
    want = [("b", 0) if lift else ("x", 0)]
    want += [(kind, i + 1) if kind != "b" or lift else (kind, i) for kind, i in layout(pattern, x_rank, nb)]
    return [got.index(label) for label in want]


def _transposed(ctx, v, perm):
    return v if perm == list(range(len(perm))) else ctx.graph.transpose(v, perm=perm)


def _index_batch(ctx, node, operands, batched):
    x = operands[0] if batched[0] else ctx.materialize(operands[0])
    pattern, keys, bnb, nb = _batched_key(ctx, node, operands[1:], list(batched[1:]))
    out = ctx.graph.advanced_index([x, *keys], pattern=pattern)
    return _transposed(ctx, out, _batched_perm(node.attrs["pattern"], len(x.shape) - 1, nb, pattern, bnb))


defop(
    name="advanced_index", family="indexing", arity=VARIADIC, min_arity=1, operands=("x", "indices"),
    attrs={"pattern": _PATTERN}, infer=_index_type, kernel=_index_kernel,
    vjp=_index_vjp, jvp=_index_jvp, batch=_index_batch, flags={"complex_ad"},
    doc="x[key] with NumPy advanced-indexing semantics (torch aten.index): `pattern` has one char per key position, "
    "'i' an integer index tensor (the operands after x, in order), ':' a full slice, 'n' a new axis; missing trailing "
    "positions are full slices. The index tensors broadcast together; their broadcast dims replace the indexed axes in "
    "place when all 'i' are adjacent, else they come first. Negative indices wrap; an index outside [-n, n) raises "
    "RlxError at run time. Gradient: advanced_index_put(zeros, dy, indices, accumulate=True).",
)


# -------------------------------------------------------------------------- scatter
def _put_type(ins, attrs):
    pattern = attrs["pattern"]
    if "n" in pattern:
        raise ShapeError(f"advanced_index_put pattern {pattern!r}: new axes ('n') are not allowed in an assignment")
    x, values, idx = ins[0], ins[1], ins[2:]
    _, bshape = _index_shapes([x, *idx], pattern)
    target = result_shape(x, bshape, pattern)
    if values.dtype != x.dtype:
        raise ShapeError(f"values dtype {values.dtype} differs from x dtype {x.dtype}")
    try:
        if broadcast_shapes(values.shape, target) != target:
            raise ShapeError("")
    except ShapeError:
        raise ShapeError(f"values {values.shape!r} do not broadcast to the indexed shape {target!r}") from None
    return x


def _put_kernel(args, attrs, out):
    x, values = args[0], args[1]
    key = checked_key(x, list(args[2:]), attrs["pattern"], "advanced_index_put")
    result = x.copy()
    vals = np.broadcast_to(values, result[key].shape)
    if attrs["accumulate"]:
        np.add.at(result, key, vals)
    else:
        result[key] = vals
    return result


def _winners(ctx, node, x, idx) -> object:
    """Bool mask over the indexed shape: the update each destination keeps (the last of duplicates, as NumPy)."""
    pattern = node.attrs["pattern"]
    target = _index_type([x.type, *(i.type for i in idx)], {"pattern": pattern}).shape
    if not target.is_static:
        raise AutodiffError(f"advanced_index_put (overwrite) gradient needs a static indexed shape, got {target!r}")
    g = ctx.graph
    order = g.constant(np.arange(int(np.prod(target, dtype=np.int64)), dtype=np.int64).reshape(tuple(target)))
    slots = ctx.broadcast_like(g.constant(np.array(-1, np.int64)), x)
    kept = g.advanced_index([g.advanced_index_put([slots, order, *idx], pattern=pattern), *idx], pattern=pattern)
    return g.eq(kept, order)


def _put_vjp(ctx, node, ct):
    x, values, *idx = ctx.operands(node)
    g, pattern = ctx.graph, node.attrs["pattern"]
    picked = g.advanced_index([ct, *idx], pattern=pattern)
    if node.attrs["accumulate"]:
        dx = ct
    else:
        dx = g.advanced_index_put([ct, ctx.zeros_like(picked), *idx], pattern=pattern)
        if ctx.wants(node, 1):
            picked = ctx.where_zero(_winners(ctx, node, x, idx), picked)
    dv = ctx.unbroadcast(picked, values) if ctx.wants(node, 1) else None
    return [dx, dv] + [None] * len(idx)


def _put_jvp(ctx, node, tangents):
    x, values, *idx = ctx.operands(node)
    tx = tangents[0] if tangents[0] is not None else ctx.zeros_like(x)
    tv = tangents[1] if tangents[1] is not None else ctx.zeros_like(values)
    return ctx.graph.advanced_index_put([tx, tv, *idx], **dict(node.attrs))


def _put_batch(ctx, node, operands, batched):
    """x and values made batched; values laid out as the batched op's indexed shape (see _batched_perm)."""
    x = operands[0] if batched[0] else ctx.materialize(operands[0])
    pattern, keys, bnb, nb = _batched_key(ctx, node, operands[2:], list(batched[2:]))
    rank = len(x.shape) - 1
    per_rank = len(layout(node.attrs["pattern"], rank, nb))
    v = ctx.align(operands[1] if batched[1] else ctx.materialize(operands[1]), per_rank)
    perm = _batched_perm(node.attrs["pattern"], rank, nb, pattern, bnb)
    inverse = [perm.index(i) for i in range(len(perm))]
    return ctx.graph.advanced_index_put([x, _transposed(ctx, v, inverse), *keys], pattern=pattern,
                                        accumulate=node.attrs["accumulate"])


defop(
    name="advanced_index_put", family="indexing", arity=VARIADIC, min_arity=2, operands=("x", "values", "indices"),
    attrs={"pattern": _PATTERN, "accumulate": AttrSpec("bool", default=False)},
    infer=_put_type, kernel=_put_kernel, vjp=_put_vjp, jvp=_put_jvp, batch=_put_batch, flags={"complex_ad"},
    doc="A copy of x with x[key] = values (NumPy assignment; torch index_put), or x[key] += values with duplicate "
    "indices accumulating (accumulate, np.add.at). The key is advanced_index's pattern and index tensors ('n' not "
    "allowed); values broadcast to the indexed shape. Overwriting with duplicate indices keeps the last update (C "
    "order; torch leaves it unspecified). Out-of-range indices raise RlxError. Gradients: x gets dy with the written "
    "positions zeroed (overwrite) or dy (accumulate); values get dy[key] (only the kept duplicate, overwrite).",
)
