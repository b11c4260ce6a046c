"""The Qwen3.5 multi-token-prediction (MTP) draft head as one HIR block (upstream's
``Qwen35MtpHead``), lowered to primitive MIR ops under every fusion policy.

Given the trunk's last hidden states ``h [B, S, E]`` and the next token ids ``[B, S]``, the head
predicts the token after next: rms_norm both the token embedding and ``h``, project their
concatenation ``[e, h] @ eh_w`` back to E, run one full-attention pre-norm decoder layer
(q projected with an output gate, per-head RMSNorm on q and k, partial NeoX RoPE, causal
grouped-query attention gated by ``sigmoid(gate)``, SwiGLU FFN), take each sequence's token at
``last_token_idx``, rms_norm it and apply the LM head: logits ``[B, 1, V]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import get_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops.hir_blocks import _add, _hir_op, _repeat_heads, scratch_lowering

MTP_OPERANDS = (
    "h_pre_norm", "input_ids", "cos", "sin", "last_token_idx", "embed_w", "hnorm_w", "hnorm_b", "enorm_w", "enorm_b",
    "eh_w", "attn_norm_w", "attn_norm_b", "q_gate_w", "k_w", "v_w", "q_norm_w", "q_norm_b", "k_norm_w", "k_norm_b",
    "o_w", "post_norm_w", "post_norm_b", "gate_w", "up_w", "down_w", "head_norm_w", "head_norm_b", "lm_head_w",
)


def _shapes(attrs: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    e, ff, v = attrs["n_embd"], attrs["n_ff"], attrs["mtp_vocab"]
    hd, heads, kv = attrs["head_dim"], attrs["num_heads"], attrs["num_kv_heads"]
    vec = {k: (e,) for k in ("hnorm_w", "hnorm_b", "enorm_w", "enorm_b", "attn_norm_w", "attn_norm_b", "post_norm_w",
                             "post_norm_b", "head_norm_w", "head_norm_b")}
    return {**vec, "eh_w": (2 * e, e), "q_gate_w": (e, 2 * heads * hd), "k_w": (e, kv * hd), "v_w": (e, kv * hd),
            "q_norm_w": (hd,), "q_norm_b": (hd,), "k_norm_w": (hd,), "k_norm_b": (hd,), "o_w": (heads * hd, e),
            "gate_w": (e, ff), "up_w": (e, ff), "down_w": (ff, e), "lm_head_w": (e, v)}


def _mtp_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    heads, kv, hd, n_rot = attrs["num_heads"], attrs["num_kv_heads"], attrs["head_dim"], attrs["n_rot"]
    if min(heads, kv, hd, attrs["n_embd"], attrs["n_ff"], attrs["mtp_vocab"]) < 1 or heads % kv:
        raise ShapeError(f"num_heads={heads} must be a positive multiple of num_kv_heads={kv}; sizes must be >= 1")
    if n_rot % 2 or not 0 < n_rot <= hd:
        raise ShapeError(f"n_rot={n_rot} must be even and in (0, head_dim={hd}]")
    named = dict(zip(MTP_OPERANDS, ins))
    h, ids, last = named["h_pre_norm"], named["input_ids"], named["last_token_idx"]
    if len(h.shape) != 3 or h.shape[2] != attrs["n_embd"]:
        raise ShapeError(f"h_pre_norm must be [B, S, n_embd={attrs['n_embd']}], got {h.shape!r}")
    if ids.shape != h.shape[:2] or not ids.dtype.is_int:
        raise ShapeError(f"input_ids must be integer [B, S] = {Shape(h.shape[:2])!r}, got {ids}")
    if last.shape != h.shape[:1] or not last.dtype.is_int:
        raise ShapeError(f"last_token_idx must be integer [B] = {Shape(h.shape[:1])!r}, got {last}")
    for key, want in _shapes(attrs).items():
        if named[key].shape != Shape(want):
            raise ShapeError(f"{key} must be {Shape(want)!r}, got {named[key].shape!r}")
    if named["embed_w"].shape[1:] != Shape((attrs["n_embd"],)):
        raise ShapeError(f"embed_w must be [vocab, n_embd={attrs['n_embd']}], got {named['embed_w'].shape!r}")
    return scratch_lowering(get_op("qwen35_mtp_head"), ins, attrs).outputs[0].type


def _per_head_rms(g: Graph, x: Value, gamma: Value, beta: Value, heads: int, hd: int, eps: float) -> Value:
    b = x.shape[0]
    y = g.apply("rms_norm", g.apply("reshape", x, [b, -1, heads, hd]), gamma, beta, axis=-1, eps=eps)
    return g.apply("reshape", y, [b, -1, heads * hd])


def _mtp_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    o = dict(zip(MTP_OPERANDS, ops))
    heads, kv, hd, eps = attrs["num_heads"], attrs["num_kv_heads"], attrs["head_dim"], attrs["eps"]
    e = attrs["n_embd"]
    b = o["h_pre_norm"].shape[0]

    def rms(x: Value, w: str) -> Value:
        return g.apply("rms_norm", x, o[f"{w}_w"], o[f"{w}_b"], axis=-1, eps=eps)

    def mm(x: Value, w: str, cols: int) -> Value:  # [B, S, K] @ [K, cols] through 2-D rows
        rows = g.apply("reshape", x, [-1, x.shape[-1]])
        return g.apply("reshape", g.apply("matmul", rows, o[w]), [b, -1, cols])

    tok = g.apply("gather", o["embed_w"], o["input_ids"], axis=0)
    cur = mm(g.apply("concat", [rms(tok, "enorm"), rms(o["h_pre_norm"], "hnorm")], axis=2), "eh_w", e)
    x = rms(cur, "attn_norm")
    q_gate = g.apply("reshape", mm(x, "q_gate_w", 2 * heads * hd), [b, -1, heads, 2 * hd])
    q = g.apply("reshape", g.apply("narrow", q_gate, 3, 0, hd), [b, -1, heads * hd])
    gate = g.apply("reshape", g.apply("narrow", q_gate, 3, hd, hd), [b, -1, heads * hd])
    k = _per_head_rms(g, mm(x, "k_w", kv * hd), o["k_norm_w"], o["k_norm_b"], kv, hd, eps)
    q = _per_head_rms(g, q, o["q_norm_w"], o["q_norm_b"], heads, hd, eps)
    q, k = (g.apply("rope", t, o["cos"], o["sin"], head_dim=hd, n_rot=attrs["n_rot"]) for t in (q, k))
    k = _repeat_heads(g, k, kv, heads, hd)
    v = _repeat_heads(g, mm(x, "v_w", kv * hd), kv, heads, hd)
    att = g.apply("attention", q, k, v, num_heads=heads, head_dim=hd, mask_kind="causal")
    att = g.apply("binary", att, g.apply("activation", gate, kind="sigmoid"), op="mul")
    h1 = _add(g, cur, mm(att, "o_w", e))
    n2 = rms(h1, "post_norm")
    ffn = g.apply("binary", g.apply("activation", mm(n2, "gate_w", attrs["n_ff"]), kind="silu"), mm(n2, "up_w", attrs["n_ff"]),
                  op="mul")
    h2 = _add(g, h1, mm(ffn, "down_w", e))
    idx = g.apply("expand", g.apply("reshape", o["last_token_idx"], [b, 1, 1]), target_shape=[b, 1, e])
    last = g.apply("gather_elements", h2, idx, axis=1)  # each sequence's token at last_token_idx[b]
    return g.apply("matmul", rms(last, "head_norm"), o["lm_head_w"])


_hir_op(
    "qwen35_mtp_head", arity=len(MTP_OPERANDS), operands=MTP_OPERANDS,
    attrs={
        "num_heads": AttrSpec("int", doc="H, query heads"),
        "num_kv_heads": AttrSpec("int", doc="KV heads (divides H)"),
        "head_dim": AttrSpec("int", doc="D per head"),
        "n_rot": AttrSpec("int", doc="rotated dims per head (partial RoPE; even, <= D)"),
        "n_embd": AttrSpec("int", doc="E, the hidden size"),
        "n_ff": AttrSpec("int", doc="FFN inner size"),
        "mtp_vocab": AttrSpec("int", doc="V, the LM head's vocabulary"),
        "eps": AttrSpec("float", default=1e-6, doc="every RMSNorm"),
    },
    infer=_mtp_type, lower=_mtp_lower,
    doc="Qwen3.5 MTP draft head (upstream Qwen35MtpHead, 29 operands): h_pre_norm [B, S, E], input_ids [B, S] (int), "
    "cos / sin [T, D/2], last_token_idx [B] (int), embed_w [vocab, E], then the norms (gamma, beta) and weights "
    "([in, out]) named in MTP_OPERANDS. cur = [rms(embed[ids]), rms(h)] @ eh_w; one pre-norm layer with q_gate_w "
    "giving per head [q | gate], per-head RMSNorm of q and k, NeoX RoPE on the first n_rot dims, causal GQA "
    "attention times sigmoid(gate), @ o_w, residual, SwiGLU FFN, residual; the token at last_token_idx of each "
    "sequence, rms(head_norm) @ lm_head_w -> logits [B, 1, V]. The sequence length may be symbolic (reshapes use "
    "-1). Lowers to primitives under both policies.",
)
