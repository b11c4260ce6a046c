"""Backward ops of the layer-level forward ops: softmax cross-entropy, the normalisations, rope,
attention and gather (split out of :mod:`rlx.ops.backward` for size; same family, same contract:
NumPy kernels binding the rows of :mod:`rlx.ops.rows`, rules composed from primitive
decompositions).
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import ShapeError
from rlx.ir.flags import BLAS
from rlx.ir.opdef import defop, get_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops import rows
from rlx.ops.attention import (
    Layout,
    attention_scale,
    attention_scores,
    attention_type,
    rope_kernel,
    rope_type,
    softmax,
)
from rlx.ops.backward import (
    _FAMILY,
    _check_indices,
    _composite,
    _composite_batch,
    _composite_jvp,
    _data_type,
    _inline,
    _require_index,
)
from rlx.ops.common import NORM_EPS, axis_of, promote_args, require_dim, require_float, require_rank
from rlx.ops.kinds import NUMPY, GraphNamespace


# ------------------------------------------------------------------------ cross entropy
def _cross_entropy_types(ins, what_logits="logits"):
    logits, labels = ins[0], ins[1]
    require_float(logits, what_logits)
    require_rank(logits, 2, what_logits)
    _require_index(labels, "labels")
    require_rank(labels, 1, "labels")
    require_dim(labels.shape[0], logits.shape[0], "labels length vs logits rows")
    return logits




def _labels(args) -> np.ndarray:
    return _check_indices(args[1], args[0].shape[1], "softmax_cross_entropy labels")


def _ce_logits(args, out) -> np.ndarray:
    return promote_args(args[:1], out.dtype)[0]


def _ce_type(ins, attrs):
    logits = _cross_entropy_types(ins)
    return TensorType(Shape(logits.shape[:1]), logits.dtype)


def _ce_kernel(args, attrs, out):
    logits = _ce_logits(args, out)
    lse = rows.log_sum_exp(NUMPY, logits, 1)
    return lse - np.take_along_axis(logits, _labels(args)[:, None], axis=1)[:, 0]


def _ce_backward_type(ins, attrs):
    logits = _cross_entropy_types(ins)
    require_rank(ins[2], 1, "d_loss")
    require_dim(ins[2].shape[0], logits.shape[0], "d_loss length vs logits rows")
    return _data_type([logits, ins[2]], ("logits", "d_loss"), same_shape=False)


def _ce_backward_kernel(args, attrs, out):
    logits, d_loss = promote_args([args[0], args[2]], out.dtype)
    p = rows.softmax_of(NUMPY, logits, 1)
    p[np.arange(len(p)), _labels(args)] -= 1.0
    return p * d_loss[:, None]


def _onehot(g, labels, classes: int, dtype):
    """[N, C] one-hot rows of integer labels (C static), as ``dtype``."""
    if not isinstance(classes, int):
        raise ShapeError(f"cross-entropy rules need a static class count, got {classes!r}")
    n = labels.shape[0]
    row = g.reshape(labels, new_shape=[n if isinstance(n, int) else -1, 1])
    ids = g.constant(np.arange(classes, dtype=labels.dtype.numpy))
    return g.cast(g.eq(row, ids), to=dtype)


def _log_softmax_prims(g, z):
    return rows.log_softmax_of(GraphNamespace(g), z, 1)


def _ce_prims(g, ops, attrs):
    """logsumexp(row) − row[label] = −Σ onehot·log_softmax."""
    z, labels = ops
    return -g.reduce(_onehot(g, labels, z.shape[1], z.dtype) * _log_softmax_prims(g, z), op="sum", axes=[1])


def _ce_backward_prims(g, ops, attrs):
    z, labels, d = ops
    p = g.exp(_log_softmax_prims(g, z))
    return (p - _onehot(g, labels, z.shape[1], z.dtype)) * g.reshape(d, new_shape=[-1, 1])


def _ce_vjp(ctx, node, ct):
    return [ctx.graph.softmax_cross_entropy_backward(*ctx.operands(node), ct), None]


defop(
    name="softmax_cross_entropy", flags={"eager_unsafe"}, precision="reduction", family=_FAMILY, arity=2, operands=("logits", "labels"),
    infer=_ce_type, kernel=_ce_kernel,
    vjp=_ce_vjp, jvp=_composite_jvp(_ce_prims), batch=_composite_batch(_ce_prims),
    doc="Per-row softmax cross-entropy: logits [N, C] (float), labels [N] (integer class ids "
    "in [0, C)) → [N], logsumexp(row) − row[label]. Not averaged (the caller reduces).",
)

defop(
    name="softmax_cross_entropy_backward", flags={"eager_unsafe"}, precision="reduction", family=_FAMILY, arity=3,
    operands=("logits", "labels", "d_loss"),
    infer=_ce_backward_type, kernel=_ce_backward_kernel, **_composite(_ce_backward_prims),
    doc="Gradient of softmax_cross_entropy w.r.t. the logits: (softmax(row) − onehot(label))·d_loss[n] → [N, C].",
)


# ------------------------------------------------------------------------ normalisations
def _affine_shape(x: TensorType, axis: int) -> Shape:
    return Shape((x.shape[axis],))


def _norm_types(ins, attrs, names: tuple[str, ...], affine: tuple[int, ...]) -> tuple[TensorType, int]:
    """x and dy (last operand) alike; the operands at ``affine`` are ``[x.shape[axis]]``."""
    x = ins[0]
    _data_type([x, ins[-1]], (names[0], names[-1]))
    axis = axis_of(attrs["axis"], x)
    for i in affine:
        require_dim(ins[i].shape, _affine_shape(x, axis), f"{names[i]} shape (x.shape[axis])")
    return _data_type(ins, names, same_shape=False), axis


# The NumPy kernels bind the norm rows (rlx.ops.rows): statistics, input gradient, gamma / beta sums.
def _along(v: np.ndarray, axis: int, rank: int) -> np.ndarray:
    return rows.along(NUMPY, v, axis, rank)


def _layer_stats(x: np.ndarray, axes, eps: float) -> tuple[np.ndarray, np.ndarray]:
    return rows.norm_stats(NUMPY, x, axes, eps)


def _ln_input_grad(xhat: np.ndarray, r: np.ndarray, gy: np.ndarray, axes) -> np.ndarray:
    return rows.norm_input_grad(NUMPY, xhat, r, gy, axes)


def _sum_except(v: np.ndarray, axis: int) -> np.ndarray:
    return rows.sum_except(NUMPY, v, axis)


_NORM_ATTRS = {
    "axis": AttrSpec("int", default=-1, doc="the normalised axis (negative counts from the end)"),
    "eps": AttrSpec("float", default=NORM_EPS, doc="added to the variance inside the square root"),
}


def _ln_input_kernel(args, attrs, out):
    x, gamma, dy = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    xhat, r = _layer_stats(x, axis, attrs["eps"])
    return _ln_input_grad(xhat, r, dy * _along(gamma, axis, x.ndim), axis)


def _ln_gamma_kernel(args, attrs, out):
    x, dy = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    return _sum_except(dy * _layer_stats(x, axis, attrs["eps"])[0], axis)


def _ln_gamma_type(ins, attrs):
    x, axis = _norm_types(ins, attrs, ("x", "dy"), ())
    return TensorType(_affine_shape(x, axis), x.dtype)


# Primitive decompositions of the normalisation gradients (for their composite rules).
def _p_along(g, v, axis: int, rank: int):
    return g.reshape(v, new_shape=[-1 if i == axis else 1 for i in range(rank)])


def _p_sum_except(g, v, axis: int):
    return g.reduce(v, op="sum", axes=[i for i in range(len(v.shape)) if i != axis])


def _p_layer_stats(g, x, axis: int, eps: float):
    """The norm-statistics row on the graph namespace (primitive nodes)."""
    return rows.norm_stats(GraphNamespace(g), x, axis, eps)


def _p_ln_input_grad(g, xhat, r, gy, axis: int, center: bool = True):
    return rows.norm_input_grad(GraphNamespace(g), xhat, r, gy, axis, center)


def _ln_input_prims(g, ops, attrs):
    x, gamma, dy = ops
    axis = attrs["axis"] % len(x.shape)
    xhat, r = _p_layer_stats(g, x, axis, attrs["eps"])
    return _p_ln_input_grad(g, xhat, r, dy * _p_along(g, gamma, axis, len(x.shape)), axis)


def _ln_gamma_prims(g, ops, attrs):
    x, dy = ops
    axis = attrs["axis"] % len(x.shape)
    return _p_sum_except(g, dy * _p_layer_stats(g, x, axis, attrs["eps"])[0], axis)


def _rms_input_prims(g, ops, attrs):
    x, gamma, _, dy = ops
    axis = attrs["axis"] % len(x.shape)
    xhat, r = rows.norm_stats(GraphNamespace(g), x, axis, attrs["eps"], center=False)
    return _p_ln_input_grad(g, xhat, r, dy * _p_along(g, gamma, axis, len(x.shape)), axis, center=False)


def _rms_gamma_prims(g, ops, attrs):
    x, _, _, dy = ops
    axis = attrs["axis"] % len(x.shape)
    return _p_sum_except(g, dy * rows.norm_stats(GraphNamespace(g), x, axis, attrs["eps"], center=False)[0], axis)


def _rms_beta_prims(g, ops, attrs):
    dy = ops[3]
    return _p_sum_except(g, dy, attrs["axis"] % len(dy.shape))


def _group_rows(g, v, groups: int):
    """[N, C, *spatial] -> [N, G, C/G·spatial] (N may be symbolic)."""
    rest = math.prod(v.shape[1:]) // groups
    return g.reshape(v, new_shape=[-1 if not isinstance(v.shape[0], int) else v.shape[0], groups, rest])


def _group_xhat(g, x, attrs):
    xhat, r = _p_layer_stats(g, _group_rows(g, x, attrs["num_groups"]), 2, attrs["eps"])
    return xhat, r


def _group_input_prims(g, ops, attrs):
    x, gamma, _, dy = ops
    xhat, r = _group_xhat(g, x, attrs)
    gy = _group_rows(g, dy * _p_along(g, gamma, 1, len(x.shape)), attrs["num_groups"])
    out = _p_ln_input_grad(g, xhat, r, gy, 2)
    return g.reshape(out, new_shape=[-1 if not isinstance(d, int) else d for d in x.shape])


def _group_gamma_prims(g, ops, attrs):
    x, dy = ops
    xhat, _ = _group_xhat(g, x, attrs)
    return _p_sum_except(g, dy * g.reshape(xhat, new_shape=[-1 if not isinstance(d, int) else d for d in x.shape]), 1)


def _group_beta_prims(g, ops, attrs):
    return _p_sum_except(g, ops[1], 1)


defop(
    name="layer_norm_backward_input", precision="reduction", family=_FAMILY, arity=3, operands=("x", "gamma", "dy"), attrs=_NORM_ATTRS,
    infer=lambda ins, attrs: _norm_types(ins, attrs, ("x", "gamma", "dy"), (1,))[0],
    kernel=_ln_input_kernel, **_composite(_ln_input_prims),
    doc="LayerNorm gradient w.r.t. x over `axis`: r·(gy − mean(gy) − x̂·mean(gy·x̂)) with "
    "gy = dy·gamma, x̂ = (x − mean)·r, r = 1/sqrt(var + eps) (population variance). gamma is [x.shape[axis]].",
)

defop(
    name="layer_norm_backward_gamma", precision="reduction", family=_FAMILY, arity=2, operands=("x", "dy"), attrs=_NORM_ATTRS,
    infer=_ln_gamma_type, kernel=_ln_gamma_kernel, **_composite(_ln_gamma_prims),
    doc="LayerNorm gradient w.r.t. gamma: Σ over every axis but `axis` of dy·x̂ → [x.shape[axis]]. "
    "(The beta gradient is a plain sum of dy, built from reduce.)",
)

_RMS_NAMES = ("x", "gamma", "beta", "dy")


def _rms_input_kernel(args, attrs, out):
    x, gamma, _, dy = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    xhat, r = rows.norm_stats(NUMPY, x, axis, attrs["eps"], center=False)
    return rows.norm_input_grad(NUMPY, xhat, r, dy * _along(gamma, axis, x.ndim), axis, center=False)


def _rms_gamma_kernel(args, attrs, out):
    x, _, _, dy = promote_args(args, out.dtype)
    axis = attrs["axis"] % x.ndim
    return _sum_except(dy * rows.norm_stats(NUMPY, x, axis, attrs["eps"], center=False)[0], axis)


def _rms_affine_type(ins, attrs):
    x, axis = _norm_types(ins, attrs, _RMS_NAMES, (1, 2))
    return TensorType(_affine_shape(x, axis), x.dtype)


_RMS_DOC = " r = 1/sqrt(mean(x², axis) + eps); gamma and beta are [x.shape[axis]] (beta is unused but kept, as upstream)."

defop(
    name="rms_norm_backward_input", precision="reduction", family=_FAMILY, arity=4, operands=_RMS_NAMES, attrs=_NORM_ATTRS,
    infer=lambda ins, attrs: _norm_types(ins, attrs, _RMS_NAMES, (1, 2))[0], kernel=_rms_input_kernel, **_composite(_rms_input_prims),
    doc="RMSNorm gradient w.r.t. x: r·(gamma·dy − x·r²·mean(dy·gamma·x))." + _RMS_DOC,
)

defop(
    name="rms_norm_backward_gamma", precision="reduction", family=_FAMILY, arity=4, operands=_RMS_NAMES, attrs=_NORM_ATTRS,
    infer=_rms_affine_type, kernel=_rms_gamma_kernel, **_composite(_rms_gamma_prims),
    doc="RMSNorm gradient w.r.t. gamma: Σ over every axis but `axis` of dy·x·r." + _RMS_DOC,
)

defop(
    name="rms_norm_backward_beta", precision="reduction", family=_FAMILY, arity=4, operands=_RMS_NAMES, attrs=_NORM_ATTRS,
    infer=_rms_affine_type,
    kernel=lambda args, attrs, out: _sum_except(promote_args(args[3:], out.dtype)[0], attrs["axis"] % args[3].ndim),
    **_composite(_rms_beta_prims),
    doc="RMSNorm gradient w.r.t. beta: Σ over every axis but `axis` of dy." + _RMS_DOC,
)

_GROUP_ATTRS = {
    "num_groups": AttrSpec("int", doc="channels split into this many contiguous groups"),
    "eps": AttrSpec("float", default=NORM_EPS),
}


def _group_types(ins, attrs, names: tuple[str, ...], out_channels: bool = False) -> TensorType:
    """x and dy alike ([N, C, *spatial]); gamma/beta (if any) [C]. Result: x's shape, or
    ``[C]`` with ``out_channels``; dtype: promotion of every operand."""
    x = _data_type([ins[0], ins[-1]], (names[0], names[-1]))
    if len(x.shape) < 2:
        raise ShapeError(f"x must be [N, C, *spatial], got {x.shape!r}")
    groups, channels = attrs["num_groups"], x.shape[1]
    if groups < 1 or (isinstance(channels, int) and channels % groups):
        raise ShapeError(f"num_groups {groups} must be >= 1 and divide the channels {channels}")
    for i in range(1, len(ins) - 1):
        require_dim(ins[i].shape, Shape((channels,)), f"{names[i]} shape ([C])")
    dtype = _data_type(ins, names, same_shape=False).dtype
    return TensorType(Shape((channels,)) if out_channels else x.shape, dtype)


def _group_stats(x: np.ndarray, groups: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """x̂ and r per (sample, group), returned in the grouped layout [N, G, C/G·spatial]."""
    return _layer_stats(x.reshape(x.shape[0], groups, -1), 2, eps)


def _per_channel(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    return v.reshape([-1 if i == 1 else 1 for i in range(x.ndim)])


def _group_input_kernel(args, attrs, out):
    x, gamma, _, dy = promote_args(args, out.dtype)
    groups = attrs["num_groups"]
    xhat, r = _group_stats(x, groups, attrs["eps"])
    gy = (dy * _per_channel(gamma, x)).reshape(xhat.shape)
    return _ln_input_grad(xhat, r, gy, 2).reshape(x.shape)


def _group_gamma_kernel(args, attrs, out):
    x, dy = promote_args(args, out.dtype)
    xhat, _ = _group_stats(x, attrs["num_groups"], attrs["eps"])
    return _sum_except(dy * xhat.reshape(x.shape), 1)


_GROUP_DOC = " Statistics per (sample, group) over (C/G)·spatial elements, population variance, eps inside the root."
_GROUP_NAMES = ("x", "gamma", "beta", "dy")

defop(
    name="group_norm_backward_input", precision="reduction", family=_FAMILY, arity=4, operands=_GROUP_NAMES, attrs=_GROUP_ATTRS,
    infer=lambda ins, attrs: _group_types(ins, attrs, _GROUP_NAMES), kernel=_group_input_kernel, **_composite(_group_input_prims),
    doc="GroupNorm gradient w.r.t. x [N, C, *spatial]: the LayerNorm formula per (sample, group) "
    "with gy = dy·gamma[c]; beta is unused." + _GROUP_DOC,
)

defop(
    name="group_norm_backward_gamma", precision="reduction", family=_FAMILY, arity=2, operands=("x", "dy"), attrs=_GROUP_ATTRS,
    infer=lambda ins, attrs: _group_types(ins, attrs, ("x", "dy"), out_channels=True),
    kernel=_group_gamma_kernel, **_composite(_group_gamma_prims),
    doc="GroupNorm gradient w.r.t. gamma: Σ_{n, spatial} dy·x̂ → [C]." + _GROUP_DOC,
)

defop(
    name="group_norm_backward_beta", precision="reduction", family=_FAMILY, arity=2, operands=("x", "dy"), attrs=_GROUP_ATTRS,
    infer=lambda ins, attrs: _group_types(ins, attrs, ("x", "dy"), out_channels=True),
    kernel=lambda args, attrs, out: _sum_except(promote_args(args[1:], out.dtype)[0], 1),
    **_composite(_group_beta_prims),
    doc="GroupNorm gradient w.r.t. beta: Σ_{n, spatial} dy → [C]. x only fixes the group layout." + _GROUP_DOC,
)


# --------------------------------------------------------------------------- rope backward
def _dim(d):
    return d if isinstance(d, int) else -1


def _rope_backward_prims(g, ops, attrs):
    """rope(dy, cos, −sin) from matmul / mul / add with constant selection matrices:
    out = dy·C + (dy @ P)·S per head, where P swaps each rotated pair, C holds cos (1 past
    n_rot) and S holds ±sin, both gathered from the tables' first S rows by a matmul."""
    dy, cos, sin = ops
    head_dim = attrs["head_dim"]
    n_rot = attrs["n_rot"] if attrs["n_rot"] is not None else head_dim
    half, width = n_rot // 2, cos.shape[1]
    seq, rows = dy.shape[-2], cos.shape[0]
    if not (isinstance(seq, int) and isinstance(rows, int)):
        raise ShapeError(f"rope_backward rules need a static sequence length and table size, got {seq!r} and {rows!r}")
    pair = [(2 * j, 2 * j + 1) if attrs["interleaved"] else (j, half + j) for j in range(half)]
    take = np.eye(seq, rows)  # [S, T]: the first S table rows
    e_cos, e_sin = np.zeros((width, head_dim)), np.zeros((width, head_dim))
    swap, base = np.zeros((head_dim, head_dim)), np.zeros(head_dim)
    base[n_rot:] = 1.0
    for j, (pa, pb) in enumerate(pair):
        e_cos[j, pa] = e_cos[j, pb] = 1.0
        e_sin[j, pa], e_sin[j, pb] = 1.0, -1.0  # inverse rotation: a·c + b·s, b·c − a·s
        swap[pb, pa] = swap[pa, pb] = 1.0
    dt = promote_all([dy.dtype, cos.dtype, sin.dtype])

    def const(a):
        return g.constant(np.asarray(a, dtype=dt.numpy), dtype=dt)

    c_full = g.matmul(g.matmul(const(take), cos), const(e_cos)) + const(base)  # [S, D]
    s_full = g.matmul(g.matmul(const(take), sin), const(e_sin))
    lead = [_dim(d) for d in dy.shape[:-1]]
    x4 = g.reshape(dy, new_shape=[*lead, dy.shape[-1] // head_dim, head_dim])  # [..., S, H, D]
    c4 = g.reshape(c_full, new_shape=[seq, 1, head_dim])
    s4 = g.reshape(s_full, new_shape=[seq, 1, head_dim])
    out = x4 * c4 + g.matmul(x4, const(swap)) * s4
    return g.reshape(out, new_shape=[_dim(d) for d in dy.shape])


defop(
    name="rope_backward", precision="data_movement", family=_FAMILY, arity=3, operands=("dy", "cos", "sin"), attrs=get_op("rope").attrs,
    infer=rope_type,
    kernel=lambda args, attrs, out: rope_kernel([args[0], args[1], -args[2]], attrs, out),
    **_composite(_rope_backward_prims),
    doc="Gradient of rope w.r.t. x: the inverse rotation, i.e. rope(dy, cos, −sin) with the same "
    "attributes (head_dim, n_rot, interleaved) and layout rules; dims past n_rot pass through. "
    "dy [B, S, H*D] or [S, H*D]; result dtype: promotion of dy, cos, sin.",
)


# ---------------------------------------------------------------------- attention backward
_WRT = ("query", "key", "value")


def _attention_backward_arity(attrs) -> int:
    return 5 if attrs["mask_kind"] in ("custom", "bias") else 4


def _attention_backward_type(ins, attrs):
    q, k, v, dy = ins[:4]
    forward = attention_type([q, k, v, *ins[4:]], attrs)
    if dy.shape != q.shape:
        raise ShapeError(f"dy must have the attention output shape (q's) {q.shape!r}, got {dy.shape!r}")
    require_float(dy, "dy")
    target = ins[_WRT.index(attrs["wrt"])]
    return TensorType(target.shape, promote_all([forward.dtype, dy.dtype]))


def _attention_backward_kernel(args, attrs, out):
    heads, head_dim = attrs["num_heads"], attrs["head_dim"]
    lay = Layout(args[0].ndim, attrs["layout"])
    q, k, v, dy = (lay.to_bhsd(a, heads, head_dim) for a in promote_args(args[:4], out.dtype))
    s, keep, t = attention_scores(q, k, attrs, args[4] if len(args) > 4 else None)
    p = softmax(s)
    if attrs["wrt"] == "value":
        return lay.from_bhsd(np.matmul(np.swapaxes(p, -1, -2), dy))
    dp = np.matmul(dy, np.swapaxes(v, -1, -2))
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    if keep is not None:
        ds = np.where(keep, ds, 0.0)  # replaced scores do not depend on q or k
    if t is not None:  # soft-cap c: d(c·tanh(s/c))/ds = 1 − tanh²
        ds = ds * (1.0 - t * t)
    ds = ds * attention_scale(attrs)
    grad = np.matmul(ds, k) if attrs["wrt"] == "query" else np.matmul(np.swapaxes(ds, -1, -2), q)
    return lay.from_bhsd(grad)


def _to_bhsd(g, a, rank: int, layout: str, heads: int, head_dim: int):
    if rank in (2, 3):
        a = g.reshape(a, new_shape=[*(_dim(d) for d in a.shape[:-1]), heads, head_dim])
        r = len(a.shape)
        return g.transpose(a, perm=[*range(r - 3), r - 2, r - 3, r - 1])
    return a if layout == "bhsd" else g.transpose(a, perm=[0, 2, 1, 3])


def _from_bhsd(g, a, like, rank: int, layout: str):
    if rank in (2, 3):
        r = len(a.shape)
        a = g.transpose(a, perm=[*range(r - 3), r - 2, r - 3, r - 1])
        return g.reshape(a, new_shape=[_dim(d) for d in like.shape])
    return a if layout == "bhsd" else g.transpose(a, perm=[0, 2, 1, 3])


def _attention_prims(g, q, k, v, mask, attrs):
    """The forward attention: the attention row (rlx.ops.rows) on the graph namespace, in primitive nodes."""
    heads, head_dim, kind = attrs["num_heads"], attrs["head_dim"], attrs["mask_kind"]
    rank, layout = len(q.shape), attrs["layout"]
    qh, kh, vh = (_to_bhsd(g, a, rank, layout, heads, head_dim) for a in (q, k, v))
    if kind in ("causal", "sliding_window") and not (isinstance(qh.shape[-2], int) and isinstance(kh.shape[-2], int)):
        raise ShapeError(f"attention_backward rules need static sequence lengths for mask {kind!r}")
    return _from_bhsd(g, rows.attention_core(GraphNamespace(g), qh, kh, vh, attrs, mask), q, rank, layout)


def _attention_backward_prims(g, ops, attrs, *, ctx):
    """The attention gradient as ``ctx.grad`` (rlx.grad) of the primitive attention, inlined."""
    from rlx.ir.graph import Graph

    fwd = Graph("attention")
    names = ["q", "k", "v", "mask"][: len(ops) - 1]  # ops: q, k, v, dy[, mask]
    data = [o for i, o in enumerate(ops) if i != 3]
    leaves = [fwd.input(n, list(o.shape), o.dtype) for n, o in zip(names, data)]
    mask = leaves[3] if len(leaves) > 3 else None
    dt = promote_all([o.dtype for o in ops[:4]])
    out = _attention_prims(fwd, *leaves[:3], mask, attrs)
    fwd.set_outputs([out if out.dtype == dt else fwd.cast(out, to=dt)])
    wrt = {"query": "q", "key": "k", "value": "v"}[attrs["wrt"]]
    bwd = ctx.grad(fwd, [wrt], seed="dy")
    return _inline(g, bwd, {**dict(zip(names, data)), "dy": ops[3]})[0]


_attention_backward_prims.needs_transforms = True  # type: ignore[attr-defined]


defop(
    name="attention_backward", family=_FAMILY, arity=_attention_backward_arity, operands=("q", "k", "v", "dy", "mask"),
    flags={BLAS},
    attrs={**get_op("attention").attrs, "wrt": AttrSpec("str", choices=_WRT, doc="which operand's gradient")},
    infer=_attention_backward_type, kernel=_attention_backward_kernel,
    **_composite(_attention_backward_prims),
    doc="Gradient of attention w.r.t. q, k or v (`wrt`): operands q, k, v, dy (the output "
    "gradient, q's shape), plus the forward's mask for mask kinds custom / bias; every "
    "attention attribute (mask kind, window, layout, score_scale, attn_logit_softcap) means "
    "what it means forward. The probabilities p are recomputed exactly as the forward; then "
    "dV = pᵀ·dy, dP = dy·vᵀ, dS = p·(dP − rowsum(p·dP)), zeroed where a mask replaced the "
    "score, times (1 − tanh²(s/c)) under a soft-cap c, times the scale; dQ = dS·k, dK = dSᵀ·q. "
    "Upstream's kernel ignores score_scale and the soft-cap; rlx honours both. Output: the "
    "shape of the chosen operand; dtype: promotion of q, k, v, dy. No gradient for the mask.",
)


# ------------------------------------------------------------------------- gather backward
def _gather_backward_type(ins, attrs):
    dy, idx = ins
    require_float(dy, "dy")
    _require_index(idx, "indices")
    table = Shape(attrs["table_shape"])
    axis = axis_of(attrs["axis"], TensorType(table, dy.dtype))
    want = Shape((*table[:axis], *idx.shape, *table[axis + 1 :]))
    if dy.shape != want:
        raise ShapeError(f"dy must have the gather output shape {want!r} (table {table!r}, axis {axis}), got {dy.shape!r}")
    return TensorType(table, dy.dtype)


def _gather_backward_canon(ins, attrs):
    rank = len(attrs["table_shape"])
    return {**attrs, "axis": attrs["axis"] % rank} if rank and -rank <= attrs["axis"] < rank else attrs


def _gather_backward_kernel(args, attrs, out):
    dy, idx = args
    table = tuple(out.shape)
    axis = attrs["axis"] % len(table)
    flat = _check_indices(idx, table[axis], "gather_backward", wrap=True).ravel()
    grouped = dy.reshape(*table[:axis], flat.size, *table[axis + 1 :])
    dt = np.zeros(table, dtype=dy.dtype)
    np.add.at(dt, (slice(None),) * axis + (flat,), grouped)
    return dt


def _gather_backward_batch(ctx, node, operands, batched):
    """Shared indices: gather_backward on the shifted axis into [B, *table_shape]. Batched indices:
    scatter_elements(add) of dy at per-example element indices (rules: rlx.autodiff.rules)."""
    from rlx.ops.shape import per_example_indices  # local: the helper lives with gather, this section stays self-contained

    g, (dy, idx), axis, table = ctx.graph, operands, node.attrs["axis"], list(node.attrs["table_shape"])
    if not batched[1]:
        return g.gather_backward(dy, idx, axis=ctx.shift_axis(axis), table_shape=[ctx.batch_size, *table])
    dy = dy if batched[0] else ctx.materialize(dy)
    eidx = per_example_indices(ctx, idx, axis, table[:axis], table[axis + 1:])
    if not Shape(table).is_static:
        raise ShapeError(f"batched indices need a static table_shape, got {Shape(table)!r}")
    zeros = ctx.materialize(g.constant(np.zeros(table, np.float32 if node.dtype.is_low_precision_float else node.dtype.numpy),
                                       dtype=node.dtype))
    return g.scatter_elements(zeros, eidx, ctx.reshape(dy, list(eidx.shape)), axis=ctx.shift_axis(axis), reduction="add")


defop(
    name="gather_backward", precision="data_movement", family=_FAMILY, arity=2, operands=("dy", "indices"),
    attrs={"axis": AttrSpec("int", default=0, doc="the gathered axis of the table (negative allowed, stored non-negative)"),
           "table_shape": AttrSpec("dims", doc="shape of the forward table")},
    canonicalize=_gather_backward_canon, infer=_gather_backward_type, kernel=_gather_backward_kernel,
    flags={"complex_ad", "eager_unsafe"},  # linear in dy: its rules hold for c64 as written
    vjp=lambda ctx, node, ct: [ctx.graph.gather(ct, ctx.operand(node, 1), axis=node.attrs["axis"]), None],
    jvp=lambda ctx, node, tangents: None if tangents[0] is None else ctx.graph.append(
        "gather_backward", [tangents[0], ctx.operand(node, 1)], dict(node.attrs)),
    batch=_gather_backward_batch,
    doc="Gradient of gather w.r.t. its table: zeros of table_shape, then dy rows are added at "
    "their indices along `axis` (repeated indices accumulate). dy has the gather output "
    "shape table[:axis] + indices.shape + table[axis+1:]; indices are integers in [-n, n) with "
    "n = table[axis], negative ones counting from the end (as gather).",
)
