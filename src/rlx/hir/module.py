"""``GraphModule`` (alias ``HirModule``) and ``rlx.define``: a model at one stage, HIR, MIR or LIR.

    m = rlx.define("layer", lambda h: h.linear(h.input("x", (2, 128)), h.param("w", (128, 128)),
                                                bias=h.param("b", (128,)), activation="gelu"))
    m.stage                                   # GraphStage.HIR
    mir = m.lower_to_mir()                    # Graph at MIR, DIRECT policy
    mir = m.lower_to_mir(rlx.FusionPolicy.FUSABLE)

A module holds exactly one graph: a HIR graph (with the fusion policy its lowering uses,
``DIRECT`` unless changed), a MIR graph, or an LIR object (anything with ``.graph`` and
``.plan``, e.g. ``rlx.LirModule``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rlx.hir.builder import HirGraph
from rlx.hir.lower import lower_to_mir
from rlx.hir.policy import FusionPolicy
from rlx.hir.stages import AdPipelineStage
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, GraphStage, Value


class GraphModule:
    """A named model at one stage. ``.stage``, ``.graph``, ``.fusion_policy``, ``lower_to_mir()``."""

    def __init__(self, content: Graph | Any, fusion_policy: FusionPolicy | str | None = None):
        if isinstance(content, Graph):
            self._graph: Graph = content
            self._lir: Any = None
        elif hasattr(content, "graph") and hasattr(content, "plan"):
            self._graph = content.graph
            self._lir = content
        else:
            raise RlxError(f"a GraphModule holds a Graph or an LIR module, got {type(content).__name__}")
        self.fusion_policy = FusionPolicy.coerce(fusion_policy)

    # ---------------------------------------------------------------- creation
    @classmethod
    def define(cls, name: str, build: Callable[[HirGraph], Any], policy: FusionPolicy | str | None = None) -> GraphModule:
        """Build a HIR module: ``build(h)`` returns the output value (or a list/tuple of them)."""
        h = HirGraph(name)
        result = build(h)
        if result is not None:
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            if not all(isinstance(o, (Value, int)) for o in outs):
                raise RlxError(f"define({name!r}): build must return graph values, got {result!r}")
            h.set_outputs(outs)
        return cls(h, policy)

    @classmethod
    def hir(cls, name: str, policy: FusionPolicy | str | None = None) -> GraphModule:
        """An empty HIR module; build through ``m.graph`` (the HIR builder)."""
        return cls(HirGraph(name), policy)

    @classmethod
    def mir(cls, name: str) -> GraphModule:
        return cls(Graph(name, GraphStage.MIR))

    @classmethod
    def from_graph(cls, graph: Graph, policy: FusionPolicy | str | None = None) -> GraphModule:
        return cls(graph, policy)

    from_hir = from_graph
    from_mir = from_graph

    @classmethod
    def from_lir(cls, lir: Any) -> GraphModule:
        return cls(lir)

    # ------------------------------------------------------------------ access
    @property
    def stage(self) -> GraphStage:
        return GraphStage.LIR if self._lir is not None else self._graph.stage

    @property
    def graph(self) -> Graph:
        """The graph (at LIR: the planned MIR graph)."""
        return self._graph

    @property
    def lir(self) -> Any:
        if self._lir is None:
            raise RlxError(f"module {self.name!r} is at stage {self.stage.value.upper()}, not LIR")
        return self._lir

    @property
    def name(self) -> str:
        return self._graph.name

    @property
    def pipeline_stage(self) -> AdPipelineStage | None:
        """``HIR_BUILD`` for a HIR module, ``MIR_LOWERED`` for a MIR one, None at LIR."""
        return {GraphStage.HIR: AdPipelineStage.HIR_BUILD, GraphStage.MIR: AdPipelineStage.MIR_LOWERED}.get(self.stage)

    def input(self, name: str, shape: Iterable[Any], dtype: Any = "f32") -> Value:
        self._require_graph("input")
        return self._graph.input(name, shape, dtype)

    def param(self, name: str, shape: Iterable[Any], dtype: Any = "f32") -> Value:
        self._require_graph("param")
        return self._graph.param(name, shape, dtype)

    def set_outputs(self, outputs: Iterable[Any]) -> None:
        self._require_graph("set_outputs")
        self._graph.set_outputs(outputs)

    def _require_graph(self, what: str) -> None:
        if self._lir is not None:
            raise RlxError(f"{what}: module {self.name!r} is at stage LIR (planned graphs are immutable)")

    # ---------------------------------------------------------------- lowering
    def with_fusion_policy(self, policy: FusionPolicy | str) -> GraphModule:
        """The same HIR graph with another lowering policy (HIR modules only)."""
        if self.stage is not GraphStage.HIR:
            raise RlxError(f"with_fusion_policy: module {self.name!r} is at stage {self.stage.value.upper()}, not HIR")
        return GraphModule(self._graph, policy)

    def lower_to_mir(self, policy: FusionPolicy | str | None = None) -> Graph:
        """The MIR graph: HIR is lowered under ``policy`` (default: the module's, ``DIRECT``);
        a MIR module returns its graph, an LIR module its planned MIR graph."""
        if self.stage is GraphStage.HIR:
            return lower_to_mir(self._graph, self.fusion_policy if policy is None else policy)
        return self._graph

    into_mir = lower_to_mir

    def lower(self, policy: FusionPolicy | str | None = None) -> GraphModule:
        """A MIR-stage module (a no-op for MIR and LIR modules)."""
        if self.stage is not GraphStage.HIR:
            return self
        return GraphModule(self.lower_to_mir(policy))

    def lower_for_autodiff(self) -> Graph:
        """``lower_to_mir(FusionPolicy.for_autodiff())`` — the ``MIR_LOWERED`` stage of training."""
        return self.lower_to_mir(FusionPolicy.for_autodiff())

    # ------------------------------------------------------------- inspection
    def inspect(self) -> str:
        """The stage's dump: ``inspect_hir`` / ``inspect_mir`` / ``inspect_lir``."""
        from rlx.hir.inspect import inspect

        return inspect(self)

    def __str__(self) -> str:
        return str(self._graph)

    def __repr__(self) -> str:
        extra = f", fusion={self.fusion_policy.title}" if self.stage is GraphStage.HIR else ""
        return f"<GraphModule {self.name!r} {self.stage.value.upper()}: {len(self._graph)} nodes{extra}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphModule):
            return NotImplemented
        return self.stage == other.stage and self._graph == other._graph and self.fusion_policy == other.fusion_policy

    __hash__ = None  # type: ignore[assignment]


HirModule = GraphModule


def define(name: str, build: Callable[[HirGraph], Any], policy: FusionPolicy | str | None = None) -> GraphModule:
    """``rlx.define``: build a HIR module with ``build(h)``; see :class:`GraphModule`."""
    return GraphModule.define(name, build, policy)
