"""Cases for the MoE / packed-expert ops (rlx.ops.moe). Oracles: per-token NumPy loops, and GGUF / NVFP4
blocks hand-packed here by encoders written out from the ggml block layouts (docs/semantics.md#packed-weights) from known
quantised values; the expected weights are computed from those known values, never by decoding bytes.
NVFP4 scales are checked with ml_dtypes' float8_e4m3fn."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from opcases import OpCase, ShapeErrorCase, randn

R = np.random.default_rng(40)


def loop_gmm(x, w, i):
    out = np.zeros((x.shape[0], w.shape[2]))
    for t in range(x.shape[0]):
        out[t] = x[t].astype(np.float64) @ w[int(i[t])].astype(np.float64)
    return out


# ------------------------------------------------------------------------- GGUF block encoders
def f16_bytes(v):
    return np.array([v], "<f2").view(np.uint8)


def pack_q4_k(d, dmin, sc, mn, q, five=False):
    """One Q4_K (or Q5_K with five=True) block from d, dmin, 6-bit scales / mins [8] and quants [256]."""
    scales = np.zeros(12, np.uint8)
    for j in range(4):
        scales[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
        scales[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
        scales[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4)
    qs = np.zeros(128, np.uint8)
    qh = np.zeros(32, np.uint8)
    for c in range(4):
        for ll in range(32):
            lo, hi = q[64 * c + ll], q[64 * c + 32 + ll]
            qs[32 * c + ll] = (lo & 0xF) | ((hi & 0xF) << 4)
            qh[ll] |= ((lo >> 4) & 1) << (2 * c)
            qh[ll] |= ((hi >> 4) & 1) << (2 * c + 1)
    parts = [f16_bytes(d), f16_bytes(dmin), scales] + ([qh] if five else []) + [qs]
    return np.concatenate(parts).astype(np.uint8)


def pack_q6_k(d, sc, q):
    """One Q6_K block from d, int8 scales [16] and quants [256] in [-32, 31]."""
    ql = np.zeros(128, np.uint8)
    qh = np.zeros(64, np.uint8)
    for e in range(256):
        u = int(q[e]) + 32
        h, r = divmod(e, 128)
        t, ll = divmod(r, 32)
        pos = 64 * h + ll + 32 * (t % 2)
        ql[pos] |= (u & 0xF) << (4 * (t // 2))
        qh[32 * h + ll] |= (u >> 4) << (2 * t)
    return np.concatenate([ql, qh, np.asarray(sc, np.int8).view(np.uint8), f16_bytes(d)]).astype(np.uint8)


def pack_q8_k(d, q):
    q = np.asarray(q, np.int8)
    bsums = q.reshape(16, 16).astype(np.int16).sum(axis=1).astype("<i2")
    return np.concatenate([np.array([d], "<f4").view(np.uint8), q.view(np.uint8), bsums.view(np.uint8)]).astype(np.uint8)


def pack_q2_k(d, dmin, sc, mn, q):
    """One Q2_K block from d, dmin, 4-bit scales / mins [16] and 2-bit quants [256] (ggml's layout, element by element)."""
    qs = np.zeros(64, np.uint8)
    for e in range(256):
        n, r = divmod(e, 128)
        j, r = divmod(r, 32)
        h, ll = divmod(r, 16)
        qs[32 * n + 16 * h + ll] |= int(q[e]) << (2 * j)
    scales = (np.asarray(sc) | (np.asarray(mn) << 4)).astype(np.uint8)
    return np.concatenate([scales, qs, f16_bytes(d), f16_bytes(dmin)]).astype(np.uint8)


def pack_q3_k(d, sc, q):
    """One Q3_K block from d, 6-bit scales [16] (value sc - 32 applies) and quants [256] in [-4, 3]."""
    hmask, qs = np.zeros(32, np.uint8), np.zeros(64, np.uint8)
    for e in range(256):
        n, r = divmod(e, 128)
        j, r = divmod(r, 32)
        h, ll = divmod(r, 16)
        u = int(q[e]) + 4  # 0..7: the low 2 bits go to qs, bit 2 set means "do not subtract 4"
        qs[32 * n + 16 * h + ll] |= (u & 3) << (2 * j)
        hmask[16 * h + ll] |= (u >> 2) << (4 * n + j)
    scales = np.zeros(12, np.uint8)
    for s_ in range(16):
        k, group = s_ % 4, s_ // 4
        low, top = int(sc[s_]) & 15, int(sc[s_]) >> 4
        byte = (k, 4 + k, k, 4 + k)[group]
        scales[byte] |= low << (4 if group >= 2 else 0)
        scales[8 + k] |= top << (2 * group)
    return np.concatenate([hmask, qs, scales, f16_bytes(d)]).astype(np.uint8)


def pack_q4_0(d, q):
    """One Q4_0 block from d and quants [32] in [-8, 7]: element l in the low nibble of byte l, 16 + l in the high one."""
    u = np.asarray(q) + 8
    return np.concatenate([f16_bytes(d), (u[:16] | (u[16:] << 4)).astype(np.uint8)]).astype(np.uint8)


def pack_q8_0(d, q):
    return np.concatenate([f16_bytes(d), np.asarray(q, np.int8).view(np.uint8)]).astype(np.uint8)


#: block elements per scheme (the layouts fix these)
BLOCK_ELEMS = {"gguf_q4_0": 32, "gguf_q8_0": 32}


def expected_k4(d, dmin, sc, mn, q):
    return np.array([d * sc[e // 32] * q[e] - dmin * mn[e // 32] for e in range(256)])


def make_blocks(scheme, nblocks, seed):
    """(packed bytes, expected flat values) for nblocks random blocks of a GGUF scheme."""
    rng = np.random.default_rng(seed)
    raw, vals = [], []
    for _ in range(nblocks):
        d = float(rng.choice([2.0**-6, 2.0**-7, 2.0**-5, -(2.0**-6)]))  # small: f32 parity of the products stays tight
        if scheme in ("gguf_q4_k", "gguf_q5_k"):
            dmin = float(rng.choice([2.0**-7, 2.0**-9, 2.0**-6]))
            sc, mn = rng.integers(0, 64, 8), rng.integers(0, 64, 8)
            five = scheme == "gguf_q5_k"
            q = rng.integers(0, 32 if five else 16, 256)
            raw.append(pack_q4_k(d, dmin, sc, mn, q, five))
            vals.append(expected_k4(d, dmin, sc, mn, q))
        elif scheme == "gguf_q6_k":
            sc, q = rng.integers(-128, 128, 16), rng.integers(-32, 32, 256)
            raw.append(pack_q6_k(d, sc, q))
            vals.append(np.array([d * sc[e // 16] * q[e] for e in range(256)]))
        elif scheme == "gguf_q2_k":
            dmin = float(rng.choice([2.0**-7, 2.0**-9, 2.0**-6]))
            sc, mn, q = rng.integers(0, 16, 16), rng.integers(0, 16, 16), rng.integers(0, 4, 256)
            raw.append(pack_q2_k(d, dmin, sc, mn, q))
            vals.append(np.array([d * sc[e // 16] * q[e] - dmin * mn[e // 16] for e in range(256)]))
        elif scheme == "gguf_q3_k":
            sc, q = rng.integers(0, 64, 16), rng.integers(-4, 4, 256)
            raw.append(pack_q3_k(d, sc, q))
            vals.append(np.array([d * (sc[e // 16] - 32) * q[e] for e in range(256)]))
        elif scheme == "gguf_q4_0":
            q = rng.integers(-8, 8, 32)
            raw.append(pack_q4_0(d, q))
            vals.append(d * q.astype(np.float64))
        elif scheme == "gguf_q8_0":
            q = rng.integers(-128, 128, 32)
            raw.append(pack_q8_0(d, q))
            vals.append(d * q.astype(np.float64))
        else:
            d = float(rng.standard_normal() * 0.01)
            q = rng.integers(-128, 128, 256)
            raw.append(pack_q8_k(d, q))
            vals.append(np.float32(d) * q.astype(np.float64))
    return np.concatenate(raw), np.concatenate(vals)


def gguf_stack(scheme, e, k, n, seed):
    """E experts packed [N, K] (GGUF) -> (bytes, expected W [E, K, N])."""
    raw, vals = make_blocks(scheme, e * k * n // BLOCK_ELEMS.get(scheme, 256), seed)
    return raw, vals.reshape(e, n, k).transpose(0, 2, 1)


# ------------------------------------------------------------------------------ NVFP4 encoder
LUT = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def nvfp4_stack(e, k, n, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, (e, k, n))
    groups = -(-k // 16)
    sbytes = rng.integers(0, 0x78, (e, groups, n)).astype(np.uint8)  # positive E4M3FN scales, exponent <= 14
    sbytes[0, 0, 0] = 0x7F  # NaN scale: read as 0
    sbytes[-1, -1, -1] = 0x7E  # exponent 15 is a normal number in E4M3FN (448)
    glob = np.array([0.75], np.float32)
    packed = []
    for i in range(e):
        flat = codes[i].reshape(-1)
        if flat.size % 2:
            flat = np.concatenate([flat, [0]])
        packed.append((flat[0::2] | (flat[1::2] << 4)).astype(np.uint8))
    scale = sbytes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    scale = np.where(np.isnan(scale), 0.0, scale)
    rows = np.arange(k) // 16
    w = np.array([[[LUT[codes[i, p, j]] * scale[i, rows[p], j] * 0.75 for j in range(n)] for p in range(k)] for i in range(e)])
    return np.concatenate(packed), sbytes, glob, w


E_, K_, N_ = 3, 4, 5
XG = randn(6, K_, seed=41)
WG = randn(E_, K_, N_, seed=42)
IDG = np.array([2, 0, 2, 2, 1, 0], np.int32)

CASES = [
    OpCase("grouped_matmul", "f64_int_ids_loop", lambda g, x, w, i: g.grouped_matmul(x, w, i), {"x": XG, "w": WG, "i": IDG},
           loop_gmm, rtol=1e-12, differentiable=("x", "w")),
    OpCase("grouped_matmul", "f64_unused_expert_i64", lambda g, x, w, i: g.grouped_matmul(x, w, i),
           {"x": XG[:4], "w": WG, "i": np.array([0, 0, 2, 0], np.int64)}, loop_gmm, rtol=1e-12),
    OpCase("grouped_matmul", "f32_float_ids_truncate", lambda g, x, w, i: g.grouped_matmul(x, w, i),
           {"x": XG.astype(np.float32), "w": WG.astype(np.float32), "i": np.array([2.0, 0.0, 1.9, 2.0, 1.0, 0.3], np.float32)},
           lambda x, w, i: loop_gmm(x, w, np.trunc(i)), rtol=1e-5, atol=1e-6),
    OpCase("grouped_matmul", "batch_dims_loop", lambda g, x, w, i: g.grouped_matmul(x, w, i, batch_dims=1),
           {"x": np.stack([XG, -XG]), "w": np.stack([WG, WG[::-1]]), "i": np.stack([IDG, IDG[::-1]])},
           lambda x, w, i: np.stack([loop_gmm(x[b], w[b], i[b]) for b in range(2)]), rtol=1e-12),
]

for _k, (_scheme, _e, _kk, _n) in enumerate([("gguf_q4_k", 2, 32, 16), ("gguf_q5_k", 2, 16, 32), ("gguf_q6_k", 3, 64, 8),
                                              ("gguf_q8_k", 2, 16, 16), ("gguf_q2_k", 2, 32, 16), ("gguf_q3_k", 2, 16, 32),
                                              ("gguf_q4_0", 3, 8, 12), ("gguf_q8_0", 2, 16, 6)]):
    _raw, _w = gguf_stack(_scheme, _e, _kk, _n, seed=50 + _k)
    CASES.append(OpCase("dequant_moe_weights", f"{_scheme}_hand_packed",
                        lambda g, p, s=_scheme, k=_kk, n=_n: g.dequant_moe_weights(p, scheme=s, k=k, n=n),
                        {"p": _raw.reshape(_e, -1)}, lambda p, w=_w: w, rtol=1e-6, atol=1e-6))
    _x = randn(5, _kk, seed=60 + _k)
    _ids = R.integers(0, _e, 5).astype(np.int32)
    CASES.append(OpCase("dequant_grouped_matmul", f"{_scheme}_hand_packed_f64",
                        lambda g, x, p, i, s=_scheme, n=_n: g.dequant_grouped_matmul(x, p, i, scheme=s, n=n),
                        {"x": _x, "p": _raw, "i": _ids}, lambda x, p, i, w=_w: loop_gmm(x, w, i), rtol=1e-6, atol=1e-6,
                        differentiable=("x",)))

_P4, _S4, _G4, _W4 = nvfp4_stack(2, 20, 3, seed=70)
_X4 = randn(4, 20, seed=71).astype(np.float32)
CASES += [
    OpCase("dequant_moe_weights", "nvfp4_hand_packed", lambda g, p, s, gl: g.dequant_moe_weights(p, s, gl, scheme="nvfp4_block", k=20, n=3),
           {"p": _P4, "s": _S4, "gl": _G4}, lambda p, s, gl: _W4, rtol=1e-6),
    OpCase("dequant_grouped_matmul", "nvfp4_hand_packed_f32",
           lambda g, x, p, i, s, gl: g.dequant_grouped_matmul(x, p, i, s, gl, scheme="nvfp4_block", n=3),
           {"x": _X4, "p": _P4, "i": np.array([1, 0, 1, 1], np.int64), "s": _S4, "gl": _G4},
           lambda x, p, i, s, gl: loop_gmm(x, _W4, i), rtol=1e-5, atol=1e-4),
]


def _in(g, name, shape, dtype="f32"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("grouped_matmul", "k_mismatch",
                   lambda g: g.grouped_matmul(_in(g, "x", (2, 3)), _in(g, "w", (2, 4, 5)), _in(g, "i", (2,), "i32")), match="contracted"),
    ShapeErrorCase("grouped_matmul", "ids_length",
                   lambda g: g.grouped_matmul(_in(g, "x", (2, 4)), _in(g, "w", (2, 4, 5)), _in(g, "i", (3,), "i32"))),
    ShapeErrorCase("dequant_grouped_matmul", "partial_slab",
                   lambda g: g.dequant_grouped_matmul(_in(g, "x", (2, 16)), _in(g, "p", (150,), "u8"), _in(g, "i", (2,), "i32"),
                                                      scheme="gguf_q4_k", n=16), match="slab"),
    ShapeErrorCase("dequant_grouped_matmul", "nvfp4_scale_bytes",
                   lambda g: g.dequant_grouped_matmul(_in(g, "x", (2, 16)), _in(g, "p", (16,), "u8"), _in(g, "i", (2,), "i32"),
                                                      _in(g, "s", (3,), "u8"), _in(g, "gl", (1,)), scheme="nvfp4_block", n=2),
                   match="scale"),
    ShapeErrorCase("dequant_moe_weights", "partial_block",
                   lambda g: g.dequant_moe_weights(_in(g, "p", (292,), "u8"), scheme="gguf_q8_k", k=10, n=10), match="multiple of 256"),
]

# ------------------------------------------------- dequant_matmul with the tier-3 schemes (docs/semantics.md#packed-weights)
_RAWQ, _WQ = gguf_stack("gguf_q6_k", 1, 32, 24, seed=80)  # one [N=24, K=32] weight: 3 blocks
_RAWQ4, _WQ4 = gguf_stack("gguf_q4_k", 1, 64, 8, seed=81)
_NEW_GGUF = {sch: gguf_stack(sch, 1, k, n, seed=90 + i)
             for i, (sch, k, n) in enumerate([("gguf_q2_k", 32, 8), ("gguf_q3_k", 64, 12), ("gguf_q4_0", 16, 6), ("gguf_q8_0", 32, 3)])}
_P1, _S1, _G1, _W1 = nvfp4_stack(1, 20, 3, seed=82)
CASES += [
    OpCase("dequant_matmul", "gguf_q6_k_hand_packed_f64", lambda g, x, p: g.dequant_matmul(x, p, scheme="gguf_q6_k"),
           {"x": randn(3, 32, seed=83), "p": _RAWQ}, lambda x, p: x @ _WQ[0], rtol=1e-6, atol=1e-6, differentiable=("x",)),
    OpCase("dequant_matmul", "gguf_q4_k_hand_packed_2d_bytes", lambda g, x, p: g.dequant_matmul(x, p, scheme="gguf_q4_k"),
           {"x": randn(2, 64, seed=84).astype(np.float32), "p": _RAWQ4.reshape(2, -1)},
           lambda x, p: x.astype(np.float64) @ _WQ4[0], rtol=1e-5, atol=1e-5),
    *[OpCase("dequant_matmul", f"{sch}_hand_packed_f64", lambda g, x, p, s=sch: g.dequant_matmul(x, p, scheme=s),
             {"x": randn(3, w.shape[1], seed=95), "p": raw}, lambda x, p, w=w: x @ w[0], rtol=1e-6, atol=1e-6, differentiable=("x",))
      for sch, (raw, w) in _NEW_GGUF.items()],
    OpCase("dequant_matmul", "nvfp4_hand_packed", lambda g, x, p, s, gl: g.dequant_matmul(x, p, s, gl, scheme="nvfp4_block"),
           {"x": randn(2, 20, seed=85).astype(np.float32), "p": _P1, "s": _S1[0], "gl": _G1},
           lambda x, p, s, gl: x.astype(np.float64) @ _W1[0], rtol=1e-5, atol=1e-4),
]
SHAPE_ERRORS += [
    ShapeErrorCase("dequant_matmul", "gguf_partial_rows",
                   lambda g: g.dequant_matmul(_in(g, "x", (2, 100)), _in(g, "p", (210,), "u8"), scheme="gguf_q6_k"), match="blocks"),
]
