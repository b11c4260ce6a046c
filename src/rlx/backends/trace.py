"""Per-node timing traces in the Chrome / Perfetto JSON format (``rlx run --trace run.json``).

:func:`trace_run` runs a graph once node by node with a backend's own per-op code — the NumPy
reference kernels (``numpy``) or the JAX lowering table run eagerly, each result waited for
(``jax``) — and records when each node started and how long it took. A compiled executable
fuses work across nodes, so these are the costs of the ops one at a time; the trace also
carries one event for a whole compiled run of the same inputs, for comparison.

The file is a JSON object ``{"traceEvents": [...], "displayTimeUnit": "ms", "metadata": ...}``
(open it in Perfetto's UI or chrome://tracing): process 1 holds the node events (thread 1)
and the compiled run (thread 2); process 2 is the arena of the graph's buffer plan: one
event per buffer spanning the nodes it is live for (args: offset, bytes) and a counter of
live bytes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Node
from rlx.ir.shape import TensorType
from rlx.lir.plan import LirModule, plan
from rlx.runtime.compile import compile as compile_backend
from rlx.runtime.compile import to_mir
from rlx.runtime.reference import bind_feed, eval_node

TRACE_BACKENDS = ("numpy", "jax")
_PID_NODES, _PID_ARENA = 1, 2


def _numpy_runner() -> tuple[Callable[[np.ndarray], Any], Callable[[Node, list[Any], TensorType], Any], Callable[[Any], Any]]:
    return (lambda a: a), eval_node, (lambda v: v)


def _jax_runner() -> tuple[Callable[[np.ndarray], Any], Callable[[Node, list[Any], TensorType], Any], Callable[[Any], Any]]:
    import jax.numpy as jnp

    from rlx.backends.jax.executable import lower_node

    def call(node: Node, args: list[Any], out: TensorType) -> Any:
        return lower_node(node, args, out, host_fallback=True)

    return jnp.asarray, call, (lambda v: v.block_until_ready())


_RUNNERS = {"numpy": _numpy_runner, "jax": _jax_runner}


def trace_run(model: Any, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None, *,
              backend: str = "numpy", compiled_run: bool = True) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Run ``model`` once node by node on ``backend``; return its outputs and the trace document."""
    if backend not in _RUNNERS:
        raise RlxError(f"trace: backend {backend!r} has no per-node runner; traceable backends: {list(TRACE_BACKENDS)}")
    lir = model if isinstance(model, LirModule) else None
    g = lir.graph if lir is not None else to_mir(model)
    if not isinstance(g, Graph):
        raise RlxError(f"trace: cannot trace a {type(model).__name__}")
    fed, binding = bind_feed(g, inputs, params)
    put, call, sync = _RUNNERS[backend]()
    values: dict[int, Any] = {}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _PID_NODES, "name": "process_name", "args": {"name": f"rlx {backend}: {g.name}"}},
        {"ph": "M", "pid": _PID_NODES, "tid": 1, "name": "thread_name", "args": {"name": "nodes (one at a time)"}},
    ]
    t0 = time.perf_counter()
    spans: dict[int, tuple[float, float]] = {}
    for node in g.nodes:
        start = time.perf_counter()
        if node.id in fed:
            values[node.id] = put(fed[node.id])
        else:
            out = TensorType(node.shape.bind(binding), node.dtype) if binding else node.type
            values[node.id] = sync(call(node, [values[i] for i in node.inputs], out))
        end = time.perf_counter()
        spans[node.id] = (start - t0, end - t0)
        events.append({"ph": "X", "pid": _PID_NODES, "tid": 1, "name": node.op, "cat": "node",
                       "ts": (start - t0) * 1e6, "dur": (end - start) * 1e6,
                       "args": {"node": node.id, "name": node.name, "shape": [str(d) for d in node.shape],
                                "dtype": str(node.dtype), "module": node.prov.label if node.prov else None}})
    outputs = [np.asarray(values[i]) for i in g.output_ids]
    if compiled_run:
        events += _compiled_run_events(g, lir, backend, inputs, params, time.perf_counter() - t0)
    if lir is None and not binding and all(n.type.shape.is_static for n in g.nodes):
        lir = plan(g)
    if lir is not None:
        events += _arena_events(lir, spans)
    doc = {"traceEvents": events, "displayTimeUnit": "ms",
           "metadata": {"rlx-trace": 1, "graph": g.name, "backend": backend, "nodes": len(g.nodes)}}
    return outputs, doc


