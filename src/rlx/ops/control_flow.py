"""Structured control flow: ``if_``, ``while_``, ``scan`` (docs/semantics.md#control-flow), holding subgraphs as attributes.

Design (docs/pipeline.md#upstream-bugs-fixed: upstream inlines ``if`` into a ``where`` that runs both
branches and unrolls ``while``; rlx keeps both structured):

* **Subgraphs** are complete :class:`rlx.Graph` values in ``graph`` attributes. Their
  parameters are their ``input`` nodes, bound **positionally in node order** to the
  operands listed in each op's doc; they must not declare ``param`` nodes (weights are
  passed in as operands). Each subgraph is verified recursively with its parent, printed,
  parsed and serialized like any attribute.
* **Results.** ``if_`` yields the taken branch's single output. ``while_`` carries N values:
  with ``output=None`` the node has N results, the final carried values (one node, so the
  body runs once per iteration); ``output=k`` yields only carried value k. ``scan`` carries
  ``num_carries`` values and has one result per carry (its final value or, with
  ``save_trajectory``, its stacked trajectory). See :mod:`rlx.ops.results`.
* **Running**: a control-flow op carries the OpDef flag :data:`SUBGRAPHS`. The runtimes
  (reference ``rlx.run`` and the numpy arena executor) call its kernel as
  ``kernel(args, attrs, out_type, evaluate=...)`` where ``evaluate(graph, arrays) -> list``
  runs a subgraph on positional arguments with the reference interpreter. So ops do not
  import the runtime (layering), and the arena plans only the outer graph: bodies run in
  the reference interpreter, outside the arena. ``if_`` evaluates **only the branch
  taken**, so an untaken branch that would fail (out-of-range gather, …) never runs.
* **Autodiff**: ``if_``'s VJP / JVP is an ``if_`` over the branches' VJP / JVP graphs (one
  ``if_`` node per operand gradient). ``scan``'s VJP is a reverse ``scan`` carrying the
  carry cotangent plus a vmapped body VJP for the per-step (xs) and broadcast operands'
  gradients (a checkpointed trajectory is recomputed in full by the backward, so checkpoints
  save forward memory only); its JVP unrolls the (static-length) scan, and a scan with several
  carries is differentiated through that unroll both ways. ``while_`` is differentiated by a
  bounded unroll when ``max_iterations`` is static (``AutodiffError`` otherwise). Batching
  (vmap): ``if_`` with an unbatched predicate stays an ``if_`` of vmapped branches; a
  batched predicate evaluates both vmapped branches and selects with ``where`` (the only
  case where both branches run). ``while_`` batched runs until every example's condition
  is false, freezing finished examples with ``where``. ``scan`` batched scans a vmapped
  body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import VARIADIC, defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.evaluate import SUBGRAPHS
from rlx.ops.graph_helpers import cast, const, zeros_like
from rlx.ops.results import as_tuple, one_or_tuple

Evaluate = Callable[[Graph, Sequence[np.ndarray]], list[np.ndarray]]


# ------------------------------------------------------------------------------ helpers
def graph_inputs(sub: Graph) -> list[Any]:
    """The ``input`` nodes of a subgraph in node order (its positional parameters)."""
    return [n for n in sub.nodes if n.op == "input"]


def _check_sub(sub: Graph, what: str, in_types: Sequence[TensorType], n_out: int | None = 1) -> list[TensorType]:
    """Check a subgraph's signature against operand types; return its output types."""
    if any(n.op == "param" for n in sub.nodes):
        raise ShapeError(f"{what}: subgraphs must not declare params (pass weights as operands)")
    ins = graph_inputs(sub)
    if len(ins) != len(in_types):
        raise ShapeError(f"{what}: takes {len(ins)} inputs, but {len(in_types)} are bound to it")
    for k, (node, t) in enumerate(zip(ins, in_types)):
        if node.type != t:
            raise ShapeError(f"{what}: input {k} ({node.attrs['name']!r}) is {node.type}, but the value bound to it is {t}")
    outs = [sub.nodes[i].type for i in sub.output_ids]
    if not all(0 <= i < len(sub.nodes) for i in sub.output_ids):
        raise ShapeError(f"{what}: an output does not exist")
    if n_out is not None and len(outs) != n_out:
        raise ShapeError(f"{what}: must have {n_out} output(s), has {len(outs)}")
    return outs


def inline(dst: Graph, sub: Graph, feed: Mapping[str, Value]) -> list[Value]:
    """Copy ``sub``'s nodes into ``dst`` with its inputs bound by name; return its outputs."""
    new: dict[int, Value] = {}
    for node in sub.nodes:
        if node.op in ("input", "param"):
            new[node.id] = feed[node.attrs["name"]]
        else:
            new[node.id] = dst.append(node.op, [new[i] for i in node.inputs], node.attrs)
    return [new[i] for i in sub.output_ids]


def inline_args(dst: Graph, sub: Graph, args: Sequence[Value]) -> list[Value]:
    """:func:`inline` with ``sub``'s inputs bound positionally (node order) to ``args``."""
    return inline(dst, sub, {n.attrs["name"]: v for n, v in zip(graph_inputs(sub), args)})


