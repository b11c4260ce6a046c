"""The training error type (its own module: every part of the package raises it)."""

from __future__ import annotations

from rlx.ir.errors import RlxError

__all__ = ["TrainingError"]


class TrainingError(RlxError):
    """A model, a ``wrt`` list, an option or a checkpoint that :func:`rlx.compile_training` cannot use."""
