"""The JAX lowering table: one function per MIR op, ``fn(args, attrs, out) -> jax array``.

``args`` are the operands as jax arrays, ``attrs`` the node's canonical attributes and
``out`` its :class:`~rlx.TensorType` with symbolic dims bound. Each function reproduces the
op's reference kernel (the registry docstring is the contract) with ``jax.numpy`` /
``jax.lax``; :mod:`rlx.backends.jax.executable` casts every result to the node's dtype.

Precision: like :func:`rlx.run`, operands narrower than f32 (f16, bf16, fp8) are widened to
f32 before a lowering runs and the result is rounded to the node's dtype afterwards, except
for the lowerings in :data:`NATIVE_LOW_PRECISION` (matmul, dot_general, conv), which feed
bf16 / f16 operands to the MXU / tensor cores as they are and accumulate in f32
(``preferred_element_type``): the same numbers, since a product of two bf16 values is exact
in f32.

Fused ops without a hand-written lowering are lowered through their registry
decomposition (:data:`DECOMPOSED`), evaluated in f32 scratch for low-precision operands as
the reference kernel does. The quantisation and numerics families live in
:mod:`rlx.backends.jax.lowering_ext`; the few ops there in ``HOST`` run their NumPy kernel on
the host through ``jax.pure_callback`` (each with its reason). :data:`REFUSED` lists, with
the reason, every op the backend does not lower (the HIR blocks, which never reach a
backend); a test walks the registry and fails for an op in none of these tables
(:func:`coverage`).

Out-of-range indices (gather, gather_elements, scatter_elements, gather_backward, cross-entropy
labels) raise the reference's ``RlxError`` through a host check (:mod:`.index_checks`).
Differences from the reference that cannot be expressed in a compiled XLA program are
documented here rather than hidden: a ``narrow`` past a symbolic axis's end is caught when the
program is traced (shapes are static under ``jax.jit``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rlx.backends.jax.index_checks import checked_index, from_empty_axis
from rlx.backends.jax.table import (
    DECOMPOSED,
    JNP,
    LEAVES,
    LOWERINGS,
    NATIVE_LOW_PRECISION,
    REFUSED,
    TABLE,
    Lowering,
    compute_dtype,
    jnp_dtype,
    lowering,
    matmul_precision,
    target_platform,
    tracing_platform,
    tracing_precision,
)
from rlx.backends.jax.table import cast_all as _cast_all
from rlx.ir.errors import RlxError
from rlx.ir.shape import TensorType
from rlx.ops import rows
from rlx.ops.conv import max_pool_with_indices, pool_count, pool_geo
from rlx.ops.kinds import ACTIVATION_KINDS
from rlx.ops.rows import reduce_identity

__all__ = ["DECOMPOSED", "JNP", "LEAVES", "LOWERINGS", "NATIVE_LOW_PRECISION", "REFUSED", "TABLE", "Lowering", "activate",
           "attention", "attention_bhsd", "compute_dtype", "conv2d", "coverage", "jnp_dtype", "lowering", "matmul_precision",
           "rope", "target_platform", "tracing_platform", "tracing_precision"]


def _scalar(value: float, like: Any) -> Any:
    return jnp.asarray(value, dtype=like.dtype)


def _is_float(a: Any) -> bool:
    return jnp.issubdtype(a.dtype, jnp.floating)


# ------------------------------------------------------------------------------ sources
@lowering("constant")
def _constant(args, attrs, out):
    return jnp.asarray(attrs["value"].array)


# -------------------------------------------------------------------------- elementwise
def activate(kind: str | None, x: Any) -> Any:
    """The activation row in jax.numpy (None: identity)."""
    return rows.activate(JNP, kind, x)


lowering("bitcast", native_low_precision=True)(TABLE.row("bitcast"))


# ------------------------------------------------------------------------------- linalg
def _contraction_operands(args, out) -> tuple[list[Any], Any, Any]:
    """Operands in a common dtype, the XLA preferred (accumulation) dtype, and the precision."""
    dt = jnp_dtype(out.dtype)
    ops = [a.astype(dt) if a.dtype != dt else a for a in args]
    if out.dtype.is_low_precision_float:
        return ops, jnp.float32, None
    precision = matmul_precision() if out.dtype.is_float or out.dtype.is_complex else None
    return ops, None, precision


@lowering("matmul", native_low_precision=True)
def _matmul(args, attrs, out):
    (a, b), acc, precision = _contraction_operands(args, out)
    return jnp.matmul(a, b, precision=precision, preferred_element_type=acc)


@lowering("dot_general", native_low_precision=True)
def _dot_general(args, attrs, out):
    (a, b), acc, precision = _contraction_operands(args, out)

    def norm(axes, rank):
        return tuple(int(x) % rank for x in axes)

    dims = ((norm(attrs["lhs_contracting"], a.ndim), norm(attrs["rhs_contracting"], b.ndim)),
            (norm(attrs["lhs_batch"], a.ndim), norm(attrs["rhs_batch"], b.ndim)))
    return lax.dot_general(a, b, dims, precision=precision, preferred_element_type=acc)


# ---------------------------------------------------------------------------- reduction
# -------------------------------------------------------------------------------- shape
# reduce, softmax, the shape ops and the norms are the table's default rows (rlx.ops.rows)
@lowering("gather")
def _gather(args, attrs, out):
    table, idx = args
    axis = attrs["axis"] % table.ndim
    checked = checked_index(idx, table.shape[axis], "gather", axis=axis)
    if table.shape[axis] == 0 and idx.size:
        return from_empty_axis(checked, table.shape[:axis] + idx.shape + table.shape[axis + 1:], table.dtype)
    return jnp.take(table, checked, axis=axis, mode="fill")


# ---------------------------------------------------------------------------- attention
def attention_bhsd(q, k, v, attrs, mask=None):
    """The attention row on [*batch, H, S, D] operands, with XLA's matmul precision.

    f32 / f64 operands compute in their dtype. bf16 / f16 operands (all of one dtype) feed
    both matmuls as they are, accumulating in f32; scores, mask and softmax are f32 and the
    probabilities are rounded to the operand dtype before ``p @ v`` (as fused attention
    kernels do), so a bf16 result may differ from the reference (all f32) by about one bf16 ulp.
    """
    low = q.dtype in (jnp.bfloat16, jnp.float16)
    precision = None if low else matmul_precision()
    acc = jnp.float32 if low else None

    def matmul(a, b):
        return jnp.matmul(a, b, precision=precision, preferred_element_type=acc)

    return rows.attention_core(JNP, q, k, v, attrs, mask, matmul=matmul)


def attention(args, attrs, out):
    lay = rows.Layout(args[0].ndim, attrs["layout"])
    qkv = list(args[:3])
    if not (out.dtype.is_low_precision_float and all(a.dtype == qkv[0].dtype for a in qkv)):
        qkv = _cast_all(qkv, out)  # mixed or wide dtypes: compute in the (f32 for narrow floats) promoted dtype
    q, k, v = (lay.to_bhsd(JNP, a, attrs["num_heads"], attrs["head_dim"]) for a in qkv)
    mask = args[3] if len(args) > 3 else None
    if mask is not None and mask.dtype in (jnp.bfloat16, jnp.float16):
        mask = mask.astype(jnp.float32)
    return lay.from_bhsd(JNP, attention_bhsd(q, k, v, attrs, mask))


LOWERINGS["attention"] = attention
NATIVE_LOW_PRECISION.add("attention")


def rope(x, cos, sin, attrs):
    head_dim = attrs["head_dim"]
    n_rot = head_dim if attrs["n_rot"] is None else attrs["n_rot"]
    seq = x.shape[-2]
    if cos.shape[0] < seq:
        raise RlxError(f"rope: cos/sin tables have {cos.shape[0]} rows, fewer than the sequence length {seq}")
    half = n_rot // 2
    c = cos[:seq, None, :half]
    s = sin[:seq, None, :half]
    xh = jnp.reshape(x, (*x.shape[:-1], -1, head_dim))
    rest = xh[..., n_rot:]
    if attrs["interleaved"]:
        a, b = xh[..., 0:n_rot:2], xh[..., 1:n_rot:2]
        rot = jnp.stack([a * c - b * s, b * c + a * s], axis=-1).reshape((*xh.shape[:-1], n_rot))
    else:
        a, b = xh[..., :half], xh[..., half:n_rot]
        rot = jnp.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    y = jnp.concatenate([rot, rest], axis=-1) if n_rot < head_dim else rot
    return jnp.reshape(y, x.shape)


@lowering("rope")
def _rope(args, attrs, out):
    x, cos, sin = _cast_all(args, out)
    return rope(x, cos, sin, attrs)


# --------------------------------------------------------------------------------- conv
def _pair(v) -> tuple[int, int]:
    return int(v[0]), int(v[1])


def conv2d(x, w, stride, padding, dilation, groups, acc=None, precision=None):
    p = _pair(padding)
    return lax.conv_general_dilated(
        x, w, window_strides=_pair(stride), padding=[(p[0], p[0]), (p[1], p[1])], rhs_dilation=_pair(dilation),
        dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=groups,
        precision=precision, preferred_element_type=acc,
    )


@lowering("conv2d", native_low_precision=True)
def _conv2d(args, attrs, out):
    (x, w), acc, precision = _contraction_operands(args, out)
    return conv2d(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"], acc, precision)


@lowering("fused_conv2d_bias_act", native_low_precision=True)
def _fused_conv2d_bias_act(args, attrs, out):
    """conv2d + per-channel bias + activation, in the compute dtype (XLA fuses the epilogue)."""
    y = _conv2d(args[:2], attrs, TensorType(out.shape, out.dtype))
    dt = compute_dtype(out.dtype)
    y = y.astype(dt)
    if attrs["has_bias"]:
        y = y + jnp.reshape(args[2].astype(dt), (-1, 1, 1))
    return activate(attrs["activation"], y)


@lowering("conv_transpose2d", native_low_precision=True)
def _conv_transpose2d(args, attrs, out):
    """A stride-1 conv of the stride-dilated input with the flipped, I/O-swapped kernel; negative padding cropped."""
    (x, w), acc, precision = _contraction_operands(args, out)
    s, p, d, op = _pair(attrs["stride"]), _pair(attrs["padding"]), _pair(attrs["dilation"]), _pair(attrs["output_padding"])
    g = attrs["groups"]
    cin, cout_g, kh, kw = w.shape
    wt = jnp.reshape(w, (g, cin // g, cout_g, kh, kw)).swapaxes(1, 2).reshape(g * cout_g, cin // g, kh, kw)
    wt = wt[:, :, ::-1, ::-1]
    lo = [d[i] * ((kh, kw)[i] - 1) - p[i] for i in range(2)]
    hi = [lo[i] + op[i] for i in range(2)]
    y = lax.conv_general_dilated(
        x, wt, window_strides=(1, 1), padding=[(max(lo[i], 0), max(hi[i], 0)) for i in range(2)],
        lhs_dilation=s, rhs_dilation=d, dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=g,
        precision=precision, preferred_element_type=acc,
    )
    crop_lo = [max(-lo[i], 0) for i in range(2)]
    return y[:, :, crop_lo[0] : crop_lo[0] + out.shape[2], crop_lo[1] : crop_lo[1] + out.shape[3]]


def _window(x, init, fn, k, s, p):
    return lax.reduce_window(x, jnp.asarray(init, x.dtype), fn, (1, 1, *k), (1, 1, *s), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))


@lowering("max_pool2d_with_indices")
def _max_pool2d_with_indices(args, attrs, out):
    """The op's own formula (rlx.ops.conv.max_pool_with_indices) over jax.numpy."""
    return max_pool_with_indices(jnp, args[0], attrs)


