"""Graph rewrites for the engine backends (onnxruntime, OpenVINO) that need the bound weights, so no
engine does them from a model file alone.

:func:`merge_parallel_matmuls`: the matmuls that read one activation with bound 2-D weights (the query,
key and value projections of an attention block written as three linears, a SwiGLU's gate and up
projections) become one matmul of the weights concatenated along N, one bias add of the concatenated
biases when every member has one, and one split: one larger GEMM instead of several small ones, the
activation read once. Measured by ``benchmarks/engine_rewrites.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import builder_method
from rlx.opt.fold_weights import fresh_param_name


def built_by(node: Node, method: str) -> bool:
    """Whether ``node`` is what the ``Graph`` builder method ``method`` makes: its op and preset attributes,
    read from the op registry (``g.add`` is a ``binary`` node with ``op="add"``), not named here."""
    found = builder_method(method)
    return found is not None and node.op == found[0].name and all(node.attrs.get(k) == v for k, v in found[1].items())


def readers(g: Graph) -> dict[int, list[int]]:
    """value id -> the ids of the nodes that read it (-1 for each graph output it is)."""
    uses: dict[int, list[int]] = {}
    for node in g.nodes:
        for i in node.inputs:
            uses.setdefault(i, []).append(node.id)
    for o in g.output_ids:
        uses.setdefault(o, []).append(-1)
    return uses


def bound_param(g: Graph, nid: int, params: Mapping[str, np.ndarray], rank: int) -> str | None:
    """The name of ``nid`` when it is a param of ``rank`` static dims with a value in ``params``."""
    node = g.node(nid)
    if node.op == "param" and node.attrs["name"] in params and len(node.shape) == rank and node.shape.is_static:
        return node.attrs["name"]
    return None


def _bias(g: Graph, mm: Node, uses: dict[int, list[int]], params: Mapping[str, np.ndarray]) -> tuple[Node, str] | None:
    """The ``add(mm, b)`` that is the matmul's only reader, with ``b`` a bound 1-D param of its width."""
    readers = uses.get(mm.id, [])
    if len(readers) != 1 or readers[0] < 0:
        return None
    add = g.node(readers[0])
    if not built_by(add, "add") or add.inputs[0] != mm.id or add.type != mm.type:
        return None
    name = bound_param(g, add.inputs[1], params, 1)
    return (add, name) if name is not None and params[name].shape == (mm.shape[-1],) else None


def _groups(g: Graph, params: Mapping[str, np.ndarray]) -> list[list[Node]]:
    by_input: dict[tuple, list[Node]] = {}
    for node in g.nodes:
        if not built_by(node, "matmul") or not node.shape.is_static or len(g.node(node.inputs[0]).shape) < 2:
            continue
        w = bound_param(g, node.inputs[1], params, 2)
        if w is not None:
            by_input.setdefault((node.inputs[0], node.dtype, params[w].shape[0]), []).append(node)
    return [members for members in by_input.values() if len(members) > 1]


def merge_parallel_matmuls(g: Graph, params: Mapping[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(graph, params)`` with each group of matmuls sharing an activation and bound 2-D weights merged
    (see the module docstring); ``g`` itself when there is none. Weights read only by merged matmuls leave
    the graph and the params."""
    groups = _groups(g, params)
    if not groups:
        return g, dict(params)
    uses = readers(g)
    plan: dict[int, tuple[list[Node], list[tuple[Node, str]] | None]] = {}  # first member id -> group
    member_of: dict[int, int] = {}
    for members in groups:
        found = [_bias(g, mm, uses, params) for mm in members]
        biases = [b for b in found if b is not None]
        plan[members[0].id] = (members, biases if len(biases) == len(members) else None)
        for mm in members:
            member_of[mm.id] = members[0].id
    merged_weights = {g.node(mm.inputs[1]).id for members, _ in plan.values() for mm in members}
    merged_bias_adds = {add.id: add for _, biases in plan.values() if biases for add, _ in biases}
    absorbed = {nid for nid in merged_weights | {add.inputs[1] for add in merged_bias_adds.values()}
                if all(u in member_of or u in merged_bias_adds for u in uses.get(nid, []))}
    taken = {n.attrs["name"] for n in g.nodes if n.op in ("param", "input")}
    out = Graph(g.name, g.stage)
    env: dict[int, int] = {}
    new_params: dict[str, np.ndarray] = {}
    for node in g.nodes:
        if node.id in absorbed:
            continue
        if node.id in plan:
            members, adds = plan[node.id]
            names = [g.node(mm.inputs[1]).attrs["name"] for mm in members]
            w_name = fresh_param_name(f"{names[0]}.merged{node.id}", taken)
            new_params[w_name] = np.concatenate([params[n] for n in names], axis=1)
            w = out.param(w_name, new_params[w_name].shape, node.dtype)
            y = out.append("matmul", [env[node.inputs[0]], w.id], {}, name=node.name, prov=node.prov)
            if adds:
                b_name = fresh_param_name(f"{adds[0][1]}.merged{node.id}", taken)
                new_params[b_name] = np.concatenate([params[n] for _, n in adds])
                y = out.append("binary", [y.id, out.param(b_name, new_params[b_name].shape, node.dtype).id], {"op": "add"})
            sizes = [int(mm.shape[-1]) for mm in members]
            first = out.append("split", [y.id], {"axis": -1, "sizes": sizes})
            for r, mm in enumerate(members):
                env[adds[r][0].id if adds else mm.id] = first.id + r
            continue
        if node.id in member_of or (node.id in merged_bias_adds and node.id in env):
            continue
        env[node.id] = out.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name, prov=node.prov).id
    out.set_outputs([env[o] for o in g.output_ids])
    kept = {n.attrs["name"] for n in out.nodes if n.op == "param"}
    return out, {**{k: v for k, v in params.items() if k in kept}, **new_params}