# ------------------------------------------------------------------ straight-line lowering
@dataclass(frozen=True)
class UnrollPolicy:
    """The limits of ``rlx.opt.lower.lower_control_flow``: with ``only_pure`` a node whose bodies may
    not run eagerly (``pure(*bodies)`` is False) stays; loops longer than ``max_unroll`` stay."""

    only_pure: bool
    max_unroll: int | None
    pure: Callable[..., bool]


#: ``run(dst, attrs, original bodies, lowered bodies, operands, policy) -> (stat, values)``: the values
#: replacing the node's results (emitted into ``dst``) and a ``lowered_*`` stat, or None and a ``kept_*`` stat
UnrollRun = Callable[[Graph, Mapping[str, Any], Mapping[str, Graph], Mapping[str, Graph], list[Value], UnrollPolicy],
                     "tuple[str, list[Value] | None]"]


def _bounded(attrs: Mapping[str, Any]) -> bool:
    return False


@dataclass(frozen=True)
class Unroll:
    """``OpDef.unroll`` of an op with subgraph bodies: how ``lower_control_flow`` replaces a node by
    straight-line ops (``run``), why a node of it stays (``why_kept(attrs of those nodes)``), and
    whether a node may never finish (``unbounded(attrs)``: nothing evaluates it speculatively)."""

    run: UnrollRun
    why_kept: Callable[[list[Mapping[str, Any]]], str] = lambda attrs: ""
    unbounded: Callable[[Mapping[str, Any]], bool] = _bounded


def make_graph(name: str, in_types: Sequence[tuple[str, TensorType]], body: Callable[[Graph, list[Value]], Sequence[Value]]) -> Graph:
    """A new subgraph with inputs ``in_types`` (name, type) in that order, outputs from ``body``."""
    h = Graph(name)
    vals = [h.input(n, t.shape, t.dtype) for n, t in in_types]
    h.set_outputs(list(body(h, vals)))
    return h


def _signature(sub: Graph) -> list[tuple[str, TensorType]]:
    return [(n.attrs["name"], n.type) for n in graph_inputs(sub)]


def _unique(sub: Graph, base: str) -> str:
    taken = {n.attrs["name"] for n in sub.nodes if n.op in ("input", "param")}
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name


def _pred_ok(t: TensorType, what: str) -> None:
    if not t.shape.is_static or int(np.prod([int(d) for d in t.shape], dtype=np.int64)) != 1:
        raise ShapeError(f"{what}: the predicate must hold one element (a scalar), got {t}")
    if t.dtype.is_complex:
        raise ShapeError(f"{what}: the predicate must be bool or real numeric, got {t.dtype}")


# ------------------------------------------------------------------------------------ if_
def _if_type(ins: list[TensorType], attrs) -> TensorType:
    _pred_ok(ins[0], "if_")
    caps = ins[1:]
    t = _check_sub(attrs["then_branch"], "then_branch", caps)[0]
    e = _check_sub(attrs["else_branch"], "else_branch", caps)[0]
    if t != e:
        raise ShapeError(f"the branches must produce the same type: then gives {t}, else gives {e}")
    return t


def _if_kernel(args, attrs, out, *, evaluate: Evaluate):
    taken = attrs["then_branch"] if bool(np.asarray(args[0]).reshape(-1)[0] != 0) else attrs["else_branch"]
    return evaluate(taken, args[1:])[0]


def _reach(sub: Graph, outputs: Sequence[int] = (0,)) -> set[int]:
    """Positions of the float inputs the listed outputs depend on through float values."""
    need = {sub.output_ids[r] for r in outputs}
    for node in reversed(sub.nodes):
        if node.id in need and node.dtype.is_float:
            need.update(node.inputs)
    return {k for k, n in enumerate(graph_inputs(sub)) if n.id in need and n.dtype.is_float}


def vjp_graph(ctx: Any, sub: Graph, want: Sequence[int], name: str | None = None, outputs: Sequence[int] = (0,)) -> Graph:
    """Subgraph ``(inputs..., ct_r for r in outputs) -> [d input_k for k in want]`` of ``sub``.

    The cotangents pair with ``sub``'s outputs listed in ``outputs`` (the others get none).
    Zeros for inputs those outputs do not depend on. Built with ``ctx.grad`` (the rule
    context's body transform: ops sit below autodiff): of ``sub`` itself when it has that one
    output, else of the scalar ``Σ_r sum(out_r · ct_r)``, seeded with 1."""
    sig = _signature(sub)
    out_ts = [sub.nodes[sub.output_ids[r]].type for r in outputs]
    cts = [_unique(sub, f"ct{r}" if len(outputs) > 1 else "ct") for r in outputs]
    reach = _reach(sub, outputs)
    ask = [k for k in want if k in reach]
    single = list(outputs) == [0] and len(sub.output_ids) == 1
    seed = cts[0] if single else _unique(sub, "seed")
    loss = sub if single else make_graph(f"{sub.name}_pairing", [*sig, *zip(cts, out_ts)], lambda h, vals: [
        _pairing(h, [inline_args(h, sub, vals)[r] for r in outputs], vals[len(sig):])])
    bwd = ctx.grad(loss, [sig[k][0] for k in ask], seed=seed) if ask else None

    def body(h: Graph, vals: list[Value]) -> list[Value]:
        got: dict[int, Value] = {}
        if bwd is not None:
            feed = {n: v for (n, _), v in zip(sig, vals)}
            feed.update(zip(cts, vals[len(sig):]))
            if not single:
                feed[seed] = const(h, 1.0, loss.nodes[loss.output_ids[0]].dtype)
            got = dict(zip(ask, inline(h, bwd, feed)))
        return [got[k] if k in got else zeros_like(h, vals[k]) for k in want]

    return make_graph(name or f"{sub.name}_vjp", [*sig, *zip(cts, out_ts)], body)