@lowering("pool2d")
def _pool2d(args, attrs, out):
    x, kind = args[0], attrs["kind"]
    k, s, p = pool_geo(attrs)
    if kind in ("max", "min", "fmax", "fmin"):
        ident = reduce_identity(kind, x.dtype)
        fn = lax.max if kind in ("max", "fmax") else lax.min
        if not _is_float(x) or kind in ("max", "min"):  # lax.max propagates NaN (torch's max_pool2d)
            return _window(x, ident, fn, k, s, p)
        nan = jnp.isnan(x)
        r = _window(jnp.where(nan, jnp.asarray(ident, x.dtype), x), ident, fn, k, s, p)
        seen = _window((~nan).astype(jnp.int32), 0, lax.add, k, s, p)
        return jnp.where(seen == 0, jnp.asarray(np.nan, x.dtype), r)
    if kind == "prod":
        return _window(x, 1, lax.mul, k, s, p)
    total = _window(x, 0, lax.add, k, s, p)
    if kind == "sum":
        return total
    if attrs["count_include_pad"]:
        return total / _scalar(k[0] * k[1], total)
    return total / jnp.asarray(pool_count(x.shape, attrs), total.dtype)


@lowering("resize_nearest_2x")
def _resize(args, attrs, out):
    return jnp.repeat(jnp.repeat(args[0], 2, axis=2), 2, axis=3)


