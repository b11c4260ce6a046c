"""The two compiled graphs of generation, built from rlx MIR ops over the GGUF weights.

The embedding lookup (a row gather) happens before the graphs, which take the rows: the table, often the largest
tensor, stays out of the compiled sessions (onnxruntime models must serialize below 2 GB).

* prefill: token embeddings [S, D] (S symbolic) -> the last position's logits [1, V] and every layer's rotated keys and values
  [KV, S, hd] (keys stored transposed, [KV, hd, S], ready for the decode step's score matmul).
* decode: one token at position p -> logits [1, V] and the new keys / values of all layers; the cache (capacity C,
  keys [KV, hd, C], values [KV, C, hd]) is an input read in place: slots >= p are masked by the ``bias`` input, and
  the current token's own key and value join through a separate score column, so the cache is never copied. The
  caller writes the returned entries into slot p (an in-place update of its own buffers).
* cached decode (:func:`build_decode_cached`, for engines with a fused kernel for it: onnxruntime's
  GroupQueryAttention): each layer's rope, cache append and attention are one ``cached_attention`` node over
  caches [1, KV, C, hd] and the position p; the updated caches are outputs, which such an engine writes into the
  input caches themselves (the onnxruntime backend's ``inplace_outputs``).

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
    #: merged weight name -> (the file's tensor names it holds, their output widths), see :data:`MERGED`
    merged: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = field(default_factory=dict)

    def merged_name(self, names: tuple[str, ...]) -> str | None:
        return next((m for m, (parts, _) in self.merged.items() if parts == names), None)


#: schemes whose matmuls take int8 activation blocks when asked (onnxruntime runs them as integer MatMulNBits)
INT8_X_SCHEMES = frozenset({"gguf_q4_0", "gguf_q8_0"})


#: matmuls of one layer that read the same input -> the merged weight that replaces them when they share a weight
#: type: one kernel call instead of three (two), and fewer nodes per decode step (rows of a packed weight are
#: independent, so stacking them computes the same columns)
MERGED = {"attn_qkv": ("attn_q", "attn_k", "attn_v"), "ffn_gate_up": ("ffn_gate", "ffn_up")}


def load_weights(f: GgufFile, c: LlmConfig, merge: bool = True) -> Weights:
    """The operands the architecture reads (other tensors in the file are ignored): 2-D weights as matmul operands
    (packed or f32 [K, N]), the embedding, norms and biases as f32; with ``merge``, the groups of :data:`MERGED`
    stacked into one operand each (and their biases into one bias)."""
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
    hd, kvw = c.head_dim, c.n_kv_heads * c.head_dim
    for i in range(c.n_layers):
        b = f"blk.{i}."
        if c.fused_qkv:  # the file's own merged weight (rows of q, k, v)
            w.merged[b + "attn_qkv.weight"] = (tuple(f"{b}attn_{p}.weight" for p in "qkv"), (c.n_heads * hd, kvw, kvw))
        if c.fused_gate_up:  # ffn_up holds gate's rows, then up's
            w.arrays[b + "ffn_gate_up.weight"] = w.arrays.pop(b + "ffn_up.weight")
            w.schemes[b + "ffn_gate_up.weight"] = w.schemes.pop(b + "ffn_up.weight")
            w.merged[b + "ffn_gate_up.weight"] = ((b + "ffn_gate.weight", b + "ffn_up.weight"), (c.d_ff, c.d_ff))
        for merged, parts in MERGED.items() if merge else ():
            if b + merged + ".weight" not in w.merged:
                _merge(w, b + merged, tuple(b + p for p in parts))
    return w


def _merge(w: Weights, merged: str, stems: tuple[str, ...]) -> None:
    names = tuple(s + ".weight" for s in stems)
    if len({w.schemes[n] for n in names}) != 1:
        return  # mixed weight types (e.g. a Q4_K_M file's Q6_K attn_v): separate matmuls
    packed = w.schemes[names[0]] is not None
    arrays = [w.arrays.pop(n) for n in names]
    widths = tuple(a.shape[0] if packed else a.shape[1] for a in arrays)
    w.arrays[merged + ".weight"] = np.concatenate(arrays, axis=0 if packed else 1)
    w.schemes[merged + ".weight"] = w.schemes[names[0]]
    for n in names:
        del w.schemes[n]
    w.merged[merged + ".weight"] = (names, widths)
    if all(s + ".bias" in w.arrays for s in stems):
        w.arrays[merged + ".bias"] = np.concatenate([w.arrays.pop(s + ".bias") for s in stems])


def rope_pairs(c: LlmConfig) -> np.ndarray:
    """For each of a head's hd lanes, the lane it rotates with: adjacent pairs (llama.cpp's normal rope) or the
    other half of the first n_rot lanes (NeoX); lanes past n_rot pair with themselves (their sin rows are 0)."""
    lanes = np.arange(c.head_dim)
    half = c.n_rot // 2
    rot = lanes[: c.n_rot]
    lanes[: c.n_rot] = rot ^ 1 if c.rope_interleaved else np.where(rot < half, rot + half, rot - half)
    return lanes.astype(np.int64)


def rope_rows(c: LlmConfig, cos: np.ndarray, sin: np.ndarray, heads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """cos / sin [n, n_rot/2] -> the [n, heads·hd] rows of ``y = x·cos_rows + x[pair]·sin_rows``: each angle's cos on
    both lanes of its pair, -sin on the first (a·c - b·s) and +sin on the second (b·c + a·s); 1 and 0 past n_rot."""
    n, half = cos.shape[0], c.n_rot // 2
    cr = np.ones((n, c.head_dim), np.float32)
    sr = np.zeros((n, c.head_dim), np.float32)
    first, second = (slice(0, c.n_rot, 2), slice(1, c.n_rot, 2)) if c.rope_interleaved else (slice(0, half), slice(half, c.n_rot))
    cr[:, first], cr[:, second] = cos, cos
    sr[:, first], sr[:, second] = -sin, sin
    return np.tile(cr, (1, heads)), np.tile(sr, (1, heads))


def rope_inputs(g: Graph, c: LlmConfig, s: int | str) -> tuple[tuple[Value, Value], tuple[Value, Value]]:
    """The graph's rope rows: (cos, sin) for every layer, then gemma3's local layers' own (cos_local, sin_local) (the
    same pair when the model has one rope)."""
    glob = (g.input("cos", (s, c.rope_width), "f32"), g.input("sin", (s, c.rope_width), "f32"))
    if not c.rope_base_local:
        return glob, glob
    return glob, (g.input("cos_local", (s, c.rope_width), "f32"), g.input("sin_local", (s, c.rope_width), "f32"))


class _Builder:
    def __init__(self, c: LlmConfig, w: Weights, name: str):
        self.c, self.w, self.g = c, w, Graph(name)
        self.params: dict[str, Value] = {}
        self._pairs: dict[int, Value] = {}
        self.fold_q = True  # the decode step's query scale in the rope's multiply (see qkv)
        self._lanes: Value | None = None
        #: the last qkv's rotated keys and its values as rows [S, W] whose last KV·hd lanes are k (v): the merged q / k
        #: rope output itself (W = (H + KV)·hd) or k; the merged q / k / v matmul's output or v. The decode step
        #: returns these rows: outputs read straight from the kernels that wrote them, where k's and v's own slices
        #: took OpenVINO a copy (Reorder) per layer each
        self.k_rows: Value | None = None
        self.v_rows: Value | None = None

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

    def linears(self, x: Value, stems: tuple[str, ...]) -> list[Value]:
        """``x @ Wᵀ (+ b)`` for the weights ``stem.weight`` (biases ``stem.bias`` where present): one merged matmul
        whose columns are split, or one matmul each."""
        merged = self.w.merged_name(tuple(s + ".weight" for s in stems))
        if merged is None:
            return [self.linear(x, s + ".weight", s + ".bias") for s in stems]
        y = self.linear(x, merged, merged[: -len(".weight")] + ".bias")
        out, start = [], 0
        for width in self.w.merged[merged][1]:
            out.append(self.g.narrow(y, 1, start, width))
            start += width
        return out

    def norm(self, x: Value, name: str) -> Value:
        """RMSNorm over the last axis, x / sqrt(mean(x²) + eps) · gamma (the rms_norm op's formula, without its beta),
        written in the elementwise ops onnxruntime fuses into one SimplifiedLayerNormalization kernel."""
        g = self.g
        return x / g.sqrt(g.mean(x * x, axes=[-1], keep_dim=True) + self.c.eps) * self.param(name)

    def head_norm(self, x: Value, name: str, heads: int) -> Value:
        """qwen3's per-head RMSNorm of q / k [S, heads·hd]."""
        hd = self.c.head_dim
        y = self.norm(self.g.reshape(x, new_shape=[-1, heads, hd]), name)
        return self.g.reshape(y, new_shape=[-1, heads * hd])

    def rope(self, t: Value, heads: int, cos: Value, sin: Value) -> Value:
        """The rope op's rotation of t [S, heads·hd] written as ``t·cos + t[pair]·sin`` over the rows of
        :func:`rope_rows` (tiled over the heads): the same products and sums (a·c - b·s, b·c + a·s), in four ONNX
        nodes instead of the rope exporter's slices and concats (what the decode step's node count is made of)."""
        g, width = self.g, heads * self.c.head_dim
        if heads not in self._pairs:
            self._pairs[heads] = g.constant(np.tile(rope_pairs(self.c), heads) + np.repeat(np.arange(heads) * self.c.head_dim,
                                                                                            self.c.head_dim))
        if width != cos.shape[1]:  # the tables are tiled for q and k heads together: every head's rows are the same
            cos, sin = g.narrow(cos, 1, 0, width), g.narrow(sin, 1, 0, width)
        return t * cos + g.gather(t, self._pairs[heads], axis=1) * sin

    def qkv(self, h: Value, i: int, cos: Value, sin: Value, q_scale: float | None = None) -> tuple[Value, Value, Value]:
        """Rotated q, k and v of layer i; with ``q_scale``, q comes out multiplied by it (the decode step's query
        scale, applied after the rotation as before, in the same fused elementwise kernel as the rope)."""
        c, b, g = self.c, f"blk.{i}.", self.g
        stems = (b + "attn_q", b + "attn_k", b + "attn_v")
        merged = self.w.merged_name(tuple(s + ".weight" for s in stems))
        if merged is not None and not c.qk_norm:  # q and k heads side by side in one matmul: one rope for both
            y = self.linear(h, merged, b + "attn_qkv.bias")
            wq, wk, wv = self.w.merged[merged][1]
            qk = self.rope(g.narrow(y, 1, 0, wq + wk), c.n_heads + c.n_kv_heads, cos, sin)
            if q_scale is not None and self.fold_q:  # one lane-scale multiply (1.0 on the k lanes: exact) fused into the rope's
                if self._lanes is None:  # elementwise kernel, instead of a multiply node on q per layer
                    self._lanes = g.constant(np.concatenate([np.full(wq, q_scale, np.float32), np.ones(wk, np.float32)]))
                qk, q_scale = qk * self._lanes, None
            q, self.k_rows, self.v_rows = g.narrow(qk, 1, 0, wq), qk, y
            return (q if q_scale is None else q * q_scale), g.narrow(qk, 1, wq, wk), g.narrow(y, 1, wq + wk, wv)
        q, k, v = self.linears(h, stems)
        if c.qk_norm:
            q, k = self.head_norm(q, b + "attn_q_norm.weight", c.n_heads), self.head_norm(k, b + "attn_k_norm.weight", c.n_kv_heads)
        q, self.k_rows, self.v_rows = self.rope(q, c.n_heads, cos, sin), self.rope(k, c.n_kv_heads, cos, sin), v
        return (q if q_scale is None else q * q_scale), self.k_rows, v

    def ffn(self, x: Value, i: int) -> Value:
        b = f"blk.{i}."
        h = self.norm(x, b + "ffn_norm.weight")
        gate, up = self.linears(h, (b + "ffn_gate", b + "ffn_up"))
        act = self.g.gelu_approx(gate) if self.c.ffn_act == "gelu_tanh" else self.g.silu(gate)
        return x + self.post_norm(self.linear(act * up, b + "ffn_down.weight"), b + "post_ffw_norm.weight")

    def post_norm(self, y: Value, name: str) -> Value:
        """gemma2's RMSNorm of a block's output before the residual add (identity for the other architectures)."""
        return self.norm(y, name) if self.c.post_norms else y

    def softcap(self, s: Value, cap: float) -> Value:
        """gemma2's tanh soft-capping, cap·tanh(s / cap) (none when cap is 0)."""
        return self.g.tanh(s / cap) * cap if cap else s

    def embed(self, x: Value) -> Value:
        return x * self.c.embed_scale if self.c.embed_scale != 1.0 else x

    def scale(self) -> float:
        return self.c.query_scale if self.c.query_scale is not None else float(self.c.head_dim) ** -0.5

    def head(self, x: Value) -> Value:
        return self.softcap(self.linear(self.norm(x, "output_norm.weight"), "output.weight"), self.c.final_softcap)


def build_prefill(c: LlmConfig, w: Weights, length: int | None = None) -> Graph:
    """Token embeddings x [S, D] -> (logits [1, V] at row ``last``, then per layer keys [KV, hd, S] and values [KV, S, hd]).
    S is the symbol ``seq``, or ``length`` for backends that want static shapes (the caller pads the prompt at
    the end: causal attention keeps the real rows exact)."""
    bld = _Builder(c, w, "llm_prefill" if length is None else f"llm_prefill_{length}")
    g, kv, hd, rep = bld.g, c.n_kv_heads, c.head_dim, c.group
    s = "seq" if length is None else length
    x = g.input("x", (s, c.d_model), "f32")
    tables = rope_inputs(g, c, s)
    last = g.input("last", (1,), "i64")
    x = bld.embed(x)
    caches: list[Value] = []
    for i in range(c.n_layers):
        q, k, v = bld.qkv(bld.norm(x, f"blk.{i}.attn_norm.weight"), i, *tables[c.is_local(i) and c.rope_base_local > 0])
        k4 = g.reshape(k, new_shape=[1, -1, kv, 1, hd])
        v4 = g.reshape(v, new_shape=[1, -1, kv, 1, hd])
        if rep > 1:
            k4 = g.expand(k4, target_shape=[-1, -1, -1, rep, -1])
            v4 = g.expand(v4, target_shape=[-1, -1, -1, rep, -1])
        att = g.attention(g.reshape(q, new_shape=[1, -1, c.n_heads, hd]), g.reshape(k4, new_shape=[1, -1, c.n_heads, hd]),
                          g.reshape(v4, new_shape=[1, -1, c.n_heads, hd]), num_heads=c.n_heads, head_dim=hd,
                          score_scale=bld.scale(), attn_logit_softcap=c.attn_softcap or None, layout="bshd",
                          # a local layer's query i sees keys i - window + 1 .. i (the op's window counts those before i)
                          **({"mask_kind": "sliding_window", "window": c.sliding_window - 1} if c.is_local(i) else {"mask_kind": "causal"}))
        att = g.reshape(att, new_shape=[-1, c.n_heads * hd])
        x = x + bld.post_norm(bld.linear(att, f"blk.{i}.attn_output.weight"), f"blk.{i}.post_attention_norm.weight")
        x = bld.ffn(x, i)
        kh = g.reshape(k, new_shape=[-1, kv, hd])
        caches += [g.transpose(kh, perm=[1, 2, 0]), g.transpose(g.reshape(v, new_shape=[-1, kv, hd]), perm=[1, 0, 2])]
    g.set_outputs([bld.head(g.gather(x, last, axis=0)), *caches])
    return g


def build_decode(c: LlmConfig, w: Weights, capacity: int, fold_query_scale: bool = True) -> Graph:
    """One token: its embedding x [1, D], cos / sin rows [1, hd], bias [1, C] (0 for filled slots, -1e30 else), per layer
    keys [KV, hd, C] and values [KV, C, hd] -> (logits [1, V], every layer's new key and new value as rows [L, W]
    whose last KV·hd lanes are the key / value (see ``_Builder.k_rows``)): two stacked outputs rather than 2·L, so
    the caller's per-token cache update is two array writes (:func:`kv_lanes` reads them out of the rows).
    ``fold_query_scale``: q's scale applied in the rope's multiply (merged q / k / v; one node less per layer, the
    same products: bit-equal, tested) rather than as a multiply of its own."""
    bld = _Builder(c, w, f"llm_decode_{capacity}")
    bld.fold_q = fold_query_scale
    g, kv, hd, rep = bld.g, c.n_kv_heads, c.head_dim, c.group
    x = g.input("x", (1, c.d_model), "f32")
    tables = rope_inputs(g, c, 1)
    bias = g.input("bias", (1, capacity), "f32")
    # local layers' mask: also -1e30 for the slots that left the sliding window
    bias_local = g.input("bias_local", (1, capacity), "f32") if c.sliding_window else bias
    scale = bld.scale()
    x = bld.embed(x)
    news: list[Value] = []
    for i in range(c.n_layers):
        kc = g.input(f"k{i}", (kv, hd, capacity), "f32")
        vc = g.input(f"v{i}", (kv, capacity, hd), "f32")
        q, k, v = bld.qkv(bld.norm(x, f"blk.{i}.attn_norm.weight"), i, *tables[c.is_local(i) and c.rope_base_local > 0], scale)
        q3 = g.reshape(q, new_shape=[kv, rep, hd])
        v3 = g.reshape(v, new_shape=[kv, 1, hd])
        s_cache = bld.softcap(g.matmul(q3, kc), c.attn_softcap) + (bias_local if c.is_local(i) else bias)  # [KV, rep, C]
        s_self = bld.softcap(g.matmul(q3, g.reshape(k, new_shape=[kv, hd, 1])), c.attn_softcap)  # [KV, rep, 1]
        p = g.softmax(g.concat([s_cache, s_self], axis=-1), axis=-1)
        att = g.matmul(g.narrow(p, 2, 0, capacity), vc) + g.narrow(p, 2, capacity, 1) * v3
        x = x + bld.post_norm(bld.linear(g.reshape(att, new_shape=[1, c.n_heads * hd]), f"blk.{i}.attn_output.weight"),
                              f"blk.{i}.post_attention_norm.weight")
        x = bld.ffn(x, i)
        assert bld.k_rows is not None and bld.v_rows is not None  # set by qkv
        news += [bld.k_rows, bld.v_rows]
    for j in (0, 1):  # merged and separate q / k / v layers (mixed weight types): k's (v's) lanes only
        if len({r.shape[1] for r in news[j::2]}) > 1:
            news[j::2] = [g.narrow(r, 1, r.shape[1] - kv * hd, kv * hd) for r in news[j::2]]
    stacked = [g.concat(news[j::2], axis=0) if c.n_layers > 1 else news[j] for j in (0, 1)]
    g.set_outputs([bld.head(x), *stacked])
    return g


def cached_decode_applies(c: LlmConfig, w: Weights) -> bool:
    """Whether :func:`build_decode_cached` can build this model's decode step: merged q / k / v matmuls (one packed
    qkv row), the rope over whole heads with one table, and plain causal attention (no per-head q / k norm between
    the matmul and the rope, no logit soft-cap, no sliding window)."""
    merged = all(w.merged_name(tuple(f"blk.{i}.attn_{p}.weight" for p in "qkv")) for i in range(c.n_layers))
    return (merged and not c.qk_norm and not c.attn_softcap and not c.sliding_window and not c.rope_base_local
            and c.n_rot == c.head_dim)


def build_decode_cached(c: LlmConfig, w: Weights, capacity: int) -> Graph:
    """One token: its embedding x [1, D], its position ``pos`` [1] (the filled cache slots), the rope tables cos / sin
    [C, hd/2] (row t: position t), per layer keys ``k{i}`` and values ``v{i}`` [1, KV, C, hd] -> (logits [1, V], then
    per layer the keys and values with slot pos written). Each layer's attention is one ``cached_attention`` node
    reading the merged q / k / v row (:func:`cached_decode_applies`)."""
    bld = _Builder(c, w, f"llm_decode_cached_{capacity}")
    g, kv, hd, heads = bld.g, c.n_kv_heads, c.head_dim, c.n_heads
    x = bld.embed(g.input("x", (1, c.d_model), "f32"))
    pos = g.input("pos", (1,), "i64")
    cos, sin = (g.input(name, (capacity, hd // 2), "f32") for name in ("cos", "sin"))
    width = (heads + 2 * kv) * hd
    caches: list[Value] = []
    for i in range(c.n_layers):
        b = f"blk.{i}."
        kc, vc = (g.input(f"{kind}{i}", (1, kv, capacity, hd), "f32") for kind in "kv")
        qkv = bld.linear(bld.norm(x, b + "attn_norm.weight"), b + "attn_qkv.weight", b + "attn_qkv.bias")
        att, k_new, v_new = g.cached_attention(g.reshape(qkv, new_shape=[1, 1, width]), kc, vc, pos, cos, sin, num_heads=heads,
                                               kv_heads=kv, head_dim=hd, scale=bld.scale(),
                                               rope="interleaved" if c.rope_interleaved else "half")
        x = x + bld.post_norm(bld.linear(g.reshape(att, new_shape=[1, heads * hd]), b + "attn_output.weight"),
                              b + "post_attention_norm.weight")
        x = bld.ffn(x, i)
        caches += [k_new, v_new]
    g.set_outputs([bld.head(x), *caches])
    return g


def kv_lanes(rows: np.ndarray, c: LlmConfig) -> np.ndarray:
    """The decode step's key or value output [L, W] as keys / values [L, KV, hd]: its last KV·hd lanes (a view)."""
    return rows.reshape(c.n_layers, -1)[:, -c.n_kv_heads * c.head_dim:].reshape(c.n_layers, c.n_kv_heads, c.head_dim)
