"""dequant_matmul over every GGUF block type rlx.llm keeps packed, against gguf's own dequantizer as the oracle."""

from __future__ import annotations

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
    n, k = 6, 256 if qtype.endswith("_K") else 64
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
