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
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ops.common import promote_args, require_dim, require_float

MASK_KINDS = ("none", "causal", "sliding_window", "custom", "bias")
MASK_FILL = -1e9  # upstream's value for masked scores (not -inf)


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
        if self.rank in (2, 3):
            return np.swapaxes(a.reshape(*a.shape[:-1], heads, head_dim), -3, -2)
        return a if self.layout == "bhsd" else np.swapaxes(a, 1, 2)

    def from_bhsd(self, a: np.ndarray) -> np.ndarray:
        if self.rank in (2, 3):
            a = np.swapaxes(a, -3, -2)
            return a.reshape(*a.shape[:-2], -1)
        return a if self.layout == "bhsd" else np.swapaxes(a, 1, 2)


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


def softmax(s: np.ndarray) -> np.ndarray:
    """Max-subtracted softmax over the last axis, so large (capped or biased) scores cannot overflow."""
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale(attrs) -> float:
    """The score multiplier: ``score_scale``, else head_dim**-0.5 (backward scales dS by it too)."""
    return attrs["score_scale"] if attrs["score_scale"] is not None else attrs["head_dim"] ** -0.5


def attention_scores(
    q: np.ndarray, k: np.ndarray, attrs, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Masked scores of q, k ([*batch, H, S, D]) -> (s, keep, t), shared by forward and backward so both
    see the same probabilities softmax(s). ``keep`` marks scores a replacing mask (custom, causal,
    sliding_window) left alone, None if none replaces; ``t`` = tanh(raw/c) under a soft-cap c, else
    None; backward needs both, to zero replaced scores' gradient and for the cap's derivative.
    """
    kind, cap = attrs["mask_kind"], attrs["attn_logit_softcap"]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(attention_scale(attrs), q.dtype)  # [*batch, H, Sq, Sk]
    t = None
    if cap is not None:  # before the mask, so masked scores stay MASK_FILL
        t = np.tanh(s / cap)
        s = cap * t
    sq, sk = s.shape[-2:]
    keep = None
    if kind == "custom":
        keep = mask[..., None, None, :] >= 0.5  # [*batch, 1, 1, Sk]
    elif kind == "bias":
        s = s + mask.astype(s.dtype, copy=False)
    elif kind in ("causal", "sliding_window"):
        i = np.arange(sq)[:, None] + (sk - sq)  # the key position aligned with query row i (bottom-right)
        j = np.arange(sk)[None, :]
        keep = j <= i
        if kind == "sliding_window":
            keep &= j >= i - attrs["window"]
    if keep is not None:
        s = np.where(keep, s, MASK_FILL)
    return s, keep, t


def _attention_kernel(args, attrs, out):
    heads, head_dim = attrs["num_heads"], attrs["head_dim"]
    lay = Layout(args[0].ndim, attrs["layout"])
    q, k, v = (lay.to_bhsd(a, heads, head_dim) for a in promote_args(args[:3], out.dtype))
    s, _, _ = attention_scores(q, k, attrs, args[3] if len(args) > 3 else None)
    return lay.from_bhsd(np.matmul(softmax(s), v))


defop(
    name="attention", family="attention", arity=_attention_arity, operands=("q", "k", "v", "mask"),
    attrs={
        "num_heads": AttrSpec("int", doc="H; k and v have as many heads as q (no GQA)"),
        "head_dim": AttrSpec("int", doc="D"),
        "mask_kind": AttrSpec("str", default="none", choices=MASK_KINDS),
        "window": AttrSpec("int", default=None, doc="sliding_window only: keys i-window .. i are kept"),
        "score_scale": AttrSpec("float", default=None, doc="score multiplier; None = head_dim**-0.5"),
        "attn_logit_softcap": AttrSpec("float", default=None, doc="c > 0: scores become c*tanh(s/c); None = off"),
        "layout": AttrSpec("str", default="bhsd", choices=("bhsd", "bshd"), doc="rank-4 operand layout"),
    },
    infer=attention_type, kernel=_attention_kernel,
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
    if attrs["interleaved"]:
        a, b = xh[..., 0:n_rot:2], xh[..., 1:n_rot:2]
        y[..., 0:n_rot:2] = a * c - b * s
        y[..., 1:n_rot:2] = b * c + a * s
    else:
        a, b = xh[..., :half], xh[..., half:n_rot]
        y[..., :half] = a * c - b * s
        y[..., half:n_rot] = b * c + a * s
    return y.reshape(x.shape)


defop(
    name="rope", family="attention", arity=3, operands=("x", "cos", "sin"),
    attrs={
        "head_dim": AttrSpec("int", doc="D; x's last dim is H*D"),
        "n_rot": AttrSpec("int", default=None, doc="rotated dims per head (even, <= head_dim); None = head_dim"),
        "interleaved": AttrSpec("bool", default=False, doc="rotate adjacent pairs (GPT-J) instead of halves (NeoX)"),
    },
    infer=rope_type, kernel=rope_kernel,
    doc="Rotary position embedding of x [B, S, H*D] or [S, H*D] (heads packed). Tables cos, "
    "sin are [T, head_dim/2] with T >= S; sequence index s uses row s (no position offset: "
    "decode callers narrow the tables); only the first n_rot/2 columns are read, even when "
    "n_rot < head_dim. Per head, with h = n_rot/2, c = cos[s, :h], si = sin[s, :h]: the "
    "default NeoX half-split rotation (upstream's only one) pairs dims (i, i+h): "
    "out[:h] = x[:h]*c - x[h:n_rot]*si, out[h:n_rot] = x[h:n_rot]*c + x[:h]*si; with "
    "interleaved=True (GPT-J / Meta LLaMA convention) it pairs dims (2i, 2i+1) instead. "
    "Dims n_rot.. pass through unchanged. Result dtype: promotion of x, cos, sin.",
)
