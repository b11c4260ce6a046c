"""Mixture-of-experts and packed-weight expert matmuls (docs/semantics.md#packed-weights): grouped_matmul,
dequant_grouped_matmul and dequant_moe_weights, with the GGUF K-quant block decoders
(Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, Q4_0, Q8_0) and NVFP4.

Conventions:

* Expert ids are integer tensors (any int dtype); float ids are accepted as upstream's
  (truncated toward zero, ``int(expert_idx[i])``). An id outside ``[0, E)`` raises
  ``RlxError`` at run time in the reference kernels.
* GGUF packing (llama.cpp / ggml ``dequantize_row_*``): one expert's weight is stored
  **``[N, K]``** (output rows): element ``(j, p)`` is flat index ``j·K + p``, split into blocks of
  256 (K-quants) or 32 (Q4_0, Q8_0) consecutive flat elements, so ``K·N`` must be a multiple of the
  block size. An expert slab is ``(K·N / block) · block_bytes`` bytes; a stack holds ``E`` slabs back to back (any operand shape,
  the byte count decides ``E``). The decoded expert is transposed to the grouped_matmul layout
  ``[K, N]``. Block layouts (bytes, little endian; ``fp16`` = IEEE half):

  - ``gguf_q4_k`` (144): ``d fp16 | dmin fp16 | scales[12] | qs[128]``. Eight sub-blocks of 32 with
    6-bit scale ``sc_s`` and min ``m_s`` packed in ``scales`` (s < 4: ``sc = scales[s] & 63``,
    ``m = scales[s+4] & 63``; s >= 4: ``sc = (scales[s+4] & 15) | (scales[s-4] >> 6) << 4``,
    ``m = (scales[s+4] >> 4) | (scales[s] >> 6) << 4``). Chunk c (64 elements) reads ``qs[32c:32c+32]``:
    low nibbles are sub-block 2c, high nibbles sub-block 2c+1. ``y = (d·sc_s)·q − dmin·m_s``.
  - ``gguf_q5_k`` (176): ``d | dmin | scales[12] | qh[32] | qs[128]``: as q4_k, plus 16 when bit s of
    ``qh[l]`` is set for element l of sub-block s.
  - ``gguf_q6_k`` (210): ``ql[128] | qh[64] | scales[16] (int8) | d fp16``. Two halves of 128; in half h,
    element ``32t + l`` (t < 4, l < 32) has low 4 bits ``ql[64h + l + 32·(t % 2)]`` (low nibble for
    t < 2, high for t >= 2) and high 2 bits ``(qh[32h + l] >> 2t) & 3``; ``q = bits − 32``; the scale
    of element e (within the block) is ``scales[e // 16]``; ``y = (d·scale)·q``.
  - ``gguf_q8_k`` (292): ``d f32 | qs[256] (int8) | bsums[16] (int16, unused)``: ``y = d·q``.
  - ``gguf_q2_k`` (84): ``scales[16] | qs[64] | d fp16 | dmin fp16``. Element ``e = 128n + 32j + 16h + l``
    (n, h < 2, j < 4, l < 16) has the 2 bits ``(qs[32n + 16h + l] >> 2j) & 3``; sub-block ``s = e // 16``
    has scale ``scales[s] & 15`` and min ``scales[s] >> 4``: ``y = d·sc·q − dmin·m``.
  - ``gguf_q3_k`` (110): ``hmask[32] | qs[64] | scales[12] | d fp16``. Element e (as Q2_K) has low bits
    ``(qs[32n + 16h + l] >> 2j) & 3``, minus 4 unless bit ``4n + j`` of ``hmask[16h + l]`` is set. The 16
    six-bit scales, with ``k = s % 4`` and ``t = scales[8 + k]``: s < 4: ``scales[k] & 15 | (t & 3) << 4``;
    s < 8: ``scales[4+k] & 15 | (t >> 2 & 3) << 4``; s < 12: ``scales[k] >> 4 | (t >> 4 & 3) << 4``; else
    ``scales[4+k] >> 4 | (t >> 6) << 4``. ``y = d·(sc_{e // 16} − 32)·q``.
  - ``gguf_q4_0`` (18, 32 elements): ``d fp16 | qs[16]``: element l < 16 is ``qs[l] & 15``, element
    16 + l is ``qs[l] >> 4``; ``y = d·(q − 8)``.
  - ``gguf_q8_0`` (34, 32 elements): ``d fp16 | qs[32] (int8)``: ``y = d·q``.

* NVFP4 (``nvfp4_block``, docs/semantics.md#packed-weights): per expert, 4-bit codes of the ``[K, N]`` weight at flat
  index ``p·N + j`` (low nibble = even index), ``ceil(K·N/2)`` bytes per expert slab; the operand
  ``scale`` holds ``E·ceil(K/16)·N`` FP8 E4M3FN bytes (per expert ``[ceil(K/16), N]``), ``global``
  is f32 ``[1]`` (shared) or ``[E]``: ``W = LUT[code] · e4m3fn(scale[p // 16, j]) · global``.
  The scale decoder is OCP E4M3FN (exponent 15 is a normal number; 0x7F / 0xFF = NaN, read as 0).
* Decoding is in f32, mirroring ggml's f32 arithmetic order; the matmul runs in x's dtype.
* ``batch_dims`` (as in rlx.ops.quant): leading axes every operand carries, mapped over (vmap).
* Autodiff: grouped_matmul is differentiated in x and w (dx = grouped_matmul(dy, wᵀ, idx); dw by a
  one-hot scatter-add per expert, built from primitive ops); the ids have no gradient. The
  dequant matmul is differentiated in x with the packed weight frozen; dequant_moe_weights is
  no_grad (its operands are bytes).
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, RlxError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import require_float, require_rank
from rlx.ops.cost import last_dim_macs
from rlx.ops.quant import BATCH_DIMS, batch_lead, map_lead, split_lead, with_lead

QK_K = 256
#: scheme -> (block elements, block bytes)
GGUF_BLOCKS = {"gguf_q4_k": (256, 144), "gguf_q5_k": (256, 176), "gguf_q6_k": (256, 210), "gguf_q8_k": (256, 292),
               "gguf_q2_k": (256, 84), "gguf_q3_k": (256, 110), "gguf_q4_0": (32, 18), "gguf_q8_0": (32, 34)}
NVFP4 = "nvfp4_block"
NVFP4_GROUP = 16
MOE_SCHEMES = (*GGUF_BLOCKS, NVFP4)
NVFP4_LUT = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


# ------------------------------------------------------------------------------ decoders
# The block decoders are written once for any array namespace ``xp`` (NumPy here, jax.numpy in the JAX
# lowering) with ``cast(bytes, kind)`` reinterpreting little-endian bytes: kind "f16" / "f32" turns
# [nb, 2] / [nb, 4] u8 into [nb] floats, "i8" reinterprets u8 as int8 elementwise.
def np_cast(b: np.ndarray, kind: str) -> np.ndarray:
    if kind == "i8":
        return b.view(np.int8)
    return np.ascontiguousarray(b).view({"f16": "<f2", "f32": "<f4"}[kind])[:, 0]


def _scale_min_k4(xp, sc):
    """The 8 six-bit (scale, min) pairs of a Q4_K / Q5_K block's ``scales[12]`` (int32) -> two [nb, 8] f32."""
    lo, mid, hi = sc[:, 0:4], sc[:, 4:8], sc[:, 8:12]
    scale = xp.concatenate([lo & 63, (hi & 0xF) | ((lo >> 6) << 4)], axis=1)
    mins = xp.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return scale.astype(xp.float32), mins.astype(xp.float32)


