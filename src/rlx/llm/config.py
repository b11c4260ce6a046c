"""Model hyper-parameters from GGUF metadata (llama.cpp's key names), checked against the tensor table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlx.frontends.gguf import GgufError, GgufFile

#: architectures rlx builds -> whether llama.cpp rotates adjacent pairs (its converter permutes q / k rows of
#: llama-family checkpoints for this "normal" rope) rather than NeoX halves
ROPE_INTERLEAVED = {"llama": True, "mistral": True, "qwen2": False, "qwen3": False, "gemma": False, "gemma2": False, "gemma3": False,
                    "phi3": False}
#: llama.cpp's gemma2 defaults where the file has no key (also transformers' Gemma2Config defaults)
GEMMA2_SOFTCAP = (50.0, 30.0)
MAX_LAYERS = 1024
MAX_WIDTH = 1 << 17


@dataclass(frozen=True)
class LlmConfig:
    arch: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_rot: int
    d_ff: int
    vocab: int
    context: int
    eps: float
    rope_base: float
    rope_interleaved: bool
    rope_linear_factor: float
    qkv_bias: bool
    qk_norm: bool
    bos: int | None
    eos: int | None
    #: gemma2: embeddings times sqrt(d), RMSNorm after attention and FFN too, GELU (tanh) gating, tanh soft-capping
    #: of attention scores and logits (0: none), the query scale, local layers' sliding window (0: none)
    embed_scale: float = 1.0
    post_norms: bool = False
    ffn_act: str = "silu"
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    query_scale: float | None = None
    sliding_window: int = 0
    #: layer i is local (sliding window) unless (i + 1) % local_pattern == 0 (gemma2: 2, gemma3: 6)
    local_pattern: int = 2
    #: gemma3's local layers rotate with their own base (0: the global tables), unscaled
    rope_base_local: float = 0.0
    #: phi3: cos and sin times ``rope.scaling.attn_factor`` (llama.cpp's attn_factor, longrope's attention factor)
    rope_mscale: float = 1.0
    #: phi3: q / k / v in one tensor ``attn_qkv`` (q rows, then k, then v), gate and up in one ``ffn_up`` (gate first)
    fused_qkv: bool = False
    fused_gate_up: bool = False

    @property
    def group(self) -> int:
        return self.n_heads // self.n_kv_heads

    def is_local(self, layer: int) -> bool:
        """gemma2 / gemma3's local (sliding-window) layers, as in llama.cpp and transformers (gemma2: the even ones)."""
        return self.sliding_window > 0 and (layer + 1) % self.local_pattern != 0

    @property
    def rope_width(self) -> int:
        """Width of the graphs' rope rows: the q and k heads side by side."""
        return (self.n_heads + self.n_kv_heads) * self.head_dim


def _int(f: GgufFile, key: str, default: int | None = None, lo: int = 1, hi: int = MAX_WIDTH) -> int:
    v = f.get(key, default)
    if v is None:
        raise GgufError(f"{f.path}: metadata key {key!r} is missing")
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise GgufError(f"{f.path}: metadata {key!r} = {v!r} must be an integer in [{lo}, {hi}]")
    return v


def _float(f: GgufFile, key: str, default: float) -> float:
    v = f.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v == v or v in (float("inf"), float("-inf")):
        raise GgufError(f"{f.path}: metadata {key!r} = {v!r} must be a finite number")
    return float(v)