def _pairing(h: Graph, outs: Sequence[Value], cts: Sequence[Value]) -> Value:
    """``Σ_r sum(out_r · ct_r)``: the scalar whose gradient is the VJP of several outputs."""
    total = None
    for o, c in zip(outs, cts):
        term = h.reduce(o * c, op="sum", keep_dim=False)
        total = term if total is None else total + term
    assert total is not None
    return total


def jvp_graph(ctx: Any, sub: Graph, active: Sequence[int], name: str | None = None) -> Graph:
    """Subgraph ``(inputs..., tangents of inputs[active]...) -> [tangent of each output]`` of ``sub``,
    built with ``ctx.jvp``."""

    sig = _signature(sub)
    out_ts = [sub.nodes[i].type for i in sub.output_ids]
    reach = _reach(sub, range(len(out_ts)))
    ask = [k for k in active if k in reach]
    fwd = ctx.jvp(sub, [sig[k][0] for k in ask]) if ask and any(t.dtype.is_float for t in out_ts) else None
    t_names = [_unique(sub, f"t{k}") for k in active]

    def body(h: Graph, vals: list[Value]) -> list[Value]:
        if fwd is None:
            return [zeros_like(h, h.value(_first_output_like(h, t, vals))) for t in out_ts]
        feed = {n: v for (n, _), v in zip(sig, vals)}
        for k, tv in zip(active, vals[len(sig):]):
            feed[f"t_{sig[k][0]}"] = tv
        outs = inline(h, fwd, feed)
        return [cast(h, t, ot.dtype) for t, ot in zip(outs[len(out_ts):], out_ts)]

    return make_graph(name or f"{sub.name}_jvp", [*sig, *[(n, sig[k][1]) for n, k in zip(t_names, active)]], body)


def _first_output_like(h: Graph, t: TensorType, vals: list[Value]) -> Value:
    """A value of type ``t`` to take zeros_like of (zeros_like needs a Value)."""
    if t.shape.is_static:
        return h.constant(np.zeros(tuple(t.shape), t.dtype.numpy))
    for v in vals:
        if v.type == t:
            return v
    raise AutodiffError(f"cannot build a zero tangent of symbolic type {t}")


def _if_vjp(ctx, node, ct):
    g = ctx.graph
    ops = ctx.operands(node)
    res: list[Any] = [None] * len(ops)
    for i in range(1, len(ops)):
        if not ctx.wants(node, i):
            continue
        then_b = vjp_graph(ctx, node.attrs["then_branch"], [i - 1])
        else_b = vjp_graph(ctx, node.attrs["else_branch"], [i - 1])
        res[i] = g.if_([ops[0], *ops[1:], ct], then_branch=then_b, else_branch=else_b)
    return res


def _if_jvp(ctx, node, tangents):
    if not node.dtype.is_float:
        return None
    ops = ctx.operands(node)
    active = [i - 1 for i in range(1, len(ops)) if tangents[i] is not None and ops[i].dtype.is_float]
    if not active:
        return None
    tans = [ctx.cast(tangents[k + 1], ops[k + 1].dtype) for k in active]
    then_b = jvp_graph(ctx, node.attrs["then_branch"], active)
    else_b = jvp_graph(ctx, node.attrs["else_branch"], active)
    return ctx.graph.if_([ops[0], *ops[1:], *tans], then_branch=then_b, else_branch=else_b)


def vmap_graph(ctx: Any, sub: Graph, batched: set[str], size: Any, reduce_outputs: Sequence[bool] = ()) -> Graph:
    """``sub`` vmapped (``ctx.vmap``) over its inputs named in ``batched`` (axis 0), inputs kept in
    order and name; every output batched, those flagged in ``reduce_outputs`` then summed over the batch axis."""
    sig = _signature(sub)
    vg = ctx.vmap(sub, {n: 0 for n, _ in sig if n in batched}, batch_size=size)
    new_sig = [(n, TensorType(Shape([size, *t.shape]), t.dtype) if n in batched else t) for n, t in sig]

    def body(h: Graph, vals: list[Value]) -> list[Value]:
        outs = inline(h, vg, {n: v for (n, _), v in zip(new_sig, vals)})
        return [h.reduce(o, op="sum", axes=[0], keep_dim=False) if k < len(reduce_outputs) and reduce_outputs[k] else o
                for k, o in enumerate(outs)]

    return make_graph(f"{sub.name}_vmap", new_sig, body)