# ----------------------------------------------------------------------------- backward
@lowering("relu_backward")
def _relu_backward(args, attrs, out):
    x, dy = _cast_all(args, out)
    return jnp.where(x > 0, dy, jnp.zeros((), dy.dtype))


@lowering("activation_backward")
def _activation_backward(args, attrs, out):
    x, dy = _cast_all(args, out)
    row = ACTIVATION_KINDS[attrs["kind"]]
    return row.vjp(JNP, x, row.forward(JNP, x), dy)


@lowering("max_pool2d_backward")
def _max_pool2d_backward(args, attrs, out):
    """Per kernel tap, the first in-bounds maximum of each window (row-major) takes the window's dy."""
    x, dy = _cast_all(args, out)
    k, p = _pair(attrs["kernel_size"]), _pair(attrs["padding"])
    s = _pair(attrs["stride"]) if attrs["stride"] is not None else k
    ho, wo = dy.shape[2:]
    padded = [max(x.shape[2 + i] + 2 * p[i], ((ho, wo)[i] - 1) * s[i] + k[i]) for i in range(2)]
    widths = [(0, 0), (0, 0)] + [(p[i], padded[i] - x.shape[2 + i] - p[i]) for i in range(2)]
    xp = jnp.pad(x, widths, constant_values=-np.inf)
    valid = np.pad(np.ones(x.shape[2:], bool), widths[2:], constant_values=False)
    taps = [(slice(kh, kh + (ho - 1) * s[0] + 1, s[0]), slice(kw, kw + (wo - 1) * s[1] + 1, s[1]))
            for kh in range(k[0]) for kw in range(k[1])]
    vals = jnp.stack([xp[:, :, hs, ws] for hs, ws in taps])
    ok = jnp.asarray(np.stack([valid[hs, ws] for hs, ws in taps]))[:, None, None]
    neg_inf = jnp.asarray(-np.inf, x.dtype)
    best = jnp.max(jnp.where(ok, vals, neg_inf), axis=0)
    winner = ok & (vals == best)
    first = jnp.argmax(winner, axis=0)
    nan_tap = ok & jnp.isnan(vals)  # a window with a NaN: its last NaN tap takes dy (as the reference)
    has_nan = jnp.any(nan_tap, axis=0)
    first = jnp.where(has_nan, len(taps) - 1 - jnp.argmax(nan_tap[::-1], axis=0), first)
    gated = jnp.where(jnp.any(winner, axis=0) | has_nan, dy, jnp.zeros((), dy.dtype))
    dxp = jnp.zeros(xp.shape, dy.dtype)
    for t, (hs, ws) in enumerate(taps):
        dxp = dxp.at[:, :, hs, ws].add(jnp.where(first == t, gated, jnp.zeros((), dy.dtype)))
    return dxp[:, :, p[0] : p[0] + x.shape[2], p[1] : p[1] + x.shape[3]]


