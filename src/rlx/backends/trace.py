"""Per-node timing traces in the Chrome / Perfetto JSON format (``rlx run --trace run.json``).

:func:`trace_run` runs a graph once node by node with a backend's own per-op code and records
when each node started and how long it took: the NumPy reference kernels (``numpy``), the
JAX lowering table run eagerly, each result waited for (``jax``), the torch lowering of the
node as the executable emits it, as a one-node fx module (``torch``), and each node as its
own one-node ONNX model in an onnxruntime session built before the clock starts
(``onnxruntime``). A compiled executable fuses work across nodes (XLA, Inductor,
onnxruntime's graph optimizer), so these are the costs of the ops one at a time; the trace
also carries one event for a whole compiled run of the same inputs, for comparison.

A backend without a per-node runner (``auto``, a registered third-party backend) is traced
as one whole-graph event, and the metadata says so (``"per_node": false`` with the reason)
instead of inventing node times. A node a per-node runner cannot run alone (onnxruntime: no
standalone ONNX form) runs with the NumPy kernel; its event says ``"runner": "numpy"`` and
the metadata lists it under ``"fallback_nodes"``.

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
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from rlx.ir.atomic import atomic_open
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.shape import TensorType
from rlx.lir.plan import LirModule, plan
from rlx.lir.specialize import bind_attrs
from rlx.ops.evaluate import node_out_type
from rlx.runtime.compile import BACKENDS, to_mir
from rlx.runtime.compile import compile as compile_backend
from rlx.runtime.reference import bind_feed, eval_node

TRACE_BACKENDS = ("numpy", "jax", "torch", "onnxruntime")
_PID_NODES, _PID_ARENA = 1, 2

#: prepare(node, operand types, out type(s)) -> a callable taking the operands, built before the clock starts.
Prepare = Callable[[Node, list[TensorType], Any], Callable[[list[Any]], Any]]


@dataclass(frozen=True)
class _Runner:
    """How one backend runs a node alone: move a fed array in, prepare a node, wait for and fetch a result."""

    put: Callable[[np.ndarray], Any]
    prepare: Prepare
    sync: Callable[[Any], Any]
    fetch: Callable[[Any, DType], np.ndarray]
    how: str
    warm: bool = True  # run each prepared node once untimed (first calls load kernels, sessions, compile)


def _numpy_runner() -> _Runner:
    return _Runner(lambda a: a, lambda node, ins, out: lambda args: eval_node(node, args, out), lambda v: v,
                   lambda v, dtype: np.asarray(v), "NumPy reference kernel per node", warm=False)


def _jax_runner() -> _Runner:
    import jax.numpy as jnp

    from rlx.backends.jax.executable import lower_node

    def prepare(node: Node, ins: list[TensorType], out: Any) -> Callable[[list[Any]], Any]:
        return lambda args: lower_node(node, args, out, host_fallback=True)

    def sync(v: Any) -> Any:
        for a in v if isinstance(v, tuple) else (v,):
            a.block_until_ready()
        return v

    return _Runner(jnp.asarray, prepare, sync, lambda v, dtype: np.asarray(v), "JAX lowering per node, run eagerly")


def _torch_runner() -> _Runner:
    import torch

    from rlx.backends.torch_backend.executable import node_module, to_numpy, to_torch

    device = torch.device("cpu")

    def prepare(node: Node, ins: list[TensorType], out: Any) -> Callable[[list[Any]], Any]:
        module = node_module(node, ins, out, device)
        return lambda args: module(*args)

    return _Runner(lambda a: to_torch(a, DType.of(a.dtype), device), prepare, lambda v: v, to_numpy,
                   "torch lowering per node (one-node fx module, eager)")


def _ort_runner() -> _Runner:
    from rlx.backends.ort_backend import node_session

    return _Runner(lambda a: a, node_session, lambda v: v, lambda v, dtype: np.asarray(v),
                   "one onnxruntime session per node (a one-node ONNX model)")


_RUNNERS = {"numpy": _numpy_runner, "jax": _jax_runner, "torch": _torch_runner, "onnxruntime": _ort_runner}


def trace_run(model: Any, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None, *,
              backend: str = "numpy", compiled_run: bool = True) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Run ``model`` once node by node on ``backend``; return its outputs and the trace document.

    A registered backend with no per-node runner gets a whole-graph trace (``metadata.per_node``
    false, with the reason)."""
    if backend not in _RUNNERS and backend not in BACKENDS:
        raise RlxError(f"trace: unknown backend {backend!r}; traceable backends: {list(TRACE_BACKENDS)} "
                       f"(per node), any other registered backend as one whole-graph event")
    lir = model if isinstance(model, LirModule) else None
    g = lir.graph if lir is not None else to_mir(model)
    if not isinstance(g, Graph):
        raise RlxError(f"trace: cannot trace a {type(model).__name__}")
    if backend not in _RUNNERS:
        return _whole_graph_trace(g, backend, inputs, params)
    fed, binding = bind_feed(g, inputs, params)
    runner = _RUNNERS[backend]()
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _PID_NODES, "name": "process_name", "args": {"name": f"rlx {backend}: {g.name}"}},
        {"ph": "M", "pid": _PID_NODES, "tid": 1, "name": "thread_name", "args": {"name": "nodes (one at a time)"}},
    ]
    values, spans, fallbacks = _run_nodes(g, fed, binding, runner, events)
    outputs = [runner.fetch(values[i], g.nodes[i].dtype) for i in g.output_ids]
    meta = {"rlx-trace": 1, "graph": g.name, "backend": backend, "nodes": len(g.nodes), "per_node": True,
            "granularity": "node", "runner": runner.how, "fallback_nodes": fallbacks}
    if compiled_run:
        try:
            _, dur = _timed_run(lir if lir is not None and backend == "numpy" else g, backend, inputs, params)
            events += _run_events(backend, max((e for _, e in spans.values()), default=0.0), dur)
        except RlxError as exc:  # the per-node trace stands; the whole-graph run is not possible on this backend
            meta["compiled_run"] = f"not run: {str(exc)[:300]}"
    if lir is None and not binding and all(n.type.shape.is_static for n in g.nodes):
        lir = plan(g)
    if lir is not None:
        events += _arena_events(lir, spans)
    return outputs, {"traceEvents": events, "displayTimeUnit": "ms", "metadata": meta}