def _vmapped(ctx: Any, sub: Graph, batched: Sequence[bool], size: Any) -> Graph:
    """:func:`vmap_graph` over the inputs flagged ``batched``; at least one must be."""
    names = {n for (n, _), b in zip(_signature(sub), batched) if b}
    if not names:
        raise AutodiffError(f"vmap of subgraph {sub.name!r}: nothing is batched")
    return vmap_graph(ctx, sub, names, size)


def _if_batch(ctx, node, operands, batched):
    g = ctx.graph
    pred, caps, cb = operands[0], list(operands[1:]), list(batched[1:])
    size = ctx.batch_size
    if not batched[0]:
        return g.if_([pred, *caps],
                     then_branch=_vmapped(ctx, node.attrs["then_branch"], cb, size),
                     else_branch=_vmapped(ctx, node.attrs["else_branch"], cb, size))
    # a per-example predicate: both branches run (vmapped if a capture is batched), then select per example
    branches = [node.attrs["then_branch"], node.attrs["else_branch"]]
    if any(cb):
        branches = [_vmapped(ctx, b, cb, size) for b in branches]
    t, e = (inline_args(g, b, caps)[0] for b in branches)
    p = pred if pred.dtype.is_bool else g.cast(pred, to="bool")
    p = ctx.reshape(p, [size, *([1] * len(node.shape))])
    return g.where(p, t, e)


def _unroll_if(dst, attrs, orig, bodies, ins, policy):
    """Both branches inlined and ``where(p, then, else)`` with ``p`` the predicate as a rank-0 bool."""
    if policy.only_pure and not policy.pure(orig["then_branch"], orig["else_branch"]):
        return "kept_if_impure", None
    t = inline_args(dst, bodies["then_branch"], ins[1:])[0]
    e = inline_args(dst, bodies["else_branch"], ins[1:])[0]
    p = ins[0]
    if not p.dtype.is_bool:
        p = dst.cast(p, to="bool")  # true when != 0 (NaN included), like the if_ kernel
    if len(p.shape):
        p = dst.reshape(p, new_shape=[])  # one element: where broadcasts it
    return "lowered_if", [dst.where(p, t, e)]


defop(
    name="if_", precision="data_movement", family="control_flow", arity=VARIADIC, min_arity=1, operands=("pred", "captures"),
    attrs={"then_branch": AttrSpec("graph", doc="taken when pred != 0; inputs = captures"),
           "else_branch": AttrSpec("graph", doc="taken when pred == 0; inputs = captures")},
    infer=_if_type, kernel=_if_kernel, flags={SUBGRAPHS},
    vjp=_if_vjp, jvp=_if_jvp, batch=_if_batch,
    unroll=Unroll(_unroll_if, lambda attrs: "kept by only_pure: a branch may fail or has effects when run eagerly"),
    doc="Structured conditional: operands [pred, *captures]; pred is a one-element bool or numeric tensor "
    "(true when != 0); each branch takes one input per capture (bound positionally, same types) and "
    "returns one output, the same type for both. Only the taken branch runs (upstream lowers to a "
    "where that runs both). VJP / JVP are if_ nodes over the branches' derivative graphs.",
)


# ---------------------------------------------------------------------------------- while_
def _while_type(ins: list[TensorType], attrs) -> TensorType | tuple[TensorType, ...]:
    c = _check_sub(attrs["cond"], "cond", ins)[0]
    if c.dtype.is_complex:
        raise ShapeError(f"cond must return a bool or real numeric tensor, got {c}")
    outs = _check_sub(attrs["body"], "body", ins, n_out=len(ins))
    for k, (o, t) in enumerate(zip(outs, ins)):
        if o != t:
            raise ShapeError(f"body output {k} is {o}, but carried value {k} is {t}")
    n = attrs["max_iterations"]
    if n is not None and n < 0:
        raise ShapeError(f"max_iterations must be >= 0, got {n}")
    k = attrs["output"]
    if k is None:
        return tuple(ins)
    if not 0 <= k < len(ins):
        raise ShapeError(f"output {k} out of range for {len(ins)} carried value(s)")
    return ins[k]


def _while_kernel(args, attrs, out, *, evaluate: Evaluate):
    carried = list(args)
    bound, steps = attrs["max_iterations"], 0
    while bound is None or steps < bound:
        if not bool(np.all(np.asarray(evaluate(attrs["cond"], carried)[0]) != 0)):
            break
        carried = evaluate(attrs["body"], carried)
        steps += 1
    return one_or_tuple(carried) if attrs["output"] is None else carried[attrs["output"]]


def _unrolled_while(node, in_types: Sequence[TensorType]) -> Graph:
    """``while_`` as a straight-line graph: ``max_iterations`` copies of cond and body, frozen with where."""
    n = node.attrs["max_iterations"]
    if n is None:
        raise AutodiffError("while_: differentiating a loop needs a static bound (set max_iterations); "
                            "the loop is unrolled that many times")
    k = node.attrs["output"]
    return unrolled_while(node.attrs["cond"], node.attrs["body"], n, in_types, None if k is None else [k])


