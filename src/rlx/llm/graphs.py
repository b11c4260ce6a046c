"""The two compiled graphs of generation, built from rlx MIR ops over the GGUF weights.

The embedding lookup (a row gather) happens before the graphs, which take the rows: the table, often the largest
tensor, stays out of the compiled sessions (onnxruntime models must serialize below 2 GB).

* prefill: token embeddings [S, D] (S symbolic) -> the last position's logits [1, V] and every layer's rotated keys and values
  [KV, S, hd] (keys stored transposed, [KV, hd, S], ready for the decode step's score matmul).
* decode: one token at position p -> logits [1, V] and the new key / value of every layer; the cache (capacity C,
  keys [KV, hd, C], values [KV, C, hd]) is an input read in place: slots >= p are masked by the ``bias`` input, and
  the current token's own key and value join through a separate score column, so the cache is never copied. The
  caller writes the returned entries into slot p (an in-place update of its own buffers).

Grouped-query attention folds the H / KV query heads that share a key head into the query rows of that head.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlx.frontends.gguf import GgufFile
from rlx.ir.graph import Graph, Value
from rlx.llm.config import LlmConfig, expected_shapes
from rlx.llm.weights import matmul_operand, to_f32

NEG = -1e30


@dataclass
class Weights:
    """Graph operands of a model: the arrays to bind (name -> array) and each matmul weight's scheme."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    schemes: dict[str, str | None] = field(default_factory=dict)
    #: dequant_matmul's x_quant for the schemes in INT8_X_SCHEMES ("q8_block": llama.cpp-style int8 activations)
    x_quant: str = "none"


#: schemes whose matmuls take int8 activation blocks when asked (onnxruntime runs them as integer MatMulNBits)
INT8_X_SCHEMES = frozenset({"gguf_q4_0", "gguf_q8_0"})


def load_weights(f: GgufFile, c: LlmConfig) -> Weights:
    """The operands the architecture reads (other tensors in the file are ignored): 2-D weights as matmul operands
    (packed or f32 [K, N]), the embedding, norms and biases as f32."""
    w = Weights()
    for name in expected_shapes(c):
        t = f.tensors.get(name)
        if t is None:
            continue
        if len(t.shape) == 2 and name != "token_embd.weight":
            w.schemes[name], w.arrays[name] = matmul_operand(t)
        else:
            w.arrays[name] = np.ascontiguousarray(to_f32(t))
    if "output.weight" not in w.arrays:  # tied embeddings: the lm head reads token_embd's (packed) rows
        w.schemes["output.weight"], w.arrays["output.weight"] = matmul_operand(f.tensors["token_embd.weight"])
    return w


class _Builder:
    def __init__(self, c: LlmConfig, w: Weights, name: str):
        self.c, self.w, self.g = c, w, Graph(name)
        self.params: dict[str, Value] = {}

    def param(self, name: str) -> Value:
        if name not in self.params:
            a = self.w.arrays[name]
            self.params[name] = self.g.param(name, a.shape, a.dtype)
        return self.params[name]

    def linear(self, x: Value, name: str, bias: str | None = None) -> Value:
        scheme = self.w.schemes[name]
        if scheme is None:
            y = self.g.matmul(x, self.param(name))
        else:
            xq = self.w.x_quant if scheme in INT8_X_SCHEMES else "none"
            y = self.g.apply("dequant_matmul", x, self.param(name), scheme=scheme, x_quant=xq)  # GGUF schemes: 2 operands
        if bias is not None and bias in self.w.arrays:
            y = y + self.param(bias)
        return y

    def norm(self, x: Value, name: str) -> Value:
        gamma = self.param(name)
        beta = self.g.constant(np.zeros(gamma.shape, np.float32))
        return self.g.rms_norm(x, gamma, beta, axis=-1, eps=self.c.eps)

    def head_norm(self, x: Value, name: str, heads: int) -> Value:
        """qwen3's per-head RMSNorm of q / k [S, heads·hd]."""
        hd = self.c.head_dim
        y = self.norm(self.g.reshape(x, new_shape=[-1, heads, hd]), name)
        return self.g.reshape(y, new_shape=[-1, heads * hd])

    def qkv(self, h: Value, i: int, cos: Value, sin: Value) -> tuple[Value, Value, Value]:
        c, b = self.c, f"blk.{i}."
        q = self.linear(h, b + "attn_q.weight", b + "attn_q.bias")
        k = self.linear(h, b + "attn_k.weight", b + "attn_k.bias")
        v = self.linear(h, b + "attn_v.weight", b + "attn_v.bias")
        if c.qk_norm:
            q, k = self.head_norm(q, b + "attn_q_norm.weight", c.n_heads), self.head_norm(k, b + "attn_k_norm.weight", c.n_kv_heads)
        def rope(t: Value) -> Value:
            return self.g.rope(t, cos, sin, head_dim=c.head_dim, n_rot=c.n_rot, interleaved=c.rope_interleaved)

        return rope(q), rope(k), v

    def ffn(self, x: Value, i: int) -> Value:
        b = f"blk.{i}."
        h = self.norm(x, b + "ffn_norm.weight")
        gate = self.g.silu(self.linear(h, b + "ffn_gate.weight"))
        return x + self.linear(gate * self.linear(h, b + "ffn_up.weight"), b + "ffn_down.weight")

    def head(self, x: Value) -> Value:
        return self.linear(self.norm(x, "output_norm.weight"), "output.weight")


