"""Attention ops: scaled dot-product ``attention`` with mask kinds, and rotary ``rope``.

Both take float operands and give the promoted dtype of their data operands (attention:
q, k, v; rope: x, cos, sin). Semantic choices against upstream are listed in each op's
docstring; the short version: masked scores are -1e9 (finite, so a fully masked row
averages v instead of giving NaN), causal / sliding-window masks are bottom-right aligned,
the logit soft-cap is applied *before* masking, and both ``score_scale`` and
``attn_logit_softcap`` are honoured (upstream's compiled CPU path ignores them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.flags import BLAS
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ops import rows
from rlx.ops.common import fresh_into, promote_args, require_dim, require_float
from rlx.ops.cost import attention_macs
from rlx.ops.facts import NOT_TPU
from rlx.ops.kinds import NUMPY, GraphNamespace
from rlx.ops.reduction import softmax
from rlx.ops.rows import KEEP_AT, MASK_FILL, attention_scale

__all__ = ["KEEP_AT", "MASK_FILL", "MASK_KINDS", "Layout", "attention_scale", "attention_scores", "attention_type",
           "position_keep", "rope_kernel", "rope_type", "softmax"]

MASK_KINDS = ("none", "causal", "sliding_window", "custom", "bias")


def position_keep(kind: str, sq: int, sk: int, window: int | None) -> np.ndarray | None:
    """The NumPy [Sq, Sk] keep mask of a positional mask kind (the row :func:`rlx.ops.rows.position_keep`):
    constants for the rules and the exporter."""
    return rows.position_keep(NUMPY, kind, sq, sk, window)


# -------------------------------------------------------------------------- attention


class Layout:
    """How an attention operand of some rank holds (batch, heads, seq, head_dim); kernels work in [*batch, H, S, D]."""

    def __init__(self, rank: int, layout: str):
        self.rank, self.layout = rank, layout

    def split(self, shape: Shape, heads: int, head_dim: int, what: str) -> tuple[tuple[Any, ...], Any]:
        """Check ``shape`` against the layout; return (batch dims, sequence length)."""
        if self.rank in (2, 3):
            require_dim(shape[-1], heads * head_dim, f"{what} last dim (num_heads*head_dim = {heads}*{head_dim})")
            return tuple(shape[:-2]), shape[-2]
        h_axis, s_axis = (1, 2) if self.layout == "bhsd" else (2, 1)
        require_dim(shape[h_axis], heads, f"{what} heads axis {h_axis} (layout {self.layout})")
        require_dim(shape[3], head_dim, f"{what} head_dim axis 3 (layout {self.layout})")
        return (shape[0],), shape[s_axis]

    def to_bhsd(self, a: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
        """View as [*batch, H, S, D]."""
        return rows.Layout(self.rank, self.layout).to_bhsd(NUMPY, a, heads, head_dim)

    def from_bhsd(self, a: np.ndarray) -> np.ndarray:
        return rows.Layout(self.rank, self.layout).from_bhsd(NUMPY, a)


def _attention_arity(attrs) -> int:
    return 4 if attrs["mask_kind"] in ("custom", "bias") else 3


def _check_attention_attrs(attrs) -> None:
    kind, window, cap = attrs["mask_kind"], attrs["window"], attrs["attn_logit_softcap"]
    if attrs["num_heads"] < 1 or attrs["head_dim"] < 1:
        raise ShapeError(f"num_heads and head_dim must be >= 1, got {attrs['num_heads']} and {attrs['head_dim']}")
    if kind == "sliding_window" and (window is None or window < 0):
        raise ShapeError(f"mask_kind='sliding_window' needs an int window >= 0, got {window!r}")
    if kind != "sliding_window" and window is not None:
        raise ShapeError(f"window is only used with mask_kind='sliding_window', not {kind!r}")
    if cap is not None and not cap > 0:
        raise ShapeError(f"attn_logit_softcap must be > 0 (None disables it), got {cap}")


def attention_type(ins: list[TensorType], attrs) -> TensorType:
    """Type rule of attention; attention_backward reuses it so both accept exactly the same operands."""
    _check_attention_attrs(attrs)
    q, k, v = ins[:3]
    heads, head_dim, kind = attrs["num_heads"], attrs["head_dim"], attrs["mask_kind"]
    for t, what in zip(ins[:3], "qkv"):
        require_float(t, what)
    if len(q.shape) not in (2, 3, 4) or not len(q.shape) == len(k.shape) == len(v.shape):
        raise ShapeError(f"q, k, v must share a rank of 2, 3 or 4, got {q.shape!r}, {k.shape!r}, {v.shape!r}")
    lay = Layout(len(q.shape), attrs["layout"])
    batch, sq = lay.split(q.shape, heads, head_dim, "q")
    kbatch, sk = lay.split(k.shape, heads, head_dim, "k")
    vbatch, sv = lay.split(v.shape, heads, head_dim, "v")
    for other, what in ((kbatch, "k"), (vbatch, "v")):
        if other:
            require_dim(other[0], batch[0], f"{what} batch dim")
    require_dim(sv, sk, "v sequence length (must equal k's)")
    if kind == "custom":
        want = Shape((*batch, sk))
        if ins[3].shape != want:
            raise ShapeError(f"custom mask must have shape {want!r} ([batch..., Sk], 1 = keep), got {ins[3].shape!r}")
    elif kind == "bias":
        require_float(ins[3], "bias mask")
        full = Shape((*batch, heads, sq, sk))
        if len(ins[3].shape) > len(full) or broadcast_shapes(ins[3].shape, full) != full:
            raise ShapeError(f"bias mask {ins[3].shape!r} does not broadcast to [batch..., H, Sq, Sk] = {full!r}")
    return TensorType(q.shape, promote_all([t.dtype for t in ins[:3]]))


def attention_scores(
    q: np.ndarray, k: np.ndarray, attrs, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The scores row (:func:`rlx.ops.rows.attention_scores`) in NumPy: (s, keep, t) for the kernels."""
    return rows.attention_scores(NUMPY, q, k, attrs, mask)


