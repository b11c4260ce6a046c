"""dequant_matmul to ONNX with packed GGUF weights bound as initializers.

gguf_q4_0 and gguf_q8_0 become onnxruntime's ``com.microsoft.MatMulNBits`` (the weight stays 4 / 8-bit in memory and
the kernel decodes blocks as it multiplies; ggml's Q4_0 / Q8_0 are blocks of 32 with one scale and the implicit zero
point 8 / 128 that MatMulNBits assumes). ``x_quant='q8_block'`` maps to accuracy_level 4 (int8 activation blocks,
integer kernels: the fast path); without it Q4_0 runs at accuracy_level 0 (float compute), and Q8_0, whose 8-bit
float-compute kernel measured 25x slower than an f32 MatMul (onnxruntime 1.32, K=768, N=32000), and the other GGUF
schemes are decoded once, here, into an f32 ``MatMul`` initializer (4 bytes per weight, never a per-run decode). An
unbound packed weight (a graph input) cannot be repacked and is refused.

For onnxruntime, a gguf_q8_0 matmul with ``x_quant='q8_block'`` and at least :data:`Q8_ROWS_AS_F32` static rows of x
(an LLM prefill) is written as the int8 block round trip of x in ONNX ops and an f32 MatMul of the decoded weight:
the op's products (up to f32 summation order; the kernel also rounds exact ties to even, docs/backends.md), faster at
128 rows on AVX2: a 128-token prefill of the benchmark model (onnxruntime 1.32, interleaved) 339 -> 408 tok/s at 1
thread, 493 -> 544 at 2 (the 8-bit integer kernel is slow at many rows; the f32 weight costs 4 bytes per weight in
the prefill's session, as the exact path's does).
"""

from __future__ import annotations

import weakref

import numpy as np

from rlx.backends.onnx.exporter import REFUSED, exporter
from rlx.ir.onnx_format import OnnxUnsupported
from rlx.ops.dequant import X_QUANT_BLOCK, decode_packed, gguf_block

MS_DOMAIN = "com.microsoft"
#: rows of x from which onnxruntime runs an int8-activation gguf_q8_0 matmul as the f32 form (see the module doc)
Q8_ROWS_AS_F32 = 16


