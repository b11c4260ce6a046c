"""``FusionPolicy``: how HIR blocks lower to MIR (docs/pipeline.md#hir-lowering)."""

from __future__ import annotations

import enum
from typing import Any

from rlx.ir.errors import RlxError


class FusionPolicy(enum.StrEnum):
    """``DIRECT`` emits fused MIR ops at lowering time; ``FUSABLE`` emits primitive chains
    the optimizer's pattern passes recognise (and autodiff can differentiate).

    ``DIRECT`` is the default everywhere in rlx (upstream's enum defaults to ``Fusable`` but
    its modules start ``Direct``; rlx has one default). The members compare equal to their
    lowercase string values.
    """

    DIRECT = "direct"
    FUSABLE = "fusable"

    @classmethod
    def for_autodiff(cls) -> FusionPolicy:
        """The policy for graphs that will be differentiated: ``FUSABLE`` (there is no third variant)."""
        return cls.FUSABLE

    @classmethod
    def default(cls) -> FusionPolicy:
        return cls.DIRECT

    @classmethod
    def coerce(cls, value: Any) -> FusionPolicy:
        """``None`` (the default), a member, or its name/value in any case."""
        if value is None:
            return cls.DIRECT
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() in (member.value, member.name.lower()):
                    return member
        raise RlxError(f"unknown fusion policy {value!r} (expected FusionPolicy.DIRECT or FusionPolicy.FUSABLE)")

    @property
    def title(self) -> str:
        """``Direct`` / ``Fusable``, as upstream's dumps print it."""
        return self.value.capitalize()

    def __str__(self) -> str:
        return self.value
