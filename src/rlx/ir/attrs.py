"""Typed op attributes: schemas, validation into canonical immutable values."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.ir.dtype import DType, DTypeError
from rlx.ir.errors import AttributeSchemaError, ShapeError
from rlx.ir.shape import SymDim, check_dim

REQUIRED: Any = object()  # sentinel: the attribute has no default


class FrozenArray:
    """An immutable ndarray wrapper with value equality (bitwise, so NaN == NaN)."""

    __slots__ = ("_digest", "array")

    def __init__(self, array: Any):
        arr = np.array(array, copy=True, order="C")
        arr.flags.writeable = False
        self.array = arr
        self._digest: bytes | None = None

    @property
    def digest(self) -> bytes:
        if self._digest is None:
            h = hashlib.sha256(f"{self.array.dtype.str}{self.array.shape}".encode())
            h.update(self.array.tobytes())
            self._digest = h.digest()
        return self._digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenArray) and (
            self.array.dtype == other.array.dtype
            and self.array.shape == other.array.shape
            and self.array.tobytes() == other.array.tobytes()
        )

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"FrozenArray({self.array.dtype}, {self.array.shape})"


#: ``size``: one int (any sign) or symbolic dim (narrow's start and length).
#: ``sizes``: target sizes of reshape / expand: ints (any sign: the op rule judges -1 and the
#: rest) or symbolic dims. ``dims``: declared dims, ints >= 0 or symbolic dims.
_KINDS = ("int", "float", "bool", "str", "dtype", "ints", "floats", "dims", "size", "sizes", "tensor", "graph", "data")


@dataclass(frozen=True)
class AttrSpec:
    """Schema of one attribute: kind, default (REQUIRED if none), allowed values, nullability."""

    kind: str
    default: Any = REQUIRED
    choices: tuple[Any, ...] | None = None
    optional: bool = False
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in _KINDS, self.kind
        if self.default is None:
            object.__setattr__(self, "optional", True)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def _fail(where: str, expected: str, value: Any) -> AttributeSchemaError:
    return AttributeSchemaError(f"{where}: expected {expected}, got {type(value).__name__} {value!r}"[:300])


def _float(value: Any) -> float:
    """``float(value)``, every NaN mapped to the one ``math.nan`` object so equal attributes compare equal."""
    out = float(value)
    return math.nan if out != out else out


def _as_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _fail(where, "int", value)
    return int(value)


def _as_data(value: Any, where: str) -> Any:
    """Nested JSON-like data made immutable (lists become tuples)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _float(value)
    if isinstance(value, (list, tuple)):
        return tuple(_as_data(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise _fail(where, "JSON-like data (None, bool, int, float, str, list)", value)


def _size(value: Any, where: str) -> Any:
    if value.__class__ is SymDim:
        return value
    if isinstance(value, str):
        try:
            return check_dim(value)
        except ShapeError as exc:
            raise ShapeError(f"{where}: {exc}") from None
    return _as_int(value, where)


CANONICAL_CLASS = {"int": int, "size": int, "bool": bool, "str": str, "dtype": DType}


def normalize_attr(spec: AttrSpec, value: Any, where: str) -> Any:
    """Check ``value`` against ``spec`` and return its canonical immutable form."""
    if value is None:
        if spec.optional:
            return None
        raise _fail(where, f"a {spec.kind}", value)
    kind = spec.kind
    if spec.choices is None or value in spec.choices:  # fast paths: values already in canonical form
        if value.__class__ is CANONICAL_CLASS.get(kind):
            return value
        if (kind == "ints" or kind == "sizes") and value.__class__ in (tuple, list) and all(v.__class__ is int for v in value):
            return tuple(value)
    if kind == "int":
        out: Any = _as_int(value, where)
    elif kind == "size":
        out = _size(value, where)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise _fail(where, "float", value)
        out = _float(value)
    elif kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise _fail(where, "bool", value)
        out = bool(value)
    elif kind == "str":
        if not isinstance(value, str):
            raise _fail(where, "str", value)
        out = value
    elif kind == "dtype":
        try:
            out = DType.of(value)
        except DTypeError:
            raise _fail(where, "dtype", value) from None
    elif kind in ("ints", "floats", "dims", "sizes"):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise _fail(where, f"a list ({kind})", value)
        items = list(value)
        if kind == "ints":
            out = tuple(_as_int(v, f"{where}[{i}]") for i, v in enumerate(items))
        elif kind == "sizes":
            try:
                out = tuple(_size(v, f"{where}[{i}]") for i, v in enumerate(items))
            except ShapeError as exc:
                raise ShapeError(f"{where}: {exc}") from None
        elif kind == "floats":
            out = tuple(normalize_attr(AttrSpec("float"), v, f"{where}[{i}]") for i, v in enumerate(items))
        else:
            try:
                out = tuple(check_dim(v) for v in items)
            except ShapeError as exc:
                raise ShapeError(f"{where}: {exc}") from None
    elif kind == "tensor":
        out = value if isinstance(value, FrozenArray) else FrozenArray(np.asarray(value))
    elif kind == "graph":
        from rlx.ir.graph import Graph  # local: graph imports this module

        if not isinstance(value, Graph):
            raise _fail(where, "Graph", value)
        out = value
    else:  # data
        out = _as_data(value, where)
    if spec.choices is not None and out not in spec.choices:
        raise AttributeSchemaError(f"{where}: {out!r} is not one of {list(spec.choices)}")
    return out

