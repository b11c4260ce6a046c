"""dequant_matmul over every GGUF block type rlx.llm keeps packed, against gguf's own dequantizer as the oracle."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from gguf_models import _quantized

import rlx
from rlx.llm.weights import PACKED_SCHEMES

gguf = pytest.importorskip("gguf")


@pytest.mark.parametrize("qtype", sorted(PACKED_SCHEMES))
def test_dequant_matmul_matches_gguf(qtype):
    from gguf.quants import dequantize

    rng = np.random.default_rng(1)
    n, k = 6, 4 * gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]][0]
    raw = _quantized(rng, rng.standard_normal((n, k)).astype(np.float32), qtype)
    w = dequantize(raw, gguf.GGMLQuantizationType[qtype]).reshape(n, k).astype(np.float64)
    x = rng.standard_normal((3, k)).astype(np.float32)
    g = rlx.Graph("dq")
    y = g.dequant_matmul(g.input("x", (3, k), "f32"), g.param("w", raw.shape, "u8"), scheme=PACKED_SCHEMES[qtype])
    g.set_outputs([y])
    (out,) = rlx.run(g, inputs={"x": x}, params={"w": raw})
    ref = x.astype(np.float64) @ w.T
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_bad_byte_count_is_a_shape_error():
    g = rlx.Graph("dq")
    with pytest.raises(rlx.ShapeError, match="gguf_q5_1"):
        g.dequant_matmul(g.input("x", (1, 64), "f32"), g.param("w", (3, 25), "u8"), scheme="gguf_q5_1")


def _q8_block_reference(x: np.ndarray) -> np.ndarray:
    """Independent formula: per 32 elements along K, s = max|x| / 127, q = round-half-away(x / s) in [-127, 127]."""
    out = np.empty_like(x, dtype=np.float64)
    for i in range(x.shape[0]):
        for b in range(0, x.shape[1], 32):
            blk = x[i, b:b + 32].astype(np.float64)
            s = np.float32(np.abs(blk).max()) / np.float32(127)
            q = np.sign(blk / s) * np.floor(np.abs(blk / s) + 0.5) if s > 0 else np.zeros_like(blk)
            out[i, b:b + 32] = np.clip(q, -127, 127) * s
    return out


@pytest.mark.parametrize("backend", ["reference", "onnxruntime"])
@pytest.mark.parametrize("qtype,rows", [("Q4_0", 3), ("Q8_0", 3), ("Q8_0", 24)])
def test_int8_activation_blocks(qtype, rows, backend):
    """x_quant='q8_block': x rounded to int8 blocks of 32 first; onnxruntime runs it as MatMulNBits accuracy_level 4,
    and a Q8_0 one with 16 rows or more (a prefill) as the rounding in ONNX ops and an f32 MatMul (ties rounded
    away from zero, an all-zero block)."""
    from gguf.quants import dequantize

    rng = np.random.default_rng(2)
    n, k = 40, 128
    raw = _quantized(rng, rng.standard_normal((n, k)).astype(np.float32), qtype)
    w = dequantize(raw, gguf.GGMLQuantizationType[qtype]).reshape(n, k).astype(np.float64)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    x[1, :32] = 0.0  # an all-zero block: scale 0
    x[2, 32:64] = np.resize(np.array([127.0, 2.5, -3.5, 0.5, -0.5, 126.5], np.float32), 32)  # scale 1: ties at .5
    g = rlx.Graph("dq8")
    y = g.dequant_matmul(g.input("x", (rows, k), "f32"), g.param("w", raw.shape, "u8"), scheme=PACKED_SCHEMES[qtype], x_quant="q8_block")
    g.set_outputs([y])
    if backend == "reference":
        (out,) = rlx.run(g, inputs={"x": x}, params={"w": raw})
    else:
        pytest.importorskip("onnxruntime")
        importlib.import_module("rlx.backends")  # registers the onnxruntime backend
        from rlx.backends.ort_backend import export_for_session

        ops = {node.op_type for node in export_for_session(g, {"w": raw}, engine="onnxruntime").graph.node}
        assert ("MatMulNBits" in ops) == (qtype == "Q4_0" or rows < 16), ops
        (out,) = rlx.compile(g, backend="onnxruntime", params={"w": raw}).run(inputs={"x": x})
    ref = _q8_block_reference(x) @ w.T
    if backend == "onnxruntime" and (qtype == "Q4_0" or rows < 16):
        # MatMulNBits rounds exact ties (x/s = k + 1/2) to even, where the op rounds them away from zero
        # (docs/backends.md): row 2's block of ties matches that rule instead
        ties = _q8_block_reference(x)
        ties[2, 32:64] = np.round(x[2, 32:64].astype(np.float64))  # scale 1 in that block
        np.testing.assert_allclose(out[2], (ties @ w.T)[2], rtol=1e-5, atol=1e-5 * np.abs(ref).max())
        out[2] = ref[2]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    assert np.abs(ref - x.astype(np.float64) @ w.T).max() > 1e-4 * np.abs(ref).max()  # the rounding is visible


def test_int8_activation_blocks_need_whole_blocks():
    g = rlx.Graph("dq8")
    with pytest.raises(rlx.ShapeError, match="multiple of 32"):
        g.dequant_matmul(g.input("x", (1, 48), "f32"), g.param("w", (2, 54), "u8"), scheme="gguf_q8_0", x_quant="q8_block")