#: Scores are computed transposed ([*batch, H, Sk, Sq]) for at least this many queries and at most this many keys:
#: NumPy's reductions along a last axis pay ~0.1 us a row, which dominates short rows (at Sq = Sk = 128, 12 heads,
#: the max took 160 us, the exp 88 us); across rows they run at vector speed once a row holds 32 or more floats.
#: Measured on [1, 12, Sq, Sk] f32 (benchmarks/README.md): 0.74-0.91x the time where it applies; outside it the
#: transposed form lost up to 1.6x (few queries over many keys: decode).
TRANSPOSED_MIN_QUERIES, TRANSPOSED_MAX_KEYS = 32, 512


def _attention_into(args, attrs, out_type, out):
    """The arena's override of the row (``rlx.run`` runs it too): the scores are the one temporary, scaled, masked
    and soft-maxed in place (transposed for the shapes above), then p @ v into ``out``."""
    heads, head_dim = attrs["num_heads"], attrs["head_dim"]
    lay = Layout(args[0].ndim, attrs["layout"])
    q, k, v = (lay.to_bhsd(a, heads, head_dim) for a in promote_args(args[:3], out_type.dtype))
    mask = args[3] if len(args) > 3 else None
    transposed = q.shape[-2] >= TRANSPOSED_MIN_QUERIES and k.shape[-2] <= TRANSPOSED_MAX_KEYS
    a, b = (k, q) if transposed else (q, k)
    st = np.matmul(a, np.swapaxes(b, -1, -2))  # a fresh array, scaled and masked in place (the row's steps)
    np.multiply(st, np.asarray(attention_scale(attrs), st.dtype), out=st)
    if attrs["attn_logit_softcap"] is not None:
        st, _ = rows.softcap(NUMPY, st, attrs["attn_logit_softcap"])
    s = np.swapaxes(st, -1, -2) if transposed else st  # the scores [*batch, H, Sq, Sk]
    if attrs["mask_kind"] == "bias":
        np.add(s, mask.astype(s.dtype, copy=False), out=s)
    keep = rows.keep_mask(NUMPY, attrs, s.shape[-2], s.shape[-1], mask, s)
    if keep is not None:
        np.copyto(s, MASK_FILL, where=~keep)
    if s.shape[-1] == 0:  # no keys: the row's empty softmax, a zero product
        out[...] = 0
        return out
    softmax(st, out=st, axis=-2 if transposed else -1)
    o = lay.to_bhsd(out, heads, head_dim)
    if o.flags.c_contiguous:
        np.matmul(s, v, out=o)
        return out
    np.copyto(o, np.matmul(s, v))  # a strided view of out (bshd, ranks 2-3): the product is made contiguous, as without out
    return out


# ----------------------------------------------------------------------- autodiff helpers
# Design (contract: rlx.autodiff.rules): attention and rope derivatives are written with
# primitive ops (matmul, reduce, binary, tanh, exp, where, reshape, transpose, expand) and rope
# itself, never attention_backward / rope_backward, so derivative graphs are differentiable
# again (hvp through attention). Attention rules recompute the probabilities in a
# [*batch, H, S, D] "heads view"; score_scale and the soft-cap are honoured.


def _n_symbols(shape) -> int:
    return sum(not isinstance(d, int) for d in shape)


