"""Cases for attention and rope.

Oracles: torch float64 ``F.scaled_dot_product_attention`` (with explicit boolean / additive
masks) where torch's semantics coincide with rlx's, and a formula written out with torch
ops (``reference_attention``) where they differ: the -1e9 fill of fully masked rows (torch
gives NaN with -inf) and the logit soft-cap (not in SDPA). RoPE is checked against the
rotate-half formula (NeoX) and against complex multiplication of adjacent pairs (GPT-J).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from opcases import OpCase, ShapeErrorCase, randn, symbolic, torch_f64

T = torch_f64
H, D = 2, 4  # heads and head_dim used by most cases


# ------------------------------------------------------------------ layout helpers (torch)


def to_bhsd(t, layout, heads=H):
    """A torch tensor in rlx's layout -> [B, H, S, D]."""
    if layout == "packed2":  # [S, H*D]
        return t.view(t.shape[0], heads, -1).transpose(0, 1)[None]
    if layout == "packed3":  # [B, S, H*D]
        return t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)
    return t if layout == "bhsd" else t.transpose(1, 2)


def from_bhsd(t, layout):
    if layout == "packed2":
        return t[0].transpose(0, 1).reshape(t.shape[2], -1)
    if layout == "packed3":
        return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1)
    return t if layout == "bhsd" else t.transpose(1, 2)


def keep_band(sq, sk, window=None):
    """Bottom-right aligned causal (optionally sliding-window) keep mask [Sq, Sk]."""
    i = torch.arange(sq)[:, None] + (sk - sq)
    j = torch.arange(sk)[None, :]
    keep = j <= i
    return keep & (j >= i - window) if window is not None else keep


def sdpa(layout="packed3", heads=H, mask_fn=None, **kw):
    """Oracle: torch SDPA in float64 on rlx-layout numpy operands.

    ``mask_fn(sq, sk, mask)`` gives SDPA's ``attn_mask`` (boolean keep mask or additive bias).
    """

    def oracle(q, k, v, mask=None):
        qt, kt, vt = (to_bhsd(T(a), layout, heads) for a in (q, k, v))
        extra = dict(kw)
        if mask_fn is not None:
            extra["attn_mask"] = mask_fn(qt.shape[2], kt.shape[2], mask)
        return from_bhsd(F.scaled_dot_product_attention(qt, kt, vt, **extra), layout)

    return oracle


def reference_attention(layout="packed3", heads=H, scale=None, cap=None, keep_fn=None, bias=False):
    """Oracle written out: scores, soft-cap, then -1e9 replacement / additive bias, softmax."""

    def oracle(q, k, v, mask=None):
        qt, kt, vt = (to_bhsd(T(a), layout, heads) for a in (q, k, v))
        s = qt @ kt.transpose(-1, -2) * (scale if scale is not None else qt.shape[-1] ** -0.5)
        if cap is not None:
            s = cap * torch.tanh(s / cap)
        if bias:
            s = s + T(mask)
        if keep_fn is not None:
            s = s.masked_fill(~keep_fn(s.shape[-2], s.shape[-1], mask), -1e9)
        return from_bhsd(torch.softmax(s, dim=-1) @ vt, layout)

    return oracle


def _qkv(b, sq, sk, layout="packed3", dtype=np.float64, seed=0, heads=H, head_dim=D):
    def shape(s):
        return {"packed2": (s, heads * head_dim), "packed3": (b, s, heads * head_dim),
                "bhsd": (b, heads, s, head_dim), "bshd": (b, s, heads, head_dim)}[layout]

    return {"q": randn(*shape(sq), dtype=dtype, seed=seed), "k": randn(*shape(sk), dtype=dtype, seed=seed + 1),
            "v": randn(*shape(sk), dtype=dtype, seed=seed + 2)}


def _attn(**attrs):
    attrs.setdefault("num_heads", H)
    attrs.setdefault("head_dim", D)
    return lambda g, q, k, v: g.attention(q, k, v, **attrs)


def _attn_mask(**attrs):
    attrs.setdefault("num_heads", H)
    attrs.setdefault("head_dim", D)
    return lambda g, q, k, v, mask: g.attention(q, k, v, mask, **attrs)


def custom_keep(sq, sk, mask):
    """rlx custom mask [B, Sk] (1 = keep) as a boolean [B, 1, Sq, Sk] keep mask."""
    return (T(mask) >= 0.5)[:, None, None, :].expand(-1, 1, sq, sk)