def _conv_adjoint(known, dy, attrs, out, precision, wrt_x: bool):
    """The adjoint (linear transpose) of the forward conv2d in x (``known`` is w) or in w (``known`` is x)."""
    conv = (lambda x: conv2d(x, known, *_conv_geometry(attrs), None, precision)) if wrt_x else (
        lambda w: conv2d(known, w, *_conv_geometry(attrs), None, precision))
    (grad,) = jax.linear_transpose(conv, jax.ShapeDtypeStruct(tuple(out.shape), known.dtype))(dy)
    return grad


def _conv_geometry(attrs) -> tuple:
    return attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]


@lowering("conv2d_backward_input")
def _conv2d_backward_input(args, attrs, out):
    (dy, w), _, precision = _contraction_operands(args, out)
    return _conv_adjoint(w, dy, attrs, out, precision, wrt_x=True)


@lowering("conv2d_backward_weight")
def _conv2d_backward_weight(args, attrs, out):
    (x, dy), _, precision = _contraction_operands(args, out)
    return _conv_adjoint(x, dy, attrs, out, precision, wrt_x=False)


@lowering("softmax_cross_entropy")
def _softmax_cross_entropy(args, attrs, out):
    (logits,) = _cast_all(args[:1], out)
    lse = rows.log_sum_exp(JNP, logits, 1)
    labels = checked_index(args[1], logits.shape[1], "softmax_cross_entropy labels", axis=1, wrap=False)
    picked = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=1, mode="fill")[:, 0]
    return lse - picked