def build_prefill(c: LlmConfig, w: Weights, length: int | None = None) -> Graph:
    """Token embeddings x [S, D] -> (logits [1, V] at row ``last``, then per layer keys [KV, hd, S] and values [KV, S, hd]).
    S is the symbol ``seq``, or ``length`` for backends that want static shapes (the caller pads the prompt at
    the end: causal attention keeps the real rows exact)."""
    bld = _Builder(c, w, "llm_prefill" if length is None else f"llm_prefill_{length}")
    g, kv, hd, rep = bld.g, c.n_kv_heads, c.head_dim, c.group
    s = "seq" if length is None else length
    x = g.input("x", (s, c.d_model), "f32")
    cos = g.input("cos", (s, c.n_rot // 2), "f32")
    sin = g.input("sin", (s, c.n_rot // 2), "f32")
    last = g.input("last", (1,), "i64")
    caches: list[Value] = []
    for i in range(c.n_layers):
        q, k, v = bld.qkv(bld.norm(x, f"blk.{i}.attn_norm.weight"), i, cos, sin)
        k4 = g.reshape(k, new_shape=[1, -1, kv, 1, hd])
        v4 = g.reshape(v, new_shape=[1, -1, kv, 1, hd])
        if rep > 1:
            k4 = g.expand(k4, target_shape=[-1, -1, -1, rep, -1])
            v4 = g.expand(v4, target_shape=[-1, -1, -1, rep, -1])
        att = g.attention(g.reshape(q, new_shape=[1, -1, c.n_heads, hd]), g.reshape(k4, new_shape=[1, -1, c.n_heads, hd]),
                          g.reshape(v4, new_shape=[1, -1, c.n_heads, hd]), num_heads=c.n_heads, head_dim=hd,
                          mask_kind="causal", layout="bshd")
        x = x + bld.linear(g.reshape(att, new_shape=[-1, c.n_heads * hd]), f"blk.{i}.attn_output.weight")
        x = bld.ffn(x, i)
        kh = g.reshape(k, new_shape=[-1, kv, hd])
        caches += [g.transpose(kh, perm=[1, 2, 0]), g.transpose(g.reshape(v, new_shape=[-1, kv, hd]), perm=[1, 0, 2])]
    g.set_outputs([bld.head(g.gather(x, last, axis=0)), *caches])
    return g


def build_decode(c: LlmConfig, w: Weights, capacity: int) -> Graph:
    """One token: its embedding x [1, D], cos / sin [1, n_rot/2], bias [1, C] (0 for filled slots, -1e30 else), per layer
    keys [KV, hd, C] and values [KV, C, hd] -> (logits [1, V], then per layer new key / value [KV, hd] each)."""
    bld = _Builder(c, w, f"llm_decode_{capacity}")
    g, kv, hd, rep = bld.g, c.n_kv_heads, c.head_dim, c.group
    x = g.input("x", (1, c.d_model), "f32")
    cos = g.input("cos", (1, c.n_rot // 2), "f32")
    sin = g.input("sin", (1, c.n_rot // 2), "f32")
    bias = g.input("bias", (1, capacity), "f32")
    scale = float(hd) ** -0.5
    news: list[Value] = []
    for i in range(c.n_layers):
        kc = g.input(f"k{i}", (kv, hd, capacity), "f32")
        vc = g.input(f"v{i}", (kv, capacity, hd), "f32")
        q, k, v = bld.qkv(bld.norm(x, f"blk.{i}.attn_norm.weight"), i, cos, sin)
        q3 = g.reshape(q, new_shape=[kv, rep, hd]) * scale
        k3, v3 = g.reshape(k, new_shape=[kv, 1, hd]), g.reshape(v, new_shape=[kv, 1, hd])
        s_cache = g.matmul(q3, kc) + bias  # [KV, rep, C]
        s_self = g.sum(q3 * k3, axes=[-1], keep_dim=True)  # [KV, rep, 1]
        p = g.softmax(g.concat([s_cache, s_self], axis=-1), axis=-1)
        att = g.matmul(g.narrow(p, 2, 0, capacity), vc) + g.narrow(p, 2, capacity, 1) * v3
        x = x + bld.linear(g.reshape(att, new_shape=[1, c.n_heads * hd]), f"blk.{i}.attn_output.weight")
        x = bld.ffn(x, i)
        news += [g.reshape(k, new_shape=[kv, hd]), g.reshape(v, new_shape=[kv, hd])]
    g.set_outputs([bld.head(x), *news])
    return g
