"""Multi-op patterns the rewrite passes in ``rlx.opt`` (and autodiff preparation) match, declared
next to the ops they name: each table says which op plays which role, the pass says how to match.

A fact about one op is an ``OpDef`` field or flag instead (``rlx.ops.facts``); these are facts
about how several ops combine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FusedPair:
    """``second(first(...), ...)`` computes what one ``fused`` node does on ``first``'s operands."""

    first: str
    second: str
    fused: str


#: splat preparation then rasterization is one differentiable render (autodiff preparation)
SPLAT_RENDER = FusedPair("gaussian_splat_prepare", "gaussian_splat_rasterize", "gaussian_splat_render")


@dataclass(frozen=True)
class Lowering:
    """``op`` is rewritten into ``into`` by a pass of ``rlx.opt`` (``why_kept``: when it cannot be)."""

    op: str
    into: tuple[str, ...]
    why_kept: str = ""


#: dot_general -> transposes, reshapes and one batched matmul (``rlx.opt.dot_general``)
DOT_GENERAL_LOWERING = Lowering("dot_general", ("transpose", "reshape", "matmul"),
                                "its groups are not expressible as one batched matmul (several symbolic dims)")
