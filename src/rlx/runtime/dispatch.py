"""Kernel dispatch reports: how each node of a graph runs on a backend.

``exe.dispatch_report()`` (or :func:`dispatch_report` on a graph and a backend name) lists
every node with one of

``native``      a kernel of the backend computes the op (NumPy: writing into its arena slot,
                or copied into it; JAX / torch: the op's lowering);
``decomposed``  the backend runs the op's registry decomposition into primitive ops;
``host``        the NumPy reference kernel runs on the host inside the backend's program (why);
``view``        no kernel: the planner made the node a view of another buffer (NumPy);
``leaf``        an input, param or constant bound by the runtime;
``refused``     the backend cannot run the op (why).

A backend says how it handles each op through a ``coverage() -> {op: "lowered" | "decomposed" |
"host: why" | "leaf" | "refused: why"}`` function in its module (the same tables its registry-walk
tests check); the NumPy arena executor's table is :func:`numpy_coverage`.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import RESULT, Graph, GraphStage
from rlx.ir.opdef import all_ops

KINDS = ("native", "decomposed", "host", "view", "leaf", "refused")
_LEAVES = frozenset({"input", "param", "constant", RESULT})  # a result node is written by its producer


@dataclass(frozen=True)
class NodeDispatch:
    node: int
    op: str
    kind: str
    reason: str = ""


@dataclass
class DispatchReport:
    """Per node of ``graph``, how ``backend`` runs it; ``counts`` by kind, ``ok`` when none is refused."""

    backend: str
    graph: str
    rows: list[NodeDispatch]

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.kind for r in self.rows)
        return {k: c[k] for k in KINDS if c[k]}

    @property
    def ok(self) -> bool:
        return not any(r.kind == "refused" for r in self.rows)

    def by_op(self) -> dict[str, tuple[str, str, int]]:
        """op -> (kind, reason, node count), one row per distinct (op, kind, reason)."""
        out: dict[str, tuple[str, str, int]] = {}
        for r in self.rows:
            kind, reason, n = out.get(r.op, (r.kind, r.reason, 0))
            out[r.op] = (kind, reason, n + 1)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "graph": self.graph, "counts": self.counts, "ok": self.ok,
                "nodes": [{"node": r.node, "op": r.op, "kind": r.kind, "reason": r.reason} for r in self.rows]}

    def __str__(self) -> str:
        head = f"dispatch on {self.backend} of {self.graph!r}: " + ", ".join(f"{k}={v}" for k, v in self.counts.items())
        lines = [head]
        for op, (kind, reason, n) in sorted(self.by_op().items(), key=lambda kv: (KINDS.index(kv[1][0]), kv[0])):
            lines.append(f"  {kind:<10} {op:<28} x{n}" + (f"  ({reason})" if reason else ""))
        return "\n".join(lines)


def numpy_coverage() -> dict[str, str]:
    """The NumPy arena executor: every op with a reference kernel runs natively."""
    table = {}
    for op in all_ops():
        if op.name in _LEAVES:
            table[op.name] = "leaf"
        elif op.kernel is None:
            table[op.name] = "refused: no NumPy reference kernel"
        elif op.kernel_into is not None:
            table[op.name] = "lowered: writes into its arena slot"
        else:
            table[op.name] = "lowered: result copied into its arena slot"
    return table


def backend_coverage(backend: str) -> dict[str, str]:
    """The coverage table of ``backend`` (its module is imported when needed)."""
    if backend == "numpy":
        return numpy_coverage()
    from rlx.runtime.compile import BACKENDS

    factory = BACKENDS.get(backend)
    module = getattr(factory, "module", None)
    if factory is None or module is None:
        raise RlxError(f"no dispatch information for backend {backend!r}; backends with it: "
                       f"{sorted(['numpy', *(n for n, f in BACKENDS.items() if getattr(f, 'module', None))])}")
    coverage = getattr(importlib.import_module(module), "coverage", None)
    if coverage is None:
        raise RlxError(f"backend {backend!r} ({module}) publishes no coverage() table")
    return dict(coverage())


def _row(node_id: int, op: str, entry: str | None, view: bool) -> NodeDispatch:
    if view:
        return NodeDispatch(node_id, op, "view", "aliases another buffer")
    if entry is None:
        return NodeDispatch(node_id, op, "refused", "the backend has no entry for this op")
    head, _, why = entry.partition(":")
    kind = {"lowered": "native", "decomposed": "decomposed", "host": "host", "leaf": "leaf", "refused": "refused"}.get(head.strip())
    if kind is None:
        raise RlxError(f"dispatch: unknown coverage entry {entry!r} for op {op!r}")
    return NodeDispatch(node_id, op, kind, why.strip())


def dispatch_report(obj: Any, backend: str | None = None) -> DispatchReport:
    """How ``backend`` runs each node of ``obj`` (an executable, an LirModule, a MIR graph or a HIR
    module); an executable's own backend when ``backend`` is None."""
    if backend is None:
        backend = getattr(obj, "backend", None) or ("numpy" if hasattr(obj, "lir") else None)
        if backend is None:
            raise RlxError("dispatch_report: name the backend (backend='numpy' | 'jax' | 'torch' | 'onnxruntime' …)")
    lir = getattr(obj, "lir", None) if not hasattr(obj, "plan") else obj
    graph = getattr(obj, "graph", obj)
    if not isinstance(graph, Graph):
        raise RlxError(f"dispatch_report: expected an executable, LirModule, Graph or HIR module, got {type(obj).__name__}")
    if graph.stage is GraphStage.HIR:
        graph = obj.lower_to_mir() if hasattr(obj, "lower_to_mir") else graph
    table = backend_coverage(backend)
    views = set(lir.plan.view_aliases) if backend == "numpy" and lir is not None else set()
    rows = [_row(n.id, n.op, table.get(n.op), n.id in views) for n in graph.nodes]
    return DispatchReport(backend, graph.name, rows)


class ReportsDispatch:
    """Mixin for executables: ``exe.dispatch_report()`` for the executable's own backend and graph."""

    def dispatch_report(self) -> DispatchReport:
        return dispatch_report(self)