def _nibbles_k4(xp, qs):
    """``qs [nb, 128]`` (int32) -> quants [nb, 8, 32]: chunk c's low nibbles are sub-block 2c, high nibbles 2c+1."""
    q = qs.reshape(-1, 4, 1, 32)
    return xp.concatenate([q & 0xF, q >> 4], axis=2).reshape(-1, 8, 32)


def _k4(xp, cast, b, q):
    """y = (d·sc)·q − dmin·m of a Q4_K / Q5_K block, [nb, 256] f32."""
    d, dmin = cast(b[:, 0:2], "f16").astype(xp.float32), cast(b[:, 2:4], "f16").astype(xp.float32)
    sc, m = _scale_min_k4(xp, b[:, 4:16].astype(xp.int32))
    y = (d[:, None] * sc)[:, :, None] * q.astype(xp.float32) - (dmin[:, None] * m)[:, :, None]
    return y.reshape(-1, QK_K)


def _decode_q4_k(xp, cast, b):
    return _k4(xp, cast, b, _nibbles_k4(xp, b[:, 16:144].astype(xp.int32)))


def _decode_q5_k(xp, cast, b):
    qh = b[:, 16:48].astype(xp.int32)
    high = (qh[:, None, :] >> xp.arange(8, dtype=xp.int32)[None, :, None]) & 1  # bit s of qh[l] -> sub-block s, element l
    return _k4(xp, cast, b, _nibbles_k4(xp, b[:, 48:176].astype(xp.int32)) + 16 * high)