def unrolled_while(cond: Graph, body: Graph, max_iterations: int, in_types: Sequence[TensorType],
                   outputs: Sequence[int] | None = None) -> Graph:
    """A bounded ``while_`` as a straight-line graph with inputs ``a0, a1, …`` (the initial carried values):
    ``max_iterations`` copies of cond and body, each carried value frozen with ``where`` once cond fails;
    its outputs are the final carried values listed in ``outputs`` (default: all of them, in order).
    Every copy of cond and body is evaluated, also after the loop is done (shared by autodiff and
    ``rlx.opt.lower``)."""
    n = max_iterations
    want = range(len(in_types)) if outputs is None else outputs

    def build(h: Graph, vals: list[Value]) -> list[Value]:
        carried = list(vals)
        active = None
        for _ in range(n):
            c = inline_args(h, cond, carried)[0]
            ok = h.ne(c, h.scalar(0, c.dtype) if not c.dtype.is_bool else h.scalar(False))
            if len(ok.shape):
                ok = h.cast(h.reduce(h.cast(ok, to="f32"), op="min", keep_dim=False), to="bool")
            active = ok if active is None else h.where(active, ok, active)  # logical and
            new = inline_args(h, body, carried)
            carried = [h.where(active, b, c) for b, c in zip(new, carried)]
        return [carried[k] for k in want]

    return make_graph("while_unrolled", [(f"a{k}", t) for k, t in enumerate(in_types)], build)


def via_graph_vjp(ctx: Any, node: Any, ct: Any, f: Graph, want: Sequence[int] | None = None) -> list[Any]:
    """VJP of ``node`` through an equivalent graph ``f`` of its operands (inputs bound positionally;
    one output per result of ``node``), for the operands in ``want`` (default: those the context wants)."""
    if want is None:
        want = [k for k in range(len(node.inputs)) if ctx.wants(node, k)]
    cts = as_tuple(node, ct)
    used = [r for r, c in enumerate(cts) if c is not None]
    vg = vjp_graph(ctx, f, want, outputs=used)
    ops = ctx.operands(node)
    outs = inline_args(ctx.graph, vg, [*ops, *[cts[r] for r in used]])
    res: list[Any] = [None] * len(ops)
    for k, o in zip(want, outs):
        res[k] = o
    return res


def via_graph_jvp(ctx: Any, node: Any, tangents: Sequence[Any], f: Graph) -> Any:
    """JVP of ``node`` through an equivalent graph ``f`` (one output per result of ``node``)."""
    ops = ctx.operands(node)
    active = [k for k, t in enumerate(tangents) if t is not None and ops[k].dtype.is_float]
    if not active or not any(t.dtype.is_float for t in node.types):
        return None
    jg = jvp_graph(ctx, f, active)
    vals = [*ops, *[ctx.cast(tangents[k], ops[k].dtype) for k in active]]
    outs = inline_args(ctx.graph, jg, vals)
    return tuple(outs) if node.extra_types else outs[0]


def _while_vjp(ctx, node, ct):
    return via_graph_vjp(ctx, node, ct, _unrolled_while(node, [ctx.operand(node, k).type for k in range(len(node.inputs))]))


def _while_jvp(ctx, node, tangents):
    return via_graph_jvp(ctx, node, tangents, _unrolled_while(node, [ctx.operand(node, k).type for k in range(len(node.inputs))]))


def _while_batch(ctx, node, operands, batched):
    g, size = ctx.graph, ctx.batch_size
    carried = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    every = [True] * len(carried)
    vcond = _vmapped(ctx, node.attrs["cond"], every, size)
    vbody = _vmapped(ctx, node.attrs["body"], every, size)
    sig = [(f"c{k}", v.type) for k, v in enumerate(carried)]

    def per_example(h: Graph, vals: list[Value]) -> Value:
        c = inline_args(h, vcond, vals)[0]
        ok = h.cast(h.ne(c, h.scalar(0, c.dtype) if not c.dtype.is_bool else h.scalar(False)), to="f32")
        if len(ok.shape) > 1:
            ok = h.reduce(ok, op="min", axes=list(range(1, len(ok.shape))), keep_dim=False)
        return ok  # f32 [B]: 1 while the example's loop runs

    def cond_b(h: Graph, vals: list[Value]) -> list[Value]:
        return [h.reduce(per_example(h, vals), op="max", keep_dim=False)]

    def body_b(h: Graph, vals: list[Value]) -> list[Value]:
        ok = h.cast(per_example(h, vals), to="bool")
        new = inline_args(h, vbody, vals)
        outs = []
        for b, c in zip(new, vals):
            mask = h.reshape(ok, new_shape=[-1 if isinstance(size, str) else size, *([1] * (len(c.shape) - 1))])
            outs.append(h.where(mask, b, c))
        return outs

    return g.while_(carried, cond=make_graph("cond_vmap", sig, cond_b), body=make_graph("body_vmap", sig, body_b),
                    max_iterations=node.attrs["max_iterations"], output=node.attrs["output"])


def _unroll_while(dst, attrs, orig, bodies, ins, policy):
    """``max_iterations`` copies of cond and body (:func:`unrolled_while`)."""
    n = attrs["max_iterations"]
    if n is None:
        return "kept_while_unbounded", None
    if policy.max_unroll is not None and n > policy.max_unroll:
        return "kept_while_too_long", None
    if policy.only_pure and not policy.pure(orig["cond"], orig["body"]):
        return "kept_while_impure", None
    k = attrs["output"]
    unrolled = unrolled_while(bodies["cond"], bodies["body"], n, [v.type for v in ins], None if k is None else [k])
    return "lowered_while", inline_args(dst, unrolled, ins)


