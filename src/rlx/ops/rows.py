"""Rows for non-elementwise ops, written once against an array namespace (the elementwise kinds
live in :mod:`rlx.ops.kinds`).

A row is the one formula of an op (or of one stage of a composite op: softmax, the norms, the
attention core); the NumPy kernel, the jax and torch lowerings and the NumPy backward kernels
bind it to their namespace. A backend's library call (``torch.softmax``, ``torch.layer_norm``,
``F.scaled_dot_product_attention``, a NumPy in-place arena kernel) is an *override* of a row,
and ``tests/ops/test_rows.py`` proves every override equal to the row on the registry's cases.

``xp`` is an :class:`rlx.ops.kinds.ArrayNamespace` (numpy, torch or jax.numpy, NumPy spellings:
``reshape``, ``broadcast_to``, ``mean(x, axis=, keepdims=)``, ``amax``, ``sqrt``, ``exp``,
``where``, ``isfinite``, ``matmul``, ``swapaxes``) with extras each namespace names:
``permute(x, perm)``, ``slice_axis(x, axis, start, length)``, ``concat(parts, axis)``,
``cast_all(args, out)`` (operands cast to the result's compute dtype), ``prod(x, axis=,
keepdims=, dtype=)`` over a tuple of axes, ``full_like_shape(shape, value, like)`` (a filled
array of ``like``'s dtype and device), ``rlx_dtype(x)`` (the tensor's rlx element type),
``astype(x, to)`` / ``bitcast(x, to)`` (convert / reinterpret as the rlx type ``to``),
``arange_like(n, like)`` (0..n-1 on ``like``'s device), ``trunc_div(a, b)`` (integer division toward zero,
never by 0 or -1), ``int_power(a, e)`` (integer power, e >= 0) and optionally ``stop_gradient``.
A lowering-table row is ``row(xp, args, attrs, out)``; :func:`bind` gives the ``(args, attrs,
out)`` form the tables hold. The semantics are the ops' own (registry docstrings).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.shape import TensorType, normalize_axis
from rlx.ops.kinds import ACTIVATION_KINDS, UNARY_MATH_KINDS, GraphNamespace

#: masked attention scores are replaced by this (finite: a fully masked row averages v instead of NaN)
MASK_FILL = -1e9
#: a 'custom' attention mask keeps key j where mask[..., j] >= KEEP_AT
KEEP_AT = 0.5


# ------------------------------------------------------------------------------ helpers
def reduce_axes(axes: Any, rank: int) -> tuple[int, ...]:
    """Sorted non-negative axes; None means every axis. Duplicates / out-of-range are ShapeErrors."""
    if axes is None:
        return tuple(range(rank))
    norm = [normalize_axis(a, rank, "reduce axis") for a in axes]
    if len(set(norm)) != len(norm):
        raise ShapeError(f"axes {list(axes)} name the same axis twice")
    return tuple(sorted(norm))


def reduce_identity(op: str, dtype: np.dtype) -> Any:
    """Start value of max / min (fmax / fmin), so that empty reductions give -inf / +inf (or the int limits)."""
    low = op in ("max", "fmax")
    if dtype.kind == "b":
        return not low
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if low else info.max
    return -np.inf if low else np.inf


def bind(row: Callable[..., Any], xp: Any) -> Callable[[list[Any], Mapping[str, Any], Any], Any]:
    """``row`` with its namespace bound: the ``fn(args, attrs, out)`` form of a lowering table."""
    def lowered(args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
        return row(xp, args, attrs, out)

    lowered.__name__ = lowered.__qualname__ = row.__name__
    # the table and the row tests read the row back
    lowered.row = row  # type: ignore[attr-defined]
    return lowered


def decomposition(row: Callable[..., Any]) -> Callable[[Any, list[Any], Mapping[str, Any]], Any]:
    """``row`` as an :class:`~rlx.ir.opdef.OpDef` ``decompose`` hook: run on the graph namespace, it emits the
    op's primitive form (what autodiff, the ONNX exporter and a backend without the row use)."""
    def decompose(g: Any, operands: list[Any], attrs: Mapping[str, Any]) -> Any:
        return row(GraphNamespace(g), [g.value(o) for o in operands], attrs, None)

    decompose.__name__ = decompose.__qualname__ = f"{row.__name__}_decomposition"
    return decompose


