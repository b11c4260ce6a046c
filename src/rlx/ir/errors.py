"""The project's exception hierarchy: every error rlx raises on bad input is one of these."""

from __future__ import annotations


class RlxError(Exception):
    """Base class of every error raised by rlx on bad input or bad graphs."""


class ShapeError(RlxError, ValueError):
    """An op was given operands whose shapes or dtypes its rule rejects."""


class AttributeSchemaError(RlxError, TypeError):
    """An op attribute is unknown, missing, or of the wrong type or value."""


class VerifyError(RlxError):
    """A graph broke one or more structural or typing rules.

    ``errors`` lists every broken rule found (verification does not stop at the first).
    """

    def __init__(self, message: str, errors: list[str] | None = None):
        super().__init__(message)
        self.errors = list(errors or [message])


class FormatError(RlxError, ValueError):
    """A serialized document or text form could not be read; the message names the field."""


class ExportError(RlxError, ValueError):
    """An object has no form in the format it is written to; the message names the node and op."""


class ParseError(FormatError):
    """The text form of a graph could not be parsed; the message names the line."""


class FeedError(RlxError, ValueError):
    """A run was fed missing, extra, or mis-shaped inputs or params."""


class AutodiffError(RlxError):
    """A graph could not be differentiated (no rule, bad ``wrt``, wrong stage …)."""


class InternalError(RuntimeError):
    """A bug, not bad input: an op's rule or kernel raised an exception it does not document
    (a ``TypeError`` inside a type rule, say). The original exception is chained as
    ``__cause__`` with its traceback. Deliberately not an :class:`RlxError`, so code that
    handles bad input (``except RlxError``) never swallows it."""


class UnknownOpError(RlxError, KeyError):
    """An op name is not in the registry."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""
