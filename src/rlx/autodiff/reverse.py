"""Reverse mode: ``grad_with_loss`` and ``grad`` (docs/pipeline.md#autodiff; upstream bugs fixed: #upstream-bugs-fixed).

The backward graph is built in three parts: a copy of the prepared forward (same node ids
as the prepared graph), one input ``d_output`` (the seed, the loss's shape and dtype), and
the gradient nodes of a reverse walk that calls each op's ``vjp`` rule. Contributions to
the same value are summed with ``add`` in visit order. Only nodes on a differentiable
path from a ``wrt`` value to the loss get a rule call, and dead code is removed at the
end, so the forward recomputation is pruned to what the gradients need. Inputs and
params are always kept, so the backward graph is fed like the forward plus ``d_output``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlx.autodiff.prepare import label, prepare, resolve_refs, shape_str
from rlx.autodiff.rules import COMPLEX_AD, NO_GRAD, VjpContext, cast, is_diff_dtype
from rlx.ir.errors import AutodiffError, RlxError
from rlx.ir.graph import RESULT, Graph, Node, Value
from rlx.ir.opdef import get_op
from rlx.ir.verify import verify
from rlx.opt.cleanup import dce

SEED = "d_output"


def resolve_wrt(g: Any, wrt: Iterable[Any] | Any, what: str, mir: Graph | None = None) -> tuple[Graph, list[int], list[str | None]]:
    """Prepare ``g`` and map ``wrt`` (names, Values, ids of the caller's graph) into it.

    Returns the prepared graph, the wrt ids in it, and each wrt's leaf name (or None).
    """
    from rlx.autodiff.prepare import as_mir

    mir = mir if mir is not None else as_mir(g, what)
    if isinstance(wrt, (str, Value, int)):
        wrt = [wrt]
    wrt = list(wrt)
    if not wrt:
        raise AutodiffError(f"{what}: wrt is empty")
    if mir is not g and any(isinstance(r, int) and not isinstance(r, Value) for r in wrt):
        raise AutodiffError(f"{what}: node ids are ambiguous for an HIR module (they name HIR nodes); pass wrt by name or Value")
    ids = resolve_refs(mir, wrt, what)
    prepared = prepare(mir, what)
    out: list[int] = []
    names: list[str | None] = []
    for ref, old in zip(wrt, ids):
        new = prepared.id_map.get(old)
        if new is None:
            raise AutodiffError(f"{what}: wrt {ref!r} (node {label(mir, old)}) does not survive prepare_graph_for_ad")
        node = prepared.graph.nodes[new]
        if not is_diff_dtype(node.dtype):
            raise AutodiffError(f"{what}: wrt {label(prepared.graph, new)} has dtype {node.dtype}; "
                                "only float and complex values have gradients")
        out.append(new)
        names.append(node.attrs["name"] if node.op in ("input", "param") else None)
    return prepared.graph, out, names


def active_set(g: Graph, sources: Iterable[int], what: str = "grad") -> list[bool]:
    """Nodes whose (float or complex) value depends on ``sources`` through such values.

    An active node whose op meets a complex operand or result must carry the
    ``COMPLEX_AD`` flag: real rules applied to complex values would give wrong
    derivatives without a sign, so any other op is an error naming it.
    """
    active = [False] * len(g.nodes)
    src = set(sources)
    reached: set[int] = set()  # multi-result nodes with an active operand
    for node in g.nodes:
        if node.op == RESULT:  # result r of a multi-result node: active with it (its rules were checked there)
            active[node.id] = (node.id - node.attrs["index"] in reached or node.id in src) and is_diff_dtype(node.dtype)
        elif node.id in src or any(active[i] for i in node.inputs):
            if any(is_diff_dtype(t.dtype) for t in node.types):
                active[node.id] = is_diff_dtype(node.dtype)
                reached.add(node.id)
                if node.id not in src:
                    _check_complex_rules(g, node, what)
    return active


def _check_complex_rules(g: Graph, node: Node, what: str) -> None:
    flags = get_op(node.op).flags
    if COMPLEX_AD in flags or NO_GRAD in flags:
        return
    if node.dtype.is_complex or any(g.nodes[i].dtype.is_complex for i in node.inputs):
        raise AutodiffError(
            f"{what}: op {node.op!r} (node {label(g, node.id)}) has complex values on a differentiable path, but its "
            f"rules are for real values only (ops with complex rules carry the {COMPLEX_AD!r} flag)"
        )


def no_rule(node: Node, g: Graph, kind: str) -> AutodiffError:
    opdef = get_op(node.op)
    return AutodiffError(
        f"op {node.op!r} (family {opdef.family}) has no {kind} rule; node {label(g, node.id)} lies on a "
        f"differentiable path (add OpDef.{kind} or the {NO_GRAD!r} flag)"
    )


NO_RULE = object()
"""What :func:`apply_rule` returns for a node whose op has no rule and is flagged ``NO_GRAD``."""


def apply_rule(kind: str, ctx: Any, fwd: Graph, node: Node, arg: Any) -> Any:
    """Run the ``kind`` ("vjp" / "jvp") rule of ``node``'s op with ``arg`` (cotangent / tangents).

    Returns :data:`NO_RULE` when the op has no such rule but is ``NO_GRAD``; raises when it has
    none otherwise, and wraps a rule's non-autodiff error with the node it failed at."""
    opdef = get_op(node.op)
    rule = getattr(opdef, kind)
    if rule is None:
        if NO_GRAD in opdef.flags:
            return NO_RULE
        raise no_rule(node, fwd, kind)
    try:
        return rule(ctx, node, arg)
    except AutodiffError:
        raise
    except RlxError as exc:
        raise AutodiffError(f"{kind} rule of {node.op!r} failed at node {label(fwd, node.id)}: {exc}") from exc


def _copy_forward(fwd: Graph, name: str) -> Graph:
    out = Graph(name, ranges=fwd.symbol_ranges)
    for node in fwd.nodes:
        out._push(node)  # nodes are immutable; same ids as the prepared forward
    return out


def build_backward(fwd: Graph, wrt: list[int], *, with_loss: bool, name: str | None = None, seed: str = SEED) -> Graph:
    """The backward graph of a prepared single-output ``fwd`` for ``wrt`` ids (see module doc)."""
    loss_id = fwd.output_ids[0]
    loss = fwd.nodes[loss_id]
    if not loss.dtype.is_float:
        raise AutodiffError(f"grad: the loss {label(fwd, loss_id)} has dtype {loss.dtype}; it must be a real float "
                            "(as in jax.grad; take complex_norm_sq or the real part of a complex loss)")
    if seed in {**fwd.inputs(), **fwd.params()}:
        raise AutodiffError(f"grad: the forward already has a leaf named {seed!r} (pass seed= another name)")
    bwd = _copy_forward(fwd, name or f"{fwd.name}_grad")
    seed_v = bwd.input(seed, loss.shape, loss.dtype)
    active = active_set(fwd, wrt)
    ctx = VjpContext(bwd, {i: i for i in range(len(fwd.nodes))}, lambda i: active[i])
    pending: dict[int, list[Value]] = {loss_id: [seed_v]} if active[loss_id] else {}
    grads: dict[int, Value] = {}
    wrt_set = set(wrt)
    held: dict[int, Value] = {}  # cotangents of results 1.. of multi-result nodes, until their producer
    for node in reversed(fwd.nodes[: loss_id + 1]):
        parts = pending.pop(node.id, None)
        ct = None
        if parts:
            ct = parts[0]
            for p in parts[1:]:
                ct = bwd.add(ct, p)
            if node.id in wrt_set:
                grads[node.id] = ct
        if node.op == RESULT:
            if ct is not None:
                held[node.id] = ct
            continue
        arg: Any = ct
        if node.extra_types:  # one cotangent per result, None for the unused ones
            arg = (ct, *(held.pop(node.id + r, None) for r in range(1, node.num_results)))
            if all(c is None for c in arg):
                continue
        elif ct is None:
            continue
        if not any(active[i] for i in node.inputs):
            continue
        results = apply_rule("vjp", ctx, fwd, node, arg)
        if results is NO_RULE:
            continue
        results = list(results)
        if len(results) != len(node.inputs):
            raise AutodiffError(f"vjp rule of {node.op!r} returned {len(results)} gradients for {len(node.inputs)} operands")
        for i, (src, gr) in enumerate(zip(node.inputs, results)):
            if gr is None or not active[src]:
                continue
            target = fwd.nodes[src]
            if tuple(gr.shape) != tuple(target.shape):
                raise AutodiffError(
                    f"vjp rule of {node.op!r} (node {label(fwd, node.id)}) gave operand {i} a gradient of shape "
                    f"{shape_str(gr.shape)}, expected {shape_str(target.shape)}"
                )
            pending.setdefault(src, []).append(cast(bwd, gr, target.dtype))
    missing = [i for i in wrt if i not in grads]
    if missing:
        names = ", ".join(label(fwd, i) for i in missing)
        raise AutodiffError(f"grad: {names} get(s) no gradient: the loss does not depend on them through differentiable ops")
    outs = ([bwd.value(loss_id)] if with_loss else []) + [grads[i] for i in wrt]
    bwd.set_outputs(outs)
    result = dce(bwd).graph
    result.name = bwd.name
    verify(result)
    return result


def grad_with_loss(g: Any, wrt: Iterable[Any] | Any, *, name: str | None = None, seed: str = SEED) -> Graph:
    """Backward graph of a one-output forward: outputs ``[loss, dL/dwrt...]``, seed input ``d_output``.

    ``g``: a MIR Graph, or an HIR module (lowered with ``FusionPolicy.for_autodiff()``);
    LIR raises :class:`rlx.AutodiffError`. ``wrt``: input / param names, Values or node ids
    of ``g`` (resolved through the prepare passes' id maps, so they never drift). ``seed``
    renames the seed input (for a grad of a graph that already has a ``d_output``).
    """
    fwd, ids, _ = _checked(g, wrt, "grad_with_loss")
    return build_backward(fwd, ids, with_loss=True, name=name, seed=seed)


def grad(g: Any, wrt: Iterable[Any] | Any, *, name: str | None = None, seed: str = SEED) -> Graph:
    """Like :func:`grad_with_loss` without the loss output: outputs ``[dL/dwrt...]``."""
    fwd, ids, _ = _checked(g, wrt, "grad")
    return build_backward(fwd, ids, with_loss=False, name=name, seed=seed)


def _checked(g: Any, wrt: Any, what: str) -> tuple[Graph, list[int], list[str | None]]:
    from rlx.autodiff.prepare import as_mir

    mir = as_mir(g, what)
    if len(mir.output_ids) != 1:
        raise AutodiffError(f"{what}: the forward graph {mir.name!r} must have exactly one output (the loss), it has {len(mir.output_ids)}")
    return resolve_wrt(g, wrt, what, mir)