def _decode_q6_k(xp, cast, b):
    ql = b[:, 0:128].astype(xp.int32).reshape(-1, 2, 64)
    qh = b[:, 128:192].astype(xp.int32).reshape(-1, 2, 32)
    sc = cast(b[:, 192:208], "i8").astype(xp.float32)
    d = cast(b[:, 208:210], "f16").astype(xp.float32)
    low = xp.concatenate([ql & 0xF, ql >> 4], axis=2)  # [nb, 2, 128]: t = 0, 1 low nibbles, t = 2, 3 high
    high = xp.stack([(qh >> (2 * t)) & 3 for t in range(4)], axis=2).reshape(-1, 2, 128)
    q = ((low | (high << 4)) - 32).astype(xp.float32).reshape(-1, 16, 16)
    return ((d[:, None] * sc)[:, :, None] * q).reshape(-1, QK_K)


def _decode_q8_k(xp, cast, b):
    d = cast(b[:, 0:4], "f32").astype(xp.float32)
    return d[:, None] * cast(b[:, 4:260], "i8").astype(xp.float32)


def _crumbs_k2(xp, qs):
    """``qs [nb, 64]`` (int32) -> the 256 two-bit values of a Q2_K / Q3_K block in element order:
    element 128n + 32j + 16h + l is bits 2j..2j+1 of ``qs[32n + 16h + l]``."""
    q = qs.reshape(-1, 2, 1, 32)  # [nb, n, 1, 16h + l]
    shifts = (2 * xp.arange(4, dtype=xp.int32)).reshape(1, 1, 4, 1)
    return ((q >> shifts) & 3).reshape(-1, QK_K)


def _decode_q2_k(xp, cast, b):
    sc = b[:, 0:16].astype(xp.int32)
    d, dmin = cast(b[:, 80:82], "f16").astype(xp.float32), cast(b[:, 82:84], "f16").astype(xp.float32)
    q = _crumbs_k2(xp, b[:, 16:80].astype(xp.int32)).astype(xp.float32).reshape(-1, 16, 16)
    y = (d[:, None] * (sc & 15).astype(xp.float32))[:, :, None] * q - (dmin[:, None] * (sc >> 4).astype(xp.float32))[:, :, None]
    return y.reshape(-1, QK_K)


def _scales_k3(xp, raw):
    """The 16 six-bit scales of a Q3_K block from its ``scales[12]`` (int32 [nb, 12]), in sub-block order."""
    lo, mid, hi = raw[:, 0:4], raw[:, 4:8], raw[:, 8:12]
    parts = [(lo & 15, 0), (mid & 15, 2), (lo >> 4, 4), (mid >> 4, 6)]
    return xp.concatenate([low | (((hi >> shift) & 3) << 4) for low, shift in parts], axis=1)


def _decode_q3_k(xp, cast, b):
    hm = b[:, 0:32].astype(xp.int32).reshape(-1, 1, 1, 32)  # hmask[16h + l]
    bit = (xp.arange(2, dtype=xp.int32).reshape(1, 2, 1, 1) * 4 + xp.arange(4, dtype=xp.int32).reshape(1, 1, 4, 1))
    high = ((hm >> bit) & 1).reshape(-1, QK_K)  # bit 4n + j of hmask[16h + l]
    q = _crumbs_k2(xp, b[:, 32:96].astype(xp.int32)) - 4 * (1 - high)
    sc = (_scales_k3(xp, b[:, 96:108].astype(xp.int32)) - 32).astype(xp.float32)
    d = cast(b[:, 108:110], "f16").astype(xp.float32)
    return ((d[:, None] * sc)[:, :, None] * q.astype(xp.float32).reshape(-1, 16, 16)).reshape(-1, QK_K)


