"""ONNX If / Loop / Scan converters.

How If / Loop / Scan are imported (decided per node; bodies become rlx subgraphs through
rlx.frontends.onnx.control_flow.convert_body, outer runtime values passed as captures):

* If: a condition known at import time inlines the taken branch (what folding the if_ would
  give); a runtime condition becomes one structured ``if_`` per output, so an untaken branch
  that would fail (out-of-range index, ...) never runs. Branches giving different types
  cannot be an ``if_``: NeedsStatic (bind the condition with static_inputs=).
* Loop: a static trip count with conditions known at every iteration is unrolled (exact,
  folds, and supports scan outputs); a runtime trip count or a data-dependent condition
  becomes ``while_`` (one node per state; a static trip count -> max_iterations, a runtime
  one carried and tested in cond). Scan outputs or states whose type changes across
  iterations have no ``while_`` form: unrolled when possible, else unsupported.
* Scan: one state, inputs on axis 0 and scan outputs that are the new state itself (a prefix
  scan) become ``scan`` (final state) / ``scan(save_trajectory)`` (stacked states); every
  scan input reversed and every scan output prepended is ``scan(reverse=True)`` (row t stays
  the state after the step reading x[t]). Everything else (several states, other per-step
  outputs, mixed directions, other axes) is unrolled over the static sequence length.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlx.frontends.onnx.import_context import Importer, NeedsShapes, NeedsStatic, _onnx, _rename_outer, converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _first, _reshape
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxError,
    OnnxUnsupported,
)
from rlx.ir.shape import Shape, TensorType


def _inline_graph(cx: Importer, body, bindings: Mapping[str, Value], deps: frozenset[str]) -> list[Value]:
    """Convert a subgraph inline: its inputs bound to ``bindings``, its local names scoped, outer names shared."""
    onnx = _onnx()
    prefix = f"__sub{next(cx._uid)}_"
    local = {vi.name for vi in body.input} | {t.name for t in body.initializer} | {o for n in body.node for o in n.output if o}
    for vi in body.input:
        cx.env[prefix + vi.name] = bindings[vi.name]
        cx.deps[prefix + vi.name] = deps
    for t in body.initializer:
        cx.env[prefix + t.name] = cx.const(cx.tensor(t))
        cx.deps[prefix + t.name] = frozenset()
    for inner in body.node:
        new = onnx.NodeProto()
        new.CopyFrom(inner)
        for a in new.attribute:
            if a.type == onnx.AttributeProto.GRAPHS:
                raise OnnxUnsupported(f"{inner.op_type} with a list of subgraphs")
            if a.type == onnx.AttributeProto.GRAPH:
                _rename_outer(a.g, lambda nm: prefix + nm if nm in local else nm)
        new.input[:] = [prefix + n if n in local else n for n in inner.input]
        new.output[:] = [prefix + n if n else "" for n in inner.output]
        cx.convert_node(new, cx.opsets)
    return [cx.value(prefix + o.name if o.name in local else o.name) for o in body.output]


@converter("Scan")
def _scan(cx, node, ins, attrs):
    if cx.opset < 9:
        raise OnnxUnsupported("Scan-8 (batch axis and sequence_lens) is not supported; use opset >= 9")
    body = attrs["body"]
    m = attrs["num_scan_inputs"]
    n = len(ins) - m
    states, xs = list(ins[:n]), ins[n:]
    k = len(body.output) - n
    in_axes = [_axis(a, len(x.shape)) for a, x in zip(attrs.get("scan_input_axes", [0] * m), xs)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * m))
    out_dirs = list(attrs.get("scan_output_directions", [0] * k))
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    symbolic = any(not isinstance(d, int) for d in lengths)
    if len(lengths) != 1:
        error = NeedsShapes if symbolic else OnnxUnsupported
        raise error(f"Scan needs one sequence length, got {sorted(map(str, lengths))}")
    steps = next(iter(lengths))
    reverse = _scan_fits(body, n, m, k, in_axes, in_dirs, out_dirs, attrs.get("scan_output_axes", [0] * k), steps)
    if reverse is not None:
        try:
            return _scan_structured(cx, node, body, states[0], xs, k, reverse)
        except (OnnxError, RlxError) as exc:  # e.g. a state whose type changes across steps: unroll
            if symbolic:
                raise NeedsShapes(f"a Scan of symbolic length {steps} is not one rlx scan ({exc})") from exc
    if symbolic:  # only the one-state prefix form is an rlx scan of any length; the rest unrolls per length
        raise NeedsShapes(f"a Scan of symbolic length {steps} with {n} state(s) and {k} scan output(s) unrolls")
    deps = frozenset().union(*(cx.deps.get(nm, frozenset()) for nm in node.input if nm))
    cx.unroll(steps * _body_cost(body), f"a Scan of {steps} steps")
    per_step: list[list[Value]] = []
    for t in range(steps):
        bind = {}
        for i, vi in enumerate(body.input):
            if i < n:
                bind[vi.name] = states[i]
            else:
                j = i - n
                pos = steps - 1 - t if in_dirs[j] else t
                sl = cx.g.narrow(xs[j], axis=in_axes[j], start=pos, length=1)
                bind[vi.name] = _reshape(cx, sl, [d for a, d in enumerate(xs[j].shape) if a != in_axes[j]])
        outs = _inline_graph(cx, body, bind, deps)
        states = outs[:n]
        per_step.append(outs[n:])
    results = list(states)
    out_axes = attrs.get("scan_output_axes", [0] * k)
    for j in range(k):
        items = [step[j] for step in per_step]
        if out_dirs[j]:
            items = items[::-1]
        rank = len(items[0].shape) + 1
        axis = _axis(out_axes[j], rank)
        parts = []
        for v in items:
            shape = list(v.shape)
            shape.insert(axis, 1)
            parts.append(_reshape(cx, v, shape))
        results.append(cx.g.concat(parts, axis=axis) if len(parts) > 1 else parts[0])
    return results


def _scan_fits(body, n, m, k, in_axes, in_dirs, out_dirs, out_axes, steps) -> bool | None:
    """Whether an ONNX Scan maps onto one rlx ``scan``: its ``reverse`` flag, or None (unrolled).

    rlx ``scan`` carries one value and yields its final value or its stacked trajectory, so
    the Scan must have exactly one state, scan inputs along axis 0, and every scan output
    must be the new state itself (same body output name) stacked along axis 0 (a cumulative
    sum / prefix scan). Directions: all forward, or every scan input reversed and every scan
    output prepended, which is rlx's ``reverse`` (iteration i reads x[length-1-i] and writes
    row length-1-i: row t is the state after the step reading x[t], as in rlx). Several
    states, other per-step outputs, mixed directions or non-leading axes are unrolled.
    (Identity chains in the body are looked through.)"""
    if n != 1 or m < 1 or (isinstance(steps, int) and steps < 1):  # a symbolic length is >= 1
        return None
    dirs = {bool(d) for d in [*in_dirs, *out_dirs]}
    if any(in_axes) or any(out_axes) or len(dirs) != 1:
        return None
    ident = {nd.output[0]: nd.input[0] for nd in body.node if nd.op_type == "Identity" and nd.output and nd.input}

    def root(name: str) -> str:
        while name in ident:
            name = ident[name]
        return name

    if not all(root(body.output[n + j].name) == root(body.output[0].name) for j in range(k)):
        return None
    return dirs.pop()


def _scan_structured(cx, node, body, init: Value, xs: list[Value], k: int, reverse: bool) -> list[Value | None]:
    from rlx.frontends.onnx import control_flow as cf

    caps = cf.captures_of(cx, body)
    step_types = [TensorType(Shape(list(x.shape)[1:]), x.dtype) for x in xs]
    slots = [(("body", 0), init.type), *[(("cap", c), cx.env[c].type) for c in caps],
             *[(("body", 1 + j), t) for j, t in enumerate(step_types)]]

    def finish(child, vals, outs):
        cf.same_type(outs[0], init.type, "Scan state")
        return [outs[0]]

    sub = cf.convert_body(cx, body, f"{node.name or 'scan'}_body", slots, finish)
    ops = [init, *[cx.env[c] for c in caps], *xs]
    common = dict(body=sub, length=xs[0].shape[0], num_bcast=len(caps), num_xs=len(xs), reverse=reverse)
    results: list[Value | None] = [cx.g.scan(*ops, **common) if node.output[0] else None]
    traj = None
    for j in range(k):
        name = node.output[1 + j] if 1 + j < len(node.output) else ""
        if not name:
            results.append(None)
            continue
        if traj is None:
            traj = cx.g.scan(*ops, save_trajectory=True, **common)
        results.append(traj)
    return results


@converter("If")
def _if(cx, node, ins, attrs):
    """A condition known at import time inlines the taken branch (the folded ``if_``); a runtime
    condition gives one structured ``if_`` node per If output, its branches rlx subgraphs taking
    every outer runtime value either branch reads as captures (only the taken branch runs)."""
    known = cx.maybe_static(ins[0])
    if known is not None:
        branch = attrs["then_branch"] if bool(np.asarray(known).reshape(-1)[0]) else attrs["else_branch"]
        return _inline_graph(cx, branch, {}, cx.deps.get(node.input[0], frozenset()))
    try:
        return _if_structured(cx, node, ins, attrs)
    except NeedsShapes:
        raise
    except (OnnxError, RlxError) as exc:
        raise NeedsStatic(f"If condition {node.input[0]!r} (structured if_ failed: {exc})",
                          cx.deps.get(node.input[0], frozenset())) from exc


def _if_structured(cx, node, ins, attrs) -> list[Value]:
    from rlx.frontends.onnx import control_flow as cf

    then_b, else_b = attrs["then_branch"], attrs["else_branch"]
    caps = cf.captures_of(cx, then_b, else_b)
    slots = [(("cap", c), cx.env[c].type) for c in caps]
    pred = ins[0]
    if pred.dtype.is_complex:
        raise OnnxUnsupported("If with a complex condition")
    results: list[Value] = []
    for j, name in enumerate(node.output):
        if not name:
            results.append(None)
            continue

        def pick(child, vals, outs, j=j):
            return [outs[j]]

        tg = cf.convert_body(cx, then_b, f"{node.name or 'if'}_then{j}", slots, pick)
        eg = cf.convert_body(cx, else_b, f"{node.name or 'if'}_else{j}", slots, pick)
        results.append(cx.g.if_([pred, *[cx.env[c] for c in caps]], then_branch=tg, else_branch=eg))
    return results


@converter("Loop")
def _loop(cx, node, ins, attrs):
    """Unrolled when the trip count and every iteration's condition are known at import time;
    otherwise (a runtime trip count or a data-dependent condition) a structured ``while_`` (see
    :func:`_loop_structured`) when the Loop has no scan outputs and its states keep their types."""
    has_trip = bool(node.input[0])
    has_cond = len(node.input) > 1 and bool(node.input[1])
    trip_known = cx.maybe_static(ins[0]) if has_trip else None
    cond_known = cx.maybe_static(ins[1]) if has_cond else np.array(True)
    if (has_trip and trip_known is None) or cond_known is None:
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError) as exc:
            if not has_trip:
                raise OnnxUnsupported(f"Loop without a static trip count ({exc})") from exc
            if trip_known is None:
                cx.static(node.input[0], "Loop trip count")
            cx.static(node.input[1], "Loop condition")
            raise
    trip = int(_first(trip_known, "Loop trip count")) if has_trip else None
    if trip is not None and trip * _body_cost(attrs["body"]) > cx.budget.unroll:  # too long to unroll: keep it a loop
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError) as exc:
            cx.unroll(trip * _body_cost(attrs["body"]), f"a Loop of {trip} iterations (no while_ form: {exc})")
    try:
        return _loop_unrolled(cx, node, ins, attrs)
    except OnnxUnsupported as exc:
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError):
            raise exc from None


def _body_cost(body) -> int:
    """Unroll budget one iteration of a subgraph spends: its node count (at least 1)."""
    return max(len(body.node), 1)


def _loop_structured(cx, node, ins, attrs) -> list[Value | None]:
    """Loop as ``while_``: carried = [iteration (i64 scalar), cond (bool scalar), *states, (trip count), *captures].

    A static trip count becomes ``max_iterations``; a runtime one is carried and checked in
    ``cond``. One ``while_`` node per state output (they share operands and subgraphs). Loops
    with scan outputs (per-iteration values stacked) have no ``while_`` form and are rejected
    here (the caller unrolls them when it can)."""
    from rlx.frontends.onnx import control_flow as cf

    body = attrs["body"]
    n = len(ins) - 2
    k = len(body.output) - 1 - n
    if k:
        raise OnnxUnsupported("Loop with scan outputs and a runtime condition / trip count")
    if len(body.input) != 2 + n:
        raise OnnxUnsupported(f"Loop body takes {len(body.input)} inputs for {n} state(s)")
    g = cx.g
    trip_v = ins[0]
    trip_known = cx.maybe_static(trip_v) if trip_v is not None else None
    max_iter = int(np.asarray(trip_known).reshape(-1)[0]) if trip_known is not None else None
    i64 = DType.of("i64")
    scalar_i64 = TensorType(Shape([]), i64)
    scalar_b = TensorType(Shape([]), DType.of("bool"))
    cond0 = ins[1] if len(ins) > 1 and ins[1] is not None else cx.const(np.array(True))
    cond0 = _reshape(cx, cond0 if cond0.dtype.is_bool else g.cast(g.ne(cond0, cx.scalar(0, cond0)), to="bool"), [])
    states = list(ins[2:])
    dyn_trip = trip_v is not None and trip_known is None
    extra = [_reshape(cx, _cast(cx, trip_v, i64), [])] if dyn_trip else []
    caps = cf.captures_of(cx, body)
    carried = [cx.const(np.array(0, np.int64)), cond0, *states, *extra, *[cx.env[c] for c in caps]]
    slots = [(("body", 0), scalar_i64), (("body", 1), scalar_b), *[(("body", 2 + j), s.type) for j, s in enumerate(states)],
             *[(("extra", "trip"), scalar_i64) for _ in extra], *[(("cap", c), cx.env[c].type) for c in caps]]

    def finish(child, vals, outs):
        h = child.g
        c = outs[0]
        if not c.dtype.is_bool:
            c = h.ne(c, child.scalar(0, c))
        c = h.reshape(c, new_shape=[]) if len(c.shape) else c
        new = []
        for j, (o, s) in enumerate(zip(outs[1:1 + n], states)):
            if o.dtype != s.dtype:
                o = h.cast(o, to=s.dtype)
            cf.same_type(o, s.type, f"Loop state {j}")
            new.append(o)
        nxt = h.add(vals[("body", 0)], child.const(np.array(1, np.int64)))
        return [nxt, c, *new, *[vals[slot] for slot, _ in slots[2 + n:]]]

    sub = cf.convert_body(cx, body, f"{node.name or 'loop'}_body", slots, finish)

    def cond_fn(h, vals):
        c = vals[1]
        if dyn_trip:
            c = h.binary(c, h.compare(vals[0], vals[2 + n], op="lt"), op="mul")
        return [c]

    from rlx.ops.control_flow import make_graph

    cond = make_graph(f"{node.name or 'loop'}_cond", [(f"a{j}", t) for j, (_, t) in enumerate(slots)], cond_fn)
    out: list[Value | None] = []
    for j in range(n):
        name = node.output[j] if j < len(node.output) else ""
        out.append(g.while_(carried, cond=cond, body=sub, max_iterations=max_iter, output=2 + j) if name else None)
    return out


def _loop_unrolled(cx, node, ins, attrs):
    body = attrs["body"]
    trip = int(np.asarray(cx.static(node.input[0], "Loop trip count")).reshape(-1)[0]) if node.input[0] else None
    cond = bool(np.asarray(cx.static(node.input[1], "Loop condition")).reshape(-1)[0]) if len(node.input) > 1 and node.input[1] else True
    if trip is None:
        raise OnnxUnsupported("Loop without a static trip count")
    states = list(ins[2:])
    n = len(states)
    k = len(body.output) - 1 - n
    deps = frozenset().union(*(cx.deps.get(nm, frozenset()) for nm in node.input if nm))
    scans: list[list[Value]] = [[] for _ in range(k)]
    i = 0
    while i < trip and cond:
        cx.unroll(_body_cost(body), "a Loop iteration")
        bind = {body.input[0].name: cx.const(np.array(i, np.int64))}
        if len(body.input) > 1:
            bind[body.input[1].name] = cx.const(np.array(cond))
        for j, vi in enumerate(body.input[2:]):
            bind[vi.name] = states[j]
        outs = _inline_graph(cx, body, bind, deps)
        c = cx.maybe_static(outs[0])
        if c is None:
            raise OnnxUnsupported("Loop whose condition is computed at run time")
        cond = bool(np.asarray(c).reshape(-1)[0])
        states = outs[1:1 + n]
        for j in range(k):
            scans[j].append(outs[1 + n + j])
        i += 1
    results = list(states)
    for items in scans:
        if not items:
            raise OnnxUnsupported("Loop with zero iterations and scan outputs (empty tensor of unknown shape)")
        parts = [_reshape(cx, v, [1, *v.shape]) for v in items]
        results.append(cx.g.concat(parts, axis=0) if len(parts) > 1 else parts[0])
    return results
