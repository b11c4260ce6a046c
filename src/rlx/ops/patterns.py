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
