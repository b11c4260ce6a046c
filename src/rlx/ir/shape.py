"""Shapes: tuples of static ``int`` dims and named symbolic dims (``"batch"``).

Equal symbol names mean the same unknown size. Broadcasting follows NumPy, extended to
symbols: a symbol broadcasts against 1 and against itself; against any other size it is
a :class:`ShapeError` (upstream silently keeps the left dim, which hides bugs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Union

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError

Dim = Union[int, str]

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_dim(d: object) -> Dim:
    """Validate one dim: a non-negative int or a symbol name (identifier)."""
    if isinstance(d, bool):
        raise ShapeError(f"dim must be an int or a symbol name, got {d!r}")
    if isinstance(d, int):
        if d < 0:
            raise ShapeError(f"dim must be >= 0, got {d}")
        return d
    if hasattr(d, "__index__"):  # numpy integers
        return check_dim(int(d))  # type: ignore[call-overload]
    if isinstance(d, str) and _SYMBOL.match(d):
        return d
    raise ShapeError(f"dim must be an int >= 0 or a symbol name, got {d!r}")


class Shape(tuple):
    """An immutable tuple of dims. ``Shape((2, "batch"))``; equal to the plain tuple."""

    def __new__(cls, dims: Iterable[object] = ()) -> Shape:
        if isinstance(dims, Shape):
            return dims
        dims = tuple(dims)
        for d in dims:  # fast path: plain non-negative ints need no conversion
            if d.__class__ is not int or d < 0:
                return super().__new__(cls, tuple(check_dim(d) for d in dims))
        return super().__new__(cls, dims)

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self)

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(d for d in self if isinstance(d, str))

    @property
    def numel(self) -> int | None:
        """Element count, or None while any dim is symbolic."""
        return math.prod(self) if self.is_static else None  # type: ignore[arg-type]

    def bind(self, binding: Mapping[str, int]) -> Shape:
        """Replace bound symbols by their sizes."""
        return Shape(binding.get(d, d) if isinstance(d, str) else d for d in self)

    def __repr__(self) -> str:
        return "[" + ", ".join(str(d) for d in self) + "]"


def broadcast_dims(a: Dim, b: Dim) -> Dim:
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    raise ShapeError(f"dims {a} and {b} do not broadcast")


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting of several shapes; raises ShapeError naming every shape."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return Shape(first)
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dim: Dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j >= 0:
                try:
                    dim = broadcast_dims(dim, s[j])
                except ShapeError:
                    listed = ", ".join(repr(Shape(x)) for x in shapes)
                    raise ShapeError(f"shapes {listed} do not broadcast (axis {i - rank})") from None
        out.append(dim)
    return Shape(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into ``[0, rank)`` or raise ShapeError."""
    if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
        raise ShapeError(f"{what} {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


@dataclass(frozen=True)
class TensorType:
    """What a node produces: a shape and an element type."""

    shape: Shape
    dtype: DType

    def __post_init__(self) -> None:
        if type(self.shape) is not Shape:
            object.__setattr__(self, "shape", Shape(self.shape))
        if type(self.dtype) is not DType:
            object.__setattr__(self, "dtype", DType.of(self.dtype))

    @property
    def nbytes(self) -> int | None:
        n = self.shape.numel
        return None if n is None else n * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.shape!r} {self.dtype}"
