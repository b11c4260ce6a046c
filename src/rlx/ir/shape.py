"""Shapes: tuples of static ``int`` dims and symbolic dims (:class:`rlx.ir.symbolic.SymDim`).

A symbolic dim is spelled by name (``"batch"``) or as an expression over names
(``"2*seq + 1"``, ``"floordiv(h + 1, 2)"``); :class:`Shape` turns both spellings into
SymDims, which support ``+ - * // %`` with ints and each other. Equal dims mean the same
size. Broadcasting follows NumPy, extended to symbols: a symbolic dim broadcasts against 1
and against itself; against any other size it is a :class:`ShapeError` (upstream silently
keeps the left dim, which hides bugs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.symbolic import Dim, SymDim, check_dim, free_symbols, substitute

__all__ = ["Dim", "Shape", "SymDim", "TensorType", "broadcast_dims", "broadcast_shapes", "check_dim", "normalize_axis"]


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
        """Names of the symbols the dims use, in order of first appearance."""
        return free_symbols(self)

    @property
    def numel(self) -> int | None:
        """Element count, or None while any dim is symbolic (see :attr:`numel_dim`)."""
        return math.prod(self) if self.is_static else None  # type: ignore[arg-type]

    @property
    def numel_dim(self) -> Dim:
        """Element count as a dim (an expression while any dim is symbolic)."""
        return math.prod(self)  # type: ignore[return-value]

    def bind(self, binding: Mapping[str, Dim]) -> Shape:
        """Substitute bound symbols (sizes or other dims) into every dim."""
        return Shape(substitute(d, binding) for d in self)

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