def _why_while_kept(attrs: list[Mapping[str, Any]]) -> str:
    if any(a["max_iterations"] is None for a in attrs):
        return "a loop without max_iterations cannot be unrolled"
    return "kept by only_pure (a body may fail or has effects when run eagerly) or max_unroll"


defop(
    name="while_", precision="data_movement", family="control_flow", arity=VARIADIC, min_arity=1, operands=("carried",),
    attrs={"cond": AttrSpec("graph", doc="carried -> one bool/numeric tensor (continue while all != 0)"),
           "body": AttrSpec("graph", doc="carried -> next carried (same count and types)"),
           "max_iterations": AttrSpec("int", default=None, doc="stop after this many iterations (None: unbounded)"),
           "output": AttrSpec("int", default=0, optional=True,
                              doc="index of the carried value the node yields; None: one result per carried value")},
    infer=_while_type, kernel=_while_kernel, flags={SUBGRAPHS},
    vjp=_while_vjp, jvp=_while_jvp, batch=_while_batch,
    unroll=Unroll(_unroll_while, _why_while_kept, unbounded=lambda attrs: attrs["max_iterations"] is None),
    doc="Structured loop: operands are the initial carried values (passed as one list); "
    "for _ in range(max_iterations or forever): if not all(cond(*c) != 0): break; c = body(*c). "
    "The node yields c[output], or with output=None every final carried value (one result each, "
    "one loop). "
    "Differentiable only with a static max_iterations (bounded unroll); batched loops run until every "
    "example is done, freezing finished ones.",
)


# ------------------------------------------------------------------------------------ scan
def _scan_arity(attrs) -> int:
    return attrs["num_carries"] + attrs["num_bcast"] + attrs["num_xs"]


def _scan_rows(attrs) -> int:
    k, n = attrs["num_checkpoints"], attrs["length"]
    return k if 0 < k < n else n


