"""``rlx.run``: the reference semantics of a graph, evaluated op by op with the ops' NumPy kernels.

Floats narrower than f32 (f16, bf16, fp8) are computed in f32 and rounded back to the
node's dtype after every op, the way XLA's CPU backend treats them.

It lives in ``ops`` (re-exported by :mod:`rlx.runtime.reference`) so that passes below the
runtime, such as constant folding in ``opt``, evaluate nodes with the very same kernels.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import FeedError, RlxError
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.opdef import OpDef, get_op
from rlx.ir.shape import TensorType
from rlx.ir.symbolic import bind_symbols, substitute


def bind_attrs(op: str, attrs: Mapping[str, Any], binding: Mapping[str, int]) -> Mapping[str, Any]:
    """``attrs`` of an ``op`` node with the bound symbols substituted in its size attributes
    (kinds ``dims``, ``sizes``, ``size``) and in its subgraphs (kind ``graph``: an ``if_`` branch or a
    loop body typed with the outer graph's symbols); the same mapping when nothing changes."""
    specs = get_op(op).attrs
    out: dict[str, Any] | None = None
    for key, value in attrs.items():
        spec = specs.get(key)
        if spec is None or value is None or spec.kind not in _BOUND_KINDS:
            continue
        bound: Any
        if spec.kind == "graph":
            bound = bound_graph(value, binding)
            changed = bound is not value
        elif spec.kind == "size":
            bound = substitute(value, binding)
            changed = bound is not value
        else:
            bound = tuple(substitute(d, binding) for d in value)
            changed = any(b is not d for b, d in zip(bound, value))
        if changed:
            out = dict(attrs) if out is None else out
            out[key] = bound
    return attrs if out is None else out


_BOUND_KINDS = ("dims", "sizes", "size", "graph")


def bind_graph(g: Graph, binding: Mapping[str, int]) -> Graph:
    """A copy of ``g`` with the given symbols replaced by sizes, node by node (ids, names and
    provenance kept; each node's type re-inferred by its op rule)."""
    out = Graph(g.name, g.stage, g.symbol_ranges)
    for node in g.nodes:
        attrs = bind_attrs(node.op, node.attrs, binding)
        if node.op == "reshape" and -1 in attrs["new_shape"]:  # the hole its rule solved: at a size of 0 it is ambiguous
            attrs = {**attrs, "new_shape": tuple(node.shape.bind(binding))}
        out.append(node.op, node.inputs, attrs, name=node.name, prov=node.prov)
    out.set_outputs(g.output_ids)
    return out


_BOUND_SUBGRAPHS: dict[tuple, tuple[weakref.ref, Graph]] = {}  # (id(sub), its length, outputs, binding) -> (sub, bound)
_BOUND_LOCK = threading.Lock()  # executables run from several threads
_WATCHED: set[int] = set()  # ids of the graphs whose copies are dropped when they are (weakref.finalize)


def bound_graph(sub: Graph, binding: Mapping[str, int]) -> Graph:
    """:func:`bind_graph` of a graph (a run's, or a subgraph attribute), ``sub`` itself when it names none of
    the bound symbols; remembered per graph and binding (a loop body is bound once per size, not per iteration)."""
    keys = set(binding)
    used = tuple(sorted(s for s in _symbols_of(sub) if s in keys))
    if not used:
        return sub
    pairs = tuple((s, binding[s]) for s in used)
    key = (id(sub), len(sub.nodes), tuple(sub.output_ids), pairs)  # a graph is append-only: its length and outputs date it
    with _BOUND_LOCK:
        hit = _BOUND_SUBGRAPHS.pop(key, None)
    if hit is None or hit[0]() is not sub:  # an id reused by a new graph is a miss
        hit = (weakref.ref(sub), bind_graph(sub, dict(pairs)))
        with _BOUND_LOCK:
            if id(sub) not in _WATCHED:  # its copies (and the constants they share) go with it
                _WATCHED.add(id(sub))
                weakref.finalize(sub, _forget, id(sub))
    with _BOUND_LOCK:
        _BOUND_SUBGRAPHS[key] = hit  # most recent last
        while len(_BOUND_SUBGRAPHS) > 64:
            _BOUND_SUBGRAPHS.pop(next(iter(_BOUND_SUBGRAPHS)))
    return hit[1]


def _forget(graph_id: int) -> None:
    with _BOUND_LOCK:
        _WATCHED.discard(graph_id)
        for key in [k for k in _BOUND_SUBGRAPHS if k[0] == graph_id]:
            del _BOUND_SUBGRAPHS[key]


def _symbols_of(g: Graph) -> set[str]:
    """The symbols of ``g``'s node types and of its nested subgraphs."""
    out: set[str] = set()
    for node in g.nodes:
        out.update(node.type.shape.symbols)
        for value in node.attrs.values():
            if isinstance(value, Graph):
                out |= _symbols_of(value)
    return out


def feed_maps(g: Graph, inputs: Any, params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``inputs`` and ``params`` as dicts name -> array; a :class:`FeedError` for anything else
    (a list of arrays, a bare array, non-string keys), before any backend indexes them."""
    out: list[dict[str, Any]] = []
    for kind, given, declared in (("input", inputs, g.inputs), ("param", params, g.params)):
        if given is None:
            out.append({})
            continue
        if not isinstance(given, Mapping):
            raise FeedError(f"bad feed for graph {g.name!r}: {kind}s= must be a mapping name -> array, got a "
                            f"{type(given).__name__}; the graph's {kind}s are {sorted(declared())}")
        bad = [k for k in given if not isinstance(k, str)]
        if bad:
            raise FeedError(f"bad feed for graph {g.name!r}: {kind} names must be strings, got {bad[0]!r}; "
                            f"the graph's {kind}s are {sorted(declared())}")
        out.append(dict(given))
    return out[0], out[1]


def bind_feed(g: Graph, inputs: Mapping[str, Any] | None, params: Mapping[str, Any] | None) -> tuple[dict[int, np.ndarray], dict[str, int]]:
    """Check a feed against the graph's inputs and params; return arrays by node id and symbol sizes.

    Every problem is reported at once: missing names, unknown names, wrong dtype, wrong rank
    or dims, and a symbolic dim fed two different sizes.
    """
    inputs, params = feed_maps(g, inputs, params)
    problems: list[str] = []
    fed: dict[int, np.ndarray] = {}
    shapes: list[tuple[str, Any, tuple[int, ...]]] = []
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
            shapes.append((f"{kind} {name!r}", node.shape, arr.shape))
            fed[node.id] = arr
    binding, mismatches = bind_symbols(shapes, g.symbol_ranges)
    problems += mismatches
    if problems:
        raise FeedError(f"bad feed for graph {g.name!r}:\n  - " + "\n  - ".join(problems))
    return fed, binding


#: OpDef flag of ops whose kernel evaluates subgraphs (control flow, rlx.ops.control_flow):
#: their kernel is called with ``evaluate=`` a subgraph runner (this interpreter's
#: :func:`call_graph`, or the arena executor's own).
SUBGRAPHS = "subgraphs"
#: OpDef flag of ops whose kernel reads its operands' bits (bitcast): they reach it in their own
#: dtype, not widened to f32 as narrow floats otherwise are.
RAW_OPERANDS = "raw_operands"


def widens(node: Node) -> bool:
    """Do the node's narrow-float operands reach its kernel widened to f32?"""
    return RAW_OPERANDS not in get_op(node.op).flags


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
        with_bodies: Callable[..., Any] = opdef.kernel  # subgraph kernels take evaluate=
        return functools.partial(with_bodies, evaluate=evaluate)
    return opdef.kernel


def eval_node(node: Node, args: list[np.ndarray], out_type: TensorType | tuple[TensorType, ...],
              attrs: Mapping[str, Any] | None = None, kernel: Any = None) -> Any:
    """Run one node's reference kernel (or ``kernel``; with ``attrs`` bound to the run's sizes when
    given); check and cast the result to the node's type. A multi-result node takes ``out_type``
    as a tuple of result types; its kernel returns (and this returns) a tuple of arrays."""
    kernel = kernel_of(get_op(node.op)) if kernel is None else kernel
    if kernel is None:
        raise RlxError(f"op {node.op!r} (node %{node.id}) has no reference kernel")
    widened = [a.astype(np.float32) if DType.of(a.dtype).is_low_precision_float else a for a in args] if widens(node) else args
    with np.errstate(all="ignore"):
        result = kernel(widened, node.attrs if attrs is None else attrs, out_type)
    if out_type.__class__ is tuple:
        if not isinstance(result, (tuple, list)) or len(result) != len(out_type):
            raise RlxError(f"kernel of {node.op!r} (node %{node.id}) must return {len(out_type)} results")
        return tuple(_checked(node, np.asarray(a), t) for a, t in zip(result, out_type))
    return _checked(node, np.asarray(result), cast(TensorType, out_type))


def _checked(node: Node, result: np.ndarray, out_type: TensorType) -> np.ndarray:
    if result.shape != tuple(out_type.shape):
        raise RlxError(f"kernel of {node.op!r} (node %{node.id}) returned shape {list(result.shape)}, expected {out_type.shape!r}")
    return result.astype(out_type.dtype.numpy, copy=False)


def node_out_type(node: Node, binding: Mapping[str, int]) -> TensorType | tuple[TensorType, ...]:
    """What :func:`eval_node` takes as ``out_type``: the node's type(s), symbols bound."""
    if node.extra_types:
        return tuple(TensorType(t.shape.bind(binding), t.dtype) if binding else t for t in node.types)
    return TensorType(node.shape.bind(binding), node.dtype) if binding else node.type


def run(g: Graph, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    """Evaluate ``g`` on the given feed and return its outputs as NumPy arrays (the caller's own: see
    :func:`_own_outputs`)."""
    fed, binding = bind_feed(g, inputs, params)
    if binding:  # every op rule checked at the fed sizes: a conv window longer than its input is a ShapeError, not a kernel's crash
        g = bound_graph(g, binding)
    values: dict[int, np.ndarray] = {}
    remaining = _last_uses(g)
    outputs = set(g.output_ids)
    for node in g.nodes:
        if node.id in fed:
            values[node.id] = fed[node.id]
            continue
        if node.op == RESULT:  # computed with its producer
            continue
        got = eval_node(node, [values[i] for i in node.inputs], node_out_type(node, {}))  # bound above
        if node.extra_types:
            for r, arr in enumerate(got):
                values[node.id + r] = arr
        else:
            values[node.id] = got
        for src in set(node.inputs):
            if remaining.get(src) == node.id and src not in outputs:
                del values[src]
    return _own_outputs([values[i] for i in g.output_ids], fed.values())


def _root(arr: Any) -> Any:
    while isinstance(getattr(arr, "base", None), np.ndarray):
        arr = arr.base
    return arr


def _own_outputs(outs: list[np.ndarray], fed: Any) -> list[np.ndarray]:
    """``outs`` with a copy where an output is, or views, a fed array or an earlier output, or is read-only (a
    constant's array): the caller's results are its own and writable, as every executable backend returns them
    (a reshape's view of an input would change with it)."""
    seen = {id(_root(a)) for a in fed}
    owned = []
    for arr in outs:
        root = id(_root(arr))
        if root in seen or (isinstance(arr, np.ndarray) and not arr.flags.writeable):
            arr = np.array(arr, copy=True)
        else:
            seen.add(root)
        owned.append(arr)
    return owned


def _last_uses(g: Graph) -> dict[int, int]:
    last: dict[int, int] = {}
    for node in g.nodes:
        if node.op != RESULT:
            for src in node.inputs:
                last[src] = node.id
    return last