def config_from_gguf(f: GgufFile) -> LlmConfig:
    arch = f.get("general.architecture")
    if arch not in ROPE_INTERLEAVED:
        raise GgufError(f"{f.path}: architecture {arch!r} is not supported (supported: {sorted(ROPE_INTERLEAVED)})")
    a = arch
    d = _int(f, f"{a}.embedding_length")
    heads = _int(f, f"{a}.attention.head_count")
    kv = _int(f, f"{a}.attention.head_count_kv", heads)
    if heads % kv:
        raise GgufError(f"{f.path}: head_count {heads} is not a multiple of head_count_kv {kv}")
    hd_default = d // heads if d % heads == 0 else None
    head_dim = _int(f, f"{a}.attention.key_length", hd_default)
    if _int(f, f"{a}.attention.value_length", head_dim) != head_dim:
        raise GgufError(f"{f.path}: key_length != value_length is not supported")
    n_rot = _int(f, f"{a}.rope.dimension_count", head_dim)
    if n_rot > head_dim or n_rot % 2 or head_dim % 2:
        raise GgufError(f"{f.path}: rope.dimension_count {n_rot} must be even and <= head dim {head_dim}")
    emb = f.tensors.get("token_embd.weight")
    if emb is None or len(emb.shape) != 2:
        raise GgufError(f"{f.path}: tensor 'token_embd.weight' [vocab, {d}] is missing")
    scaling = f.get(f"{a}.rope.scaling.type", "none")
    if scaling not in ("none", "linear", None):
        raise GgufError(f"{f.path}: rope scaling {scaling!r} is not supported (none, linear; llama3 via rope_freqs)")
    factor = _float(f, f"{a}.rope.scaling.factor", 1.0) if scaling == "linear" else 1.0
    if factor <= 0:
        raise GgufError(f"{f.path}: rope.scaling.factor must be > 0")
    eps = _float(f, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
    bos, eos = f.get("tokenizer.ggml.bos_token_id"), f.get("tokenizer.ggml.eos_token_id")
    extra: dict = {}
    if arch == "gemma":  # embeddings times sqrt(d), GELU-tanh gating, q scaled by 1/sqrt(head dim): no post norms
        extra = {"embed_scale": float(np.float32(d ** 0.5)), "ffn_act": "gelu_tanh", "query_scale": head_dim ** -0.5}
    if arch in ("gemma2", "gemma3"):
        layers = _int(f, f"{a}.block_count", hi=MAX_LAYERS)
        # llama.cpp scales q by 1/sqrt(head dim), except for the 27B models (46 / 62 layers): 1/sqrt(d / heads)
        big = layers == (46 if arch == "gemma2" else 62)
        caps = GEMMA2_SOFTCAP if arch == "gemma2" else (0.0, 0.0)  # gemma3 has no soft-capping unless the file says so
        extra = {"embed_scale": float(np.float32(d ** 0.5)), "post_norms": True, "ffn_act": "gelu_tanh",
                 "attn_softcap": _float(f, f"{a}.attn_logit_softcapping", caps[0]),
                 "final_softcap": _float(f, f"{a}.final_logit_softcapping", caps[1]),
                 "query_scale": (d / heads if big else head_dim) ** -0.5,
                 "sliding_window": _int(f, f"{a}.attention.sliding_window", 4096, hi=1 << 24),
                 **({"local_pattern": 6, "rope_base_local": 10000.0} if arch == "gemma3" else {})}
        if extra["attn_softcap"] < 0 or extra["final_softcap"] < 0:
            raise GgufError(f"{f.path}: soft-capping values must be >= 0 (0: none)")
    if arch == "phi3":  # llama.cpp runs phi3 without its sliding window (the file's key is ignored there too)
        extra = {"rope_mscale": _float(f, f"{a}.rope.scaling.attn_factor", 1.0), "fused_gate_up": True,
                 "fused_qkv": "blk.0.attn_qkv.weight" in f.tensors}
        if extra["rope_mscale"] <= 0:
            raise GgufError(f"{f.path}: rope.scaling.attn_factor must be > 0")
    return LlmConfig(
        arch=arch, n_layers=_int(f, f"{a}.block_count", hi=MAX_LAYERS), d_model=d, n_heads=heads, n_kv_heads=kv,
        head_dim=head_dim, n_rot=n_rot, d_ff=_int(f, f"{a}.feed_forward_length", hi=1 << 20), vocab=emb.shape[0],
        context=_int(f, f"{a}.context_length", 4096, hi=1 << 24), eps=eps,
        rope_base=_float(f, f"{a}.rope.freq_base", 10000.0), rope_interleaved=ROPE_INTERLEAVED[arch],
        rope_linear_factor=factor, qkv_bias="blk.0.attn_q.bias" in f.tensors, qk_norm="blk.0.attn_q_norm.weight" in f.tensors,
        bos=bos if isinstance(bos, int) else None, eos=eos if isinstance(eos, int) else None, **extra,
    )


def expected_shapes(c: LlmConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the architecture reads, name -> logical shape (outermost first); optional ones marked by the caller."""
    d, hd, f = c.d_model, c.head_dim, c.d_ff
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (c.vocab, d), "output_norm.weight": (d,), "output.weight": (c.vocab, d)}
    for i in range(c.n_layers):
        b = f"blk.{i}."
        shapes[b + "attn_norm.weight"] = (d,)
        if c.fused_qkv:
            shapes[b + "attn_qkv.weight"] = ((c.n_heads + 2 * c.n_kv_heads) * hd, d)
        else:
            kvw = c.n_kv_heads * hd
            shapes.update({b + "attn_q.weight": (c.n_heads * hd, d), b + "attn_k.weight": (kvw, d), b + "attn_v.weight": (kvw, d)})
        shapes.update({b + "attn_output.weight": (d, c.n_heads * hd), b + "ffn_norm.weight": (d,)})
        if c.fused_gate_up:
            shapes[b + "ffn_up.weight"] = (2 * f, d)
        else:
            shapes.update({b + "ffn_gate.weight": (f, d), b + "ffn_up.weight": (f, d)})
        shapes[b + "ffn_down.weight"] = (d, f)
        if c.qkv_bias:
            kvw = c.n_kv_heads * hd
            shapes.update({b + "attn_q.bias": (c.n_heads * hd,), b + "attn_k.bias": (kvw,), b + "attn_v.bias": (kvw,)})
        if c.qk_norm:
            shapes.update({b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)})
        if c.post_norms:
            shapes.update({b + "post_attention_norm.weight": (d,), b + "post_ffw_norm.weight": (d,)})
    return shapes


OPTIONAL = frozenset({"output.weight", "rope_freqs.weight"})
#: per-frequency divisors of the rope's angles (llama3's rope_freqs; phi3's longrope short factors, the ones llama.cpp
#: takes for a context no longer than the original one)
FREQ_FACTORS = ("rope_freqs.weight", "rope_factors_short.weight")


def check_tensors(f: GgufFile, c: LlmConfig) -> None:
    """Every tensor the model reads exists with the right shape (output.weight may be tied to token_embd)."""
    want = expected_shapes(c)
    for name in FREQ_FACTORS:
        if name in f.tensors:
            want[name] = (c.n_rot // 2,)
    for name, shape in want.items():
        t = f.tensors.get(name)
        if t is None:
            if name in OPTIONAL:
                continue
            raise GgufError(f"{f.path}: tensor {name!r} {list(shape)} is missing for {c.arch}")
        if tuple(t.shape) != shape:
            raise GgufError(f"{f.path}: tensor {name!r} has shape {list(t.shape)}, {c.arch} needs {list(shape)}")
