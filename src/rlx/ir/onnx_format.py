"""The ONNX format facts: element-type tables (numbers, names, the opset each newer type needs),
the two dtype conversions and the ONNX error hierarchy.

They live in ``ir`` (not beside the reader) because both the ONNX reader (``rlx.frontends.onnx``) and
the ONNX exporter (``rlx.backends.onnx``) need them, and frontends and backends share a layer that
neither may import across (docs/architecture.md, "Layering"); like the rest of ``ir`` this module
imports no onnx."""

from __future__ import annotations

from collections import Counter

from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError, RlxError

# TensorProto.DataType numbers (stable across onnx releases; written out so that this module
# does not import onnx).
ONNX_TO_RLX: dict[int, DType] = {
    1: DType.F32, 2: DType.U8, 3: DType.I8, 5: DType.I16, 6: DType.I32, 7: DType.I64, 9: DType.BOOL,
    10: DType.F16, 11: DType.F64, 4: DType.U16, 12: DType.U32, 13: DType.U64, 14: DType.C64,
    16: DType.BF16, 17: DType.F8E4M3, 18: DType.F8E4M3FNUZ, 19: DType.F8E5M2, 20: DType.F8E5M2FNUZ, 21: DType.U4,
    22: DType.I4, 23: DType.F4E2M1, 24: DType.F8E8M0, 25: DType.U2, 26: DType.I2,
}
RLX_TO_ONNX: dict[DType, int] = {v: k for k, v in ONNX_TO_RLX.items()}
#: the first ai.onnx opset whose ops (Cast, QuantizeLinear ...) take each newer element type
SINCE_OPSET: dict[DType, int] = {
    DType.F8E4M3: 19, DType.F8E5M2: 19, DType.F8E4M3FNUZ: 19, DType.F8E5M2FNUZ: 19, DType.U4: 21, DType.I4: 21,
    DType.F4E2M1: 23, DType.F8E8M0: 24, DType.U2: 25, DType.I2: 25,
}
ONNX_TYPE_NAMES = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
    9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64", 15: "COMPLEX128",
    16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4",
    22: "INT4", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2",
}


class OnnxError(RlxError):
    """An ONNX model or graph could not be converted."""


class OnnxUnsupported(OnnxError):
    """The model uses something rlx cannot represent (an op, an attribute value, a dtype)."""


class OnnxFormatError(OnnxError, FormatError):
    """The model file itself is malformed or unsafe to read (bad protobuf, external data outside its folder …)."""


class OnnxLimitError(OnnxFormatError):
    """Importing would exceed one of the caller's :class:`rlx.LoadLimits`; the message names the node and the limit."""


class DeclaredTypeError(OnnxError):
    """A value's dtype or shape as rlx computes it contradicts the type the model declares for it."""


class UnsupportedOpsError(OnnxUnsupported):
    """The model has op types with no converter; ``counts`` maps each op type to its node count."""

    def __init__(self, counts: Counter):
        self.counts = dict(counts)
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items(), key=lambda kv: str(kv[0])))
        super().__init__(f"unsupported ONNX op types ({sum(counts.values())} nodes): {listed}")


def rlx_dtype(elem_type: int, where: str = "") -> DType:
    try:
        return ONNX_TO_RLX[elem_type]
    except (KeyError, TypeError):
        name = ONNX_TYPE_NAMES.get(elem_type, str(elem_type))
        raise OnnxUnsupported(f"{where}element type {name} has no rlx equivalent") from None


def onnx_dtype(dtype: DType, where: str = "") -> int:
    try:
        return RLX_TO_ONNX[dtype]
    except KeyError:
        raise OnnxUnsupported(f"{where}rlx dtype {dtype} has no ONNX equivalent") from None
