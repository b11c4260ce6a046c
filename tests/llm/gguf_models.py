"""Small random GGUF language models for the tests (written with the gguf package's own writer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: types the gguf package cannot quantize: random valid blocks (scale fields set to small finite f16 values) ->
#: (block elements, block bytes, f16 field offsets)
K_BLOCKS = {"Q2_K": (256, 84, (80, 82)), "Q3_K": (256, 110, (108,)), "Q4_K": (256, 144, (0, 2)), "Q5_K": (256, 176, (0, 2)),
            "Q6_K": (256, 210, (208,)), "IQ4_NL": (32, 18, (0,)), "IQ4_XS": (256, 136, (0,))}
#: their f16 scales' size where the codes reach far (weights of order 0.05)
BLOCK_SCALE = {"Q6_K": 0.0005, "IQ4_NL": 0.0005, "IQ4_XS": 0.00003}


def _tokens(vocab: int) -> list[str]:
    base = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    words = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["▁" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks = (base + words)[:vocab]
    toks += [f"tok{i}" for i in range(vocab - len(toks))]
    return toks


def _byte_level_tokens() -> list[str]:
    """GPT-2's byte-to-character table (printable bytes map to themselves, the others to chr(256 + n))."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in keep]
    table = {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}
    return [table[b] for b in range(256)]


#: a tiny byte-level BPE: every byte, then merges building "hello"
BPE_MERGES = ["h e", "l l", "he ll", "hell o"]


def _quantized(rng: np.random.Generator, w: np.ndarray, qtype: str) -> np.ndarray:
    """Raw ggml blocks [N, row bytes] of a [N, K] weight in ``qtype`` (K-quants: random valid blocks)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    t = GGMLQuantizationType[qtype]
    if qtype not in K_BLOCKS:
        return quantize(w.astype(np.float32), t)
    elems, nbytes, f16_at = K_BLOCKS[qtype]
    n, k = w.shape
    blocks = rng.integers(0, 256, size=(n * k // elems, nbytes), dtype=np.uint8)
    for off in f16_at:
        scale = np.float16(BLOCK_SCALE.get(qtype, 0.02)) * rng.uniform(0.5, 1.5, size=blocks.shape[0])
        blocks[:, off:off + 2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return blocks.reshape(n, -1)


def write_model(path: Path, *, arch: str = "llama", qtype: str = "F32", vocab: int = 300, d: int = 64, layers: int = 2,
                heads: int = 4, kv_heads: int = 2, ff: int = 96, seed: int = 0, qk_norm: bool | None = None,
                tie: bool = False, extra: dict | None = None, tensors: dict[str, np.ndarray] | None = None,
                tokenizer: str = "llama", embed_std: float = 1.0, tokens: list[str] | None = None, pre: str = "qwen2",
                merges: list[str] | None = None, n_rot: int | None = None) -> Path:
    """Write a random-weight model; matmul weights in ``qtype`` (norms, biases, embedding F32). ``tokens``: a
    sentencepiece vocabulary of ``vocab`` pieces, scored best-first (default: the toy one of :func:`_tokens`);
    ``pre`` / ``merges``: a byte-level vocabulary's pre-tokenizer name and merges (default :data:`BPE_MERGES`; the
    merged pieces follow the 256 bytes in merge order); ``n_rot``: rotated lanes per head (default all)."""
    from gguf import GGMLQuantizationType, GGUFWriter

    rng = np.random.default_rng(seed)
    hd = d // heads
    w = GGUFWriter(str(path), arch)
    w.add_block_count(layers)
    w.add_context_length(2048)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    if "add_rope_freq_base" not in (extra or {}):
        w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(n_rot or hd)
    w.add_key_length(hd)
    w.add_value_length(hd)
    for key, value in (extra or {}).items():
        getattr(w, key)(value)
    if tokenizer != "none":
        w.add_tokenizer_model(tokenizer)
    if tokenizer == "llama":  # SentencePiece-style: <unk> <s> </s>, byte fallback pieces, letters
        w.add_token_list(tokens or _tokens(vocab))
        w.add_token_scores([-float(i) for i in range(vocab)])
        w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    elif tokenizer == "gpt2":  # byte-level BPE (qwen2's kind), the end-of-text token last
        merges = merges or BPE_MERGES
        toks = [*_byte_level_tokens(), *(m.replace(" ", "") for m in merges)]
        toks += [f"x{i}" for i in range(vocab - len(toks) - 1)] + ["<|endoftext|>"]
        w.add_token_list(toks)
        w.add_token_types([1] * (vocab - 1) + [3])
        w.add_token_merges(merges)
        w.add_tokenizer_pre(pre)
        w.add_eos_token_id(vocab - 1)

    def f32(name: str, shape: tuple[int, ...], scale: float = 0.02, offset: float = 0.0) -> None:
        w.add_tensor(name, (offset + scale * rng.standard_normal(shape)).astype(np.float32))

    def mat(name: str, n: int, k: int) -> None:
        a = (rng.standard_normal((n, k)) * (0.5 / np.sqrt(k))).astype(np.float32)
        if qtype == "F32":
            w.add_tensor(name, a)
        elif qtype in ("F16", "BF16") and qtype == "F16":
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, _quantized(rng, a, qtype), raw_dtype=GGMLQuantizationType[qtype])

    f32("token_embd.weight", (vocab, d), embed_std)
    for i in range(layers):
        b = f"blk.{i}."
        f32(b + "attn_norm.weight", (d,), 0.1, 1.0)
        if arch == "phi3":  # llama.cpp's phi3 tensors: q / k / v rows in one attn_qkv, gate / up rows in one ffn_up
            mat(b + "attn_qkv.weight", (heads + 2 * kv_heads) * hd, d)
        else:
            mat(b + "attn_q.weight", heads * hd, d)
            mat(b + "attn_k.weight", kv_heads * hd, d)
            mat(b + "attn_v.weight", kv_heads * hd, d)
        if arch == "qwen2":
            f32(b + "attn_q.bias", (heads * hd,), 0.1)
            f32(b + "attn_k.bias", (kv_heads * hd,), 0.1)
            f32(b + "attn_v.bias", (kv_heads * hd,), 0.1)
        if qk_norm or (qk_norm is None and arch in ("qwen3", "gemma3")):
            f32(b + "attn_q_norm.weight", (hd,), 0.1, 1.0)
            f32(b + "attn_k_norm.weight", (hd,), 0.1, 1.0)
        mat(b + "attn_output.weight", d, heads * hd)
        if arch in ("gemma2", "gemma3"):  # norms after attention and FFN as well
            f32(b + "post_attention_norm.weight", (d,), 0.1, 1.0)
            f32(b + "post_ffw_norm.weight", (d,), 0.1, 1.0)
        f32(b + "ffn_norm.weight", (d,), 0.1, 1.0)
        if arch == "phi3":
            mat(b + "ffn_up.weight", 2 * ff, d)
        else:
            mat(b + "ffn_gate.weight", ff, d)
            mat(b + "ffn_up.weight", ff, d)
        mat(b + "ffn_down.weight", d, ff)
    f32("output_norm.weight", (d,), 0.1, 1.0)
    if not tie:
        mat("output.weight", vocab, d)
    for name, value in (tensors or {}).items():
        w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