def along(xp: Any, v: Any, axis: int, rank: int) -> Any:
    """A per-channel vector shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    return xp.reshape(v, tuple(-1 if i == axis else 1 for i in range(rank)))


def as_dtype_of(xp: Any, a: Any, like: Any) -> Any:
    """``a`` in ``like``'s element type (a no-op when they agree)."""
    return a if a.dtype == like.dtype else xp.astype(a, xp.rlx_dtype(like))


def _detached(xp: Any, m: Any) -> Any:
    """A shift that carries no gradient (jax traces through the rows; the others ignore this)."""
    stop = getattr(xp, "stop_gradient", None)
    return m if stop is None else stop(m)


# ------------------------------------------------------------------------ shape / reduce
def reshape(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    return xp.reshape(args[0], tuple(out.shape))


def transpose(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    perm = attrs["perm"] if attrs["perm"] is not None else tuple(range(args[0].ndim - 1, -1, -1))
    return xp.permute(args[0], tuple(perm))


def narrow(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """An out-of-bounds slice raises as the reference does (checked before the library call)."""
    x = args[0]
    axis, start, length = attrs["axis"] % x.ndim, attrs["start"], attrs["length"]
    if start + length > x.shape[axis]:
        raise RlxError(f"narrow: slice [{start}, {start + length}) is out of bounds for axis {axis} of size {x.shape[axis]}")
    return xp.slice_axis(x, axis, start, length)


def expand(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    return xp.broadcast_to(args[0], tuple(out.shape))


def concat(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    parts = xp.cast_all(args, out)
    return xp.concat(parts, attrs["axis"] % parts[0].ndim)


def minmax_reduce(xp: Any, x: Any, axes: tuple[int, ...], keep: bool, op: str) -> Any:
    """max / min (NaN-propagating, np.max) or fmax / fmin (NaN-ignoring, np.fmax.reduce) over ``axes``;
    an empty reduction gives the identity, as the ``reduce`` op documents."""
    dtype = xp.rlx_dtype(x)
    identity = reduce_identity(op, dtype.numpy)
    if any(x.shape[a] == 0 for a in axes):
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else [d for i, d in enumerate(x.shape) if i not in axes]
        return xp.full_like_shape(shape, identity, x)
    high = op in ("max", "fmax")
    if dtype.is_bool:
        return (xp.any if high else xp.all)(x, axis=axes, keepdims=keep)
    extreme = xp.amax if high else xp.amin
    if not dtype.is_float or op in ("max", "min"):
        return extreme(x, axis=axes, keepdims=keep)
    nan = xp.isnan(x)
    r = extreme(xp.where(nan, xp.full_like_shape((), identity, x), x), axis=axes, keepdims=keep)
    return xp.where(xp.all(nan, axis=axes, keepdims=keep), xp.full_like_shape((), float("nan"), x), r)


def bitcast(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``bitcast`` op: bool travels as u8, and any nonzero byte reads back as True."""
    x, to = args[0], attrs["to"]
    if xp.rlx_dtype(x).is_bool:
        x = xp.astype(x, DType.U8)
    if to.is_bool:
        return xp.bitcast(x, DType.U8) != 0
    return xp.bitcast(x, to)


def reduce(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``reduce`` op: the dtype is kept (integer sum / prod wrap in the input type)."""
    x, op, keep = args[0], attrs["op"], attrs["keep_dim"]
    axes = tuple(reduce_axes(attrs["axes"], x.ndim))
    if not axes:
        return x
    if op == "sum":
        return xp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    if op == "prod":
        return xp.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)
    if op == "mean":
        return xp.mean(x, axis=axes, keepdims=keep)
    return minmax_reduce(xp, x, axes, keep, op)


SHAPE_ROWS: dict[str, Callable[..., Any]] = {"reshape": reshape, "transpose": transpose, "narrow": narrow, "expand": expand,
                                             "concat": concat}


# ------------------------------------------------------------------------------ softmax
def softmax_of(xp: Any, x: Any, axis: int) -> Any:
    """exp(x - m) / sum(exp(x - m)) along ``axis``, m the row max: a row holding NaN or +inf, or only -inf,
    is all NaN, as torch, JAX and ONNX's ``Softmax`` (onnxruntime) compute it."""
    if len(x.shape) == 0:
        return xp.ones_like(x)
    if x.shape[axis] == 0:
        return x
    m = _detached(xp, xp.amax(x, axis=axis, keepdims=True))
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=axis, keepdims=True)


def log_sum_exp(xp: Any, x: Any, axis: int, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) along ``axis``, max-shifted (m + log(sum(exp(x - m))))."""
    m = _detached(xp, xp.amax(x, axis=axis, keepdims=True))
    r = m + xp.log(xp.sum(xp.exp(x - m), axis=axis, keepdims=True))
    return r if keepdims else xp.squeeze(r, axis)


def log_softmax_of(xp: Any, x: Any, axis: int) -> Any:
    """x - log_sum_exp(x) along ``axis``."""
    return x - log_sum_exp(xp, x, axis, keepdims=True)


def softmax(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``softmax`` op."""
    x = args[0]
    return softmax_of(xp, x, int(attrs["axis"]) % max(x.ndim, 1))


# ---------------------------------------------------------------------------- normalisations
def norm_stats(xp: Any, x: Any, axes: Any, eps: float, center: bool = True) -> tuple[Any, Any]:
    """(x̂, r): r = 1/sqrt(var + eps) over ``axes`` (keepdims), x̂ = (x - mean)·r; the variance is the
    two-pass population one. ``center=False``: the RMS statistics (x̂ = x·r, r = 1/sqrt(mean(x²) + eps))."""
    d = x - xp.mean(x, axis=axes, keepdims=True) if center else x
    r = 1.0 / xp.sqrt(xp.mean(d * d, axis=axes, keepdims=True) + eps)
    return d * r, r


def standardize(xp: Any, x: Any, axes: Any, eps: float) -> Any:
    """(x - mean) / sqrt(var + eps) over ``axes``, the two-pass variance of the reference kernels."""
    mu = xp.mean(x, axis=axes, keepdims=True)
    d = x - mu
    var = xp.mean(d * d, axis=axes, keepdims=True)
    return d / xp.sqrt(var + eps)


def _affine(xp: Any, y: Any, gamma: Any, beta: Any, axis: int) -> Any:
    return y * along(xp, gamma, axis, y.ndim) + along(xp, beta, axis, y.ndim)


def layer_norm_of(xp: Any, x: Any, gamma: Any, beta: Any, axis: int, eps: float) -> Any:
    axis %= x.ndim
    return _affine(xp, standardize(xp, x, axis, eps), gamma, beta, axis)


def rms_norm_of(xp: Any, x: Any, gamma: Any, beta: Any, axis: int, eps: float) -> Any:
    axis %= x.ndim
    y = x / xp.sqrt(xp.mean(x * x, axis=axis, keepdims=True) + eps)
    return _affine(xp, y, gamma, beta, axis)


def group_rows(xp: Any, x: Any, groups: int) -> Any:
    """[N, C, *spatial] -> [N, G, C/G·spatial]: each group's contiguous channels with their spatial extent."""
    if x.shape[1] % groups:
        raise ShapeError(f"group_norm: channels C={x.shape[1]} are not divisible by num_groups={groups}")
    return xp.reshape(x, (x.shape[0], groups, -1))


def group_norm_of(xp: Any, x: Any, gamma: Any, beta: Any, groups: int, eps: float) -> Any:
    y = xp.reshape(standardize(xp, group_rows(xp, x, groups), 2, eps), tuple(x.shape))
    return _affine(xp, y, gamma, beta, 1)


def layer_norm(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    x, gamma, beta = xp.cast_all(args, out)
    return layer_norm_of(xp, x, gamma, beta, attrs["axis"], attrs["eps"])


def layer_norm2d(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    x, gamma, beta = xp.cast_all(args, out)
    return layer_norm_of(xp, x, gamma, beta, 1, attrs["eps"])


def rms_norm(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    x, gamma, beta = xp.cast_all(args, out)
    return rms_norm_of(xp, x, gamma, beta, attrs["axis"], attrs["eps"])


def group_norm(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    x, gamma, beta = xp.cast_all(args, out)
    return group_norm_of(xp, x, gamma, beta, attrs["num_groups"], attrs["eps"])


def norm_input_grad(xp: Any, xhat: Any, r: Any, gy: Any, axes: Any, center: bool = True) -> Any:
    """d/dx of a norm with statistics ``(xhat, r)`` over ``axes``, gy = dy·gamma:
    r·(gy − mean(gy) − x̂·mean(gy·x̂)); RMS (``center=False``) drops the mean(gy) term."""
    inner = gy - xp.mean(gy, axis=axes, keepdims=True) if center else gy
    return r * (inner - xhat * xp.mean(gy * xhat, axis=axes, keepdims=True))


def sum_except(xp: Any, v: Any, axis: int) -> Any:
    """Sum over every axis but ``axis`` (a gamma / beta gradient)."""
    others = tuple(i for i in range(v.ndim) if i != axis)
    return xp.sum(v, axis=others) if others else v


# ------------------------------------------------------------------------------ attention
def attention_scale(attrs: Mapping[str, Any]) -> float:
    """The score multiplier: ``score_scale``, else head_dim**-0.5 (backward scales dS by it too)."""
    return attrs["score_scale"] if attrs["score_scale"] is not None else attrs["head_dim"] ** -0.5


def positions_from_end(xp: Any, n: Any, like: Any, axis: int) -> Any:
    """n-1, ..., 0: positions along ``axis`` of ``like`` (length ``n`` there) counted from the end. A
    namespace may name ``positions_from_end(n, like, axis)`` returning graph values, compared through
    its ``greater_equal`` / ``logical_and`` (the autodiff mask namespace, for symbolic lengths); the
    others count ``arange_like`` down and compare arrays with operators (a static mask stays a host
    constant on the graph namespace)."""
    own = getattr(xp, "positions_from_end", None)
    return own(n, like, axis) if own is not None else (n - 1) - xp.arange_like(n, like)


def position_keep(xp: Any, kind: str, sq: Any, sk: Any, window: int | None, like: Any = None) -> Any:
    """The [Sq, Sk] bool keep mask of a positional mask kind (causal, sliding_window), None for the
    others: query row i is aligned with key i + (Sk - Sq) (bottom-right), keeps keys j <= that one and,
    for a sliding window w, j >= that one - w. Written with positions counted from the end (query
    Sq-1-i keeps key Sk-1-j >= it), so no Sk - Sq is needed and symbolic lengths build the same graph;
    ``like`` holds Sq on axis -2 and Sk on axis -1 (the scores)."""
    if kind not in ("causal", "sliding_window"):
        return None
    ri = xp.reshape(positions_from_end(xp, sq, like, -2), (sq, 1))
    rj = xp.reshape(positions_from_end(xp, sk, like, -1), (1, sk))
    if not hasattr(xp, "positions_from_end"):  # arrays
        keep = rj >= ri
        return keep & (ri + window >= rj) if kind == "sliding_window" else keep
    keep = xp.greater_equal(rj, ri)
    return xp.logical_and(keep, xp.greater_equal(ri + window, rj)) if kind == "sliding_window" else keep


def keep_mask(xp: Any, attrs: Mapping[str, Any], sq: int, sk: int, mask: Any, like: Any) -> Any:
    """The one attention mask builder: a bool keep mask broadcasting against the scores [*batch, H, Sq, Sk]
    for the replacing kinds (causal, sliding_window: [Sq, Sk]; custom key padding: [*batch, 1, 1, Sk],
    kept where mask >= KEEP_AT), None for 'none' and 'bias'."""
    kind = attrs["mask_kind"]
    if kind == "custom":
        keep = mask if xp.rlx_dtype(mask).is_bool else xp.greater_equal(mask, KEEP_AT)
        return xp.reshape(keep, (*keep.shape[:-1], 1, 1, keep.shape[-1]))
    return position_keep(xp, kind, sq, sk, attrs["window"], like)


def softcap(xp: Any, s: Any, cap: float) -> tuple[Any, Any]:
    """(c·tanh(s/c), tanh(s/c)): the logit soft-cap and the tanh its derivative needs."""
    t = xp.tanh(s / cap)
    return cap * t, t


def attention_scores(xp: Any, q: Any, k: Any, attrs: Mapping[str, Any], mask: Any = None,
                     matmul: Callable[[Any, Any], Any] | None = None) -> tuple[Any, Any, Any]:
    """Scores of q, k ([*batch, H, S, D]) -> (s, keep, t): s = mask(cap(q kᵀ · scale)). ``keep`` marks
    scores a replacing mask left alone (None if none replaces) and ``t`` = tanh(raw/c) under a soft-cap c
    (else None): a backward zeroes replaced scores' gradient and needs t for the cap's derivative.
    The cap comes before the mask, so masked scores stay MASK_FILL."""
    mm = matmul or xp.matmul
    s = mm(q, xp.swapaxes(k, -1, -2))
    s = s * attention_scale(attrs)
    t = None
    if attrs["attn_logit_softcap"] is not None:
        s, t = softcap(xp, s, attrs["attn_logit_softcap"])
    if attrs["mask_kind"] == "bias":
        s = s + as_dtype_of(xp, mask, s)
    keep = keep_mask(xp, attrs, s.shape[-2], s.shape[-1], mask, s)
    if keep is not None:
        s = xp.where(keep, s, MASK_FILL)
    return s, keep, t


def attention_core(xp: Any, q: Any, k: Any, v: Any, attrs: Mapping[str, Any], mask: Any = None,
                   matmul: Callable[[Any, Any], Any] | None = None) -> Any:
    """softmax(scores) @ v on [*batch, H, S, D] operands (the probabilities in v's dtype)."""
    s, _, _ = attention_scores(xp, q, k, attrs, mask, matmul)
    p = softmax_of(xp, s, len(s.shape) - 1)
    return (matmul or xp.matmul)(as_dtype_of(xp, p, v), v)


class Layout:
    """How an attention operand of some rank holds (batch, heads, seq, head_dim); rows work in [*batch, H, S, D]."""

    def __init__(self, rank: int, layout: str):
        self.rank, self.layout = rank, layout

    def to_bhsd(self, xp: Any, a: Any, heads: int, head_dim: int) -> Any:
        if self.rank in (2, 3):
            return xp.swapaxes(xp.reshape(a, (*a.shape[:-1], heads, head_dim)), -3, -2)
        return a if self.layout == "bhsd" else xp.swapaxes(a, 1, 2)

    def from_bhsd(self, xp: Any, a: Any) -> Any:
        if self.rank in (2, 3):
            a = xp.swapaxes(a, -3, -2)
            return xp.reshape(a, (*a.shape[:-2], -1))
        return a if self.layout == "bhsd" else xp.swapaxes(a, 1, 2)


def attention(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``attention`` op: operands in the compute dtype, viewed [*batch, H, S, D], the core, back."""
    lay = Layout(args[0].ndim, attrs["layout"])
    q, k, v = (lay.to_bhsd(xp, a, attrs["num_heads"], attrs["head_dim"]) for a in xp.cast_all(list(args[:3]), out))
    return lay.from_bhsd(xp, attention_core(xp, q, k, v, attrs, args[3] if len(args) > 3 else None))


# ------------------------------------------------------------------------------ cached attention
def rotate_pairs(xp: Any, x: Any, c: Any, s: Any, interleaved: bool) -> Any:
    """Rotary rotation of ``x`` [..., D] by angles (c, s) [..., D/2]: pairs (2j, 2j+1) when ``interleaved``,
    else (j, j + D/2); a' = a·c - b·s, b' = b·c + a·s."""
    d = x.shape[-1]
    if interleaved:
        pairs = xp.reshape(x, (*x.shape[:-1], d // 2, 2))
        a, b, c, s = pairs[..., 0:1], pairs[..., 1:2], c[..., None], s[..., None]
        return xp.reshape(xp.concat([a * c - b * s, b * c + a * s], -1), tuple(x.shape))
    a, b = x[..., : d // 2], x[..., d // 2:]
    return xp.concat([a * c - b * s, b * c + a * s], -1)


def one_hot(xp: Any, idx: Any, n: int, like: Any) -> Any:
    """[..., n] rows of ``like``'s dtype, 1 where the column equals ``idx`` (gathers and scatters as matmuls)."""
    return xp.astype(idx[..., None] == xp.arange_like(n, idx), xp.rlx_dtype(like))


def cached_attention(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``cached_attention`` op on operands with any leading axes ``L`` (``batch_dims``) before B: rope q and k
    at positions pos + i, write k and v into the caches' slots pos + i, causal grouped-query attention over the
    new caches. Rows are gathered and slots written through one-hot matmuls (exact: one nonzero term)."""
    qkv, kc, vc, pos, cos, sin = args
    heads, kv, hd = attrs["num_heads"], attrs["kv_heads"], attrs["head_dim"]
    group, lead, s, c = heads // kv, tuple(qkv.shape[:-2]), qkv.shape[-2], kc.shape[-2]
    n = len(lead)
    t = pos[..., None] + xp.arange_like(s, pos)  # [*L, B, S] absolute positions
    cos, sin = (as_dtype_of(xp, xp.reshape(a, (*a.shape[:-2], 1, *a.shape[-2:])), qkv) for a in (cos, sin))
    at = one_hot(xp, t, cos.shape[-2], qkv)  # [*L, B, S, P]
    ct, st = xp.matmul(at, cos)[..., None, :], xp.matmul(at, sin)[..., None, :]  # [*L, B, S, 1, D/2]
    x = xp.reshape(qkv, (*lead, s, heads + 2 * kv, hd))
    q = rotate_pairs(xp, x[..., :heads, :], ct, st, attrs["rope"] == "interleaved")
    k = rotate_pairs(xp, x[..., heads:heads + kv, :], ct, st, attrs["rope"] == "interleaved")
    to_heads = (*range(n), n + 1, n, n + 2)  # [*L, B, S, KV, D] -> [*L, B, KV, S, D]
    slot = xp.swapaxes(one_hot(xp, t, c, kc), -1, -2)[..., None, :, :]  # [*L, B, 1, C, S]
    written = xp.sum(slot, axis=-1, keepdims=True) > 0
    k_new, v_new = (xp.where(written, xp.matmul(slot, xp.permute(a, to_heads)), cache)
                    for a, cache in ((k, kc), (x[..., heads + kv:, :], vc)))
    qg = xp.permute(xp.reshape(q, (*lead, s, kv, group, hd)), (*range(n), n + 1, n + 2, n, n + 3))  # [*L,B,KV,G,S,D]
    scores = xp.matmul(qg, xp.swapaxes(k_new, -1, -2)[..., None, :, :]) * cached_attention_scale(attrs)
    keep = xp.reshape(xp.arange_like(c, pos) <= t[..., None], (*lead, 1, 1, s, c))
    p = softmax_of(xp, xp.where(keep, scores, MASK_FILL), n + 3)
    o = xp.matmul(p, v_new[..., None, :, :])  # [*L, B, KV, G, S, D]
    return xp.reshape(xp.permute(o, (*range(n), n + 2, n, n + 1, n + 3)), (*lead, s, heads * hd)), k_new, v_new


def cached_attention_scale(attrs: Mapping[str, Any]) -> float:
    """The score multiplier of ``cached_attention``: ``scale``, else head_dim**-0.5."""
    return attrs["scale"] if attrs["scale"] is not None else attrs["head_dim"] ** -0.5


# ------------------------------------------------------------------------------ elementwise
#: the int types whose float conversion out of range is defined (float_to_int); the sub-byte ones give 0
WIDE_INTS = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64})


def float_to_int(xp: Any, x: Any, to: DType, astype: Callable[[Any, DType], Any]) -> Any:
    """``cast`` of floats to the int type ``to`` in array namespace ``xp`` (``astype(a, dtype)`` converts),
    defined for every input: truncate toward zero; a value the type holds is exact. Otherwise, for u32 /
    u64, a value >= 0 (too large, +inf) gives 0; for the other types, and for u32 / u64 below 0 or NaN,
    the value goes through i32 (i64 for the 64-bit types): one that fits keeps its low bits (two's
    complement wrap: -1.0 -> u8 255, 300.0 -> i8 44), NaN, +-inf and anything beyond give that
    type's minimum, then its low bits (NaN -> i32 INT_MIN, -> u8 0). That is what NumPy, torch and
    onnxruntime do on x86-64; written out here so every backend and platform gives it."""
    t = xp.trunc(x)
    bits = to.bits
    via = DType.I64 if bits == 64 else DType.I32
    low, high = -(2.0 ** (via.bits - 1)), 2.0 ** (via.bits - 1)
    if to in (DType.U32, DType.U64):  # [2**(bits-1), 2**bits) as its negative twin (exact: Sterbenz); larger: 0
        big = t >= 2.0 ** bits
        t = xp.where(big, 0.0, xp.where(t >= high, t - 2.0 ** bits, t))
    fits = (t >= low) & (t < high)  # False for NaN
    return astype(xp.where(fits, astype(xp.where(fits, t, 0.0), via), int(low)), to)


def activate(xp: Any, kind: str | None, x: Any) -> Any:
    """The activation kind's formula (rlx.ops.kinds.ACTIVATION_KINDS) on ``x``; None is the identity."""
    if kind is None:
        return x
    dtype = xp.rlx_dtype(x)
    return ACTIVATION_KINDS[kind].forward(xp, x, is_int=not (dtype.is_float or dtype.is_complex))


def activation(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``activation`` op in the result's compute dtype (abs keeps its operand: |c64| is real)."""
    kind = attrs["kind"]
    (x,) = (args[0],) if kind == "abs" else xp.cast_all(args[:1], out)
    return activate(xp, kind, x)


def cast(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``cast`` op: to bool is ``x != 0``; complex to real keeps the real part; float to int truncates
    (:func:`float_to_int` for the wide ints); the narrow floats round through f32 (no double-rounding drift)."""
    x, to = args[0], attrs["to"]
    src = xp.rlx_dtype(x)
    if to.is_bool:
        return x != 0
    if src.is_complex and not to.is_complex:
        x = xp.real(x)
        src = xp.rlx_dtype(x)
    if to in WIDE_INTS and src.is_float:
        return float_to_int(xp, x, to, xp.astype)
    if to.is_int and src.is_float:
        x = xp.trunc(x)
    if to.is_low_precision_float and src.is_float and src is not DType.F32:
        x = xp.astype(x, DType.F32)
    return xp.astype(x, to)


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def compare(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``compare`` op: both operands in their promoted type, then the comparison (bool)."""
    common = DType.promote(xp.rlx_dtype(args[0]), xp.rlx_dtype(args[1]))
    a, b = xp.cast_all(args, TensorType(out.shape, common))
    return _COMPARE[attrs["op"]](a, b)


def where(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``where`` op: a non-bool condition counts as true where != 0; the branches in the result's dtype."""
    c = args[0] if xp.rlx_dtype(args[0]).is_bool else args[0] != 0
    a, b = xp.cast_all(args[1:], out)
    return xp.where(c, a, b)


def unary_math(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``unary_math`` op: its kind's formula (rlx.ops.kinds.UNARY_MATH_KINDS)."""
    x = args[0]
    return UNARY_MATH_KINDS[attrs["kind"]].forward(xp, x, is_int=not xp.rlx_dtype(x).is_float)


# ------------------------------------------------------------------------------ binary
def int_div(xp: Any, a: Any, b: Any) -> Any:
    """Integer division truncating toward zero; x / 0 gives 0 and MIN / -1 gives MIN (the negation wraps).
    No divisor 0 or -1 reaches ``xp.trunc_div`` (torch's kernel raises SIGFPE on both)."""
    zero = b == 0
    if xp.rlx_dtype(a).numpy.kind != "i":
        q = xp.trunc_div(a, xp.where(zero, xp.ones_like(b), b))
        return xp.where(zero, xp.zeros_like(q), q)
    minus1 = b == -1
    q = xp.trunc_div(a, xp.where(zero | minus1, xp.ones_like(b), b))
    return xp.where(zero, xp.zeros_like(q), xp.where(minus1, xp.negative(q), q))


def int_pow(xp: Any, a: Any, b: Any) -> Any:
    """Integer power; a negative exponent gives the truncated reciprocal (0 unless |a| == 1).
    ``xp.int_power(a, e)`` raises to exponents >= 0 (wrapping)."""
    a, b = xp.broadcast_arrays(a, b)
    neg = b < 0
    pos = xp.int_power(a, xp.where(neg, xp.zeros_like(b), b))
    recip = xp.where(xp.abs(a) == 1, xp.int_power(a, xp.abs(b) % 2), xp.zeros_like(a))
    return xp.where(neg, recip, pos)


def nan_ignoring(xp: Any, pick: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """np.fmax / np.fmin from the NaN-propagating ``pick`` (maximum / minimum): NaN only where both are."""
    return xp.where(xp.isnan(a), b, xp.where(xp.isnan(b), a, pick(a, b)))


_BOOL_BINARY = {"add": "logical_or", "max": "logical_or", "fmax": "logical_or",
                "mul": "logical_and", "min": "logical_and", "fmin": "logical_and"}


def binary(xp: Any, args: list[Any], attrs: Mapping[str, Any], out: Any) -> Any:
    """The ``binary`` op in the result's compute dtype: on bool add / max are ``or`` and mul / min ``and``;
    integer div and pow are :func:`int_div` / :func:`int_pow`; max / min propagate NaN, fmax / fmin ignore it."""
    a, b = xp.cast_all(args, out)
    op = attrs["op"]
    dtype = xp.rlx_dtype(a)
    if dtype.is_bool and op in _BOOL_BINARY:
        return getattr(xp, _BOOL_BINARY[op])(a, b)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return int_div(xp, a, b) if dtype.is_int else a / b
    if op in ("fmax", "fmin") and dtype.is_float:
        return xp.fmax(a, b) if op == "fmax" else xp.fmin(a, b)
    if op in ("max", "fmax"):
        return xp.maximum(a, b)
    if op in ("min", "fmin"):
        return xp.minimum(a, b)
    return int_pow(xp, a, b) if dtype.is_int else xp.power(a, b)


# --------------------------------------------------------------------------------- indices
def out_of_range(xp: Any, idx: Any, n: int, wrap: bool = True) -> Any:
    """Where ``idx`` is outside ``[0, n)`` (``wrap``: ``[-n, n)``, negative ones counting from the end)."""
    return (idx < (-n if wrap else 0)) | (idx >= n)


def index_error(op: str, value: int, axis: int | None, n: int) -> RlxError:
    """The one out-of-range message every index-reading kernel and lowering raises."""
    where = f"axis {axis} of size {n}" if axis is not None else f"an axis of size {n}"
    return RlxError(f"{op}: index {int(value)} is out of range for {where}")


def checked_index(xp: Any, idx: Any, n: int, op: str, axis: int | None = None, wrap: bool = True) -> Any:
    """``idx`` with negative entries wrapped (``wrap``), or the :func:`index_error` of its first bad entry
    (eager namespaces; jax folds the same check into its program: rlx.backends.jax.index_checks)."""
    bad = out_of_range(xp, idx, n, wrap)
    if bad.any():
        raise index_error(op, idx[bad].reshape(-1)[0], axis, n)
    return xp.where(idx < 0, idx + n, idx) if wrap else idx


#: The rows a lowering table binds by default (rlx.backends.lowering_table): op name -> row.
ROWS: dict[str, Callable[..., Any]] = {
    **SHAPE_ROWS, "reduce": reduce, "bitcast": bitcast, "binary": binary, "activation": activation, "cast": cast,
    "compare": compare, "where": where, "unary_math": unary_math, "softmax": softmax, "layer_norm": layer_norm,
    "layer_norm2d": layer_norm2d, "rms_norm": rms_norm, "group_norm": group_norm, "attention": attention,
    "cached_attention": cached_attention,
}
# new composite rows go here