def _q4_0_blobs(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml Q4_0 blocks -> (MatMulNBits 4-bit blobs [N, K/32, 16], f32 scales [N·K/32]): element j < 16 of a ggml
    block is the low nibble of qs[j], j + 16 the high one; MatMulNBits packs elements 2i, 2i+1 into byte i."""
    b = raw.reshape(-1, 18)
    scales = b[:, 0:2].copy().view("<f2").astype(np.float32).reshape(-1)
    qs = b[:, 2:18]
    vals = np.concatenate([qs & 15, qs >> 4], axis=1)  # [blocks, 32] in element order
    blobs = (vals[:, 0::2] | (vals[:, 1::2] << 4)).astype(np.uint8)
    return blobs.reshape(n, -1, 16), scales


def _q8_0_blobs(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml Q8_0 blocks -> (8-bit blobs [N, K/32, 32] holding q + 128, f32 scales)."""
    b = raw.reshape(-1, 34)
    scales = b[:, 0:2].copy().view("<f2").astype(np.float32).reshape(-1)
    return (b[:, 2:34] ^ 0x80).reshape(n, -1, 32), scales


_NBITS = {"gguf_q4_0": (4, _q4_0_blobs), "gguf_q8_0": (8, _q8_0_blobs)}


@exporter("dequant_matmul")
def _dequant_matmul(ex, node, ins):
    scheme = node.attrs["scheme"]
    if not scheme.startswith("gguf_") or node.attrs["batch_dims"]:
        raise OnnxUnsupported(f"node %{node.id} (dequant_matmul): scheme {scheme!r} / batch_dims has no ONNX mapping")
    wnode = ex.g.node(node.inputs[1])
    param = raw = ex.params.get(wnode.attrs["name"]) if wnode.op == "param" else None
    if raw is None:
        raise OnnxUnsupported(f"node %{node.id} (dequant_matmul): the packed weight must be a bound param to be repacked")
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    k = node.inputs and ex.g.node(node.inputs[0]).shape[-1]
    elems, nbytes = gguf_block(scheme)
    n = raw.size // nbytes * elems // k
    x_dt = ex.g.node(node.inputs[0]).dtype
    int8_x = node.attrs["x_quant"] == "q8_block"
    rows, f32_x = ex.g.node(node.inputs[0]).shape[0], x_dt.numpy == np.float32
    if (int8_x and f32_x and scheme == "gguf_q8_0" and ex.engine == "onnxruntime" and isinstance(rows, int)
            and rows >= Q8_ROWS_AS_F32):
        return ex.node("MatMul", [_q8_block_roundtrip(ex, ins[0], k), ex.const(_decoded_t(param, raw, scheme, n, k, np.float32))])
    if scheme in _NBITS and f32_x and (int8_x or scheme == "gguf_q4_0"):
        bits, repack = _NBITS[scheme]
        blobs, scales = repack(raw, n)
        return ex.node("MatMulNBits", [ins[0], ex.const(blobs), ex.const(scales)], domain=MS_DOMAIN, K=k, N=n, bits=bits,
                       block_size=32, accuracy_level=4 if int8_x else 0)
    if int8_x:
        raise OnnxUnsupported(f"node %{node.id} (dequant_matmul): x_quant='q8_block' maps to MatMulNBits for gguf_q4_0 / "
                              f"gguf_q8_0 with f32 x only, not {scheme} / {x_dt}")
    return ex.node("MatMul", [ins[0], ex.const(_decoded_t(param, raw, scheme, n, k, x_dt.numpy))])


#: decoded weights per packed param object (id -> (a weak reference to it, (scheme, N, K, dtype) -> the array while
#: an export or a session holds it)): the LLM's prefill and decode graphs bind the same param arrays, and an engine
#: handed the arrays (``export(external=...)``) gets one decoded copy for both. Keyed by the live object, not its
#: address: another file mapped where a freed one was must not find that one's weights.
_DECODED: dict[int, tuple[weakref.ref, weakref.WeakValueDictionary]] = {}


def _forget(pid: int, ref: weakref.ref) -> None:
    """A packed param died: drop its entry (unless its id already names a newer object's)."""
    if _DECODED.get(pid, (None,))[0] is ref:
        del _DECODED[pid]


def _decoded_t(param: np.ndarray, raw: np.ndarray, scheme: str, n: int, k: int, dtype: np.dtype) -> np.ndarray:
    """``param``'s packed weight (its bytes ``raw``) decoded once, as the [K, N] MatMul operand."""
    pid = id(param)
    entry = _DECODED.get(pid)
    if entry is None or entry[0]() is not param:
        entry = (weakref.ref(param, lambda ref: _forget(pid, ref)), weakref.WeakValueDictionary())
        _DECODED[pid] = entry
    key = (scheme, n, k, np.dtype(dtype).str)
    w = entry[1].get(key)
    if w is None:
        w = entry[1][key] = np.ascontiguousarray(decode_packed(raw, scheme).reshape(n, k).T).astype(dtype, copy=False)
    return w


def _q8_block_roundtrip(ex, x: str, k: int) -> str:
    """:func:`rlx.ops.dequant.q8_block_roundtrip` in ONNX ops: per 32 elements along K, s = max|x|/127,
    clip(round half away from zero(x / s), -127, 127)·s (0 where s is 0)."""
    f32 = np.float32
    blocks = ex.node("Reshape", [x, ex.ints([0, k // X_QUANT_BLOCK, X_QUANT_BLOCK])])
    s = ex.node("Div", [ex.node("ReduceMax", [ex.node("Abs", [blocks]), ex.ints([-1])], keepdims=1),
                        ex.const(np.array(127, f32))])
    nonzero = ex.node("Greater", [s, ex.const(np.array(0, f32))])
    scaled = ex.node("Div", [blocks, ex.node("Where", [nonzero, s, ex.const(np.array(1, f32))])])
    rounded = ex.node("Mul", [ex.node("Sign", [scaled]),
                              ex.node("Floor", [ex.node("Add", [ex.node("Abs", [scaled]), ex.const(np.array(0.5, f32))])])])
    q = ex.node("Clip", [rounded, ex.const(np.array(-127, f32)), ex.const(np.array(127, f32))])
    return ex.node("Reshape", [ex.node("Mul", [q, s]), ex.ints([0, k])])


REFUSED.pop("dequant_matmul", None)
