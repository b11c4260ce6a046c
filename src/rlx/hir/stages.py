"""``AdPipelineStage``: the named stages of the training pipeline (docs/pipeline.md#stages)."""

from __future__ import annotations

import enum

from rlx.ir.graph import GraphStage


class AdPipelineStage(enum.Enum):
    """Where a graph is on the way from model code to a backward graph.

    ``HIR_BUILD`` (block ops, as built) → ``MIR_LOWERED`` (after ``lower_to_mir``, for
    autodiff with ``FusionPolicy.for_autodiff()``) → ``MIR_PREPARED`` (after
    ``prepare_graph_for_ad``: fused ops unfused, control flow rewritten) →
    ``MIR_BACKWARD`` (the graph ``grad_with_loss`` returns). Upstream the enum is
    documentation only; here each member also names the graph stage it holds.
    """

    HIR_BUILD = "hir_build"
    MIR_LOWERED = "mir_lowered"
    MIR_PREPARED = "mir_prepared"
    MIR_BACKWARD = "mir_backward"

    @property
    def graph_stage(self) -> GraphStage:
        return GraphStage.HIR if self is AdPipelineStage.HIR_BUILD else GraphStage.MIR

    @property
    def next(self) -> AdPipelineStage | None:
        order = list(AdPipelineStage)
        i = order.index(self)
        return order[i + 1] if i + 1 < len(order) else None

    def __str__(self) -> str:
        return self.value
