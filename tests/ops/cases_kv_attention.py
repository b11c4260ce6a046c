"""Cases for ``cached_attention`` (a KV-cache decode step).

Oracle: the semantics written out as a float64 loop over rows, tokens and heads (rope pair by pair,
the cache slots written one by one, a softmax over slots 0 .. pos + i per query head), independent of
rlx's row (which gathers and scatters with one-hot matmuls over whole tensors).
"""

from __future__ import annotations

import numpy as np

from opcases import OpCase, ShapeErrorCase, randn

NAMES = ("qkv", "k_cache", "v_cache", "pos", "cos", "sin")


def loop_oracle(heads, kv, hd, scale=None, rope="interleaved"):
    """out, k_cache_new, v_cache_new of the op's docstring, in float64 loops."""

    def oracle(qkv, k_cache, v_cache, pos, cos, sin):
        qkv, cos, sin = (np.asarray(a, np.float64) for a in (qkv, cos, sin))
        kc, vc = np.array(k_cache, np.float64), np.array(v_cache, np.float64)
        b_, s_, _ = qkv.shape
        sc = hd ** -0.5 if scale is None else scale

        def rot(x, t):
            y = x.copy()
            for j in range(hd // 2):
                ia, ib = (2 * j, 2 * j + 1) if rope == "interleaved" else (j, j + hd // 2)
                y[ia] = x[ia] * cos[t, j] - x[ib] * sin[t, j]
                y[ib] = x[ib] * cos[t, j] + x[ia] * sin[t, j]
            return y

        def head(b, i, n):
            return qkv[b, i, n * hd:(n + 1) * hd]

        for b in range(b_):
            for i in range(s_):
                for g in range(kv):
                    kc[b, g, pos[b] + i] = rot(head(b, i, heads + g), pos[b] + i)
                    vc[b, g, pos[b] + i] = head(b, i, heads + kv + g)
        out = np.zeros((b_, s_, heads * hd))
        for b in range(b_):
            for i in range(s_):
                t = pos[b] + i
                for h in range(heads):
                    g = h // (heads // kv)
                    q = rot(head(b, i, h), t)
                    scores = np.array([sc * q @ kc[b, g, j] for j in range(t + 1)])
                    p = np.exp(scores - scores.max())
                    out[b, i, h * hd:(h + 1) * hd] = (p / p.sum()) @ vc[b, g, :t + 1]
        return out, kc, vc

    return oracle


def feed(b, s, c, p, heads, kv, hd, pos, dtype=np.float64, seed=0):
    return {
        "qkv": randn(b, s, (heads + 2 * kv) * hd, dtype=dtype, seed=seed),
        "k_cache": randn(b, kv, c, hd, dtype=dtype, seed=seed + 1),
        "v_cache": randn(b, kv, c, hd, dtype=dtype, seed=seed + 2),
        "pos": np.asarray(pos, np.int64),
        "cos": np.cos(randn(p, hd // 2, seed=seed + 3)).astype(dtype),
        "sin": np.sin(randn(p, hd // 2, seed=seed + 3)).astype(dtype),
    }


def build(**attrs):
    def b(g, qkv, k_cache, v_cache, pos, cos, sin):
        return g.cached_attention(qkv, k_cache, v_cache, pos, cos, sin, **attrs)

    return b


def case(name, b, s, c, p, heads, kv, hd, pos, dtype=np.float64, tol=1e-12, **attrs):
    """One case: the op with ``attrs`` against the loop oracle on a seeded feed."""
    full = {"num_heads": heads, "kv_heads": kv, "head_dim": hd, **attrs}
    return OpCase("cached_attention", name, build(**full), feed(b, s, c, p, heads, kv, hd, pos, dtype, seed=len(name)),
                  loop_oracle(heads, kv, hd, attrs.get("scale"), attrs.get("rope", "interleaved")), rtol=tol, atol=tol)


CASES = [
    case("decode_interleaved_gqa3", 2, 1, 6, 7, 3, 1, 4, [2, 5]),
    case("decode_half_mha", 2, 1, 5, 5, 2, 2, 4, [0, 4], rope="half"),
    case("prefill_chunk_pos0", 1, 3, 5, 6, 3, 1, 4, [0]),
    case("chunk_at_cache_end", 2, 2, 6, 6, 6, 2, 4, [4, 1], rope="half"),
    case("scale", 1, 2, 4, 4, 2, 1, 6, [1], scale=0.3),
    case("f32", 2, 1, 8, 8, 4, 2, 8, [7, 3], dtype=np.float32, tol=1e-5),
    case("f16", 1, 2, 8, 8, 2, 1, 8, [5], dtype=np.float16, tol=2e-2),
]


def _error(qkv=(2, 1, 20), k=(2, 1, 6, 4), v=(2, 1, 6, 4), pos=(2,), cos=(6, 2), dtypes=("f32",) * 3, pos_dtype="i64", **attrs):
    def b(g):
        full = {"num_heads": 3, "kv_heads": 1, "head_dim": 4, **attrs}
        return g.cached_attention(g.input("qkv", qkv, dtypes[0]), g.input("k", k, dtypes[1]), g.input("v", v, dtypes[2]),
                                  g.input("pos", pos, pos_dtype), g.input("cos", cos, "f32"), g.input("sin", cos, "f32"), **full)

    return b


SHAPE_ERRORS = [
    ShapeErrorCase("cached_attention", "qkv_width", _error(qkv=(2, 1, 24)), match="qkv last dim"),
    ShapeErrorCase("cached_attention", "kv_heads_not_dividing", _error(kv_heads=2), match="dividing"),
    ShapeErrorCase("cached_attention", "odd_head_dim", _error(head_dim=3), match="even"),
    ShapeErrorCase("cached_attention", "cache_heads", _error(k=(2, 2, 6, 4)), match="k_cache axis 1"),
    ShapeErrorCase("cached_attention", "cache_slots_differ", _error(v=(2, 1, 5, 4)), match="v_cache slots"),
    ShapeErrorCase("cached_attention", "cache_dtype", _error(dtypes=("f32", "f16", "f32")), match="k_cache is f16"),
    ShapeErrorCase("cached_attention", "pos_dtype", _error(pos_dtype="i32"), match="pos must be i64"),
    ShapeErrorCase("cached_attention", "pos_length", _error(pos=(3,)), match="pos length"),
    ShapeErrorCase("cached_attention", "table_width", _error(cos=(6, 3)), match="cos / sin width"),
    ShapeErrorCase("cached_attention", "int_qkv", _error(dtypes=("i32", "f32", "f32")), match="qkv must be a float"),
]