TOL = {"rtol": 1e-10, "atol": 1e-12}
PADDING = np.array([[1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0, 1.0]])
FULLY_MASKED = np.array([[1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])  # batch 1: every key masked

CASES = [
    OpCase("attention", "none_packed3", _attn(), _qkv(2, 5, 5, seed=1), sdpa(), **TOL),
    OpCase("attention", "causal_square", _attn(mask_kind="causal"), _qkv(2, 5, 5, seed=4), sdpa(is_causal=True), **TOL),
    OpCase("attention", "causal_decode_sk_gt_sq", _attn(mask_kind="causal"), _qkv(2, 2, 6, seed=7),
           sdpa(mask_fn=lambda sq, sk, m: keep_band(sq, sk)), **TOL),
    # Sq > Sk: the first Sq - Sk query rows see no key at all -> uniform average of v (not NaN)
    OpCase("attention", "causal_sq_gt_sk_fully_masked_rows", _attn(mask_kind="causal"), _qkv(1, 5, 3, seed=10),
           reference_attention(keep_fn=lambda sq, sk, m: keep_band(sq, sk)), **TOL),
    OpCase("attention", "sliding_window", _attn(mask_kind="sliding_window", window=2), _qkv(2, 6, 6, seed=13),
           sdpa(mask_fn=lambda sq, sk, m: keep_band(sq, sk, 2)), **TOL),
    OpCase("attention", "sliding_window_decode", _attn(mask_kind="sliding_window", window=1), _qkv(1, 3, 7, seed=16),
           sdpa(mask_fn=lambda sq, sk, m: keep_band(sq, sk, 1)), **TOL),
    OpCase("attention", "sliding_window_0_is_diagonal", _attn(mask_kind="sliding_window", window=0), _qkv(1, 4, 4, seed=19),
           lambda q, k, v: v, **TOL),
    OpCase("attention", "custom_padding", _attn_mask(mask_kind="custom"), {**_qkv(2, 4, 5, seed=22), "mask": PADDING},
           sdpa(mask_fn=lambda sq, sk, m: custom_keep(sq, sk, m)), **TOL),
    OpCase("attention", "custom_fully_masked_row", _attn_mask(mask_kind="custom"),
           {**_qkv(2, 3, 5, seed=25), "mask": FULLY_MASKED}, reference_attention(keep_fn=custom_keep), **TOL),
    OpCase("attention", "custom_bool_mask", _attn_mask(mask_kind="custom"),
           {**_qkv(2, 4, 5, seed=28), "mask": PADDING.astype(bool)},
           sdpa(mask_fn=lambda sq, sk, m: custom_keep(sq, sk, m)), **TOL),
    OpCase("attention", "bias_full", _attn_mask(mask_kind="bias"), {**_qkv(2, 3, 4, seed=31), "mask": randn(2, H, 3, 4, seed=34)},
           sdpa(mask_fn=lambda sq, sk, m: T(m)), **TOL),
    OpCase("attention", "bias_broadcast_sq_sk", _attn_mask(mask_kind="bias"), {**_qkv(2, 3, 4, seed=35), "mask": randn(3, 4, seed=38)},
           sdpa(mask_fn=lambda sq, sk, m: T(m)), **TOL),
    OpCase("attention", "score_scale", _attn(score_scale=0.3), _qkv(2, 4, 4, seed=39), sdpa(scale=0.3), **TOL),
    OpCase("attention", "score_scale_causal", _attn(score_scale=1.7, mask_kind="causal"), _qkv(1, 4, 4, seed=42),
           sdpa(scale=1.7, is_causal=True), **TOL),
    OpCase("attention", "softcap", _attn(attn_logit_softcap=0.5, score_scale=2.0), _qkv(2, 4, 4, seed=45),
           reference_attention(scale=2.0, cap=0.5), **TOL),
    # the cap comes before the mask: masked scores stay at -1e9 instead of becoming -cap
    OpCase("attention", "softcap_then_causal", _attn(attn_logit_softcap=1.0, mask_kind="causal"), _qkv(1, 4, 4, seed=48),
           reference_attention(cap=1.0, keep_fn=lambda sq, sk, m: keep_band(sq, sk)), **TOL),
    OpCase("attention", "softcap_then_bias", _attn_mask(attn_logit_softcap=1.0, mask_kind="bias"),
           {**_qkv(1, 3, 3, seed=51), "mask": randn(1, H, 3, 3, seed=54) * 3},
           reference_attention(cap=1.0, bias=True), **TOL),
    OpCase("attention", "packed2", _attn(mask_kind="causal"), _qkv(1, 5, 5, "packed2", seed=55),
           sdpa("packed2", is_causal=True), **TOL),
    OpCase("attention", "packed2_custom", _attn_mask(mask_kind="custom"),
           {**_qkv(1, 3, 5, "packed2", seed=58), "mask": PADDING[0]},
           sdpa("packed2", mask_fn=lambda sq, sk, m: custom_keep(sq, sk, m[None])), **TOL),
    OpCase("attention", "packed2_bias", _attn_mask(mask_kind="bias"),
           {**_qkv(1, 3, 4, "packed2", seed=61), "mask": randn(H, 3, 4, seed=64)},
           sdpa("packed2", mask_fn=lambda sq, sk, m: T(m)[None]), **TOL),
    OpCase("attention", "bhsd_default", _attn(mask_kind="causal"), _qkv(2, 3, 3, "bhsd", seed=65),
           sdpa("bhsd", is_causal=True), **TOL),
    OpCase("attention", "bshd", _attn(layout="bshd"), _qkv(2, 5, 3, "bshd", seed=68), sdpa("bshd"), **TOL),
    # S == num_heads: upstream's shape guess would read this as [B, H, S, D]; the attribute decides
    OpCase("attention", "bshd_seq_equals_heads", _attn(layout="bshd", mask_kind="causal"),
           _qkv(2, H, H, "bshd", seed=71), sdpa("bshd", is_causal=True), **TOL),
    OpCase("attention", "bhsd_custom_mask", _attn_mask(mask_kind="custom"),
           {**_qkv(2, 3, 5, "bhsd", seed=74), "mask": PADDING},
           sdpa("bhsd", mask_fn=lambda sq, sk, m: custom_keep(sq, sk, m)), **TOL),
    OpCase("attention", "three_heads_dim8", _attn(num_heads=3, head_dim=8, mask_kind="causal"),
           _qkv(2, 4, 4, seed=77, heads=3, head_dim=8), sdpa(heads=3, is_causal=True), **TOL),
    OpCase("attention", "f32", _attn(mask_kind="causal"), _qkv(2, 6, 6, dtype=np.float32, seed=80),
           sdpa(is_causal=True), rtol=1e-5, atol=1e-6),
    # >= 32 queries over <= 512 keys: NumPy computes the scores transposed (TRANSPOSED_MIN_QUERIES): masks on that layout
    OpCase("attention", "many_queries_causal", _attn(mask_kind="causal"), _qkv(1, 40, 48, seed=92),
           sdpa(mask_fn=lambda sq, sk, m: keep_band(sq, sk)), **TOL),
    OpCase("attention", "many_queries_bias_softcap", _attn_mask(mask_kind="bias", attn_logit_softcap=2.0),
           {**_qkv(2, 33, 35, seed=95), "mask": randn(2, H, 33, 35, seed=98)}, reference_attention(cap=2.0, bias=True), **TOL),
    OpCase("attention", "many_queries_custom_bshd", _attn_mask(mask_kind="custom", layout="bshd"),
           {**_qkv(2, 32, 5, "bshd", seed=101), "mask": PADDING}, sdpa("bshd", mask_fn=lambda sq, sk, m: custom_keep(sq, sk, m)),
           **TOL),
    # empty sequences: no keys gives zeros (torch's SDPA too), no queries an empty result
    OpCase("attention", "no_keys", _attn(), _qkv(2, 3, 0, "bhsd", seed=86), sdpa("bhsd"), **TOL),
    OpCase("attention", "no_queries_causal", _attn(mask_kind="causal", layout="bshd"), _qkv(2, 0, 3, "bshd", seed=89),
           sdpa("bshd", is_causal=True), **TOL),
    OpCase("attention", "symbolic_batch_seq",
           symbolic(_attn(mask_kind="causal"), {"q": ("b", "s", H * D), "k": ("b", "t", H * D), "v": ("b", "t", H * D)},
                    ("b", "s", H * D)),
           _qkv(2, 3, 5, seed=83), sdpa(mask_fn=lambda sq, sk, m: keep_band(sq, sk)), **TOL),
]


# ---------------------------------------------------------------------------------- rope


def rope_tables(rows, head_dim, base=10000.0):
    inv_freq = base ** (-np.arange(0, head_dim, 2) / head_dim)
    angles = np.arange(rows)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def rope_half_split(x, cos, sin, head_dim, n_rot=None):
    """NeoX: x*cos + rotate_half(x)*sin on the first n_rot dims of each head (torch, float64)."""
    n_rot = n_rot or head_dim
    t = T(x)
    s = t.shape[-2]
    heads = t.view(*t.shape[:-1], -1, head_dim)  # [..., S, H, D]
    rot, rest = heads[..., :n_rot], heads[..., n_rot:]
    c = torch.cat([T(cos)[:s, : n_rot // 2]] * 2, dim=-1)[:, None, :]
    si = torch.cat([T(sin)[:s, : n_rot // 2]] * 2, dim=-1)[:, None, :]
    a, b = rot[..., : n_rot // 2], rot[..., n_rot // 2:]
    rotate_half = torch.cat([-b, a], dim=-1)
    return torch.cat([rot * c + rotate_half * si, rest], dim=-1).reshape(t.shape)


def rope_interleaved(x, cos, sin, head_dim, n_rot=None):
    """GPT-J: adjacent pairs (2i, 2i+1) as complex numbers times cos + i*sin (numpy complex)."""
    n_rot = n_rot or head_dim
    s = x.shape[-2]
    heads = x.reshape(*x.shape[:-1], -1, head_dim).astype(np.float64)
    z = heads[..., 0:n_rot:2] + 1j * heads[..., 1:n_rot:2]
    w = (cos[:s, : n_rot // 2] + 1j * sin[:s, : n_rot // 2])[:, None, :]
    out = heads.copy()
    out[..., 0:n_rot:2], out[..., 1:n_rot:2] = (z * w).real, (z * w).imag
    return out.reshape(x.shape)


def _rope_feed(xshape, rows, head_dim, dtype=np.float64, seed=0, random_tables=False):
    if random_tables:
        cos, sin = randn(rows, head_dim // 2, seed=seed + 1), randn(rows, head_dim // 2, seed=seed + 2)
    else:
        cos, sin = rope_tables(rows, head_dim)
    return {"x": randn(*xshape, dtype=dtype, seed=seed), "cos": cos.astype(dtype), "sin": sin.astype(dtype)}


def _rope(**attrs):
    return lambda g, x, cos, sin: g.rope(x, cos, sin, **attrs)


def _rope_case(name, oracle, xshape, rows, head_dim, n_rot=None, dtype=np.float64, tol=1e-12, **kw):
    attrs = {"head_dim": head_dim, **({"n_rot": n_rot} if n_rot else {}), **kw}
    return OpCase("rope", name, _rope(**attrs), _rope_feed(xshape, rows, head_dim, dtype, seed=len(name), random_tables="random" in name),
                  lambda x, cos, sin: oracle(x, cos, sin, head_dim, n_rot), rtol=tol, atol=tol)


CASES += [
    _rope_case("half_split", rope_half_split, (2, 5, 16), 5, 8),
    _rope_case("half_split_longer_tables", rope_half_split, (2, 3, 16), 7, 8),
    _rope_case("half_split_rank2", rope_half_split, (6, 24), 6, 8),
    _rope_case("half_split_n_rot_lt_head_dim", rope_half_split, (2, 4, 16), 4, 8, n_rot=4),
    _rope_case("half_split_random_tables", rope_half_split, (1, 3, 12), 4, 6),
    _rope_case("interleaved", rope_interleaved, (2, 5, 16), 5, 8, interleaved=True),
    _rope_case("interleaved_n_rot_lt_head_dim", rope_interleaved, (2, 3, 24), 5, 12, n_rot=6, interleaved=True),
    _rope_case("interleaved_random_tables_rank2", rope_interleaved, (4, 8), 4, 4, interleaved=True),
    _rope_case("f32", rope_half_split, (2, 5, 16), 5, 8, dtype=np.float32, tol=1e-6),
    OpCase("rope", "symbolic_seq",
           symbolic(_rope(head_dim=8), {"x": ("b", "s", 16), "cos": (10, 4), "sin": (10, 4)}, ("b", "s", 16)),
           _rope_feed((2, 6, 16), 10, 8, seed=9), lambda x, cos, sin: rope_half_split(x, cos, sin, 8),
           rtol=1e-12, atol=1e-12),
]


def _attention_error(qshape, kshape, vshape, mask=None, **attrs):
    attrs = {"num_heads": H, "head_dim": D, **attrs}

    def build(g):
        ops = [g.input("q", qshape), g.input("k", kshape), g.input("v", vshape)]
        if mask is not None:
            ops.append(g.input("mask", mask[0], mask[1]))
        return g.attention(*ops, **attrs)

    return build


def _rope_error(xshape, tshape, head_dim=8, sshape=None, xdtype="f32", **attrs):
    return lambda g: g.rope(g.input("x", xshape, xdtype), g.input("cos", tshape), g.input("sin", sshape or tshape),
                            head_dim=head_dim, **attrs)


SHAPE_ERRORS = [
    ShapeErrorCase("attention", "packed_width", _attention_error((2, 5, 9), (2, 5, 8), (2, 5, 8)), match="num_heads"),
    ShapeErrorCase("attention", "kv_seq_mismatch", _attention_error((2, 5, 8), (2, 5, 8), (2, 4, 8)), match="sequence"),
    ShapeErrorCase("attention", "batch_mismatch", _attention_error((2, 5, 8), (3, 5, 8), (3, 5, 8)), match="batch"),
    ShapeErrorCase("attention", "rank_mismatch", _attention_error((2, 5, 8), (5, 8), (5, 8)), match="rank"),
    ShapeErrorCase("attention", "rank5", _attention_error((1, 2, 5, 2, 4), (1, 2, 5, 2, 4), (1, 2, 5, 2, 4)), match="rank"),
    ShapeErrorCase("attention", "bhsd_heads", _attention_error((2, 5, 2, 4), (2, 5, 2, 4), (2, 5, 2, 4)), match="heads"),
    ShapeErrorCase("attention", "bshd_head_dim", _attention_error((2, 5, 2, 3), (2, 5, 2, 3), (2, 5, 2, 3), layout="bshd"),
                   match="head_dim"),
    ShapeErrorCase("attention", "custom_mask_shape",
                   _attention_error((2, 5, 8), (2, 6, 8), (2, 6, 8), mask=((2, 5), "f32"), mask_kind="custom"), match="mask"),
    ShapeErrorCase("attention", "bias_not_broadcastable",
                   _attention_error((2, 5, 8), (2, 6, 8), (2, 6, 8), mask=((2, 2, 5, 5), "f32"), mask_kind="bias")),
    ShapeErrorCase("attention", "missing_mask_operand", _attention_error((2, 5, 8), (2, 5, 8), (2, 5, 8), mask_kind="custom"),
                   match="operands"),
    ShapeErrorCase("attention", "int_q", lambda g: g.attention(g.input("q", (5, 8), "i32"), g.input("k", (5, 8)),
                                                               g.input("v", (5, 8)), num_heads=2, head_dim=4), match="float"),
    ShapeErrorCase("attention", "sliding_window_without_window",
                   _attention_error((5, 8), (5, 8), (5, 8), mask_kind="sliding_window"), match="window"),
    ShapeErrorCase("attention", "window_without_sliding", _attention_error((5, 8), (5, 8), (5, 8), window=2), match="window"),
    ShapeErrorCase("attention", "nonpositive_softcap", _attention_error((5, 8), (5, 8), (5, 8), attn_logit_softcap=0.0),
                   match="softcap"),
    ShapeErrorCase("rope", "width_not_multiple", _rope_error((2, 5, 12), (5, 4)), match="multiple"),
    ShapeErrorCase("rope", "table_too_short", _rope_error((2, 5, 16), (4, 4)), match="rows"),
    ShapeErrorCase("rope", "table_width", _rope_error((2, 5, 16), (5, 8)), match="head_dim/2"),
    ShapeErrorCase("rope", "cos_sin_differ", _rope_error((2, 5, 16), (5, 4), sshape=(6, 4)), match="differ"),
    ShapeErrorCase("rope", "odd_n_rot", _rope_error((2, 5, 16), (5, 4), n_rot=3), match="n_rot"),
    ShapeErrorCase("rope", "n_rot_too_big", _rope_error((2, 5, 16), (5, 4), n_rot=10), match="n_rot"),
    ShapeErrorCase("rope", "odd_head_dim", _rope_error((2, 5, 14), (5, 3), head_dim=7), match="even"),
    ShapeErrorCase("rope", "rank4_x", _rope_error((1, 2, 5, 8), (5, 4)), match="x must be"),
    ShapeErrorCase("rope", "int_x", _rope_error((2, 5, 16), (5, 4), xdtype="i32"), match="float"),
]