def _compiled_run_events(g: Graph, lir: LirModule | None, backend: str, inputs: Any, params: Any, at: float) -> list[dict[str, Any]]:
    exe = compile_backend(lir if lir is not None and backend == "numpy" else g, backend=backend)
    exe.run(inputs=inputs, params=params)  # warm: compilation is not part of the run
    start = time.perf_counter()
    exe.run(inputs=inputs, params=params)
    dur = time.perf_counter() - start
    return [{"ph": "M", "pid": _PID_NODES, "tid": 2, "name": "thread_name", "args": {"name": f"compiled {backend} run"}},
            {"ph": "X", "pid": _PID_NODES, "tid": 2, "name": f"{backend} executable run", "cat": "run",
             "ts": at * 1e6, "dur": dur * 1e6, "args": {}}]


def _arena_events(lir: LirModule, spans: Mapping[int, tuple[float, float]]) -> list[dict[str, Any]]:
    """The buffer plan on the node timeline: schedule step t spans node schedule[t]'s run."""
    p = lir.plan
    steps = [spans[nid] for nid in p.schedule]
    end_of_run = steps[-1][1] if steps else 0.0
    out: list[dict[str, Any]] = [{"ph": "M", "pid": _PID_ARENA, "name": "process_name",
                                  "args": {"name": f"arena ({p.arena_size} B, lower bound {p.lower_bound} B)"}}]
    for rid, (birth, death) in sorted(p.lifetimes.items()):
        slot = p.assignments.get(rid)
        if slot is None:
            continue
        start = steps[birth][0]
        stop = steps[death][1] if death < len(steps) else end_of_run
        out.append({"ph": "X", "pid": _PID_ARENA, "tid": 1, "name": f"%{rid} {lir.graph.node(rid).op}", "cat": "buffer",
                    "ts": start * 1e6, "dur": max(stop - start, 0.0) * 1e6,
                    "args": {"node": rid, "offset": slot.offset, "bytes": slot.size}})
    live = _live_bytes(p, len(steps))
    for t, (start, _) in enumerate(steps):
        out.append({"ph": "C", "pid": _PID_ARENA, "name": "live bytes", "ts": start * 1e6, "args": {"bytes": live[t]}})
    return out


def _live_bytes(p: Any, n: int) -> list[int]:
    """Bytes of the slots live at each step: the live intervals of each slot are merged first (an
    in-place result shares its operand's slot and overlaps it at one step), then summed by a
    difference array."""
    by_slot: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for rid, (birth, death) in p.lifetimes.items():
        slot = p.assignments.get(rid)
        if slot is not None:
            by_slot.setdefault((slot.offset, slot.size), []).append((birth, min(death, n - 1)))
    delta = [0] * (n + 1)
    for (_, size), spans in by_slot.items():
        spans.sort()
        lo, hi = spans[0]
        for b, d in [*spans[1:], (n + 1, n + 1)]:
            if b <= hi:
                hi = max(hi, d)
                continue
            delta[lo] += size
            delta[hi + 1] -= size
            lo, hi = b, d
    live, cur = [], 0
    for t in range(n):
        cur += delta[t]
        live.append(cur)
    return live


def write_trace(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write a trace document as JSON."""
    try:
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            json.dump(doc, f)
    except OSError as exc:
        raise RlxError(f"trace: cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from None