def _swap_last(g, v, i: int, j: int):
    """Swap axes ``i`` and ``j`` (negative) of ``v``."""
    r = len(v.shape)
    perm = list(range(r))
    perm[i], perm[j] = perm[j], perm[i]
    return g.transpose(v, perm=perm)


def _unsqueeze(ctx, v, at: int, count: int = 1):
    """Insert ``count`` unit axes before axis ``at`` (negative, counted on v); works for any
    number of symbolic dims (expand prepends, transpose moves)."""
    r = len(v.shape)
    pos = r + at + 1 if at < 0 else at
    if _n_symbols(v.shape) <= 1:
        return ctx.reshape(v, [*v.shape[:pos], *([1] * count), *v.shape[pos:]])
    e = ctx.graph.expand(v, target_shape=[1] * count + [-1] * r)
    return ctx.graph.transpose(e, perm=[*range(count, count + pos), *range(count), *range(count + pos, count + r)])


def _positions(ctx, v, axis: int, dtype, reverse: bool = False):
    """Float positions 0..n-1 (reverse: n-1..0) along ``axis`` of ``v``, as a [n] value."""
    g, n = ctx.graph, v.shape[axis]
    if isinstance(n, int):
        a = np.arange(n)[::-1] if reverse else np.arange(n)
        return g.constant(np.ascontiguousarray(a).astype(dtype.numpy), dtype=dtype)
    rank = len(v.shape)
    ones = ctx.broadcast_like(ctx.const(1.0, dtype), v)
    others = [i for i in range(rank) if i != axis % rank]
    ones = g.reduce(ones, op="max", axes=others, keep_dim=False) if others else ones
    return g.append("cumulative", [ones], {"op": "sum", "axis": 0, "exclusive": True, "reverse": reverse})


def _selection(ctx, rows_like, axis: int, n_cols, dtype):
    """E [S, T] with E[s, t] = (s == t): S = rows_like.shape[axis], T = n_cols (int)."""
    s = rows_like.shape[axis]
    if isinstance(s, int):
        return ctx.graph.constant(np.eye(s, n_cols, dtype=dtype.numpy), dtype=dtype)
    i = ctx.reshape(_positions(ctx, rows_like, axis, dtype), [s, 1])
    j = ctx.graph.constant(np.arange(n_cols).astype(dtype.numpy), dtype=dtype)
    return ctx.graph.cast(ctx.graph.eq(i, j), to=dtype)


# ----------------------------------------------------------------- attention (heads view)


def _head_matrix(heads: int, head_dim: int, dtype):
    """E [H, H*D, D]: x[..., H*D] @ E[h] = head h."""
    e = np.zeros((heads, heads * head_dim, head_dim), dtype=dtype.numpy)
    for h in range(heads):
        e[h, h * head_dim:(h + 1) * head_dim] = np.eye(head_dim)
    return e


def _to_heads(ctx, node, a):
    """An operand in the node's layout (any extra leading axes) -> [*lead, *batch, H, S, D]."""
    g, rank, attrs = ctx.graph, len(node.shape), node.attrs
    heads, hd = attrs["num_heads"], attrs["head_dim"]
    if rank == 4:
        return a if attrs["layout"] == "bhsd" else _swap_last(g, a, -3, -2)
    if _n_symbols(a.shape) <= 1:
        return _swap_last(g, ctx.reshape(a, [*a.shape[:-1], heads, hd]), -3, -2)
    r = len(a.shape)  # several symbols: no reshape; select each head with a constant matmul
    e = g.expand(a, target_shape=[heads] + [-1] * r)
    e = g.transpose(e, perm=[*range(1, r - 1), 0, r - 1, r])  # [*lead, H, S, H*D]
    return g.matmul(e, g.constant(_head_matrix(heads, hd, a.dtype), dtype=a.dtype))


def _from_heads(ctx, node, o):
    """Inverse of _to_heads."""
    g, rank, attrs = ctx.graph, len(node.shape), node.attrs
    heads, hd = attrs["num_heads"], attrs["head_dim"]
    if rank == 4:
        return o if attrs["layout"] == "bhsd" else _swap_last(g, o, -3, -2)
    if _n_symbols(o.shape) <= 1:
        t = _swap_last(g, o, -3, -2)
        return ctx.reshape(t, [*t.shape[:-2], heads * hd])
    e = np.ascontiguousarray(np.swapaxes(_head_matrix(heads, hd, o.dtype), 1, 2))
    return g.reduce(g.matmul(o, g.constant(e, dtype=o.dtype)), op="sum", axes=[len(o.shape) - 3], keep_dim=False)


