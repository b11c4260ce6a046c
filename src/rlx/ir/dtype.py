"""Element types, their NumPy mapping, and a commutative JAX-style promotion lattice.

Upstream's ``promote`` is order-dependent (``promote(i8, u8) != promote(u8, i8)``); rlx
instead promotes along a lattice, so ``promote(a, b) == promote(b, a)`` always and the
result is the least type that every operand type converts into:

    bool -> u2 -> u4 -> u8 -> i16 -> i32 -> i64 -> f* ;  bool -> i2 -> i4 -> i8 -> i16
    u2 -> i4 ;  u4 -> i8 ;  u8 -> u16 -> u32 -> u64 -> f64 ;  u16 -> i32 ;  u32 -> i64
    f* -> f16 -> f32 ;  f* -> f8e4m3 / f8e5m2 / f8e4m3fnuz / f8e5m2fnuz / f8e8m0 / f4e2m1 -> bf16
    bf16 -> f32 -> f64 -> c64 ;  f32 -> c64 -> c128

``f*`` is JAX's weak float: integers meet floats at the float (``i32 + f16 = f16``,
``i64 + f32 = f32``), as in ``jax.numpy``; u64 meets signed ints and
floats at f64 (no narrower type holds both), as in NumPy. c128 sits above c64 only: f64 meets c64 at
c64 (rlx's rule since before c128 existed; NumPy would give c128), so c128 appears only where asked for. Two of the 8- and 4-bit float kinds
meet at bf16 (which holds every value of each), one of them and f16 at f32. The sub-byte
integers (i4 u4 i2 u2) and f4e2m1 are stored one element per byte (ml_dtypes' layout: the
value's low bits); ONNX packs them, its importer and exporter convert.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import numpy as np

from rlx.ir.errors import RlxError

try:
    import ml_dtypes
except ImportError:  # a core dependency; without it rlx still imports and only bf16 / fp8 storage is missing
    ml_dtypes = None  # type: ignore[assignment]

#: A dtype name NumPy may read (``float32``, ``<f4``); anything else is refused before NumPy parses it.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_<>=|]{1,40}")
_NUMPY: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
}
if ml_dtypes is not None:
    _NUMPY.update(
        bf16=np.dtype(ml_dtypes.bfloat16), f8e4m3=np.dtype(ml_dtypes.float8_e4m3fn), f8e5m2=np.dtype(ml_dtypes.float8_e5m2),
        f8e4m3fnuz=np.dtype(ml_dtypes.float8_e4m3fnuz), f8e5m2fnuz=np.dtype(ml_dtypes.float8_e5m2fnuz),
        f8e8m0=np.dtype(ml_dtypes.float8_e8m0fnu), f4e2m1=np.dtype(ml_dtypes.float4_e2m1fn),
        i4=np.dtype(ml_dtypes.int4), u4=np.dtype(ml_dtypes.uint4), i2=np.dtype(ml_dtypes.int2), u2=np.dtype(ml_dtypes.uint2),
    )
#: the types ml_dtypes provides, one byte each but bf16
_ML_DTYPES = ("bf16", "f8e4m3", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4", "u4", "i2", "u2")
_ITEMSIZE = {**{name: d.itemsize for name, d in _NUMPY.items()}, **{name: 2 if name == "bf16" else 1 for name in _ML_DTYPES}}
#: value bits of the sub-byte types (the rest of their byte is unused)
_BITS = {"i4": 4, "u4": 4, "i2": 2, "u2": 2, "f4e2m1": 4}

# Edges of the promotion lattice (``a -> b`` means a converts into b without loss of kind).
_EDGES = {
    "bool": ("u2", "i2"),
    "u2": ("u4", "i4"),
    "i2": ("i4",),
    "u4": ("u8", "i8"),
    "i4": ("i8",),
    "u8": ("i16", "u16"),
    "u16": ("i32", "u32"),
    "i8": ("i16",),
    "i16": ("i32",),
    "i32": ("i64",),
    "u32": ("i64", "u64"),
    "u64": ("f64",),
    "i64": ("f*",),
    "f*": ("f16", "f8e4m3", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e8m0", "f4e2m1"),
    "f8e4m3": ("bf16",),
    "f8e5m2": ("bf16",),
    "f8e4m3fnuz": ("bf16",),
    "f8e5m2fnuz": ("bf16",),
    "f8e8m0": ("bf16",),
    "f4e2m1": ("bf16",),
    "f16": ("f32",),
    "bf16": ("f32",),
    "f32": ("f64", "c64"),
    "f64": ("c64",),
    "c64": ("c128",),
    "c128": (),
}


class DType(enum.Enum):
    """An element type. The value is the short name used in text and JSON (``"f32"``)."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    F64 = "f64"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    BOOL = "bool"
    C64 = "c64"
    C128 = "c128"
    F8E4M3 = "f8e4m3"
    F8E5M2 = "f8e5m2"
    F8E4M3FNUZ = "f8e4m3fnuz"
    F8E5M2FNUZ = "f8e5m2fnuz"
    F8E8M0 = "f8e8m0"
    F4E2M1 = "f4e2m1"
    I4 = "i4"
    U4 = "u4"
    I2 = "i2"
    U2 = "u2"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"rlx.{self.value}"

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype that stores this element type (bf16, the 8- and 4-bit floats, i4 u4 i2 u2 via ml_dtypes)."""
        try:
            return _NUMPY[self.value]
        except KeyError:
            raise DTypeError(f"{self.value} values need the ml_dtypes package (pip install ml_dtypes)") from None

    @property
    def itemsize(self) -> int:
        """Bytes per element as rlx stores it (1 for the sub-byte types)."""
        return _ITEMSIZE[self.value]

    @property
    def bits(self) -> int:
        """Value bits per element (4 or 2 for the sub-byte types, 8 * itemsize otherwise)."""
        return _BITS.get(self.value, 8 * _ITEMSIZE[self.value])

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def is_complex(self) -> bool:
        return self is DType.C64 or self is DType.C128

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def is_low_precision_float(self) -> bool:
        """Floats NumPy computes poorly in; reference kernels evaluate them in f32."""
        return self in _LOW_FLOATS

    @classmethod
    def of(cls, value: Any) -> DType:
        """Coerce a DType, a short name (``"f32"``) or anything ``np.dtype`` accepts."""
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
            if not _PLAIN_NAME.fullmatch(value):  # np.dtype would parse (literal_eval) a structured format
                raise DTypeError(f"not a dtype: {value[:60]!r}")
        try:
            npd = np.dtype(value)
        except (TypeError, ValueError):  # ValueError: a malformed comma-separated format string
            raise DTypeError(f"not a dtype: {value!r}") from None
        for name, candidate in _NUMPY.items():
            if candidate == npd:
                return cls(name)
        raise DTypeError(f"dtype {npd} has no rlx equivalent")

    @staticmethod
    def promote(a: DType | str, b: DType | str) -> DType:
        """Least upper bound of two element types in the promotion lattice (commutative)."""
        return _PROMOTION[(DType.of(a), DType.of(b))]


class DTypeError(RlxError, TypeError):
    """A value could not be read as an rlx element type."""


_LOW_FLOATS = frozenset({DType.F16, DType.BF16, DType.F8E4M3, DType.F8E5M2, DType.F8E4M3FNUZ, DType.F8E5M2FNUZ,
                         DType.F8E8M0, DType.F4E2M1})
_FLOATS = frozenset({DType.F32, DType.F64}) | _LOW_FLOATS
_INTS = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64,
                   DType.I4, DType.U4, DType.I2, DType.U2})


def _upper_sets() -> dict[str, frozenset[str]]:
    memo: dict[str, frozenset[str]] = {}

    def up(node: str) -> frozenset[str]:
        if node not in memo:
            memo[node] = frozenset({node}).union(*(up(n) for n in _EDGES[node]))
        return memo[node]

    return {node: up(node) for node in _EDGES}


def _promotion_table() -> dict[tuple[DType, DType], DType]:
    ups = _upper_sets()
    table = {}
    for a in DType:
        for b in DType:
            common = ups[a.value] & ups[b.value]
            least = [c for c in common if common <= ups[c]]
            assert len(least) == 1, f"promotion lattice has no unique join for {a}, {b}"
            table[(a, b)] = DType(least[0])
    return table


_PROMOTION = _promotion_table()


def promote_all(dtypes: list[DType]) -> DType:
    """Join of several element types (left fold; the lattice makes the order irrelevant)."""
    result = dtypes[0]
    for d in dtypes[1:]:
        result = DType.promote(result, d)
    return result


f32, f16, bf16, f64 = DType.F32, DType.F16, DType.BF16, DType.F64
i8, i16, i32, i64 = DType.I8, DType.I16, DType.I32, DType.I64
u8, u16, u32, u64 = DType.U8, DType.U16, DType.U32, DType.U64
bool_, c64, c128 = DType.BOOL, DType.C64, DType.C128
f8e4m3, f8e5m2 = DType.F8E4M3, DType.F8E5M2
f8e4m3fnuz, f8e5m2fnuz, f8e8m0, f4e2m1 = DType.F8E4M3FNUZ, DType.F8E5M2FNUZ, DType.F8E8M0, DType.F4E2M1
i4, u4, i2, u2 = DType.I4, DType.U4, DType.I2, DType.U2


def needs_f32_master(dtype: Any) -> bool:
    """Whether training keeps an f32 master copy of a param of this NumPy / ml_dtypes dtype: the floats
    narrower than f32 (f16, bf16), whose small updates would round away."""
    return (np.dtype(dtype).itemsize < 4 and np.dtype(dtype).kind == "f") or str(dtype) == "bfloat16"
