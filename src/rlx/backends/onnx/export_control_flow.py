"""rlx structured control flow → ONNX: ``if_`` → If, ``while_`` → Loop, ``scan`` → Scan; ``custom_fn`` inlined.

Subgraphs are exported recursively by the same converters (:meth:`Exporter.scope`): an rlx
subgraph's ``input`` nodes are bound positionally to ONNX names, either the ONNX body's own
inputs (Loop / Scan carried values and per-step elements) or outer-scope names (If captures,
Scan broadcasts; ONNX subgraphs read enclosing scopes by name). Constants of every depth are
initializers of the main graph, and fresh names are unique across nesting. Exact semantics:

* ``if_``: the predicate is one element, true when ``!= 0`` (NaN included): ``Not(Equal(p, 0))``
  for a numeric predicate, reshaped to a scalar; only the taken branch runs, as in rlx.
* ``while_``: rlx tests ``all(cond(c) != 0)`` *before* every iteration and never after the
  bound is reached; ONNX Loop's body yields the *next* condition. So the first condition is
  computed in the enclosing scope (Loop's ``cond`` input: zero iterations when false), the
  body runs ``body`` then ``cond`` on the new values, and with ``max_iterations`` = M
  (Loop's trip count) that ``cond`` sits in an If on ``iter + 1 < M``: the condition is
  evaluated exactly when rlx evaluates it (a cond that would fail past the bound, e.g. an
  out-of-range Gather, never runs). ``max_iterations == 0`` is the initial value itself.
  A non-scalar condition is reduced: ``ReduceSum(Cast(c == 0)) == 0`` (an empty one is true,
  like ``np.all``). ``while_`` nodes with ``output=None`` yield every value of one Loop.
* ``scan``: one Scan state (the carry), bcasts read from the outer scope, xs as scan inputs
  (a zero-filled ``uint8 [length]`` scan input when there are none: Scan takes its length
  from its scan inputs), the trajectory as a scan output of the new carry. ``reverse``:
  every scan input reversed and the scan output *prepended*, so row t is still the carry
  after step t. Checkpoint rows are a Gather of the stacked trajectory.
* ``custom_fn``: its forward ``body`` is inlined into the enclosing scope (operands bound to
  its inputs). ``vjp_body`` / ``jvp_body`` are custom *derivative* rules, used only when rlx
  differentiates the graph (training): they are not exported, and the model computes exactly
  the node's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.backends.onnx.exporter import Exporter, exporter, primitive
from rlx.ir.dtype import DType
from rlx.ir.graph import Graph
from rlx.ir.shape import Shape, TensorType
from rlx.ops.control_flow import checkpoint_steps, graph_inputs

_BOOL = TensorType(Shape([]), DType.BOOL)
_I64 = TensorType(Shape([]), DType.I64)


def inline(ex: Exporter, sub: Graph, bind: Sequence[str], nodes: list[Any] | None = None) -> tuple[Exporter, list[str]]:
    """Convert ``sub`` (unfused) with its inputs bound to ``bind``, in a new ONNX scope or into ``nodes``.

    Returns the scope's exporter and the ONNX names of ``sub``'s outputs."""
    sub = primitive(sub)
    child = ex.scope(sub, nodes)
    ins = graph_inputs(sub)
    for node, name in zip(ins, bind, strict=True):
        child.names[node.id] = name
    for node in sub.nodes:
        if node.op != "input":
            child.convert(node)
    return child, [child.names[i] for i in sub.output_ids]


def body_graph(ex: Exporter, hint: str, inputs: Sequence[tuple[str, TensorType]], outputs: Sequence[tuple[str, TensorType]]):
    """The GraphProto of ``ex``'s scope; every output goes through an Identity to a fresh name
    (an output may be a body input or an outer name)."""
    helper = ex.onnx.helper
    outs = []
    for src, t in outputs:
        name = ex.fresh(f"{hint}_out")
        ex.nodes.append(helper.make_node("Identity", [src], [name]))
        outs.append(ex.value_info(name, t))
    return helper.make_graph(ex.nodes, ex.fresh(hint), [ex.value_info(n, t) for n, t in inputs], outs)


def _branch(ex: Exporter, sub: Graph, bind: Sequence[str], hint: str, t: TensorType):
    """An If branch running ``sub`` on outer names ``bind``."""
    child, outs = inline(ex, sub, bind)
    return body_graph(child, hint, [], [(outs[0], t)])


def _one_element(t: TensorType) -> bool:
    return t.shape.numel == 1


def _truth(ex: Exporter, name: str, t: TensorType) -> str:
    """A bool scalar: ``all(value != 0)`` (one element: just that element)."""
    if _one_element(t):
        ok = name if t.dtype.is_bool else ex.node("Not", [ex.node("Equal", [name, ex.scalar(0, t.dtype)])])
        return ok if len(t.shape) == 0 else ex.node("Reshape", [ok, ex.ints([])])
    bad = ex.node("Not", [name]) if t.dtype.is_bool else ex.node("Equal", [name, ex.scalar(0, t.dtype)])
    count = ex.node("ReduceSum", [ex.node("Cast", [bad], to=ex.onnx.TensorProto.INT64)], keepdims=0)
    return ex.node("Equal", [count, ex.scalar(0, DType.I64)])


def _out_type(sub: Graph) -> TensorType:
    return sub.node(sub.output_ids[0]).type


def _as_list(outs: str | list[str]) -> list[str]:
    return [outs] if isinstance(outs, str) else list(outs)


# ------------------------------------------------------------------------------------ if_
@exporter("if_")
def _if(ex, node, ins):
    pred = _truth(ex, ins[0], ex.g.node(node.inputs[0]).type)
    caps = ins[1:]
    then_b = _branch(ex, node.attrs["then_branch"], caps, "then", node.type)
    else_b = _branch(ex, node.attrs["else_branch"], caps, "else", node.type)
    return ex.node("If", [pred], then_branch=then_b, else_branch=else_b)


# ---------------------------------------------------------------------------------- while_
@exporter("while_")
def _while(ex, node, ins):
    a = node.attrs
    bound, cond, body = a["max_iterations"], a["cond"], a["body"]
    k = a["output"]
    if bound == 0:  # rlx evaluates nothing
        outs = [ex.node("Identity", [x]) for x in ins]
    else:
        outs = _loop(ex, ins, [ex.g.node(i).type for i in node.inputs], cond, body, bound)
    return (outs if node.extra_types else outs[0]) if k is None else outs[k]


def _cond_in(ex: Exporter, cond: Graph, bind: Sequence[str]) -> str:
    """``all(cond(*bind) != 0)`` written into ``ex``'s scope."""
    child, outs = inline(ex, cond, bind, nodes=ex.nodes)
    return _truth(child, outs[0], _out_type(cond))