def _run_nodes(g: Graph, fed: Mapping[int, np.ndarray], binding: Mapping[str, int], runner: _Runner,
               events: list[dict[str, Any]]) -> tuple[dict[int, Any], dict[int, tuple[float, float]], list[dict[str, Any]]]:
    """Each node prepared, then timed alone; result nodes take their producer's result (no time of their own)."""
    values: dict[int, Any] = {}
    spans: dict[int, tuple[float, float]] = {}
    fallbacks: list[dict[str, Any]] = []
    results: dict[int, Any] = {}
    t0 = time.perf_counter()
    for node in g.nodes:
        how, warm = None, False
        if node.id in fed:
            thunk: Callable[[], Any] = partial(runner.put, fed[node.id])
        elif node.op == RESULT:
            thunk = partial(_identity, results.pop(node.id))
        else:
            node = _bound(node, binding)
            out = node_out_type(node, binding)
            ins = [_bound_type(g.nodes[i].type, binding) for i in node.inputs]
            args = [values[i] for i in node.inputs]
            try:
                thunk, warm = partial(runner.prepare(node, ins, out), args), runner.warm
            except RlxError as exc:  # no standalone form on this backend: the NumPy kernel, said so
                arrays = [runner.fetch(a, t.dtype) for a, t in zip(args, ins)]
                thunk, how = partial(_on_numpy, runner, node, arrays, out), "numpy"
                fallbacks.append({"node": node.id, "op": node.op, "reason": str(exc)[:300]})
        if warm:
            runner.sync(thunk())
        start = time.perf_counter()
        value = runner.sync(thunk())
        end = time.perf_counter()
        if isinstance(value, (tuple, list)):
            for r, v in enumerate(value[1:], start=1):
                results[node.id + r] = v
            value = value[0]
        values[node.id] = value
        spans[node.id] = (start - t0, end - t0)
        args_doc = {"node": node.id, "name": node.name, "shape": [str(d) for d in node.shape], "dtype": str(node.dtype),
                    "module": node.prov.label if node.prov else None}
        if how is not None:
            args_doc["runner"] = how
        events.append({"ph": "X", "pid": _PID_NODES, "tid": 1, "name": node.op, "cat": "node",
                       "ts": (start - t0) * 1e6, "dur": (end - start) * 1e6, "args": args_doc})
    return values, spans, fallbacks


def _identity(v: Any) -> Any:
    return v


def _on_numpy(runner: _Runner, node: Node, arrays: list[np.ndarray], out: Any) -> Any:
    """The node's NumPy kernel, its result(s) moved to the backend."""
    value = eval_node(node, arrays, out)
    return tuple(runner.put(np.asarray(v)) for v in value) if isinstance(value, tuple) else runner.put(np.asarray(value))


def _bound(node: Node, binding: Mapping[str, int]) -> Node:
    if not binding:
        return node
    import dataclasses

    attrs = bind_attrs(node.op, node.attrs, binding)
    return node if attrs is node.attrs else dataclasses.replace(node, attrs=attrs)


def _bound_type(t: TensorType, binding: Mapping[str, int]) -> TensorType:
    return TensorType(t.shape.bind(binding), t.dtype) if binding else t


def _whole_graph_trace(g: Graph, backend: str, inputs: Any, params: Any) -> tuple[list[np.ndarray], dict[str, Any]]:
    """One event for the whole run: the backend has no per-node code to time, and the trace says so."""
    outputs, dur = _timed_run(g, backend, inputs, params)
    events = [{"ph": "M", "pid": _PID_NODES, "name": "process_name", "args": {"name": f"rlx {backend}: {g.name}"}},
              *_run_events(backend, 0.0, dur)]
    meta = {"rlx-trace": 1, "graph": g.name, "backend": backend, "nodes": len(g.nodes), "per_node": False,
            "granularity": "whole-graph", "reason": f"backend {backend!r} has no per-node runner (per-node traces: "
            f"{', '.join(TRACE_BACKENDS)}); the run is one event", "fallback_nodes": []}
    return outputs, {"traceEvents": events, "displayTimeUnit": "ms", "metadata": meta}


def _timed_run(obj: Any, backend: str, inputs: Any, params: Any) -> tuple[list[np.ndarray], float]:
    """A compiled run's outputs and seconds (a first, untimed run warms it: compilation is not the run)."""
    exe = compile_backend(obj, backend=backend)
    exe.run(inputs=inputs, params=params)
    start = time.perf_counter()
    outputs = [np.asarray(o) for o in exe.run(inputs=inputs, params=params)]
    return outputs, time.perf_counter() - start


def _run_events(backend: str, at: float, dur: float) -> list[dict[str, Any]]:
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
        with atomic_open(os.fspath(path), "w") as f:
            json.dump(doc, f)
    except OSError as exc:
        raise RlxError(f"trace: cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from None
