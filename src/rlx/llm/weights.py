"""GGUF tensors as graph operands: quantized matmul weights stay packed (``dequant_matmul``), the rest become f32."""

from __future__ import annotations

import numpy as np

from rlx.frontends.gguf import GgufError, GgufTensor

#: ggml type -> dequant_matmul scheme (raw ggml blocks of a [N, K] weight, decoded by rlx.ops.quant / rlx.ops.moe)
PACKED_SCHEMES = {
    "Q8_0": "gguf_q8_0", "Q4_0": "gguf_q4_0", "Q4_1": "gguf_q4_1", "Q5_0": "gguf_q5_0", "Q5_1": "gguf_q5_1",
    "Q2_K": "gguf_q2_k", "Q3_K": "gguf_q3_k", "Q4_K": "gguf_q4_k", "Q5_K": "gguf_q5_k", "Q6_K": "gguf_q6_k",
    "IQ4_NL": "gguf_iq4_nl", "IQ4_XS": "gguf_iq4_xs",
}
FLOAT_TYPES = ("F32", "F16", "BF16")


def to_f32(t: GgufTensor) -> np.ndarray:
    """The tensor's values as f32 in its logical shape (ggml's own dequantizer for block types)."""
    if t.ggml_type == "F32":
        return np.asarray(t.data, np.float32).reshape(t.shape)
    if t.ggml_type == "F16":
        return np.asarray(t.data).astype(np.float32).reshape(t.shape)
    if t.ggml_type in PACKED_SCHEMES or t.ggml_type == "BF16":
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        return dequantize(np.asarray(t.data), GGMLQuantizationType[t.ggml_type]).astype(np.float32).reshape(t.shape)
    raise GgufError(f"tensor {t.name!r}: ggml type {t.ggml_type} is not supported "
                    f"(supported: {', '.join((*FLOAT_TYPES, *PACKED_SCHEMES))})")


def matmul_operand(t: GgufTensor) -> tuple[str | None, np.ndarray]:
    """(scheme, array) for ``y = x @ Wᵀ`` with W = ``t`` [N, K]: (None, Wᵀ f32 [K, N]) for float types, else the
    packed scheme and the raw block bytes [N, row bytes] (u8, still memory-mapped)."""
    scheme = PACKED_SCHEMES.get(t.ggml_type)
    if scheme is not None:
        return scheme, np.asarray(t.data, np.uint8).reshape(t.shape[0], -1)
    return None, np.ascontiguousarray(to_f32(t).T)