def _loop(ex: Exporter, ins: list[str], types: list[TensorType], cond: Graph, body: Graph, bound: int | None) -> list[str]:
    first = _cond_in(ex, cond, ins)  # tested before the first iteration (Loop's cond input)
    it, keep = ex.fresh("iter"), ex.fresh("cond_in")
    carried = [ex.fresh("v_in") for _ in ins]
    child, new = inline(ex, body, carried)
    if bound is None:
        nxt = _cond_in(child, cond, new)
    else:  # test the next condition only if another iteration may run (rlx stops at the bound untested)
        more = child.node("Less", [child.node("Add", [it, child.scalar(1, DType.I64)]), child.scalar(bound, DType.I64)])
        test = child.scope(child.g)
        then_b = body_graph(test, "then", [], [(_cond_in(test, cond, new), _BOOL)])
        stop = child.scope(child.g)
        else_b = body_graph(stop, "else", [], [(stop.const(np.array(False)), _BOOL)])
        nxt = child.node("If", [more], then_branch=then_b, else_branch=else_b)
    graph = body_graph(child, "loop_body", [(it, _I64), (keep, _BOOL), *zip(carried, types)],
                       [(nxt, _BOOL), *zip(new, types)])
    trip = ex.scalar(bound, DType.I64) if bound is not None else ""
    return _as_list(ex.node("Loop", [trip, first, *ins], n_out=len(ins), body=graph))


# ------------------------------------------------------------------------------------ scan
@exporter("scan")
def _scan(ex, node, ins):
    a = node.attrs
    n, nc, nb, save = a["length"], a["num_carries"], a["num_bcast"], a["save_trajectory"]
    carry_ts = [ex.g.node(i).type for i in node.inputs[:nc]]
    bcasts, xs = ins[nc:nc + nb], ins[nc + nb:]
    step_types = [TensorType(Shape(list(ex.g.node(i).shape)[1:]), ex.g.node(i).dtype) for i in node.inputs[nc + nb:]]
    if not xs:  # Scan's length is its scan inputs' length: a dummy one the body ignores
        xs, dummy = [ex.const(np.zeros(n, np.uint8))], [TensorType(Shape([]), DType.U8)]
    else:
        dummy = []
    c_in = [ex.fresh("carry_in") for _ in carry_ts]
    x_in = [ex.fresh("x_t") for _ in xs]
    child, c_new = inline(ex, a["body"], [*c_in, *bcasts, *x_in[:len(step_types)]])
    carried = list(zip(c_new, carry_ts))
    graph = body_graph(child, "scan_body", [*zip(c_in, carry_ts), *zip(x_in, step_types + dummy)],
                       carried * (2 if save else 1))
    rev = [1] * len(xs) if a["reverse"] else None
    outs = _as_list(ex.node("Scan", [*ins[:nc], *xs], n_out=nc * (2 if save else 1), body=graph, num_scan_inputs=len(xs),
                            scan_input_directions=rev, scan_output_directions=[1] * nc if rev and save else None))
    if save:
        k = a["num_checkpoints"]
        outs = [ex.node("Gather", [o, ex.ints(checkpoint_steps(n, k))], axis=0) if 0 < k < n else o for o in outs[nc:]]
    return outs if node.extra_types else outs[0]


# ------------------------------------------------------------------------------- custom_fn
@exporter("custom_fn")
def _custom_fn(ex, node, ins):
    """The forward body inlined; the custom derivative bodies are training-only and not exported."""
    return inline(ex, node.attrs["body"], ins, nodes=ex.nodes)[1][0]