def checkpoint_steps(length: int, k: int) -> list[int]:
    """Steps whose carry a checkpointed trajectory keeps: t_k = ceil((k+1)·length/K) − 1 (docs/semantics.md#control-flow)."""
    return [-(-(j + 1) * length // k) - 1 for j in range(k)]


def _scan_type(ins: list[TensorType], attrs) -> TensorType | tuple[TensorType, ...]:
    n, nc, nb, nx = attrs["length"], attrs["num_carries"], attrs["num_bcast"], attrs["num_xs"]
    if n < 1:
        raise ShapeError(f"length must be >= 1, got {n}")
    if nc < 1:
        raise ShapeError(f"num_carries must be >= 1, got {nc}")
    if nb < 0 or nx < 0:
        raise ShapeError("num_bcast and num_xs must be >= 0")
    carries, bcasts, xs = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    steps = []
    for i, t in enumerate(xs):
        if len(t.shape) < 1 or t.shape[0] != n:
            raise ShapeError(f"xs_{i} must have a leading axis of length {n}, got {t}")
        steps.append(TensorType(Shape(list(t.shape)[1:]), t.dtype))
    outs = _check_sub(attrs["body"], "body", [*carries, *bcasts, *steps], n_out=nc)
    for k, (out, carry) in enumerate(zip(outs, carries)):
        if out != carry:
            raise ShapeError(f"body returns {out}" + (f" for carry {k}" if nc > 1 else "") + f", but the carry is {carry}")
    k = attrs["num_checkpoints"]
    if k < 0 or k > n:
        raise ShapeError(f"num_checkpoints must be in [0, length={n}], got {k}")
    if k and not attrs["save_trajectory"]:
        raise ShapeError("num_checkpoints needs save_trajectory")
    if k and k < n and attrs["reverse"]:
        raise ShapeError("a reverse scan cannot keep checkpoints")
    if attrs["save_trajectory"]:
        carries = [TensorType(Shape([_scan_rows(attrs), *c.shape]), c.dtype) for c in carries]
    return carries[0] if nc == 1 else tuple(carries)


def _scan_kernel(args, attrs, out, *, evaluate: Evaluate):
    n, nc, nb = attrs["length"], attrs["num_carries"], attrs["num_bcast"]
    c, bcasts, xs = list(args[:nc]), list(args[nc:nc + nb]), list(args[nc + nb:])
    order = range(n - 1, -1, -1) if attrs["reverse"] else range(n)
    traj: list[list[np.ndarray]] = [[] for _ in range(n)]
    for t in order:
        c = evaluate(attrs["body"], [*c, *bcasts, *[x[t] for x in xs]])
        traj[t] = c
    if not attrs["save_trajectory"]:
        return one_or_tuple(c)
    k = attrs["num_checkpoints"]
    rows = checkpoint_steps(n, k) if 0 < k < n else range(n)
    return one_or_tuple([np.stack([traj[t][j] for t in rows]) for j in range(nc)])


def _rows(g: Graph, v: Value, start: int, length: int) -> Value:
    return g.narrow(v, axis=0, start=start, length=length)


def _row(g: Graph, v: Value, t: int) -> Value:
    return g.reshape(_rows(g, v, t, 1), new_shape=[int(d) if not isinstance(d, str) else -1 for d in v.shape[1:]] or [])


def _stack1(g: Graph, v: Value) -> Value:
    return g.reshape(v, new_shape=[1, *[int(d) if not isinstance(d, str) else -1 for d in v.shape]])


def _shift(g: Graph, rows: Value, first: Value, n: int, at_end: bool) -> Value:
    """[first, rows[0..n-2]] (at_end False) or [rows[1..n-1], first] (at_end True)."""
    one = _stack1(g, first)
    if n == 1:
        return one
    return g.concat([_rows(g, rows, 1, n - 1), one] if at_end else [one, _rows(g, rows, 0, n - 1)], axis=0)


def _spread_rows(ctx, rows: Value, steps: Sequence[int], like: Value) -> Value:
    """A [length, *carry] cotangent holding ``rows[j]`` at step ``steps[j]`` and zeros at every other
    step (``like`` is any [length, *carry] value: the zero blocks take their shape from its rows)."""
    g = ctx.graph
    pieces, t = [], 0
    for j, step in enumerate(steps):
        if step > t:
            pieces.append(ctx.zeros_like(_rows(g, like, t, step - t)))
        pieces.append(_rows(g, rows, j, 1))
        t = step + 1
    return pieces[0] if len(pieces) == 1 else g.concat(pieces, axis=0)


def _scan_vjp(ctx, node, ct):
    """Reverse scan for the carry cotangent; the bcast / xs gradients from the body VJP vmapped over steps.

    A scan with several carries is differentiated through its unroll."""
    a = node.attrs
    if a["num_carries"] > 1:
        return via_graph_vjp(ctx, node, ct, _unrolled_scan(node, [ctx.operand(node, k).type for k in range(len(node.inputs))]))
    n, nb, nx, rev = a["length"], a["num_bcast"], a["num_xs"], a["reverse"]
    g = ctx.graph
    ops = ctx.operands(node)
    init, bcasts, xs = ops[0], ops[1:1 + nb], ops[1 + nb:]
    body = a["body"]
    sig = _signature(body)
    checkpointed = 0 < a["num_checkpoints"] < n
    if a["save_trajectory"] and not checkpointed:
        traj = ctx.output(node)
    else:  # recompute every carry (a checkpointed forward kept only some rows)
        traj = g.scan(*ops, body=body, length=n, save_trajectory=True, num_bcast=nb, num_xs=nx, reverse=rev)
    if checkpointed:
        ct = _spread_rows(ctx, ct, checkpoint_steps(n, a["num_checkpoints"]), traj)
    before = _shift(g, traj, init, n, at_end=rev)  # the carry fed to each step
    ctype = init.type
    # backward scan: carry dc (the cotangent of the carry leaving a step), per step inputs (carry_before, xs, upstream)
    vj_carry = vjp_graph(ctx, body, [0])
    step_types = [t for _, t in sig[1 + nb:]]
    up_names = ["up"] if a["save_trajectory"] else []

    def bwd_body(h: Graph, vals: list[Value]) -> list[Value]:
        dc, bs = vals[0], vals[1:1 + nb]
        cb, xt = vals[1 + nb], vals[2 + nb:2 + nb + nx]
        if up_names:
            dc = dc + vals[-1]
        return inline_args(h, vj_carry, [cb, *bs, *xt, dc])

    bsig = [("dc", ctype), *[(f"b{i}", t) for i, (_, t) in enumerate(sig[1:1 + nb])], ("carry", ctype),
            *[(f"x{i}", t) for i, t in enumerate(step_types)], *[("up", ctype) for _ in up_names]]
    bwd = make_graph(f"{body.name}_scan_vjp", bsig, bwd_body)
    dc0 = ctx.zeros_like(init) if a["save_trajectory"] else ct
    bx = [before, *xs, *([ct] if up_names else [])]
    dtraj = g.scan(dc0, *bcasts, *bx, body=bwd, length=n, save_trajectory=True, num_bcast=nb,
                   num_xs=len(bx), reverse=not rev)
    # row t of dtraj = the cotangent of the carry entering step t
    res: list[Any] = [None] * len(ops)
    res[0] = _row(g, dtraj, n - 1 if rev else 0) if ctx.wants(node, 0) else None
    want = [k for k in range(1, len(ops)) if ctx.wants(node, k)]
    if want:
        dout = _shift(g, dtraj, dc0, n, at_end=not rev)  # the cotangent of the carry leaving step t (before upstream)
        if a["save_trajectory"]:
            dout = dout + ct
        vj = vjp_graph(ctx, body, want)
        vsig = [x for x, _ in _signature(vj)]
        per_step = [vsig[0], *vsig[1 + nb:1 + nb + nx], vsig[-1]]
        vg = ctx.vmap(vj, {x: 0 for x in per_step}, batch_size=n)
        outs = inline(g, vg, dict(zip(vsig, [before, *bcasts, *xs, dout])))
        for k, o in zip(want, outs):
            res[k] = g.reduce(o, op="sum", axes=[0], keep_dim=False) if k <= nb else o
    return res


def _unrolled_scan(node, in_types: Sequence[TensorType]) -> Graph:
    a = node.attrs
    n, nc, nb = a["length"], a["num_carries"], a["num_bcast"]
    if not isinstance(n, int):
        raise AutodiffError(f"a scan of symbolic length {n} cannot be unrolled (bind the length first)")
    def build(h: Graph, vals: list[Value]) -> list[Value]:
        c, bs, xs = vals[:nc], vals[nc:nc + nb], vals[nc + nb:]
        traj: dict[int, list[Value]] = {}
        for t in (range(n - 1, -1, -1) if a["reverse"] else range(n)):
            c = inline_args(h, a["body"], [*c, *bs, *[_row(h, x, t) for x in xs]])
            traj[t] = c
        if not a["save_trajectory"]:
            return c
        k = a["num_checkpoints"]
        rows = checkpoint_steps(n, k) if 0 < k < n else range(n)
        return [h.concat([_stack1(h, traj[t][j]) for t in rows], axis=0) for j in range(nc)]

    return make_graph("scan_unrolled", [(f"a{k}", t) for k, t in enumerate(in_types)], build)


def _scan_jvp(ctx, node, tangents):
    return via_graph_jvp(ctx, node, tangents, _unrolled_scan(node, [ctx.operand(node, k).type for k in range(len(node.inputs))]))


def _scan_batch(ctx, node, operands, batched):
    a = node.attrs
    g, size, nc, nb = ctx.graph, ctx.batch_size, a["num_carries"], a["num_bcast"]
    inits = [v if b else ctx.materialize(v) for v, b in zip(operands[:nc], batched[:nc])]
    bcasts = list(operands[nc:nc + nb])
    xs = []
    for v, b in zip(operands[nc + nb:], batched[nc + nb:]):
        if b:  # [B, L, *s] -> [L, B, *s]
            r = len(v.shape)
            v = g.transpose(v, perm=[1, 0, *range(2, r)])
        xs.append(v)
    vbody = _vmapped(ctx, a["body"], [*[True] * nc, *batched[nc:]], size)
    out = g.scan(*inits, *bcasts, *xs, body=vbody, length=a["length"], save_trajectory=a["save_trajectory"],
                 num_carries=nc, num_bcast=nb, num_xs=a["num_xs"], num_checkpoints=a["num_checkpoints"], reverse=a["reverse"])
    outs = as_tuple(node, out)
    if a["save_trajectory"]:
        outs = tuple(g.transpose(o, perm=[1, 0, *range(2, len(o.shape))]) for o in outs)
    return outs if node.extra_types else outs[0]


def _unroll_scan(dst, attrs, orig, bodies, ins, policy):
    """The unrolled evaluation the op performs (final carry, trajectory, reverse, checkpoints)."""
    n = attrs["length"]
    if not isinstance(n, int) or (policy.max_unroll is not None and n > policy.max_unroll):
        return "kept_scan_too_long", None
    unrolled = _unrolled_scan(SimpleNamespace(attrs={**attrs, **bodies}), [v.type for v in ins])
    return "lowered_scan", inline_args(dst, unrolled, ins)


defop(
    name="scan", family="control_flow", arity=_scan_arity, operands=("inits", "bcasts", "xs"),
    attrs={"body": AttrSpec("graph", doc="(*carries, *bcasts, *x_t) -> next carries"),
           "num_carries": AttrSpec("int", default=1, doc="how many carried values lead the operands (one result each)"),
           "length": AttrSpec("size", doc="number of steps (may be symbolic); every xs has this leading axis"),
           "save_trajectory": AttrSpec("bool", default=False),
           "num_bcast": AttrSpec("int", default=0),
           "num_xs": AttrSpec("int", default=0),
           "num_checkpoints": AttrSpec("int", default=0),
           "reverse": AttrSpec("bool", default=False, doc="run steps length-1 … 0 (rows stay in step order)")},
    infer=_scan_type, kernel=_scan_kernel, flags={SUBGRAPHS},
    vjp=_scan_vjp, jvp=_scan_jvp, batch=_scan_batch,
    unroll=Unroll(_unroll_scan, lambda attrs: "longer than max_unroll, or of symbolic length"),
    doc="Loop over a leading axis: operands [*inits, *bcasts, *xs] (num_carries inits, default 1); c = inits; "
    "for t in range(length): c = body(*c, *bcasts, *[x[t] for x in xs]). One result per carry: its final "
    "value, or with save_trajectory its stacked values [length, *carry] (row t = carry after step t); "
    "with 0 < num_checkpoints = K < length only rows t_k = ceil((k+1)·length/K) − 1. "
    "reverse=True (an rlx extension, as in JAX) runs t = length-1 … 0. "
    "VJP: a reverse scan for the carry plus the body VJP vmapped over steps for bcasts / xs (bcast "
    "gradients summed over steps; a checkpointed trajectory's backward recomputes every carry and "
    "spreads the row cotangents over their steps; several carries: through the unroll); JVP: unrolled; "
    "vmap: a scan of the vmapped body.",
)