def _decode_q4_0(xp, cast, b):
    d = cast(b[:, 0:2], "f16").astype(xp.float32)
    qs = b[:, 2:18].astype(xp.int32)
    q = xp.concatenate([qs & 15, qs >> 4], axis=1) - 8
    return d[:, None] * q.astype(xp.float32)


def _decode_q8_0(xp, cast, b):
    d = cast(b[:, 0:2], "f16").astype(xp.float32)
    return d[:, None] * cast(b[:, 2:34], "i8").astype(xp.float32)


GGUF_DECODERS = {"gguf_q4_k": _decode_q4_k, "gguf_q5_k": _decode_q5_k, "gguf_q6_k": _decode_q6_k, "gguf_q8_k": _decode_q8_k,
                 "gguf_q2_k": _decode_q2_k, "gguf_q3_k": _decode_q3_k, "gguf_q4_0": _decode_q4_0, "gguf_q8_0": _decode_q8_0}


def decode_gguf(raw, scheme: str, xp=np, cast=np_cast):
    """ggml's ``dequantize_row_*``: raw u8 blocks (any shape) -> the flat f32 values (256 or 32 per block)."""
    nbytes = GGUF_BLOCKS[scheme][1]
    blocks = (np.ascontiguousarray(raw, dtype=np.uint8) if xp is np else raw).reshape(-1, nbytes)
    return GGUF_DECODERS[scheme](xp, cast, blocks).reshape(-1).astype(xp.float32)


def decode_e4m3fn(byte: np.ndarray) -> np.ndarray:
    """OCP FP8 E4M3FN (NVFP4 scales): bias 7, subnormal (m/8)·2⁻⁶, exponent 15 normal; 0x7F / 0xFF (NaN) -> 0."""
    b = byte.astype(np.int64)
    e, m = (b >> 3) & 0xF, b & 0x7
    mag = np.where(e == 0, np.ldexp(m / 8.0, -6), np.ldexp(1.0 + m / 8.0, (e - 7).astype(np.int32)))
    mag = np.where((b & 0x7F) == 0x7F, 0.0, mag)
    return (np.where(b & 0x80, -1.0, 1.0) * mag).astype(np.float32)


#: every E4M3FN byte's value (NaN bytes read as 0): decoders look scales up here
E4M3FN_TABLE = decode_e4m3fn(np.arange(256))