class _MaskNamespace(GraphNamespace):
    """The graph namespace the mask row (:func:`rlx.ops.rows.keep_mask`) runs in for a derivative graph:
    positions along a (possibly symbolic) axis of the scores come from a cumulative sum of ones."""

    def __init__(self, ctx, dtype):
        super().__init__(ctx.graph)
        self.ctx, self.dtype = ctx, dtype

    def positions_from_end(self, n, like, axis: int):
        return _positions(self.ctx, like, axis, self.dtype, reverse=True)

    def logical_and(self, a, b):
        return self.g.mul(a, b)


def _keep_mask(ctx, node, s, mask, dtype):
    """Bool keep mask broadcasting against scores ``s`` [*lead, *batch, H, Sq, Sk], or None."""
    g, kind = ctx.graph, node.attrs["mask_kind"]
    if kind == "custom":
        keep = g.ge(ctx.cast(mask, dtype), ctx.const(KEEP_AT, dtype))  # [*lead, *batch, Sk]
        return _unsqueeze(ctx, keep, -2, 2)
    sq, sk = s.shape[-2], s.shape[-1]
    if isinstance(sq, int) and isinstance(sk, int):
        keep = position_keep(kind, sq, sk, node.attrs["window"])
        return None if keep is None else g.constant(keep)
    return rows.position_keep(_MaskNamespace(ctx, dtype), kind, sq, sk, node.attrs["window"], s)


class _Attn:
    """Forward quantities of an attention node, recomputed from primitives in the heads view."""

    def __init__(self, ctx, node, q, k, v, mask):
        g, dt, attrs = ctx.graph, node.dtype, node.attrs
        self.ctx, self.node = ctx, node
        self.scale, self.cap = attention_scale(attrs), attrs["attn_logit_softcap"]
        self.q4, self.k4, self.v4 = (_to_heads(ctx, node, ctx.cast(a, dt)) for a in (q, k, v))
        raw = g.matmul(self.q4, ctx.transpose_last2(self.k4)) * ctx.const(self.scale, dt)
        self.t = None
        s = raw
        if self.cap is not None:
            self.t = g.tanh(raw / ctx.const(self.cap, dt))
            s = self.t * ctx.const(self.cap, dt)
        if attrs["mask_kind"] == "bias":
            s = s + ctx.cast(mask, dt)
        self.keep = _keep_mask(ctx, node, s, mask, dt)
        if self.keep is not None:
            s = g.where(self.keep, s, ctx.const(MASK_FILL, dt))
        last = len(s.shape) - 1
        e = g.exp(s - g.reduce(s, op="max", axes=[last], keep_dim=True))
        self.p = e / g.reduce(e, op="sum", axes=[last], keep_dim=True)

    def softmax_t(self, dp):
        """The softmax's Jacobian (symmetric) applied to dp: p * (dp - sum(p*dp))."""
        g = self.ctx.graph
        return self.p * (dp - g.reduce(self.p * dp, op="sum", axes=[len(dp.shape) - 1], keep_dim=True))

    def raw_from_scores(self, ds):
        """Map a score cotangent / tangent through the mask replacement and the soft-cap."""
        ctx = self.ctx
        if self.keep is not None:
            ds = ctx.where_zero(self.keep, ds)
        if self.t is not None:
            ds = ds * (ctx.const(1.0, ds.dtype) - self.t * self.t)
        return ds


def _attention_vjp(ctx, node, ct):
    """dv = pᵀ·do; ds = softmax'(do·vᵀ); dbias = unbroadcast(ds); dq = ds'·k·scale, dk = ds'ᵀ·q·scale
    (ds' = ds through the mask and cap). A float custom mask gets zeros (a threshold: zero a.e.)."""
    g, dt = ctx.graph, node.dtype
    ops = ctx.operands(node)
    mask = ops[3] if len(ops) > 3 else None
    a = _Attn(ctx, node, *ops[:3], mask)
    do4 = _to_heads(ctx, node, ctx.cast(ct, dt))
    grads: list = [None] * len(ops)
    if node.attrs["mask_kind"] == "custom" and ctx.wants(node, 3):
        grads[3] = ctx.zeros_like(mask)  # a 0/1 threshold: zero almost everywhere (explicit, so grad wrt it works)
    if ctx.wants(node, 2):
        grads[2] = ctx.unbroadcast(_from_heads(ctx, node, g.matmul(ctx.transpose_last2(a.p), do4)), ops[2])
    want_bias = node.attrs["mask_kind"] == "bias" and ctx.wants(node, 3)
    if ctx.wants(node, 0) or ctx.wants(node, 1) or want_bias:
        ds = a.softmax_t(g.matmul(do4, ctx.transpose_last2(a.v4)))
        if want_bias:
            grads[3] = ctx.unbroadcast(ds, mask)
        draw = a.raw_from_scores(ds) * ctx.const(a.scale, dt)
        if ctx.wants(node, 0):
            grads[0] = ctx.unbroadcast(_from_heads(ctx, node, g.matmul(draw, a.k4)), ops[0])
        if ctx.wants(node, 1):
            grads[1] = ctx.unbroadcast(_from_heads(ctx, node, g.matmul(ctx.transpose_last2(draw), a.q4)), ops[1])
    return grads


