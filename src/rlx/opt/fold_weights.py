"""``fold_weights(g, params)``: the subgraphs that read only params and constants (transposed,
cast, dequantised or BatchNorm-scaled weights) computed once, their results bound as new params.

Importers leave weight preparation in the graph: ``torch.export`` transposes every linear weight
(``permute(W)`` before the matmul), a folded BatchNorm scales the conv weight
(:mod:`rlx.opt.fold_affine`), a quantised model dequantises its int8 weights. Every backend would
redo that work on every run. This pass evaluates each weight-only node with the reference kernels
(given the param values), and each weight-only value read by the rest of the graph becomes a
param named ``<name or op>.folded<id>``, with its value in the returned params; params read
only by folded nodes disappear from the graph and from the params. Bound to these weights: fold
again after binding others. The numbers are the reference kernels' own.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlx.ir.errors import RlxError
from rlx.ir.graph import RESULT, Graph
from rlx.ops.evaluate import eval_node

_LEAVES = ("param", "constant")


def _foldable(g: Graph, params: Mapping[str, np.ndarray]) -> set[int]:
    """Ids of weight-only nodes: params with a value, constants, and single-result nodes of a static shape reading only those."""
    known: set[int] = set()
    for node in g.nodes:
        if node.op == "param":
            if node.attrs["name"] in params:
                known.add(node.id)
        elif node.op == "constant":
            known.add(node.id)
        elif node.inputs and not node.extra_types and node.op != RESULT and node.shape.is_static \
                and all(i in known for i in node.inputs):  # a symbolic shape is bound only at run time
            known.add(node.id)
    return known


def fold_weights(g: Graph, params: Mapping[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(graph, params)`` with every weight-only subgraph of ``g`` replaced by a param holding its value."""
    weight = _foldable(g, params)
    used_outside = {i for node in g.nodes if node.id not in weight for i in node.inputs} | set(g.output_ids)
    boundary = [n for n in g.nodes if n.id in weight and n.id in used_outside and n.op not in _LEAVES]
    if not boundary:
        return g, dict(params)
    values = _evaluate(g, weight, params)
    taken = {n.attrs["name"] for n in g.nodes if n.op in ("param", "input")}
    out = Graph(g.name, g.stage)
    env: dict[int, int] = {}
    folded: dict[str, np.ndarray] = {}
    cut = {n.id for n in boundary}
    for node in g.nodes:
        if node.id in cut:
            name = fresh_param_name(f"{node.name or node.op}.folded{node.id}", taken)
            env[node.id] = out.param(name, tuple(node.shape), node.dtype).id
            folded[name] = values[node.id]
        elif node.id in weight and node.id not in used_outside:
            continue  # computed into a boundary param, or a leaf only folded nodes read
        else:
            env[node.id] = out.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name, prov=node.prov).id
    out.set_outputs([env[o] for o in g.output_ids])
    kept = {n.attrs["name"] for n in out.nodes if n.op == "param"}
    return out, {**{k: v for k, v in params.items() if k in kept}, **folded}


def _evaluate(g: Graph, weight: set[int], params: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    values: dict[int, np.ndarray] = {}
    for node in g.nodes:
        if node.id not in weight:
            continue
        if node.op == "param":
            arr = np.asarray(params[node.attrs["name"]])
            if arr.shape != tuple(node.shape) or arr.dtype != node.dtype.numpy:
                raise RlxError(f"fold_weights: param {node.attrs['name']!r} is {arr.dtype}{list(arr.shape)}, "
                               f"the graph declares {node.type}")
            values[node.id] = arr
        elif node.op == "constant":
            values[node.id] = node.attrs["value"].array
        else:
            values[node.id] = eval_node(node, [values[i] for i in node.inputs], node.type)
    return values


def fresh_param_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name.1``, ``name.2`` … — the first not in ``taken`` (which then holds it)."""
    out, k = name, 1
    while out in taken:
        out, k = f"{name}.{k}", k + 1
    taken.add(out)
    return out
