"""The pass manager: a pass is a function ``graph -> PassResult(graph, id_map, stats)``.

Every pass returns an old → new id map (values that survive, including those now
computed by a fused node); the manager composes them so callers can carry references
(outputs, names, ``wrt`` lists) across a whole pipeline. With ``check`` on (the
default, and always in tests) the verifier runs after every pass and a failure names
the pass.

Sub-graphs: a node holding graph-valued attributes (``if_`` branches, ``while_`` /
``scan`` bodies, ``custom_fn`` bodies) gets each body run through the same pipeline
(recursively) after the outer passes, and is rebuilt with the optimized bodies. A body's
``input`` nodes (its positional parameters: names, types, order) and its outputs' count
and types are preserved: a pass option ``keep_leaves`` is forced on for bodies, the body
signature is checked after its pipeline, and the rebuilt node must keep its type. Node
ids do not change in that step; each body's :class:`PipelineResult` is recorded in
``PipelineResult.bodies`` under ``(node id in the result, attribute name)``. A body
shared by several nodes (or attributes) is optimized once and stays shared.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.dump import IrDump, active_dump
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


PassFn = Callable[..., PassResult]  # fn(graph, **options)


@dataclass(frozen=True)
class Pass:
    """A named pass. ``produces`` lists the ops it may create (gated by backend claim sets);
    ``top_level`` passes (their options name nodes of the outer graph) do not run on bodies."""

    name: str
    fn: PassFn
    produces: frozenset[str] = frozenset()
    options: Mapping[str, Any] = field(default_factory=dict)
    top_level: bool = False

    def __call__(self, g: Graph) -> PassResult:
        return self.fn(g, **self.options) if self.options else self.fn(g)

    def with_options(self, **options: Any) -> Pass:
        return Pass(self.name, self.fn, self.produces, {**self.options, **options}, self.top_level)


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
    #: per optimized body: (node id in ``graph``, attribute name) -> the body's own result
    bodies: dict[tuple[int, str], PipelineResult] = field(default_factory=dict)
    #: the graph the passes ran on
    source: Graph | None = None

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


def run_passes(g: Graph, passes: Sequence[Pass | PassFn], *, check: bool = True, bodies: bool = True) -> PipelineResult:
    """Run ``passes`` in order; verify after each when ``check``; compose the id maps.

    With ``bodies`` (the default) graph-valued attributes are then optimized with the same
    passes, recursively (see the module docstring).

    The cyclic garbage collector is paused while the passes run: they allocate millions
    of small acyclic objects (freed by reference counting), and its full collections
    would otherwise make the time per node grow with graph size.
    """
    with paused_gc():
        return _run_passes(g, passes, check, bodies, {}, active_dump(g.name))


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


def _run_passes(
    g: Graph, passes: Sequence[Pass | PassFn], check: bool, bodies: bool, memo: dict[int, tuple[Graph, PipelineResult]],
    dump: IrDump | None = None,
) -> PipelineResult:
    log: list[PassLog] = []
    id_map: dict[int, int] | None = None
    g0, n0 = g, len(g.nodes)
    if check:
        verify(g)
    text_before = str(g) if dump is not None else ""
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
        if dump is not None:
            entry = log[-1]
            after = str(result.graph) if result.graph is not g else text_before
            dump.pass_diff(name, text_before, after, entry.stats, (entry.nodes_before, entry.nodes_after), entry.seconds)
            text_before = after
        g = result.graph
    body_results: dict[tuple[int, str], PipelineResult] = {}
    if bodies:
        g = _optimize_bodies(g, passes, check, memo, body_results)
    if dump is not None:
        dump.stage("optimized", str(g))
    return PipelineResult(g, id_map if id_map is not None else {i: i for i in range(n0)}, log, body_results, g0)


# ------------------------------------------------------------------------ sub-graphs
_GRAPH_ATTRS: dict[str, tuple[str, ...]] = {}


def graph_attrs(op: str) -> tuple[str, ...]:
    """Names of the ``graph``-kind attributes of ``op`` (cached; empty for unknown ops)."""
    names = _GRAPH_ATTRS.get(op)
    if names is None:
        from rlx.ir.opdef import get_op, has_op

        names = tuple(k for k, spec in get_op(op).attrs.items() if spec.kind == "graph") if has_op(op) else ()
        _GRAPH_ATTRS[op] = names
    return names


def _body_passes(passes: Sequence[Pass | PassFn]) -> list[Pass | PassFn]:
    """``passes`` for a body: ``top_level`` ones dropped, any ``keep_leaves`` option forced on (a body's inputs
    are its parameters)."""
    return [p.with_options(keep_leaves=True) if isinstance(p, Pass) and "keep_leaves" in p.options else p
            for p in passes if not (isinstance(p, Pass) and p.top_level)]


def _signature(g: Graph) -> tuple[list[tuple[str, Any]], list[Any]]:
    ins = [(n.attrs["name"], n.type) for n in g.nodes if n.op in ("input", "param")]
    return ins, [g.nodes[i].type for i in g.output_ids]


def _optimize_bodies(
    g: Graph, passes: Sequence[Pass | PassFn], check: bool,
    memo: dict[int, tuple[Graph, PipelineResult]], out: dict[tuple[int, str], PipelineResult],
) -> Graph:
    """Run ``passes`` on every graph-valued attribute of ``g``'s nodes; rebuild the nodes that changed."""
    todo = [(node, names) for node in g.nodes if (names := graph_attrs(node.op))]
    if not todo:
        return g
    body_passes = _body_passes(passes)
    replaced: dict[int, dict[str, Graph]] = {}
    for node, names in todo:
        for name in names:
            sub = node.attrs.get(name)
            if not isinstance(sub, Graph):
                continue  # an optional body left unset
            hit = memo.get(id(sub))
            if hit is None or hit[0] is not sub:
                try:
                    res = _run_passes(sub, body_passes, check, True, memo)
                except PassError as exc:
                    raise PassError(f"in {node.op} %{node.id} {name!r}: {exc}") from exc
                if _signature(res.graph) != _signature(sub):
                    raise PassError(f"in {node.op} %{node.id} {name!r}: the passes changed the body's inputs or outputs")
                memo[id(sub)] = hit = (sub, res)
            res = hit[1]
            out[(node.id, name)] = res
            if res.graph is not sub:
                replaced.setdefault(node.id, {})[name] = res.graph
    if not replaced:
        return g
    new = Graph(g.name, g.stage, g.symbol_ranges)
    for node in g.nodes:
        swap = replaced.get(node.id)
        if swap is None:
            new._push(node)
            continue
        where = f"{node.op} %{node.id}"
        try:
            v = new.append(node.op, node.inputs, {**node.attrs, **swap}, name=node.name, prov=node.prov)
        except RlxError as exc:
            raise PassError(f"{where}: rebuilding with optimized bodies failed: {exc}") from exc
        if v.type != node.type:
            raise PassError(f"{where}: optimized bodies changed its type from {node.type} to {v.type}")
    new.set_outputs(g.output_ids)
    if check:
        try:
            verify(new)
        except VerifyError as exc:
            raise PassError(f"optimizing bodies produced an invalid graph: {exc}") from exc
    return new


def remap_refs(refs: Iterable[int], id_map: Mapping[int, int]) -> list[int]:
    """Map old ids to new ones; raises PassError for a value that no longer exists."""
    out = []
    for r in refs:
        r = int(r)
        if r not in id_map:
            raise PassError(f"node %{r} did not survive the passes")
        out.append(id_map[r])
    return out