def _attention_jvp(ctx, node, tangents):
    g, dt = ctx.graph, node.dtype
    ops = ctx.operands(node)
    mask = ops[3] if len(ops) > 3 else None
    tq, tk, tv = tangents[:3]
    tm = tangents[3] if len(tangents) > 3 and node.attrs["mask_kind"] == "bias" else None
    a = _Attn(ctx, node, *ops[:3], mask)
    ts = None
    if tq is not None:
        ts = g.matmul(_to_heads(ctx, node, ctx.cast(tq, dt)), ctx.transpose_last2(a.k4))
    if tk is not None:
        part = g.matmul(a.q4, ctx.transpose_last2(_to_heads(ctx, node, ctx.cast(tk, dt))))
        ts = part if ts is None else ts + part
    if ts is not None:
        ts = a.raw_from_scores(ts * ctx.const(a.scale, dt))
    if tm is not None:
        ts = ctx.cast(tm, dt) if ts is None else ts + ctx.cast(tm, dt)
    out = None
    if ts is not None:
        out = g.matmul(a.softmax_t(ts), a.v4)
    if tv is not None:
        part = g.matmul(a.p, _to_heads(ctx, node, ctx.cast(tv, dt)))
        out = part if out is None else out + part
    return None if out is None else _from_heads(ctx, node, out)


def _merge_lead(ctx, v):
    """[B, b, *rest] -> [B*b, *rest] (static B, b)."""
    return ctx.reshape(v, [v.shape[0] * v.shape[1], *v.shape[2:]])


def _attention_batch(ctx, node, operands, batched):
    """Per-example rank 2: the op's own rank-3 form. Static shapes: merge the vmap axis into the
    batch axis (reshape). Otherwise (symbolic batch): recompute with primitives in the heads
    view, which take any leading axes."""
    g, rank, kind = ctx.graph, len(node.shape), node.attrs["mask_kind"]
    bsize = ctx.batch_size
    qkv = [v if b else ctx.materialize(v) for v, b in zip(operands[:3], batched[:3])]
    mask = operands[3] if len(operands) > 3 else None
    mb = len(operands) > 3 and batched[3]
    per_batch = list(node.shape[:-2]) if rank < 4 else [node.shape[0]]
    if rank == 2:
        ins = list(qkv)
        if kind == "custom":
            ins.append(mask if mb else ctx.materialize(mask))
        elif kind == "bias":
            ins.append(ctx.align(mask, 3) if mb else mask)
        return g.append("attention", ins, dict(node.attrs))
    shapes = [v.shape for v in qkv] + ([mask.shape] if mask is not None else [])
    if isinstance(bsize, int) and all(_n_symbols(s) == 0 for s in shapes):
        ins = [_merge_lead(ctx, v) for v in qkv]
        if kind == "custom":
            ins.append(_merge_lead(ctx, mask if mb else ctx.materialize(mask)))
        elif kind == "bias":
            full = len(per_batch) + 3
            if not mb and len(mask.shape) <= 3:
                ins.append(mask)
            else:
                m = ctx.align(mask if mb else ctx.materialize(mask), full)
                m = g.expand(m, target_shape=[bsize, *per_batch, -1, -1, -1])
                ins.append(_merge_lead(ctx, m))
        out = g.append("attention", ins, dict(node.attrs))
        return ctx.reshape(out, [bsize, *node.shape])
    if kind == "bias" and mb:
        mask = ctx.align(mask, len(per_batch) + 3)
    a = _Attn(ctx, node, *operands[:3], mask)
    out = _from_heads(ctx, node, g.matmul(a.p, a.v4))
    return out if len(out.shape) > rank else ctx.materialize(out)


