"""``rlx.run``: the reference semantics of a graph, evaluated op by op in NumPy.

Floats narrower than f32 (f16, bf16, fp8) are computed in f32 and rounded back to the
node's dtype after every op, the way XLA's CPU backend treats them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import FeedError, RlxError
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import OpDef, get_op
from rlx.ir.shape import TensorType
from rlx.ir.symbolic import solve_for, substitute


def bind_feed(g: Graph, inputs: Mapping[str, Any] | None, params: Mapping[str, Any] | None) -> tuple[dict[int, np.ndarray], dict[str, int]]:
    """Check a feed against the graph's inputs and params; return arrays by node id and symbol sizes.

    Every problem is reported at once: missing names, unknown names, wrong dtype, wrong rank
    or dims, and a symbolic dim fed two different sizes.
    """
    inputs = dict(inputs or {})
    params = dict(params or {})
    problems: list[str] = []
    fed: dict[int, np.ndarray] = {}
    binding: dict[str, int] = {}
    bound_by: dict[str, str] = {}
    compound: list[tuple[str, int, Any, int]] = []
    for kind, declared, given in (("input", g.inputs(), inputs), ("param", g.params(), params)):
        for name in given.keys() - declared.keys():
            other = "param" if kind == "input" else "input"
            hint = f" (it is a {other}: pass it in {other}s=)" if name in (g.params() if kind == "input" else g.inputs()) else ""
            problems.append(f"unknown {kind} {name!r}{hint}; the graph's {kind}s are {sorted(declared)}")
        for name, value in declared.items():
            if name not in given:
                problems.append(f"missing {kind} {name!r} ({value.type})")
                continue
            node = value.node
            arr = given[name]
            if not isinstance(arr, np.ndarray):
                try:
                    arr = np.asarray(arr, dtype=node.dtype.numpy)
                except (TypeError, ValueError) as exc:
                    problems.append(f"{kind} {name!r}: cannot convert to {node.dtype}: {exc}")
                    continue
            if arr.dtype != node.dtype.numpy:
                problems.append(f"{kind} {name!r}: dtype {arr.dtype} given, {node.dtype} declared (use .astype)")
                continue
            if arr.ndim != len(node.shape):
                problems.append(f"{kind} {name!r}: shape {list(arr.shape)} given, {node.shape!r} declared")
                continue
            if not _bind_dims(f"{kind} {name!r}", node.shape, arr.shape, binding, bound_by, problems, compound):
                continue
            fed[node.id] = arr
    _bind_compound(compound, binding, bound_by, problems)
    if problems:
        raise FeedError(f"bad feed for graph {g.name!r}:\n  - " + "\n  - ".join(problems))
    return fed, binding


def _bind_dims(what: str, declared: Any, given: tuple[int, ...], binding: dict[str, int], bound_by: dict[str, str],
               problems: list[str], compound: list[tuple[str, int, Any, int]]) -> bool:
    """Bind the bare symbols of one fed array's shape; queue expression dims for later."""
    for axis, (dim, size) in enumerate(zip(declared, given)):
        if dim.__class__ is int:
            if dim != size:
                problems.append(f"{what}: shape {list(given)} given, {declared!r} declared")
                return False
        elif len(dim.symbols) == 1 and dim in dim.symbols:
            if binding.setdefault(dim, size) != size:
                problems.append(f"{what}: axis {axis} is symbol {str(dim)!r} = {binding[dim]} elsewhere, but {size} here "
                                f"(bound by {bound_by[dim]})")
            bound_by.setdefault(dim, f"{what} axis {axis}")
        else:
            compound.append((what, axis, dim, size))
    return True


def _bind_compound(compound: list[tuple[str, int, Any, int]], binding: dict[str, int], bound_by: dict[str, str],
                   problems: list[str]) -> None:
    """Solve expression dims (``2*n + 1``) for their one unbound symbol, then check them all."""
    pending = list(compound)
    while pending:
        progress = False
        for item in list(pending):
            what, axis, dim, size = item
            solved = solve_for(dim, size, binding)
            if solved is not None:
                binding[solved[0]] = solved[1]
                bound_by[solved[0]] = f"{what} axis {axis} ({dim} = {size})"
                pending.remove(item)
                progress = True
        if not progress:
            break
    for what, axis, dim, size in compound:
        value = substitute(dim, binding)
        if value.__class__ is not int:
            problems.append(f"{what}: axis {axis} is {dim}, which the feed does not determine (unbound: "
                            f"{sorted(value.symbols)})")
        elif value != size:
            problems.append(f"{what}: axis {axis} is {dim} = {value} by the other feeds, but {size} here")


def compute_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype a reference kernel computes in for a tensor of ``dtype``."""
    return np.dtype(np.float32) if dtype.is_low_precision_float else dtype.numpy


#: OpDef flag of ops whose kernel evaluates subgraphs (control flow, rlx.ops.control_flow):
#: their kernel is called with ``evaluate=call_graph`` (ops must not import the runtime).
SUBGRAPHS = "subgraphs"


def call_graph(sub: Graph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a subgraph with its ``input`` nodes bound positionally (node order) to ``args``."""
    names = [n.attrs["name"] for n in sub.nodes if n.op == "input"]
    if len(names) != len(args):
        raise RlxError(f"subgraph {sub.name!r} takes {len(names)} inputs, {len(args)} given")
    return run(sub, dict(zip(names, args)))


def kernel_of(opdef: OpDef, evaluate: Callable[[Graph, Sequence[np.ndarray]], list[np.ndarray]] = call_graph) -> Any:
    """The op's reference kernel, with ``evaluate=`` bound for ops that evaluate subgraphs
    (the reference interpreter by default; the arena executor passes its own)."""
    if opdef.kernel is not None and SUBGRAPHS in opdef.flags:
        return functools.partial(opdef.kernel, evaluate=evaluate)
    return opdef.kernel


def eval_node(node: Node, args: list[np.ndarray], out_type: TensorType) -> np.ndarray:
    """Run one node's reference kernel; check and cast the result to the node's type."""
    opdef = get_op(node.op)
    kernel = kernel_of(opdef)
    if kernel is None:
        raise RlxError(f"op {node.op!r} (node %{node.id}) has no reference kernel")
    widened = [a.astype(np.float32) if DType.of(a.dtype).is_low_precision_float else a for a in args]
    with np.errstate(all="ignore"):
        result = np.asarray(kernel(widened, node.attrs, out_type))
    if result.shape != tuple(out_type.shape):
        raise RlxError(f"kernel of {node.op!r} (node %{node.id}) returned shape {list(result.shape)}, expected {out_type.shape!r}")
    return result.astype(out_type.dtype.numpy, copy=False)


def run(g: Graph, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    """Evaluate ``g`` on the given feed and return its outputs as NumPy arrays."""
    fed, binding = bind_feed(g, inputs, params)
    values: dict[int, np.ndarray] = {}
    remaining = _last_uses(g)
    outputs = set(g.output_ids)
    for node in g.nodes:
        if node.id in fed:
            values[node.id] = fed[node.id]
            continue
        out_type = TensorType(node.shape.bind(binding), node.dtype) if binding else node.type
        values[node.id] = eval_node(node, [values[i] for i in node.inputs], out_type)
        for src in set(node.inputs):
            if remaining.get(src) == node.id and src not in outputs:
                del values[src]
    return [values[i] for i in g.output_ids]


def _last_uses(g: Graph) -> dict[int, int]:
    last: dict[int, int] = {}
    for node in g.nodes:
        for src in node.inputs:
            last[src] = node.id
    return last

