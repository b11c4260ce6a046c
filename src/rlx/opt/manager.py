"""The pass manager: a pass is a function ``graph -> PassResult(graph, id_map, stats)``.

Every pass returns an old → new id map (values that survive, including those now
computed by a fused node); the manager composes them so callers can carry references
(outputs, names, ``wrt`` lists) across a whole pipeline. With ``check`` on (the
default, and always in tests) the verifier runs after every pass and a failure names
the pass.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.errors import RlxError, VerifyError
from rlx.ir.graph import Graph
from rlx.ir.verify import verify


class PassError(RlxError):
    """A pass failed or produced a graph that does not verify; names the pass."""


@dataclass
class PassResult:
    """What a pass did: the new graph, old → new ids of surviving values, counters."""

    graph: Graph
    id_map: Mapping[int, int] | None = None  # None: ids unchanged (identity)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return any(self.stats.values())


PassFn = Callable[[Graph], PassResult]


@dataclass(frozen=True)
class Pass:
    """A named pass. ``produces`` lists the ops it may create (gated by backend claim sets)."""

    name: str
    fn: PassFn
    produces: frozenset[str] = frozenset()
    options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, g: Graph) -> PassResult:
        return self.fn(g, **self.options) if self.options else self.fn(g)

    def with_options(self, **options: Any) -> Pass:
        return Pass(self.name, self.fn, self.produces, {**self.options, **options})


@dataclass
class PassLog:
    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    stats: dict[str, int]


@dataclass
class PipelineResult:
    graph: Graph
    id_map: dict[int, int]
    log: list[PassLog]

    def remap(self, ref: int) -> int | None:
        """New id of an old value, or None if it no longer exists."""
        return self.id_map.get(int(ref))


def compose(first: Mapping[int, int] | None, second: Mapping[int, int] | None, n: int) -> dict[int, int] | None:
    """``second ∘ first``; None stands for the identity on ``n`` ids."""
    if second is None:
        return None if first is None else dict(first)
    if first is None:
        return dict(second)
    return {old: second[mid] for old, mid in first.items() if mid in second}


def run_passes(g: Graph, passes: Sequence[Pass | PassFn], *, check: bool = True) -> PipelineResult:
    """Run ``passes`` in order; verify after each when ``check``; compose the id maps.

    The cyclic garbage collector is paused while the passes run: they allocate millions
    of small acyclic objects (freed by reference counting), and its full collections
    would otherwise make the time per node grow with graph size.
    """
    with paused_gc():
        return _run_passes(g, passes, check)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _run_passes(g: Graph, passes: Sequence[Pass | PassFn], check: bool) -> PipelineResult:
    log: list[PassLog] = []
    id_map: dict[int, int] | None = None
    n0 = len(g.nodes)
    if check:
        verify(g)
    for p in passes:
        name = p.name if isinstance(p, Pass) else getattr(p, "__name__", "pass")
        before = len(g.nodes)
        t0 = time.perf_counter()
        try:
            result = p(g)
        except RlxError as exc:
            raise PassError(f"pass {name!r} failed: {exc}") from exc
        if not isinstance(result, PassResult):
            raise PassError(f"pass {name!r} returned {type(result).__name__}, expected PassResult")
        if check and result.graph is not g:  # a pass that changed nothing returns its input
            try:
                verify(result.graph)
            except VerifyError as exc:
                raise PassError(f"pass {name!r} produced an invalid graph: {exc}") from exc
        id_map = compose(id_map, result.id_map, n0)
        log.append(PassLog(name, before, len(result.graph.nodes), time.perf_counter() - t0, dict(result.stats)))
        g = result.graph
    return PipelineResult(g, id_map if id_map is not None else {i: i for i in range(n0)}, log)


def remap_refs(refs: Iterable[int], id_map: Mapping[int, int]) -> list[int]:
    """Map old ids to new ones; raises PassError for a value that no longer exists."""
    out = []
    for r in refs:
        r = int(r)
        if r not in id_map:
            raise PassError(f"node %{r} did not survive the passes")
        out.append(id_map[r])
    return out