defop(
    name="attention", macs=attention_macs, family="attention", arity=_attention_arity, operands=("q", "k", "v", "mask"), flags={BLAS},
    native_on=NOT_TPU,
    attrs={
        "num_heads": AttrSpec("int", doc="H; k and v have as many heads as q (no GQA)"),
        "head_dim": AttrSpec("int", doc="D"),
        "mask_kind": AttrSpec("str", default="none", choices=MASK_KINDS),
        "window": AttrSpec("int", default=None, doc="sliding_window only: keys i-window .. i are kept"),
        "score_scale": AttrSpec("float", default=None, doc="score multiplier; None = head_dim**-0.5"),
        "attn_logit_softcap": AttrSpec("float", default=None, doc="c > 0: scores become c*tanh(s/c); None = off"),
        "layout": AttrSpec("str", default="bhsd", choices=("bhsd", "bshd"), doc="rank-4 operand layout"),
    },
    infer=attention_type, kernel=fresh_into(_attention_into), kernel_into=_attention_into,
    vjp=_attention_vjp, jvp=_attention_jvp, batch=_attention_batch,
    doc="Scaled dot-product attention, per batch b and head h: s = q_h @ k_h.T * scale "
    "(scale = score_scale, default head_dim**-0.5); soft-cap s = c*tanh(s/c) if "
    "attn_logit_softcap = c; then the mask; p = softmax(s) (max-subtracted); out_h = p @ v_h. "
    "Operands q, k, v, plus a 4th `mask` iff mask_kind is 'custom' or 'bias'. "
    "Layouts (output = q's shape): rank 2 [S, H*D], rank 3 [B, S, H*D] (head h = columns "
    "h*D:(h+1)*D), rank 4 per the `layout` attribute, 'bhsd' = [B, H, S, D] (default) or "
    "'bshd' = [B, S, H, D]; `layout` is ignored at ranks 2 and 3. Upstream guesses rank-4 "
    "layouts from q.shape[1] == num_heads, which is ambiguous when S == H; rlx asks. "
    "q has Sq rows, k and v Sk rows. Mask kinds: 'none'; 'causal' keeps key j for query i "
    "iff j <= i + (Sk - Sq) (bottom-right aligned, as for KV-cache decode); "
    "'sliding_window' (attr window = w) keeps i + (Sk - Sq) - w <= j <= i + (Sk - Sq), the aligned key and w before it; 'custom' takes a "
    "mask [batch..., Sk] (1 = keep, kept where mask >= 0.5; key padding); 'bias' adds a "
    "float mask that broadcasts to [batch..., H, Sq, Sk]. Masked scores are replaced by "
    "-1e9, not -inf (upstream's choice), so a fully masked row averages v instead of giving "
    "NaN. The soft-cap is applied before masks (upstream's interpreter caps after, turning "
    "masked logits into -c; its compiled path ignores score_scale and the cap). "
    "Result dtype: promotion of q, k, v.",
)


# ------------------------------------------------------------------------------- rope


def _rope_n_rot(attrs) -> int:
    return attrs["head_dim"] if attrs["n_rot"] is None else attrs["n_rot"]


