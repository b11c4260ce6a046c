"""Model summaries for ``inspect`` / ``optimize`` / ``plan`` / ``run``: parameter count,
FLOPs and MACs by op kind, weight against activation memory — as table rows and as the
plain dicts the ``--json`` output is made of (docs/cli.md documents the schema).

FLOPs are an estimate with simple, stated rules, read from each op's cost facts: a contraction
(an op with an ``OpDef.macs`` rule: matmul, dot_general, linear, conv, attention) does ``2 × MACs``,
with MACs = output elements × the contracted size; an op without one does the FLOPs of its
``OpDef.work`` class: one per output element (``"output"``), per input element (``"input"``:
reductions, norms, pooling) or none (``"none"``: data movement and sources). A symbolic
shape makes the count unknown (``None``), never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.hir.inspect import format_bytes, op_kind
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import get_op, has_op
from rlx.ops.cost import numel

__all__ = ["format_bytes", "graph_summary", "io_entries", "node_cost", "shape_json"]

_NO_COST = (0, 0)


def node_cost(g: Graph, node: Node) -> tuple[int | None, int | None]:
    """``(flops, macs)`` of one node (see the module docstring for the rules), from the op's cost
    facts (``OpDef.macs`` / ``OpDef.work``); an op the registry does not know counts per result element."""
    opdef = get_op(node.op) if has_op(node.op) else None
    if opdef is not None and opdef.macs is not None:
        macs = opdef.macs([g.node(i).type.shape for i in node.inputs], node.type.shape, node.attrs)
        if macs is None:
            return None, None
        if macs:
            return 2 * macs, macs
    work = opdef.work if opdef is not None else "output"
    if work == "none":
        return _NO_COST
    if work == "input" and node.inputs:
        return numel(g.node(node.inputs[0]).type.shape), 0
    return numel(node.type.shape), 0


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def shape_json(shape: Any) -> list[int | str]:
    return [d if isinstance(d, str) else int(d) for d in shape]


def io_entries(g: Graph, params: Mapping[str, np.ndarray]) -> dict[str, list[dict[str, Any]]]:
    """Inputs, params (with whether the file holds their weights) and outputs."""
    return {
        "inputs": [{"name": n, "shape": shape_json(v.shape), "dtype": str(v.dtype)} for n, v in g.inputs().items()],
        "params": [{"name": n, "shape": shape_json(v.shape), "dtype": str(v.dtype), "saved": n in params}
                   for n, v in g.params().items()],
        "outputs": [{"index": i, "id": v.id, "name": g.node(v.id).name, "shape": shape_json(v.shape), "dtype": str(v.dtype)}
                    for i, v in enumerate(g.outputs)],
    }


def graph_summary(g: Graph, plan: Any = None) -> dict[str, Any]:
    """Parameter count, FLOPs / MACs (total and by op kind), weight / activation bytes.

    Weights are params and constants; activations every other node's tensor, summed without
    reuse (``activation_bytes``); with a ``plan`` also the planned arena.
    """
    by_kind: dict[str, dict[str, Any]] = {}
    flops: int | None = 0
    macs: int | None = 0
    parameters: int | None = 0
    weight_bytes: int | None = 0
    activation_bytes: int | None = 0
    for node in g.nodes:
        f, m = node_cost(g, node)
        flops, macs = _add(flops, f), _add(macs, m)
        row = by_kind.setdefault(op_kind(node), {"kind": op_kind(node), "count": 0, "flops": 0, "macs": 0})
        row["count"] += 1
        row["flops"], row["macs"] = _add(row["flops"], f), _add(row["macs"], m)
        nbytes = node.type.nbytes
        if node.op == "param":
            parameters = _add(parameters, numel(node.type.shape))
        if node.op in ("param", "constant"):
            weight_bytes = _add(weight_bytes, nbytes)
        else:
            activation_bytes = _add(activation_bytes, nbytes)
    kinds = sorted(by_kind.values(), key=lambda r: (-(r["flops"] or 0), -r["count"], r["kind"]))
    out: dict[str, Any] = {"parameters": parameters, "flops": flops, "macs": macs, "weight_bytes": weight_bytes,
                           "activation_bytes": activation_bytes, "by_kind": kinds}
    if plan is not None:
        out["arena_bytes"] = int(plan.arena_size)
        out["lower_bound_bytes"] = int(plan.lower_bound)
    return out


def count_text(n: int | None) -> str:
    """``1.2 G`` style (decimal SI prefixes: counts, not bytes); ``?`` when unknown."""
    if n is None:
        return "?"
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return str(n)


def bytes_text(n: int | None) -> str:
    return "?" if n is None else format_bytes(n)


def summary_rows(s: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [("parameters", count_text(s["parameters"])), ("FLOPs", count_text(s["flops"])), ("MACs", count_text(s["macs"])),
            ("weights", bytes_text(s["weight_bytes"])), ("activations (no reuse)", bytes_text(s["activation_bytes"]))]
    if "arena_bytes" in s:
        rows.append(("arena (planned)", bytes_text(s["arena_bytes"])))
    return rows


def kind_rows(s: Mapping[str, Any], top: int) -> list[tuple[Any, ...]]:
    total = s["flops"] or 0
    rows = []
    for r in s["by_kind"][:top]:
        share = f"{100 * r['flops'] / total:.1f}%" if total and r["flops"] is not None else ""
        rows.append((r["kind"], r["count"], count_text(r["flops"]), count_text(r["macs"]), share))
    return rows