@lowering("softmax_cross_entropy_backward")
def _softmax_cross_entropy_backward(args, attrs, out):
    logits, d_loss = _cast_all([args[0], args[2]], out)
    p = rows.softmax_of(JNP, logits, 1)
    labels = checked_index(args[1], logits.shape[1], "softmax_cross_entropy_backward labels", axis=1, wrap=False)
    onehot = jax.nn.one_hot(labels, logits.shape[1], dtype=p.dtype)
    return (p - onehot) * d_loss[:, None]


def _layer_stats(x, axes, eps: float):
    return rows.norm_stats(JNP, x, axes, eps)


def _along(v, axis: int, rank: int):
    return rows.along(JNP, v, axis, rank)


def _sum_except(v, axis: int):
    return rows.sum_except(JNP, v, axis)


@lowering("layer_norm_backward_input")
def _ln_backward_input(args, attrs, out):
    x, gamma, dy = _cast_all(args, out)
    axis = attrs["axis"] % x.ndim
    xhat, r = _layer_stats(x, axis, attrs["eps"])
    return rows.norm_input_grad(JNP, xhat, r, dy * _along(gamma, axis, x.ndim), axis)


@lowering("layer_norm_backward_gamma")
def _ln_backward_gamma(args, attrs, out):
    x, dy = _cast_all(args, out)
    axis = attrs["axis"] % x.ndim
    return _sum_except(dy * _layer_stats(x, axis, attrs["eps"])[0], axis)


@lowering("rms_norm_backward_input")
def _rms_backward_input(args, attrs, out):
    x, gamma, _, dy = _cast_all(args, out)
    axis = attrs["axis"] % x.ndim
    xhat, r = rows.norm_stats(JNP, x, axis, attrs["eps"], center=False)
    return rows.norm_input_grad(JNP, xhat, r, dy * _along(gamma, axis, x.ndim), axis, center=False)


@lowering("rms_norm_backward_gamma")
def _rms_backward_gamma(args, attrs, out):
    x, _, _, dy = _cast_all(args, out)
    axis = attrs["axis"] % x.ndim
    return _sum_except(dy * rows.norm_stats(JNP, x, axis, attrs["eps"], center=False)[0], axis)


@lowering("rms_norm_backward_beta")
def _rms_backward_beta(args, attrs, out):
    (dy,) = _cast_all(args[3:], out)
    return _sum_except(dy, attrs["axis"] % dy.ndim)


def _group_stats(x, groups: int, eps: float):
    return _layer_stats(rows.group_rows(JNP, x, groups), 2, eps)


@lowering("group_norm_backward_input")
def _gn_backward_input(args, attrs, out):
    x, gamma, _, dy = _cast_all(args, out)
    xhat, r = _group_stats(x, attrs["num_groups"], attrs["eps"])
    gy = jnp.reshape(dy * _along(gamma, 1, x.ndim), xhat.shape)
    return jnp.reshape(rows.norm_input_grad(JNP, xhat, r, gy, 2), x.shape)


@lowering("group_norm_backward_gamma")
def _gn_backward_gamma(args, attrs, out):
    x, dy = _cast_all(args, out)
    xhat, _ = _group_stats(x, attrs["num_groups"], attrs["eps"])
    return _sum_except(dy * jnp.reshape(xhat, x.shape), 1)


