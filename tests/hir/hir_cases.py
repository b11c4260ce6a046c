"""Block cases for the HIR tests: one or more per HIR op (and per MIR op used as a HIR block).

Each case builds a small HIR module from random data, names the MIR op kinds its DIRECT and
FUSABLE lowerings must emit (docs/pipeline.md#hir-lowering, leaves excluded), and may give an independent
NumPy oracle. ``test_hir_blocks.py`` fails when a HIR op has no case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import rlx


@dataclass
class BlockCase:
    op: str
    name: str
    arrays: dict[str, np.ndarray]
    build: Callable[..., Any]  # build(h, **values) -> Value or tuple of Values
    direct: tuple[str, ...]
    fusable: tuple[str, ...]
    params: tuple[str, ...] = ()
    oracle: Callable[..., Any] | None = None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"

    def module(self) -> rlx.GraphModule:
        def build(h):
            values = {}
            for key, arr in self.arrays.items():
                declare = h.param if key in self.params else h.input
                values[key] = declare(key, arr.shape, rlx.DType.of(arr.dtype))
            return self.build(h, **values)

        return rlx.define(self.id.replace("-", "_"), build)

    def feed(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        inputs = {k: v for k, v in self.arrays.items() if k not in self.params}
        params = {k: v for k, v in self.arrays.items() if k in self.params}
        return inputs, params


def randn(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def rope_tables(rows: int, head_dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    half = head_dim // 2
    inv = base ** (-np.arange(half) / half)
    ang = np.arange(rows)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


# ------------------------------------------------------------------ oracles (NumPy, f64)


def _f64(*arrays):
    return [a.astype(np.float64) for a in arrays]


def _gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def _silu(x):
    return x / (1 + np.exp(-x))


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _rms(x, g, b, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g + b


def _dwconv_oracle(x, w, pad):
    x, w, pad = _f64(x, w, pad)
    full = np.concatenate([pad, x], axis=1)
    k = w.shape[-1]
    s = x.shape[1]
    out = np.zeros_like(x)
    for j in range(k):
        out += full[:, j : j + s, :] * w[:, 0, 0, j][None, None, :]
    return out


# -------------------------------------------------------------------------------- cases


def _linear_cases() -> list[BlockCase]:
    arr = {"x": randn(2, 8, seed=1), "w": randn(8, 16, seed=2) * 0.3, "b": randn(16, seed=3)}
    arr3 = {"x": randn(2, 3, 8, seed=4), "w": randn(8, 16, seed=5) * 0.3, "b": randn(16, seed=6)}
    p = ("w", "b")
    return [
        BlockCase("linear", "bias-gelu", arr, lambda h, x, w, b: h.linear(x, w, bias=b, activation="gelu"),
                  ("fused_matmul_bias_act",), ("matmul", "add", "gelu"), p,
                  oracle=lambda x, w, b: _gelu(np.float64(x) @ w + b)),
        BlockCase("linear", "bias-tanh-rank3", arr3, lambda h, x, w, b: h.linear(x, w, bias=b, activation="tanh"),
                  ("fused_matmul_bias_act",), ("matmul", "add", "tanh"), p,
                  oracle=lambda x, w, b: np.tanh(np.float64(x) @ w + b)),
        BlockCase("linear", "bias-noact", arr, lambda h, x, w, b: h.linear(x, w, bias=b),
                  ("fused_matmul_bias_act",), ("matmul", "add"), p,
                  oracle=lambda x, w, b: np.float64(x) @ w + b),
        BlockCase("linear", "nobias-silu", {"x": arr["x"], "w": arr["w"]}, lambda h, x, w: h.linear(x, w, activation="silu"),
                  ("matmul", "silu"), ("matmul", "silu"), ("w",),
                  oracle=lambda x, w: _silu(np.float64(x) @ w)),
        BlockCase("linear", "nobias", {"x": arr["x"], "w": arr["w"]}, lambda h, x, w: h.linear(x, w),
                  ("matmul",), ("matmul",), ("w",), oracle=lambda x, w: np.float64(x) @ w),
        BlockCase("linear_fused", "relu", arr, lambda h, x, w, b: h.linear_fused(x, w, b, activation="relu"),
                  ("fused_matmul_bias_act",), ("fused_matmul_bias_act",), p,
                  oracle=lambda x, w, b: np.maximum(np.float64(x) @ w + b, 0)),
        BlockCase("linear_fused", "noact", arr, lambda h, x, w, b: h.linear_fused(x, w, b),
                  ("fused_matmul_bias_act",), ("fused_matmul_bias_act",), p,
                  oracle=lambda x, w, b: np.float64(x) @ w + b),
    ]


def _pair_cases() -> list[BlockCase]:
    arr = {"x": randn(3, 8, seed=7), "w1": randn(8, 4, seed=8), "w2": randn(8, 6, seed=9)}
    return [
        BlockCase("shared_linear_pair", "both", arr, lambda h, x, w1, w2: h.shared_linear_pair(x, w1, w2),
                  ("matmul", "matmul"), ("matmul", "matmul"), ("w1", "w2"),
                  oracle=lambda x, w1, w2: (np.float64(x) @ w1, np.float64(x) @ w2)),
    ]


def _swiglu_cases() -> list[BlockCase]:
    arr = {"x": randn(2, 8, seed=10), "up": randn(8, 16, seed=11) * 0.3, "gate": randn(8, 16, seed=12) * 0.3,
           "down": randn(16, 8, seed=13) * 0.3}
    arr3 = {"x": randn(2, 3, 8, seed=14), "up": randn(8, 12, seed=15) * 0.3, "gate": randn(8, 12, seed=16) * 0.3,
            "down": randn(12, 5, seed=17) * 0.3}

    def oracle(x, up, gate, down):
        x, up, gate, down = _f64(x, up, gate, down)
        return ((x @ up) * _silu(x @ gate)) @ down

    build = lambda h, x, up, gate, down: h.swiglu(x, up, gate, down)
    direct = ("concat", "matmul", "fused_swiglu", "matmul")
    fusable = ("matmul", "matmul", "silu", "mul", "matmul")
    return [
        BlockCase("swiglu", "8-16-8", arr, build, direct, fusable, ("up", "gate", "down"), oracle),
        BlockCase("swiglu", "rank3-8-12-5", arr3, build, direct, fusable, ("up", "gate", "down"), oracle),
    ]


def _norm_cases() -> list[BlockCase]:
    arr = {"x": randn(3, 8, seed=20), "r": randn(3, 8, seed=21), "gamma": randn(8, seed=22), "beta": randn(8, seed=23)}
    norm = {"x": arr["x"], "gamma": arr["gamma"], "beta": arr["beta"]}
    p = ("gamma", "beta")
    return [
        BlockCase("residual_rms_norm", "eps1e-5", arr, lambda h, x, r, gamma, beta: h.residual_rms_norm(x, r, gamma, beta),
                  ("fused_residual_rms_norm",), ("add", "rms_norm"), p,
                  oracle=lambda x, r, gamma, beta: _rms(*_f64(x + r, gamma, beta))),
        BlockCase("residual_rms_norm", "eps1e-2", arr, lambda h, x, r, gamma, beta: h.residual_rms_norm(x, r, gamma, beta, eps=1e-2),
                  ("fused_residual_rms_norm",), ("add", "rms_norm"), p,
                  oracle=lambda x, r, gamma, beta: _rms(*_f64(x + r, gamma, beta), eps=1e-2)),
        BlockCase("rms_norm", "mir-block", norm, lambda h, x, gamma, beta: h.rms_norm(x, gamma, beta, eps=1e-6),
                  ("rms_norm",), ("rms_norm",), p, oracle=lambda x, gamma, beta: _rms(*_f64(x, gamma, beta), eps=1e-6)),
        BlockCase("layer_norm", "mir-block", norm, lambda h, x, gamma, beta: h.layer_norm(x, gamma, beta),
                  ("layer_norm",), ("layer_norm",), p),
    ]


def _rope_cases() -> list[BlockCase]:
    cos, sin = rope_tables(6, 4)
    arr = {"x": randn(2, 5, 8, seed=30), "cos": cos, "sin": sin}
    return [
        BlockCase("rope", "mir-block", arr, lambda h, x, cos, sin: h.rope(x, cos, sin, head_dim=4),
                  ("rope",), ("rope",), ("cos", "sin")),
    ]


def _attention_cases() -> list[BlockCase]:
    q, k, v = randn(2, 4, 8, seed=40), randn(2, 5, 8, seed=41), randn(2, 5, 8, seed=42)
    cases = []
    for kind, extra in (("none", {}), ("causal", {}), ("sliding_window", {"window": 1})):
        cases.append(BlockCase(
            "attention", kind, {"q": q, "k": k, "v": v},
            lambda h, q, k, v, kind=kind, extra=extra: h.attention(q, k, v, num_heads=2, head_dim=4, mask_kind=kind, **extra),
            ("attention",), ("attention",)))
    keep = np.array([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0]], np.float32)
    cases.append(BlockCase(
        "attention", "custom", {"q": q, "k": k, "v": v, "mask": keep},
        lambda h, q, k, v, mask: h.attention(q, k, v, mask, num_heads=2, head_dim=4, mask_kind="custom"),
        ("attention",), ("attention",)))
    cases.append(BlockCase(
        "attention", "bias", {"q": q, "k": k, "v": v, "mask": randn(2, 2, 4, 5, seed=43)},
        lambda h, q, k, v, mask: h.attention(q, k, v, mask, num_heads=2, head_dim=4, mask_kind="bias"),
        ("attention",), ("attention",)))
    return cases


def _dwconv_cases() -> list[BlockCase]:
    chain = ("concat", "transpose", "reshape", "conv2d", "reshape", "transpose")
    build = lambda h, x, w, pad: h.depthwise_conv1d_causal(x, w, pad, kernel_size=w.shape[-1])
    return [
        BlockCase("depthwise_conv1d_causal", "k4", {"x": randn(2, 5, 3, seed=50), "w": randn(3, 1, 1, 4, seed=51),
                                                    "pad": randn(2, 3, 3, seed=52)}, build, chain, chain, ("w",), _dwconv_oracle),
        BlockCase("depthwise_conv1d_causal", "k2-zero-pad", {"x": randn(1, 6, 4, seed=53), "w": randn(4, 1, 1, 2, seed=54),
                                                             "pad": np.zeros((1, 1, 4), np.float32)}, build, chain, chain, ("w",),
                  _dwconv_oracle),
    ]


LLAMA_D, LLAMA_F = 16, 24


def llama_arrays(batch: int, seq: int, heads: int, kv: int, head_dim: int, seed: int = 60,
                 custom_mask: bool = False) -> dict[str, np.ndarray]:
    d = LLAMA_D
    cos, sin = rope_tables(seq + 2, head_dim)
    arr = {
        "x": randn(batch, seq, d, seed=seed),
        "attn_norm": 1 + 0.1 * randn(d, seed=seed + 1), "attn_norm_b": 0.1 * randn(d, seed=seed + 2),
        "wq": randn(d, heads * head_dim, seed=seed + 3) * 0.25, "wk": randn(d, kv * head_dim, seed=seed + 4) * 0.25,
        "wv": randn(d, kv * head_dim, seed=seed + 5) * 0.25, "wo": randn(heads * head_dim, d, seed=seed + 6) * 0.25,
        "cos": cos, "sin": sin,
        "ffn_norm": 1 + 0.1 * randn(d, seed=seed + 7), "ffn_norm_b": 0.1 * randn(d, seed=seed + 8),
        "w_gate": randn(d, LLAMA_F, seed=seed + 9) * 0.25, "w_up": randn(d, LLAMA_F, seed=seed + 10) * 0.25,
        "w_down": randn(LLAMA_F, d, seed=seed + 11) * 0.25,
    }
    if custom_mask:
        arr["mask"] = (np.arange(seq)[None, :] < np.array([[seq], [seq - 2]])[:batch]).astype(np.float32)
    return arr


LLAMA_PARAMS = tuple(k for k in llama_arrays(1, 2, 2, 1, 4) if k not in ("x", "mask"))


def _llama_ops(heads: int, kv: int) -> tuple[str, ...]:
    gqa = () if heads == kv else ("narrow",) * heads + ("concat",) + ("narrow",) * heads + ("concat",)
    return ("rms_norm", "matmul", "matmul", "matmul", "rope", "rope", *gqa, "attention", "matmul", "add",
            "rms_norm", "matmul", "matmul", "silu", "mul", "matmul", "add")


def _llama_cases() -> list[BlockCase]:
    cases = []
    for heads, kv, kind in ((4, 2, "causal"), (2, 2, "none"), (2, 1, "sliding_window")):
        extra = {"window": 2} if kind == "sliding_window" else {}
        cases.append(BlockCase(
            "llama_decoder_block", f"h{heads}-kv{kv}-{kind}", llama_arrays(2, 5, heads, kv, 4),
            lambda h, *, heads=heads, kv=kv, kind=kind, extra=extra, **o: h.llama_decoder_block(
                *(o[k] for k in ("x", *LLAMA_PARAMS)), num_heads=heads, head_dim=4, num_kv_heads=kv, mask_kind=kind, **extra),
            _llama_ops(heads, kv), _llama_ops(heads, kv), LLAMA_PARAMS))
    ops = list(_llama_ops(4, 2))
    cases.append(BlockCase(
        "llama_decoder_block", "h4-kv2-custom", llama_arrays(2, 5, 4, 2, 4, custom_mask=True),
        lambda h, **o: h.llama_decoder_block(*(o[k] for k in ("x", *LLAMA_PARAMS, "mask")), num_heads=4, head_dim=4,
                                             num_kv_heads=2, mask_kind="custom"),
        tuple(ops), tuple(ops), LLAMA_PARAMS))
    rank2 = llama_arrays(1, 5, 4, 2, 4, seed=90)
    rank2["x"] = rank2["x"][0]
    rank2["mask"] = randn(4, 5, 5, seed=91)  # additive bias [H, Sq, Sk] for x [S, D]
    cases.append(BlockCase(
        "llama_decoder_block", "rank2-bias", rank2,
        lambda h, **o: h.llama_decoder_block(*(o[k] for k in ("x", *LLAMA_PARAMS, "mask")), num_heads=4, head_dim=4,
                                             num_kv_heads=2, mask="bias"),
        tuple(ops), tuple(ops), LLAMA_PARAMS))
    return cases


MTP = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 4, "n_rot": 2, "n_embd": 8, "n_ff": 12, "mtp_vocab": 11, "eps": 1e-6}


def mtp_arrays(batch: int = 2, seq: int = 5, vocab: int = 9, seed: int = 90) -> dict[str, np.ndarray]:
    e, ff, v, hd, heads, kv = (MTP[k] for k in ("n_embd", "n_ff", "mtp_vocab", "head_dim", "num_heads", "num_kv_heads"))
    rng = np.random.default_rng(seed)
    cos, sin = rope_tables(seq + 1, hd)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.4).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32), (0.1 * rng.standard_normal(n)).astype(np.float32)

    arr = {"h_pre_norm": w(batch, seq, e) * 2, "input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
           "cos": cos, "sin": sin, "last_token_idx": np.array([seq - 1, seq // 2][:batch], np.int64), "embed_w": w(vocab, e)}
    for name, n in (("hnorm", e), ("enorm", e)):
        arr[f"{name}_w"], arr[f"{name}_b"] = norm(n)
    arr["eh_w"] = w(2 * e, e)
    arr["attn_norm_w"], arr["attn_norm_b"] = norm(e)
    arr |= {"q_gate_w": w(e, 2 * heads * hd), "k_w": w(e, kv * hd), "v_w": w(e, kv * hd)}
    arr["q_norm_w"], arr["q_norm_b"] = norm(hd)
    arr["k_norm_w"], arr["k_norm_b"] = norm(hd)
    arr["o_w"] = w(heads * hd, e)
    arr["post_norm_w"], arr["post_norm_b"] = norm(e)
    arr |= {"gate_w": w(e, ff), "up_w": w(e, ff), "down_w": w(ff, e)}
    arr["head_norm_w"], arr["head_norm_b"] = norm(e)
    arr["lm_head_w"] = w(e, v)
    return arr


def _mtp_oracle(**a):
    """The MTP head written out per head and per token in float64."""
    a = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in a.items()}
    heads, kv, hd, n_rot, eps = (MTP[k] for k in ("num_heads", "num_kv_heads", "head_dim", "n_rot", "eps"))
    b, s, _ = a["h_pre_norm"].shape

    def rms(x, name):
        return _rms(x, a[f"{name}_w"], a[f"{name}_b"], eps)

    def rope(t):  # t [S, D] one head, NeoX halves over the first n_rot dims
        half, out = n_rot // 2, t.copy()
        c, si = a["cos"][:s, :half], a["sin"][:s, :half]
        x1, x2 = t[:, :half], t[:, half:n_rot]
        out[:, :half], out[:, half:n_rot] = x1 * c - x2 * si, x2 * c + x1 * si
        return out

    cur = np.concatenate([rms(a["embed_w"][a["input_ids"]], "enorm"), rms(a["h_pre_norm"], "hnorm")], axis=2) @ a["eh_w"]
    x = rms(cur, "attn_norm")
    qg = (x @ a["q_gate_w"]).reshape(b, s, heads, 2 * hd)
    k = (x @ a["k_w"]).reshape(b, s, kv, hd)
    v = (x @ a["v_w"]).reshape(b, s, kv, hd)
    att = np.zeros((b, s, heads, hd))
    for bi in range(b):
        for h in range(heads):
            kvh = h // (heads // kv)
            q = rope(_rms(qg[bi, :, h, :hd], a["q_norm_w"], a["q_norm_b"], eps))
            kk = rope(_rms(k[bi, :, kvh], a["k_norm_w"], a["k_norm_b"], eps))
            scores = q @ kk.T / np.sqrt(hd) + np.triu(np.full((s, s), -np.inf), 1)
            gate = 1 / (1 + np.exp(-qg[bi, :, h, hd:]))
            att[bi, :, h] = (_softmax(scores) @ v[bi, :, kvh]) * gate
    h1 = cur + att.reshape(b, s, heads * hd) @ a["o_w"]
    n2 = rms(h1, "post_norm")
    h2 = h1 + (_silu(n2 @ a["gate_w"]) * (n2 @ a["up_w"])) @ a["down_w"]
    last = h2[np.arange(b), a["last_token_idx"]][:, None, :]
    return rms(last, "head_norm") @ a["lm_head_w"]


def _mtp_cases() -> list[BlockCase]:
    from rlx.ops.hir_qwen35 import MTP_OPERANDS

    arrays = mtp_arrays()
    params = tuple(k for k in MTP_OPERANDS if k not in ("h_pre_norm", "input_ids", "last_token_idx", "cos", "sin"))
    rms3 = ("rms_norm",)

    def mm():
        return ("reshape", "matmul", "reshape")

    gqa = ("narrow",) * 4 + ("concat",)
    ops = ("gather", *rms3, *rms3, "concat", *mm(), *rms3, *mm(), "reshape", "narrow", "reshape", "narrow", "reshape",
           *mm(), "reshape", "rms_norm", "reshape", "reshape", "rms_norm", "reshape", "rope", "rope", *gqa, *mm(), *gqa,
           "attention", "sigmoid", "mul", *mm(), "add", *rms3, *mm(), "silu", *mm(), "mul", *mm(), "add", "reshape",
           "expand", "gather_elements", *rms3, "matmul")
    return [BlockCase("qwen35_mtp_head", "h4-kv2-rot2", arrays,
                      lambda h, **o: h.qwen35_mtp_head(*(o[k] for k in MTP_OPERANDS), **MTP), ops, ops, params,
                      oracle=_mtp_oracle)]


def _mir_cases() -> list[BlockCase]:
    arr = {"x": randn(2, 8, seed=70), "w": randn(8, 4, seed=71)}
    return [
        BlockCase("mir", "matmul-softmax", arr, lambda h, x, w: h.mir("softmax", h.matmul(x, w), axis=-1),
                  ("matmul", "softmax"), ("matmul", "softmax"), ("w",),
                  oracle=lambda x, w: _softmax(np.float64(x) @ w)),
        BlockCase("mir", "operators", arr, lambda h, x, w: h.gelu(x @ w) * 2.0,
                  ("matmul", "gelu", "constant", "mul"), ("matmul", "gelu", "constant", "mul"), ("w",),
                  oracle=lambda x, w: 2 * _gelu(np.float64(x) @ w)),
    ]


def all_cases() -> list[BlockCase]:
    return [*_linear_cases(), *_pair_cases(), *_swiglu_cases(), *_norm_cases(), *_rope_cases(), *_attention_cases(),
            *_dwconv_cases(), *_llama_cases(), *_mtp_cases(), *_mir_cases()]