def rope_type(ins: list[TensorType], attrs) -> TensorType:
    """Type rule of rope, reused by rope_backward (same operands, same layout rules)."""
    x, cos, sin = ins
    head_dim, n_rot = attrs["head_dim"], _rope_n_rot(attrs)
    for t, what in zip(ins, ("x", "cos", "sin")):
        require_float(t, what)
    if head_dim < 2 or head_dim % 2:
        raise ShapeError(f"head_dim must be even and >= 2, got {head_dim}")
    if not 0 < n_rot <= head_dim or n_rot % 2:
        raise ShapeError(f"n_rot must be even with 0 < n_rot <= head_dim={head_dim}, got {n_rot}")
    if len(x.shape) not in (2, 3):
        raise ShapeError(f"x must be [B, S, H*head_dim] or [S, H*head_dim], got {x.shape!r}")
    last = x.shape[-1]
    if not isinstance(last, int) or last % head_dim:
        raise ShapeError(f"x last dim {last} must be a static multiple of head_dim={head_dim}")
    if cos.shape != sin.shape:
        raise ShapeError(f"cos {cos.shape!r} and sin {sin.shape!r} differ")
    if len(cos.shape) != 2:
        raise ShapeError(f"cos/sin tables must be [T, head_dim/2], got {cos.shape!r}")
    require_dim(cos.shape[1], head_dim // 2, "cos/sin table width (head_dim/2)")
    seq, rows = x.shape[-2], cos.shape[0]
    if isinstance(seq, int) and isinstance(rows, int) and rows < seq:
        raise ShapeError(f"cos/sin tables have {rows} rows, fewer than the sequence length {seq}")
    return TensorType(x.shape, promote_all([t.dtype for t in ins]))


def rope_kernel(args, attrs, out):
    """Rotate x by (cos, sin); rope_backward calls it with -sin, the inverse rotation."""
    x, cos, sin = promote_args(args, out.dtype)
    head_dim, n_rot = attrs["head_dim"], _rope_n_rot(attrs)
    seq = x.shape[-2]
    if cos.shape[0] < seq:
        raise ShapeError(f"rope: cos/sin tables have {cos.shape[0]} rows, fewer than the sequence length {seq}")
    half = n_rot // 2
    c = cos[:seq, None, :half]  # [S, 1, half], broadcast over heads
    s = sin[:seq, None, :half]
    xh = x.reshape(*x.shape[:-1], -1, head_dim)  # [..., S, H, D]
    y = xh.copy()
    y[..., :n_rot] = rows.rotate_pairs(NUMPY, xh[..., :n_rot], c, s, attrs["interleaved"])
    return y.reshape(x.shape)


# ------------------------------------------------------------------------ rope rules
# rope is linear in x for fixed tables and bilinear overall. Its transpose is the rotation by
# (cos, -sin), so dx = rope(dy, cos, -sin); table gradients are sums over batch and heads of
# dy·x (cos) and dy·rope(x, 0, 1) (sin: -dy_a·x_b, dy_b·x_a), gathered per pair by a constant
# [H*D, D/2] matrix and padded to the table's rows by a selection matmul. All differentiable.


def _rope_pairs(attrs) -> list[tuple[int, int]]:
    """(first, second) dim of each rotated pair within a head, pair i uses table column i."""
    half = _rope_n_rot(attrs) // 2
    if attrs["interleaved"]:
        return [(2 * i, 2 * i + 1) for i in range(half)]
    return [(i, half + i) for i in range(half)]


def _rope_gather_matrix(attrs, width: int, dtype) -> np.ndarray:
    """M [H*D, D/2]: M[h*D + a_i, i] = M[h*D + b_i, i] = 1 (sums a pair's two dims, all heads)."""
    hd = attrs["head_dim"]
    m = np.zeros((width, hd // 2), dtype=dtype.numpy)
    for h in range(width // hd):
        for i, (a, b) in enumerate(_rope_pairs(attrs)):
            m[h * hd + a, i] = m[h * hd + b, i] = 1.0
    return m


def _rope_table_grad(ctx, node, p, table):
    """Table gradient [T, D/2] from the elementwise products p [*batch, S, H*D]."""
    g = ctx.graph
    if len(p.shape) > 2:
        p = g.reduce(p, op="sum", axes=list(range(len(p.shape) - 2)), keep_dim=False)
    m = g.constant(_rope_gather_matrix(node.attrs, p.shape[-1], p.dtype), dtype=p.dtype)
    gt = g.matmul(p, m)  # [S, D/2]
    if gt.shape[0] != table.shape[0]:
        if not isinstance(table.shape[0], int):
            raise AutodiffError(f"rope: cannot pad a table gradient of {gt.shape!r} to the symbolic table rows {table.shape!r}")
        gt = g.matmul(ctx.transpose_last2(_selection(ctx, gt, 0, table.shape[0], p.dtype)), gt)
    return ctx.unbroadcast(gt, table)


def _ones_table(ctx, table, dtype):
    return ctx.broadcast_like(ctx.const(1.0, dtype), ctx.cast(table, dtype))


def _rope_vjp(ctx, node, ct):
    g, dt = ctx.graph, node.dtype
    x, cos, sin = ctx.operands(node)
    ct = ctx.cast(ct, dt)
    cos_d, sin_d = ctx.cast(cos, dt), ctx.cast(sin, dt)
    grads: list = [None, None, None]
    if ctx.wants(node, 0):
        grads[0] = ctx.cast(g.append("rope", [ct, cos_d, -sin_d], dict(node.attrs)), x.dtype)
    xd = ctx.cast(x, dt)
    if ctx.wants(node, 1):
        grads[1] = _rope_table_grad(ctx, node, ct * xd, cos)
    if ctx.wants(node, 2):
        swapped = g.append("rope", [xd, ctx.zeros_like(cos_d), _ones_table(ctx, sin, dt)], dict(node.attrs))
        grads[2] = _rope_table_grad(ctx, node, ct * swapped, sin)
    return grads


def _rope_jvp(ctx, node, tangents):
    g, dt = ctx.graph, node.dtype
    x, cos, sin = (ctx.cast(v, dt) for v in ctx.operands(node))
    tx, tc, ts = tangents
    out = None
    if tx is not None:
        out = g.append("rope", [ctx.cast(tx, dt), cos, sin], dict(node.attrs))
    if tc is not None or ts is not None:
        zeros = ctx.zeros_like(cos)
        tc = zeros if tc is None else ctx.cast(tc, dt)
        ts = zeros if ts is None else ctx.cast(ts, dt)
        part = g.append("rope", [x, tc, ts], dict(node.attrs))
        if _rope_n_rot(node.attrs) < node.attrs["head_dim"]:  # drop the pass-through dims
            part = part - g.append("rope", [x, zeros, zeros], dict(node.attrs))
        out = part if out is None else out + part
    return out


def _rope_full_tables(ctx, node, x, cos, sin, dtype):
    """cos / sin expanded to [*tb, S, H*D] coefficient rows: y = x*C + swap(x)*S."""
    g, attrs = ctx.graph, node.attrs
    width, hd = x.shape[-1], attrs["head_dim"]
    ec = np.zeros((hd // 2, width), dtype=dtype.numpy)
    es = np.zeros((hd // 2, width), dtype=dtype.numpy)
    passthrough = np.ones(width, dtype=dtype.numpy)
    for h in range(width // hd):
        for i, (a, b) in enumerate(_rope_pairs(attrs)):
            ec[i, h * hd + a] = ec[i, h * hd + b] = 1.0
            es[i, h * hd + a], es[i, h * hd + b] = -1.0, 1.0
            passthrough[h * hd + a] = passthrough[h * hd + b] = 0.0
    rows = x.shape[-2]
    out = []
    for tab, e in ((cos, ec), (sin, es)):
        tab = ctx.cast(tab, dtype)
        if rows != tab.shape[-2]:
            tab = g.matmul(_selection(ctx, x, len(x.shape) - 2, tab.shape[-2], dtype), tab)
        out.append(g.matmul(tab, g.constant(e, dtype=dtype)))
    out[0] = out[0] + g.constant(passthrough, dtype=dtype)
    return out


def _rope_swap_matrix(attrs, width: int, dtype) -> np.ndarray:
    hd = attrs["head_dim"]
    p = np.zeros((width, width), dtype=dtype.numpy)
    for h in range(width // hd):
        for a, b in _rope_pairs(attrs):
            p[h * hd + b, h * hd + a] = p[h * hd + a, h * hd + b] = 1.0
    return p


def _rope_batch(ctx, node, operands, batched):
    """Shared tables: the op itself ([S, HD] -> [B, S, HD], or the vmap axis merged into the batch
    axis when static). Batched tables or a symbolic batch: the rotation from primitives."""
    g, dt, bsize = ctx.graph, node.dtype, ctx.batch_size
    x, cos, sin = operands
    _, cb, sb = batched
    rank = len(node.shape)
    if not cb and not sb:
        if rank == 2:
            return g.append("rope", [x, cos, sin], dict(node.attrs))
        if isinstance(bsize, int) and _n_symbols(x.shape) == 0:
            y = g.append("rope", [ctx.reshape(x, [bsize * x.shape[1], *x.shape[2:]]), cos, sin], dict(node.attrs))
            return ctx.reshape(y, [bsize, *node.shape])
    xd = ctx.cast(x, dt)
    if cb != sb:
        cos, sin = (v if b else ctx.materialize(v) for v, b in ((cos, cb), (sin, sb)))
    cf, sf = _rope_full_tables(ctx, node, xd, cos, sin, dt)
    if (cb or sb) and rank == 3:  # [B, S, HD] tables against [(B,) b, S, HD]
        cf, sf = _unsqueeze(ctx, cf, -3), _unsqueeze(ctx, sf, -3)
    swapped = g.matmul(xd, g.constant(_rope_swap_matrix(node.attrs, xd.shape[-1], dt), dtype=dt))
    return xd * cf + swapped * sf


defop(
    name="rope", precision="data_movement", family="attention", arity=3, operands=("x", "cos", "sin"),
    attrs={
        "head_dim": AttrSpec("int", doc="D; x's last dim is H*D"),
        "n_rot": AttrSpec("int", default=None, doc="rotated dims per head (even, <= head_dim); None = head_dim"),
        "interleaved": AttrSpec("bool", default=False, doc="rotate adjacent pairs (GPT-J) instead of halves (NeoX)"),
    },
    infer=rope_type, kernel=rope_kernel, vjp=_rope_vjp, jvp=_rope_jvp, batch=_rope_batch,
    doc="Rotary position embedding of x [B, S, H*D] or [S, H*D] (heads packed). Tables cos, "
    "sin are [T, head_dim/2] with T >= S; sequence index s uses row s (no position offset: "
    "decode callers narrow the tables); only the first n_rot/2 columns are read, even when "
    "n_rot < head_dim. Per head, with h = n_rot/2, c = cos[s, :h], si = sin[s, :h]: the "
    "default NeoX half-split rotation (upstream's only one) pairs dims (i, i+h): "
    "out[:h] = x[:h]*c - x[h:n_rot]*si, out[h:n_rot] = x[h:n_rot]*c + x[:h]*si; with "
    "interleaved=True (GPT-J / Meta LLaMA convention) it pairs dims (2i, 2i+1) instead. "
    "Dims n_rot.. pass through unchanged. Result dtype: promotion of x, cos, sin.",
)