@lowering("group_norm_backward_beta")
def _gn_backward_beta(args, attrs, out):
    (dy,) = _cast_all(args[1:], out)
    return _sum_except(dy, 1)


@lowering("rope_backward")
def _rope_backward(args, attrs, out):
    dy, cos, sin = _cast_all(args, out)
    return rope(dy, cos, -sin, attrs)


@lowering("attention_backward")
def _attention_backward(args, attrs, out):
    """The VJP of the attention lowering in the chosen operand (masked scores pass no gradient)."""
    heads, head_dim = attrs["num_heads"], attrs["head_dim"]
    lay = rows.Layout(args[0].ndim, attrs["layout"])
    q, k, v, dy = (lay.to_bhsd(JNP, a, heads, head_dim) for a in _cast_all(list(args[:4]), out))
    mask = args[4] if len(args) > 4 else None
    which = ("query", "key", "value").index(attrs["wrt"])
    operands = [q, k, v]

    def forward(t):
        ops = list(operands)
        ops[which] = t
        return attention_bhsd(*ops, attrs, mask)

    _, vjp = jax.vjp(forward, operands[which])
    return lay.from_bhsd(JNP, vjp(dy)[0])


@lowering("gather_backward")
def _gather_backward(args, attrs, out):
    dy, idx = args
    table = tuple(out.shape)
    axis = attrs["axis"] % len(table)
    dt = jnp.zeros(table, jnp_dtype(out.dtype) if not out.dtype.is_low_precision_float else jnp.float32)
    idx = checked_index(idx, table[axis], "gather_backward", axis=axis)
    return dt.at[(slice(None),) * axis + (idx,)].add(dy.astype(dt.dtype))


