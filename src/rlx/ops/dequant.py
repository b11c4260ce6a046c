"""``dequant_matmul``: a matmul whose weight stays packed in the graph (int8 / int4 blocks, fp8, NVFP4 and
ggml's GGUF block types; docs/semantics.md#packed-weights), decoded by one block decoder per scheme that the
NumPy kernel, the ONNX export (MatMulNBits) and rlx.llm share. The quantisation family's conventions
(rounding, ``batch_dims``, autodiff) are those of :mod:`rlx.ops.quant`.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import require_float, require_rank
from rlx.ops.cost import last_dim_macs
from rlx.ops.elementwise import round_half_away
from rlx.ops.quant import BATCH_DIMS, batch_lead, map_lead, require_dtype, split_lead, with_lead

# ----------------------------------------------------------------------- dequant_matmul
DEQUANT_SCHEMES = ("int8_block", "int8_block_asym", "int4_block", "fp8_e4m3", "fp8_e5m2",
                   "gguf_q4_k", "gguf_q5_k", "gguf_q6_k", "gguf_q8_k", "gguf_q2_k", "gguf_q3_k", "gguf_q4_0", "gguf_q8_0",
                   "nvfp4_block", "gguf_q4_1", "gguf_q5_0", "gguf_q5_1", "gguf_iq4_nl", "gguf_iq4_xs")
# Tier-3 schemes (docs/semantics.md#packed-weights); their block decoders live in rlx.ops.moe (imported lazily: moe imports this module).
_GGUF_DQ = tuple(s for s in DEQUANT_SCHEMES if s.startswith("gguf_"))


# ggml's other block types (dequantize_row_q4_1 / q5_0 / q5_1 / iq4_nl / iq4_xs), written over an array namespace like the
# decoders in rlx.ops.moe: element j < 16 of a block is the low nibble of qs[j], element j + 16 the high nibble; Q5
# types take bit j (resp. j + 16) of the little-endian u32 qh as the fifth bit.
def _nibbles_32(xp, qs):
    return xp.concatenate([qs & 15, qs >> 4], axis=1)


def _fifth_bits(xp, qh):
    word = qh[:, 0] | (qh[:, 1] << 8) | (qh[:, 2] << 16) | (qh[:, 3] << 24)
    return (word[:, None] >> xp.arange(32, dtype=xp.int64)[None, :]) & 1


def _decode_q4_1(xp, cast, b):
    d, m = cast(b[:, 0:2], "f16").astype(xp.float32), cast(b[:, 2:4], "f16").astype(xp.float32)
    return d[:, None] * _nibbles_32(xp, b[:, 4:20].astype(xp.int32)).astype(xp.float32) + m[:, None]


def _decode_q5_0(xp, cast, b):
    d = cast(b[:, 0:2], "f16").astype(xp.float32)
    q = _nibbles_32(xp, b[:, 6:22].astype(xp.int32)) + 16 * _fifth_bits(xp, b[:, 2:6].astype(xp.int64)).astype(xp.int32)
    return d[:, None] * (q - 16).astype(xp.float32)


def _decode_q5_1(xp, cast, b):
    d, m = cast(b[:, 0:2], "f16").astype(xp.float32), cast(b[:, 2:4], "f16").astype(xp.float32)
    q = _nibbles_32(xp, b[:, 8:24].astype(xp.int32)) + 16 * _fifth_bits(xp, b[:, 4:8].astype(xp.int64)).astype(xp.int32)
    return d[:, None] * q.astype(xp.float32) + m[:, None]


#: IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl): a 4-bit code picks one, times the block's scale
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def _decode_iq4_nl(xp, cast, b):
    """18 bytes: f16 d, then 16 bytes of codes (element j < 16 the low nibble of byte j, j + 16 its high one)."""
    d = cast(b[:, 0:2], "f16").astype(xp.float32)
    return d[:, None] * IQ4_LEVELS[_nibbles_32(xp, b[:, 2:18].astype(xp.int32))]


def _decode_iq4_xs(xp, cast, b):
    """136 bytes per 256 elements: f16 d, u16 scales_h, u8 scales_l[4], 8 sub-blocks of 16 code bytes laid out as
    IQ4_NL's; sub-block i's scale is d·(s - 32), s = its nibble of scales_l[i / 2] | (2 bits i of scales_h) << 4."""
    d = cast(b[:, 0:2], "f16").astype(xp.float32)
    high = b[:, 2].astype(xp.int32) | (b[:, 3].astype(xp.int32) << 8)
    i = xp.arange(8)
    s = ((b[:, 4 + i // 2].astype(xp.int32) >> (4 * (i % 2))) & 15) | (((high[:, None] >> (2 * i)) & 3) << 4)
    qs = b[:, 8:136].astype(xp.int32).reshape(-1, 16)
    levels = IQ4_LEVELS[_nibbles_32(xp, qs)].reshape(-1, 8, 32)
    return ((d[:, None] * (s - 32).astype(xp.float32))[:, :, None] * levels).reshape(-1, 256)


#: scheme -> (block elements, block bytes, decoder) for the block types decoded here
LEGACY_BLOCKS = {"gguf_q4_1": (32, 20, _decode_q4_1), "gguf_q5_0": (32, 22, _decode_q5_0), "gguf_q5_1": (32, 24, _decode_q5_1),
                 "gguf_iq4_nl": (32, 18, _decode_iq4_nl), "gguf_iq4_xs": (256, 136, _decode_iq4_xs)}


def gguf_block(scheme: str) -> tuple[int, int]:
    """(elements, bytes) of one block of a GGUF dequant_matmul scheme."""
    if scheme in LEGACY_BLOCKS:
        return LEGACY_BLOCKS[scheme][:2]
    from rlx.ops.moe import GGUF_BLOCKS

    return GGUF_BLOCKS[scheme]


def decode_packed(raw, scheme: str, xp=np, cast=None):
    """ggml's ``dequantize_row_*`` of any GGUF scheme: raw u8 blocks -> the flat f32 values."""
    from rlx.ops.moe import decode_gguf, np_cast

    cast = cast or np_cast
    if scheme not in LEGACY_BLOCKS:
        return decode_gguf(raw, scheme, xp, cast)
    _, nbytes, fn = LEGACY_BLOCKS[scheme]
    blocks = (np.ascontiguousarray(raw, dtype=np.uint8) if xp is np else raw).reshape(-1, nbytes)
    return fn(xp, cast, blocks).reshape(-1).astype(xp.float32)


