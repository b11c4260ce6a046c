"""Errors of the HIR layer."""

from __future__ import annotations

from rlx.ir.errors import ShapeError


class LowerError(ShapeError):
    """A HIR block was built or lowered with the wrong operands (count, a missing one, shapes).

    Subclass of :class:`rlx.ShapeError`. ``block`` is the op name and ``label`` the block's
    label (``None`` when it has none); both appear in the message.
    """

    def __init__(self, block: str, label: str | None, message: str):
        where = f"HIR block {block!r}" + (f" (label {label!r})" if label else "")
        super().__init__(f"{where}: {message}")
        self.block = block
        self.label = label
