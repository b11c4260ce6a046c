"""The constants and load limits of the rlx-ir document format (split out of :mod:`rlx.ir.serialize`,
which re-exports them; docs/format.md has the schema)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rlx.ir.dtype import DType

FORMAT = "rlx-ir"
VERSION = 2  # 2: multi-result nodes (a node's "results" field and its "result" nodes)
INLINE_MAX_BYTES = 4096  # tensors up to this many bytes stay inline in save() and fingerprint()
LEVELS = ("hir", "mir", "lir")
CONST_PREFIX = "rlx.const."  # sidecar names of constants: rlx.const.<sha256 of bytes>.<dtype>[<dims>]
PAYLOAD_SUFFIX = ".safetensors"
_HEADER = ("format", "version", "level", "kind", "payload")

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_SHA = re.compile(r"[0-9a-f]{64}")
_NONFINITE_IN = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_DTYPES = {d.value: d for d in DType}
_ST_DTYPE = {
    "f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32", "i16": "I16",
    "i8": "I8", "u8": "U8", "u16": "U16", "u32": "U32", "u64": "U64", "bool": "BOOL", "c64": "C64",
    "f8e4m3": "F8_E4M3", "f8e5m2": "F8_E5M2", "f8e8m0": "F8_E8M0",
    # rlx's own names (one byte per element; stock safetensors readers do not know them)
    "f8e4m3fnuz": "F8_E4M3FNUZ", "f8e5m2fnuz": "F8_E5M2FNUZ", "f4e2m1": "F4_E2M1_BYTE",
    "c128": "C128", "i4": "I4_BYTE", "u4": "U4_BYTE", "i2": "I2_BYTE", "u2": "U2_BYTE",
}
_ST_DTYPE_IN = {v: DType(k) for k, v in _ST_DTYPE.items()}


# ------------------------------------------------------------------------------------ limits


@dataclass(frozen=True)
class LoadLimits:
    """Bounds a loader enforces before it allocates or loops; every field is configurable.

    A hostile ten-line file cannot make the loader allocate more than these allow or loop
    for long: declared sizes (shapes, base64 lengths, safetensors offsets) are checked
    before any buffer is made, and no buffer is ever made for a node's declared type.
    """

    max_document_bytes: int = 1 << 31  # JSON text of one document
    max_depth: int = 32  # graphs nested in graph attributes (ONNX subgraphs and function bodies too); ``data`` nesting
    max_nodes: int = 10_000_000  # nodes over all graphs of a document, nested ones included
    max_items: int = 1 << 20  # entries of one list (operands, outputs, ints, dims, passes ...)
    max_string: int = 1 << 16  # characters of one name, op, symbol or str attribute
    max_rank: int = 64  # dims of one shape
    max_dim: int = 1 << 48  # one declared dim
    max_tensor_bytes: int = 1 << 40  # declared bytes of one tensor (node type, constant, weight)
    max_inline_bytes: int = 1 << 28  # bytes of one inline (base64) tensor
    max_total_bytes: int = 1 << 40  # tensor bytes actually read: inline constants + payload file
    max_header_bytes: int = 1 << 26  # safetensors JSON header
    # importers that compute values at import time (rlx.onnx.import_model):
    max_constant_elements: int = 1 << 24  # elements of one constant computed at import (folded values, index tables)
    max_constant_bytes: int = 1 << 31  # bytes of all constants computed at import, together
    max_unroll: int = 1 << 14  # loop iterations / scan steps / per-node pieces unrolled at import, over the whole import


DEFAULT_LIMITS = LoadLimits()