def _dq_arity(attrs) -> int:
    return 2 if attrs.get("scheme") in _GGUF_DQ else 4


def _dq_packed_geom(x: TensorType, wq: TensorType, rest: list[TensorType], scheme: str) -> object:
    """N of a GGUF (x, packed) or NVFP4 (x, w_q, scale, global) dequant_matmul; checks the packed operands."""
    from rlx.ops.moe import NVFP4_GROUP

    k = x.shape[1]
    require_dtype(wq, DType.U8, "w_q (packed bytes)")
    if not wq.shape.is_static:
        raise ShapeError("w_q must have a static shape")
    total = math.prod(wq.shape)
    if scheme in _GGUF_DQ:
        elems, nbytes = gguf_block(scheme)
        if total % nbytes or (total // nbytes * elems) % k:
            raise ShapeError(f"{scheme}: w_q holds {total} bytes, not whole {nbytes}-byte blocks of a [N, K={k}] weight")
        return total // nbytes * elems // k
    scale, glob = rest
    require_dtype(scale, DType.U8, "scale (E4M3FN bytes)")
    require_rank(scale, 2, "scale")
    n = scale.shape[1]
    if scale.shape[0] != -(-k // NVFP4_GROUP) or not isinstance(n, int) or total != -(-k * n // 2):
        raise ShapeError(f"nvfp4_block: scale {scale.shape!r} must be [ceil(K/16), N] and w_q hold ceil(K·N/2) bytes (got {total})")
    if not glob.dtype.is_float or tuple(glob.shape) != (1,):
        raise ShapeError(f"nvfp4_block: global must be a float tensor [1], got {glob}")
    return n


def decode_fp8(byte: np.ndarray, kind: str) -> np.ndarray:
    """Upstream's fp8 weight decoder (docs/semantics.md#quantisation), f32. e4m3: bias 7, subnormal m·2⁻⁹, exponent 15 ->
    ±inf (mantissa 0) / NaN (IEEE-style, not OCP E4M3FN); e5m2: bias 15, subnormal m·2⁻¹⁶, exponent 31 -> inf / NaN."""
    b = byte.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    if kind == "fp8_e4m3":
        e, m, bias, mbits, emax = (b >> 3) & 0xF, b & 0x7, 7, 3, 15
    else:
        e, m, bias, mbits, emax = (b >> 2) & 0x1F, b & 0x3, 15, 2, 31
    frac = m / float(1 << mbits)
    normal = np.ldexp(1.0 + frac, (e - bias).astype(np.int32))
    sub = np.ldexp(frac, 1 - bias)
    special = np.where(m == 0, np.inf, np.nan)
    mag = np.where(e == 0, sub, np.where(e == emax, special, normal))
    return (sign * mag).astype(np.float32)


def _dq_geom(ins, attrs):
    lead, (x, wq, *rest) = split_lead(ins, attrs["batch_dims"])
    scheme, bs = attrs["scheme"], attrs["block_size"]
    require_rank(x, 2, "x")
    require_float(x, "x")
    if x.dtype.is_complex:
        raise ShapeError("x must be real")
    k = x.shape[1]
    if not isinstance(k, int):
        raise ShapeError("K must be static")
    if attrs["x_quant"] == "q8_block" and k % X_QUANT_BLOCK:
        raise ShapeError(f"x_quant='q8_block' needs K a multiple of {X_QUANT_BLOCK}, got K={k}")
    if scheme in _GGUF_DQ or scheme == "nvfp4_block":
        return lead, x, _dq_packed_geom(x, wq, rest, scheme)
    scale, zp = rest
    if not scale.dtype.is_float or not zp.dtype.is_float:
        raise ShapeError(f"scale and zp must be float tensors, got {scale.dtype} and {zp.dtype}")
    if scheme.startswith("fp8"):
        require_dtype(wq, DType.U8, "w_q (fp8 bytes)")
        require_rank(wq, 2, "w_q")
        if wq.shape[0] != k:
            raise ShapeError(f"w_q {wq.shape!r} must be [K={k}, N]")
        n = wq.shape[1]
        if len(scale.shape) != 1 or scale.shape[0] not in (n, 1, 0):
            raise ShapeError(f"fp8 scale must be [N={n}] ([1] shared, [0] = absent), got {scale.shape!r}")
        return lead, x, n
    if bs < 1:
        raise ShapeError(f"block_size must be >= 1, got {bs}")
    require_rank(scale, 2, "scale")
    n = scale.shape[1]
    nblk = -(-k // bs)
    if scale.shape[0] != nblk:
        raise ShapeError(f"scale {scale.shape!r} must be [ceil(K/block_size)={nblk}, N]")
    if scheme == "int4_block":
        require_dtype(wq, DType.U8, "w_q (packed int4)")
        if not isinstance(n, int) or not wq.shape.is_static or math.prod(wq.shape) != -(-k * n // 2):
            raise ShapeError(f"w_q {wq.shape!r} must hold ceil(K·N/2) = {-(-k * n // 2) if isinstance(n, int) else '?'} bytes")
    else:
        require_dtype(wq, DType.I8, "w_q")
        if tuple(wq.shape) != (k, n):
            raise ShapeError(f"w_q {wq.shape!r} must be [K={k}, N={n}]")
    if scheme == "int8_block_asym" and tuple(zp.shape) != tuple(scale.shape):
        raise ShapeError(f"zp {zp.shape!r} must have the shape of scale {scale.shape!r}")
    return lead, x, n


def _dq_type(ins, attrs):
    lead, x, n = _dq_geom(ins, attrs)
    return with_lead(lead, TensorType(Shape((x.shape[0], n)), x.dtype))


def dequant_weight(wq: np.ndarray, scale: np.ndarray, zp: np.ndarray, k: int, scheme: str, bs: int) -> np.ndarray:
    """The logical weight W [K, N] (f32) of a dequant_matmul's packed operands (docs/semantics.md#quantisation, #packed-weights)."""
    if scheme in _GGUF_DQ:
        return decode_packed(wq, scheme).reshape(-1, k).T.copy()  # packed [N, K]
    if scheme == "nvfp4_block":
        from rlx.ops.moe import decode_nvfp4

        n = scale.shape[1]  # the zp operand is the f32 global scale [1]
        return decode_nvfp4(np.asarray(wq).reshape(1, -1), np.asarray(scale).reshape(1, -1, n), np.asarray(zp), k, n)[0]
    if scheme.startswith("fp8"):
        n = wq.shape[1]
        w = decode_fp8(wq, scheme)
        s = np.ones(n, np.float32) if scale.size == 0 else np.broadcast_to(scale.astype(np.float32), (n,))
        return w * s
    n = scale.shape[1]
    rows = np.arange(k) // bs
    s = scale.astype(np.float32)[rows]
    if scheme == "int4_block":
        flat = wq.reshape(-1)
        i = np.arange(k * n)
        byte = flat[i // 2].astype(np.int64)
        nib = np.where(i % 2 == 0, byte & 0xF, byte >> 4)
        return nib.reshape(k, n).astype(np.float32) * s
    w = wq.astype(np.float32)
    if scheme == "int8_block_asym":
        w = w - zp.astype(np.float32)[rows]
    return w * s


X_QUANT_BLOCK = 32


def q8_block_roundtrip(x: np.ndarray) -> np.ndarray:
    """x [M, K] rounded to int8 per block of 32 along K with scale max|x|/127 (round half away from zero), then
    scaled back: the activation quantization of llama.cpp's Q8 dot products and onnxruntime's accuracy_level 4."""
    m, k = x.shape
    blocks = x.astype(np.float32).reshape(m, k // X_QUANT_BLOCK, X_QUANT_BLOCK)
    amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
    s = amax / np.float32(127)
    inv = np.where(s > 0, np.float32(1) / np.where(s > 0, s, 1), 0).astype(np.float32)
    return (np.clip(round_half_away(blocks * inv), -127, 127) * s).reshape(m, k).astype(x.dtype)


def _dq_one(args, attrs):
    x, wq, *rest = args
    scale, zp = rest if rest else (None, None)
    if attrs["x_quant"] == "q8_block":
        x = q8_block_roundtrip(x)
    w = dequant_weight(wq, scale, zp, x.shape[1], attrs["scheme"], attrs["block_size"])
    return x @ w.astype(x.dtype if x.dtype == np.float64 else np.float32)


def _dq_kernel(args, attrs, out):
    return map_lead(lambda a: _dq_one(a, attrs), args, attrs["batch_dims"], out)


def _dq_weight_value(ctx, node):
    """W [*B, K, N] as a graph value: dequant_matmul(I_K, …) (no separate unpack op needed)."""
    g = ctx.graph
    x, *packed = ctx.operands(node)
    nb = node.attrs["batch_dims"]
    k = x.shape[-1]
    eye = g.constant(np.eye(k, dtype=x.dtype.numpy), dtype=x.dtype)
    if nb:
        lead = list(x.shape[:nb])
        if not all(isinstance(d, int) for d in lead):
            raise AutodiffError("dequant_matmul: derivative of a vmapped node with a symbolic batch is not supported")
        eye = g.expand(eye, target_shape=[*lead, k, k])
    return g.append("dequant_matmul", [eye, *packed], {**dict(node.attrs), "x_quant": "none"})


def _dq_vjp(ctx, node, ct):
    rest = [None] * (len(node.inputs) - 1)
    if not ctx.wants(node, 0):
        return [None, *rest]
    w = _dq_weight_value(ctx, node)
    return [ctx.graph.matmul(ct, ctx.transpose_last2(w)), *rest]


def _dq_jvp(ctx, node, tangents):
    if tangents[0] is None:
        return None
    _, *packed = ctx.operands(node)  # x_quant: straight through (the rounding's derivative is taken as 1)
    return ctx.graph.append("dequant_matmul", [tangents[0], *packed], {**dict(node.attrs), "x_quant": "none"})


defop(
    name="dequant_matmul", precision="compute", family="quant", arity=_dq_arity, operands=("x", "w_q", "scale", "zp"),
    macs=last_dim_macs,
    attrs={
        "scheme": AttrSpec("str", choices=DEQUANT_SCHEMES),
        "block_size": AttrSpec("int", default=32, doc="rows of K per scale block (int8 / int4 schemes)"),
        "x_quant": AttrSpec("str", default="none", choices=("none", "q8_block"),
                            doc="q8_block: x is first rounded to int8 blocks of 32 along K (integer dot products)"),
        "batch_dims": BATCH_DIMS,
    },
    infer=_dq_type, kernel=_dq_kernel, vjp=_dq_vjp, jvp=_dq_jvp, batch=batch_lead, flags={"blas"},
    doc="x [M, K] (float) @ W -> [M, N] with W [K, N] decoded from packed operands (docs/semantics.md#packed-weights, W row-major, "
    "flat index p·N + j, scale block p // block_size along K). int8_block: w_q i8 [K, N], W = w_q·scale "
    "(scale f32 [ceil(K/bs), N], zp present but ignored, any shape); int8_block_asym: W = (w_q - zp)·scale, zp "
    "shaped like scale; int4_block: w_q u8 holding ceil(K·N/2) bytes (any shape), nibble of flat index i = low "
    "nibble of byte i//2 for even i, high for odd, read UNSIGNED 0..15, W = nibble·scale (upstream applies no -8 "
    "offset; store signed weights with +8 and fold the offset into x·scale sums if needed); fp8_e4m3 / fp8_e5m2: "
    "w_q u8 [K, N] one byte per weight, W = decode(byte)·scale[j], scale [N] ([1] shared, [0] = 1.0), zp ignored; "
    "decoders as upstream: e4m3 bias 7, subnormal m·2⁻⁹, exponent 15 -> ±inf / NaN (not OCP E4M3FN); e5m2 bias 15. "
    "GGUF schemes (docs/semantics.md#packed-weights; gguf_q2_k / q3_k / q4_k / q5_k / q6_k / q8_k, gguf_q4_0 / q4_1 / q5_0 / q5_1 / q8_0, "
    "gguf_iq4_nl / iq4_xs) take 2 operands (x, w_q): "
    "w_q u8 holds raw ggml blocks of a weight stored [N, K] (flat j·K + p, 256-element blocks, 32 for q4_0 / q4_1 / q5_0 / q5_1 / q8_0 / "
    "iq4_nl; N = bytes / block_bytes · block / K), decoded as ggml's "
    "dequantize_row_* (layouts in rlx.ops.moe and rlx.ops.dequant; iq4 codes index ggml's 16 kvalues_iq4nl levels) and "
    "transposed: out = x @ Wᵀ_packed. nvfp4_block takes (x, w_q, scale, "
    "global): w_q u8 ceil(K·N/2) bytes of 4-bit codes of W [K, N] (flat p·N + j, low nibble first), scale u8 [ceil(K/16), "
    "N] OCP E4M3FN bytes (0x7F / 0xFF read as 0), global f32 [1] (in the zp slot): W = LUT[code]·e4m3fn(scale)·global. "
    "W is decoded in f32; the product runs in x's dtype. x_quant='q8_block' (K a multiple of 32) first replaces x by "
    "its int8 block round trip: per 32 consecutive elements along K, s = max|x|/127, x -> clip(round(x/s), -127, 127)·s "
    "(round half away from zero; s = 0 gives 0), as llama.cpp's Q8 activation blocks and onnxruntime's MatMulNBits "
    "accuracy_level 4 (whose integer kernels then run). Gradient: "
    "dx = dy @ Wᵀ (W re-decoded; x_quant is straight-through); the packed weight, scale and zp are frozen (no gradient).",
)