# ------------------------------------------------------------------------------ math_ext
@lowering("binary_ext")
def _binary_ext(args, attrs, out):
    a, b = _cast_all(args, out)
    op = attrs["op"]
    if op in ("mod", "fmod"):
        fn = jnp.mod if op == "mod" else jnp.fmod
        if _is_float(a):
            return fn(a, b)
        zero = b == 0
        r = fn(a, jnp.where(zero, jnp.ones((), b.dtype), b))
        return jnp.where(zero, jnp.zeros((), a.dtype), r)
    if op.startswith("bitwise"):
        return {"bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or, "bitwise_xor": jnp.bitwise_xor}[op](a, b)
    bits = jnp.iinfo(a.dtype).bits
    count = b.astype(jnp.dtype(f"uint{bits}"))  # the count is read as unsigned (a negative count is huge)
    big = count >= bits
    shift = jnp.where(big, jnp.zeros((), count.dtype), count).astype(a.dtype)
    zero = jnp.zeros((), a.dtype)
    if op == "shift_left":
        return jnp.where(big, zero, jnp.left_shift(a, shift))
    fill = jnp.where(a < 0, jnp.asarray(-1, a.dtype), zero) if jnp.issubdtype(a.dtype, jnp.signedinteger) else zero
    return jnp.where(big, fill, jnp.right_shift(a, shift))


# ------------------------------------------------------------------------------ indexing
@lowering("arg_reduce")
def _arg_reduce(args, attrs, out):
    x = args[0]
    axis = attrs["axis"] % x.ndim
    fn = jnp.argmax if attrs["op"] == "argmax" else jnp.argmin
    if attrs["select_last"]:
        r = x.shape[axis] - 1 - fn(jnp.flip(x, axis), axis=axis)
    else:
        r = fn(x, axis=axis)
    r = r.astype(jnp_dtype(out.dtype))
    return jnp.expand_dims(r, axis) if attrs["keep_dim"] else r


@lowering("cumulative")
def _cumulative(args, attrs, out):
    """docs/semantics.md#backward-ops: cumsum (op="sum") and cumsum_backward (reverse flipped) as well as the running product."""
    x = args[0]
    axis = attrs["axis"] % x.ndim
    if attrs["reverse"]:
        x = jnp.flip(x, axis)
    fn = jnp.cumsum if attrs["op"] == "sum" else jnp.cumprod
    r = fn(x, axis=axis, dtype=x.dtype)
    if attrs["exclusive"] and x.shape[axis]:
        first = (jnp.zeros_like if attrs["op"] == "sum" else jnp.ones_like)(lax.slice_in_dim(r, 0, 1, axis=axis))
        r = jnp.concatenate([first, lax.slice_in_dim(r, 0, x.shape[axis] - 1, axis=axis)], axis=axis)
    return jnp.flip(r, axis) if attrs["reverse"] else r


@lowering("gather_elements")
def _gather_elements(args, attrs, out):
    data, idx = args
    axis = attrs["axis"] % data.ndim
    sub = tuple(slice(0, s) if i != axis else slice(None) for i, s in enumerate(idx.shape))
    checked = checked_index(idx, data.shape[axis], "gather_elements", axis=axis)
    if data.shape[axis] == 0 and idx.size:
        return from_empty_axis(checked, idx.shape, data.dtype)
    return jnp.take_along_axis(data[sub], checked, axis=axis, mode="fill")


@lowering("scatter_elements")
def _scatter_elements(args, attrs, out):
    data, idx, upd = args
    axis = attrs["axis"] % data.ndim
    idx = checked_index(idx, data.shape[axis], "scatter_elements", axis=axis)
    where = tuple(idx if i == axis else lax.broadcasted_iota(idx.dtype, idx.shape, i) for i in range(data.ndim))
    red = attrs["reduction"]
    if red == "none":  # duplicates: the last update in C order wins, as NumPy assignment (XLA's order is unspecified)
        order = jnp.arange(upd.size, dtype=jnp.int32).reshape(upd.shape)
        winner = jnp.full(data.shape, -1, jnp.int32).at[where].max(order)
        picked = jnp.take(upd.reshape(-1), jnp.maximum(winner, 0))
        return jnp.where(winner >= 0, picked, data)
    at = data.at[where]
    return {"add": at.add, "mul": at.multiply, "max": at.max, "min": at.min}[red](upd)


# ------------------------------------------------------------------------------- fused
@lowering("fused_matmul_bias_act", native_low_precision=True)
def _fused_matmul_bias_act(args, attrs, out):
    x, w, b = args
    y = _matmul([x, w], {}, TensorType(out.shape, out.dtype))
    dt = compute_dtype(out.dtype)
    y = y.astype(dt) + b.astype(dt)
    return activate(attrs["activation"], y)


def coverage() -> dict[str, str]:
    """How the backend handles each registered op: 'lowered', 'decomposed', 'host: why', 'leaf' or 'refused: why'.

    An op missing from the result has no JAX lowering at all (the registry-walk test fails on it).
    """
    return TABLE.coverage(host=HOST)



@lowering("cached_attention")
def _cached_attention(args, attrs, out):
    """The row, with the position check folded into the program: 0 <= pos <= min(C, P) - S."""
    qkv, kc, vc, pos, cos, sin = args
    fits = min(kc.shape[-2], cos.shape[-2]) - qkv.shape[-2] + 1
    pos = checked_index(pos, max(fits, 0), "cached_attention pos (pos + S must fit the cache slots and the cos / sin rows)",
                        wrap=False)
    return rows.cached_attention(JNP, [qkv, kc, vc, pos, cos, sin], attrs, out)

from rlx.backends.jax import (  # noqa: E402  (each module registers its lowerings on import)
    lowering_control_flow,  # noqa: F401  (registers if_ / while_ / scan)
    lowering_custom,  # noqa: F401  (registers custom_fn and rlx.custom_op(jax=...) lowerings)
    lowering_index,  # noqa: F401  (registers advanced_index / advanced_index_put)
    lowering_linalg,  # noqa: F401  (registers the factorizations / solvers and the complex parts)
    lowering_moe,  # noqa: F401  (registers grouped_matmul / dequant_grouped_matmul / dequant_moe_weights)
    lowering_sequence,  # noqa: F401  (registers selective_scan / gated_delta_net / axial_rope2d)
    lowering_special,  # noqa: F401  (registers the special-function lowering)
    lowering_splat,  # noqa: F401  (registers gaussian_splat_render and its derivatives)
)
from rlx.backends.jax.lowering_ext import HOST  # noqa: E402  (registers the quant / numerics lowerings)