def decode_nvfp4(codes, scale, glob, k: int, n: int, xp=np):
    """NVFP4 experts: codes [E, ceil(K·N/2)] bytes, scale bytes [E, ceil(K/16), N], global [E] or [1] -> W [E, K, N] f32."""
    e = codes.shape[0]
    i = np.arange(k * n)
    byte = codes[:, i // 2].astype(xp.int32)
    code = xp.where(xp.asarray(i % 2 == 0)[None, :], byte & 0xF, byte >> 4).reshape(e, k, n)
    s = xp.asarray(E4M3FN_TABLE)[scale.astype(xp.int32)][:, np.arange(k) // NVFP4_GROUP]  # [E, K, N]
    g = glob.astype(xp.float32).reshape(-1)[:, None, None]
    return xp.asarray(NVFP4_LUT)[code] * s * g


def slab_bytes(scheme: str, k: int, n: int) -> int:
    """Bytes of one expert's packed weight."""
    if scheme == NVFP4:
        return -(-k * n // 2)
    elems, nbytes = GGUF_BLOCKS[scheme]
    return (k * n // elems) * nbytes


def dequant_experts(packed, extra: list, scheme: str, k: int, n: int, xp=np, cast=np_cast):
    """A packed expert stack (+ nvfp4 scale / global) -> f32 [E, K, N] (grouped_matmul layout)."""
    raw = (np.ascontiguousarray(packed, dtype=np.uint8) if xp is np else packed).reshape(-1)
    e = raw.shape[0] // slab_bytes(scheme, k, n)
    if scheme != NVFP4:
        return decode_gguf(raw, scheme, xp, cast).reshape(e, n, k).transpose(0, 2, 1)
    scale, glob = extra
    return decode_nvfp4(raw.reshape(e, -1), scale.reshape(e, -(-k // NVFP4_GROUP), n), glob, k, n, xp)


# ------------------------------------------------------------------------- grouped_matmul
def _expert_ids(idx: np.ndarray, e: int, op: str) -> np.ndarray:
    ids = np.trunc(idx).astype(np.int64) if idx.dtype.kind == "f" else idx.astype(np.int64)
    bad = (ids < 0) | (ids >= e)
    if bad.any():
        raise RlxError(f"{op}: expert index {int(ids[bad].flat[0])} is out of range for {e} experts")
    return ids


def grouped_matmul_reference(x: np.ndarray, w: np.ndarray, ids: np.ndarray, op: str = "grouped_matmul") -> np.ndarray:
    """out[i] = x[i] @ w[ids[i]], one matmul per expert present (rows grouped by expert)."""
    ids = _expert_ids(ids, w.shape[0], op)
    out = np.zeros((x.shape[0], w.shape[2]), dtype=np.result_type(x.dtype, w.dtype))
    for ex in np.unique(ids):
        rows = ids == ex
        out[rows] = x[rows] @ w[ex]
    return out


def _check_ids(t: TensorType, m, what: str = "expert_idx") -> None:
    require_rank(t, 1, what)
    if not (t.dtype.is_int or (t.dtype.is_float and not t.dtype.is_complex)):
        raise ShapeError(f"{what} must be an integer (or float, truncated) tensor, got {t.dtype}")
    if t.shape[0] != m:
        raise ShapeError(f"{what} {t.shape!r} must have one entry per row of x (M = {m})")


def _check_x(x: TensorType) -> None:
    require_rank(x, 2, "x")
    require_float(x, "x")
    if x.dtype.is_complex:
        raise ShapeError("x must be a real float tensor")


def _gmm_type(ins, attrs):
    lead, (x, w, idx) = split_lead(ins, attrs["batch_dims"])
    _check_x(x)
    require_rank(w, 3, "w")
    if w.dtype != x.dtype:
        raise ShapeError(f"w must have x's dtype {x.dtype}, got {w.dtype}")
    if w.shape[1] != x.shape[1]:
        raise ShapeError(f"contracted dims differ: x {x.shape!r} vs w {w.shape!r} (w is [E, K, N])")
    _check_ids(idx, x.shape[0])
    return with_lead(lead, TensorType(Shape((x.shape[0], w.shape[2])), x.dtype))


def _gmm_kernel(args, attrs, out):
    return map_lead(lambda a: grouped_matmul_reference(*a), args, attrs["batch_dims"], out)


def _gmm(ctx, x, w, idx, nb):
    return ctx.graph.append("grouped_matmul", [x, w, idx], {"batch_dims": nb})


def _onehot(ctx, idx, e: int, dtype: DType):
    """[*B, M, E] one-hot of the expert ids (ids truncated as the kernel does)."""
    g = ctx.graph
    ids = idx if idx.dtype.is_int else g.cast(idx, to="i64")
    arange = g.constant(np.arange(e, dtype=ids.dtype.numpy), dtype=ids.dtype)
    ids_col = ctx.reshape(ids, (*ids.shape, 1))
    return g.cast(g.eq(ids_col, arange), to=dtype)


def _gmm_dw(ctx, x, idx, ct, w_shape, nb):
    """dw[*b, e] = Σ_{i: idx_i = e} x[*b, i]ᵀ ct[*b, i] as [*B, E, K, N] (one-hot, then one matmul)."""
    e, k, n = w_shape[nb:]
    m = x.shape[nb]
    if not all(isinstance(d, int) for d in (*x.shape, e, k, n)):
        raise AutodiffError("grouped_matmul: the weight gradient needs static shapes")
    lead = tuple(x.shape[:nb])
    oh = _onehot(ctx, idx, e, x.dtype)  # [*B, M, E]
    xe = ctx.reshape(oh, (*lead, m, e, 1)) * ctx.reshape(x, (*lead, m, 1, k))  # [*B, M, E, K]
    xe = ctx.reshape(xe, (*lead, m, e * k))
    dw = ctx.graph.matmul(ctx.transpose_last2(xe), ct)  # [*B, E·K, N]
    return ctx.reshape(dw, (*lead, e, k, n))


def _gmm_vjp(ctx, node, ct):
    x, w, idx = ctx.operands(node)
    nb = node.attrs["batch_dims"]
    out = [None, None, None]
    if ctx.wants(node, 0):
        out[0] = _gmm(ctx, ct, ctx.transpose_last2(w), idx, nb)
    if ctx.wants(node, 1):
        out[1] = _gmm_dw(ctx, x, idx, ct, w.shape, nb)
    return out


def _gmm_jvp(ctx, node, tangents):
    x, w, idx = ctx.operands(node)
    nb = node.attrs["batch_dims"]
    tx, tw = tangents[0], tangents[1]
    acc = None
    if tx is not None:
        acc = _gmm(ctx, tx, w, idx, nb)
    if tw is not None:
        term = _gmm(ctx, x, tw, idx, nb)
        acc = term if acc is None else acc + term
    return acc


defop(
    name="grouped_matmul", precision="compute", family="moe", arity=3, operands=("x", "w", "expert_idx"), attrs={"batch_dims": BATCH_DIMS},
    macs=last_dim_macs,
    infer=_gmm_type, kernel=_gmm_kernel, vjp=_gmm_vjp, jvp=_gmm_jvp, batch=batch_lead, flags={"blas", "eager_unsafe"},
    doc="Per-token expert matmul (docs/semantics.md#packed-weights): x [M, K], w [E, K, N] (x's dtype), expert_idx [M] -> [M, N], "
    "out[i] = x[i] @ w[expert_idx[i]]. Ids are integers (float ids are truncated toward zero, as upstream's "
    "int(expert_idx[i])); an id outside [0, E) raises RlxError at run time. Gradient in x (dx = "
    "grouped_matmul(dy, wᵀ, idx)) and w (per-expert scatter-add of x[i]ᵀ dy[i], built as a one-hot matmul); "
    "the ids get none.",
)


# --------------------------------------------------------------------- packed expert stacks
def _packed_geom(packed: TensorType, extra: list[TensorType], scheme: str, k, n) -> int:
    """Check a packed expert stack (+ nvfp4 scale / global); return E."""
    if packed.dtype != DType.U8:
        raise ShapeError(f"w_packed must be u8 bytes, got {packed.dtype}")
    if not isinstance(k, int) or not isinstance(n, int) or k < 1 or n < 1:
        raise ShapeError(f"K and N must be static and >= 1, got K={k}, N={n}")
    if not packed.shape.is_static:
        raise ShapeError("w_packed must have a static shape (its byte count decides E)")
    if scheme != NVFP4 and (k * n) % GGUF_BLOCKS[scheme][0]:
        raise ShapeError(f"{scheme}: K·N = {k * n} must be a multiple of {GGUF_BLOCKS[scheme][0]} (whole blocks per expert)")
    total, slab = math.prod(packed.shape), slab_bytes(scheme, k, n)
    if total % slab:
        raise ShapeError(f"{scheme}: w_packed holds {total} bytes, not a whole number of {slab}-byte expert slabs (K={k}, N={n})")
    e = total // slab
    if scheme == NVFP4:
        if len(extra) != 2:
            raise ShapeError("nvfp4_block takes the operands scale (u8) and global (f32)")
        scale, glob = extra
        want = e * -(-k // NVFP4_GROUP) * n
        if scale.dtype != DType.U8 or not scale.shape.is_static or math.prod(scale.shape) != want:
            raise ShapeError(f"nvfp4 scale must be u8 holding E·ceil(K/16)·N = {want} bytes, got {scale}")
        if not glob.dtype.is_float or tuple(glob.shape) not in ((1,), (e,)):
            raise ShapeError(f"nvfp4 global must be a float tensor [1] or [E={e}], got {glob}")
    return e


def _scheme_arity(base: int):
    return lambda attrs: base + 2 * (attrs.get("scheme") == NVFP4)


def _dgmm_type(ins, attrs):
    lead, core = split_lead(ins, attrs["batch_dims"])
    x, packed, idx, *extra = core
    _check_x(x)
    _check_ids(idx, x.shape[0])
    _packed_geom(packed, extra, attrs["scheme"], x.shape[1], attrs["n"])
    return with_lead(lead, TensorType(Shape((x.shape[0], attrs["n"])), x.dtype))


def _dgmm_one(args, attrs):
    x, packed, idx, *extra = args
    w = dequant_experts(packed, extra, attrs["scheme"], x.shape[1], attrs["n"])
    return grouped_matmul_reference(x, w.astype(x.dtype if x.dtype == np.float64 else np.float32), idx, "dequant_grouped_matmul")


def _dgmm_vjp(ctx, node, ct):
    ops = ctx.operands(node)
    out = [None] * len(ops)
    if ctx.wants(node, 0):
        nb = node.attrs["batch_dims"]
        x = ops[0]
        w = ctx.graph.append("dequant_moe_weights", [ops[1], *ops[3:]],
                             {"scheme": node.attrs["scheme"], "k": x.shape[-1], "n": node.attrs["n"], "batch_dims": nb})
        w = w if w.dtype == x.dtype else ctx.graph.cast(w, to=x.dtype)
        out[0] = _gmm(ctx, ct, ctx.transpose_last2(w), ops[2], nb)
    return out


def _dgmm_jvp(ctx, node, tangents):
    if tangents[0] is None:
        return None
    ops = ctx.operands(node)
    return ctx.graph.append("dequant_grouped_matmul", [tangents[0], *ops[1:]], dict(node.attrs))


_SCHEME = {"scheme": AttrSpec("str", choices=MOE_SCHEMES, doc="gguf_q4_k / q5_k / q6_k / q8_k or nvfp4_block")}

defop(
    name="dequant_grouped_matmul", macs=last_dim_macs, precision="compute", family="moe",
    arity=_scheme_arity(3), operands=("x", "w_packed", "expert_idx", "scale", "global"),
    attrs={**_SCHEME, "n": AttrSpec("int", doc="output features N of every expert"), "batch_dims": BATCH_DIMS},
    infer=_dgmm_type, kernel=lambda args, attrs, out: map_lead(lambda a: _dgmm_one(a, attrs), args, attrs["batch_dims"], out),
    vjp=_dgmm_vjp, jvp=_dgmm_jvp, batch=batch_lead, flags={"blas", "eager_unsafe"},
    doc="grouped_matmul with packed expert weights (docs/semantics.md#packed-weights): x [M, K] (float), w_packed u8 holding E "
    "expert slabs "
    "back to back (any shape; E = bytes / slab bytes), expert_idx [M] -> [M, N], out[i] = x[i] @ W[expert_idx[i]]. "
    "GGUF schemes (gguf_q2_k, q3_k, q4_k, q5_k, q6_k, q8_k: 256-element blocks; gguf_q4_0, q8_0: 32): each slab is "
    "(K·N/block)·block_bytes bytes of ggml blocks for the expert stored [N, K] (flat j·K + p; K·N a multiple of "
    "the block), decoded as ggml's dequantize_row_* (layouts in the "
    "rlx.ops.moe module doc) and transposed. nvfp4_block takes two more operands: scale u8 (E·ceil(K/16)·N FP8 "
    "E4M3FN bytes, per expert [ceil(K/16), N]) and global f32 [1] or [E]; codes [K, N] flat p·N + j, low nibble "
    "first, ceil(K·N/2) bytes per slab; W = LUT[code]·e4m3fn(scale)·global. Decoded in f32; the product runs in x's "
    "dtype. Out-of-range ids raise RlxError. Gradient in x only (dx = dy @ W[idx]ᵀ, W re-decoded); the packed "
    "operands and ids are frozen.",
)


def _dmw_type(ins, attrs):
    lead, (packed, *extra) = split_lead(ins, attrs["batch_dims"])
    e = _packed_geom(packed, extra, attrs["scheme"], attrs["k"], attrs["n"])
    return with_lead(lead, TensorType(Shape((e, attrs["k"], attrs["n"])), DType.F32))


defop(
    name="dequant_moe_weights", family="moe", arity=_scheme_arity(1), operands=("w_packed", "scale", "global"),
    attrs={**_SCHEME, "k": AttrSpec("int", doc="input features K"), "n": AttrSpec("int", doc="output features N"),
           "batch_dims": BATCH_DIMS},
    infer=_dmw_type,
    kernel=lambda args, attrs, out: map_lead(lambda a: dequant_experts(a[0], list(a[1:]), attrs["scheme"], attrs["k"], attrs["n"]),
                                             args, attrs["batch_dims"], out),
    flags={"no_grad"}, batch=batch_lead,
    doc="Decode a packed expert stack (docs/semantics.md#packed-weights) into f32 [E, K, N], the grouped_matmul weight layout: the byte "
    "count must be E whole slabs (layouts as dequant_grouped_matmul: GGUF experts packed [N, K] and transposed here; "
    "nvfp4_block with the extra scale / global operands). No gradient (the operands are bytes / frozen scales).",
)
