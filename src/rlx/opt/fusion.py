"""Pattern fusion passes (docs/pipeline.md#fusion-patterns), with uniform single-use checks.

Every pattern counts graph outputs as uses (:func:`use_counts`), so a value that is
also an output or has a second consumer is never swallowed into a fused node. Each
candidate is type-checked against the fused op's own rule before the rebuild, so a
pass never produces a graph the verifier rejects. Replacements are emitted at the
position of the pattern's last node (all its outside operands are defined by then);
the shared-input matmul is emitted at the first matmul of its group (weights declared
later are leaves there, and are hoisted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import RESULT, Graph, Node, infer_type
from rlx.ir.opdef import get_op, has_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops import patterns as chains
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder, uses_and_consumer


@dataclass
class Match:
    """One rewrite: at ``anchor`` run ``build(rb)`` which returns old id -> new id for every
    value of ``consumed`` that is still used; the other consumed nodes disappear."""

    anchor: int
    consumed: frozenset[int]
    build: Callable[[Rebuilder], Mapping[int, int]]
    pattern: str = ""
    extra_anchor_ids: Sequence[int] = field(default_factory=tuple)


def infers(op: str, in_types: Sequence[TensorType], attrs: Mapping[str, Any],
           expect: TensorType | tuple[TensorType, ...] | None = None) -> TensorType | tuple[TensorType, ...] | None:
    """The type ``op`` gives for these operands/attrs (None if the rule rejects them or
    the result differs from ``expect``)."""
    if not has_op(op):
        return None
    opdef = get_op(op)
    try:
        checked = opdef.check_attrs(attrs, op)
        if opdef.canonicalize is not None:
            checked = opdef.check_attrs(opdef.canonicalize(list(in_types), checked), op)
        t = infer_type(opdef, list(in_types), checked, op)
    except RlxError:
        return None
    if expect is not None and t != expect:
        return None
    return t


def infers_one(op: str, in_types: Sequence[TensorType], attrs: Mapping[str, Any],
               expect: TensorType | None = None) -> TensorType | None:
    """:func:`infers` for a single-result op (what the patterns build); None for anything else."""
    t = infers(op, in_types, attrs, expect)
    return t if isinstance(t, TensorType) else None


def apply_matches(g: Graph, matches: Sequence[Match], pass_name: str) -> PassResult:
    """Rebuild ``g`` applying non-overlapping matches (earlier ones win)."""
    if not matches:
        return PassResult(g, None, {"fused": 0})
    at: dict[int, Match] = {}
    skip: set[int] = set()
    for mt in matches:
        skip |= mt.consumed
        at[mt.anchor] = mt
    rb = Rebuilder(g, pass_name)
    for node in g.nodes:
        here = at.get(node.id)
        if here is not None:
            for old, new in here.build(rb).items():
                rb.alias(old, new)
            continue
        if node.id in skip or node.id in rb.map:  # consumed, or a leaf hoisted by a build
            continue
        rb.copy(node, trusted=True)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"fused": len(matches)})


class _Ctx:
    def __init__(self, g: Graph):
        self.g = g
        self.nodes = g.nodes
        self.uses, self.last = uses_and_consumer(g)
        self.outputs = set(g.output_ids)
        self.claimed: set[int] = set()

    def single_consumer(self, i: int) -> Node | None:
        """The only consumer of node ``i`` when it has exactly one use and is not an output."""
        if self.uses[i] != 1 or i in self.outputs:
            return None
        return self.nodes[self.last[i]]

    def single_use(self, i: int) -> bool:
        return self.uses[i] == 1 and i not in self.outputs

    def free(self, ids: Sequence[int]) -> bool:
        return not any(i in self.claimed for i in ids)

    def claim(self, ids: Sequence[int]) -> frozenset[int]:
        s = frozenset(ids)
        self.claimed |= s
        return s


def _is(node: Node, op: str, kind: str | None = None) -> bool:
    if node.op != op:
        return False
    if kind is None:
        return True
    return node.attrs.get("op", node.attrs.get("kind")) == kind


def _last_axis(node: Node, rank: int) -> bool:
    axis = node.attrs.get("axis", -1)
    return rank > 0 and axis % rank == rank - 1


# ------------------------------------------------------------------------- patterns
@dataclass(frozen=True)
class Site:
    """One place a pattern could apply: ``node`` (where a report points) and either the rewrite
    (``match``) or the ``reason`` it does not apply. ``note`` describes an applicable site left in
    a graph (a pass that did not run); ``hint`` says how a user can make it apply."""

    node: Node
    match: Match | None = None
    reason: str | None = None
    note: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Pattern:
    """A fusion pattern, the one object that both matches and explains.

    ``sites(g)`` finds every place the pattern could apply, each with its rewrite or the reason it
    does not; the pass (:attr:`as_pass`) applies the rewrites, and the fusion report
    (:mod:`rlx.opt.report`) lists the sites still present in an optimised graph with their reasons.
    ``name`` is the report's pattern name (two patterns may share one: the SwiGLU forms);
    ``produces`` the ops the rewrite emits (a backend's claims gate the pass); ``reported``: False
    for a rewrite that is no missed opportunity when absent (reshaping before an rms_norm).
    """

    name: str
    pass_name: str
    sites: Callable[[Graph], list[Site]]
    produces: frozenset[str]
    reported: bool = True

    def find(self, g: Graph) -> list[Match]:
        return [s.match for s in self.sites(g) if s.match is not None]

    def run(self, g: Graph) -> PassResult:
        return apply_matches(g, self.find(g), self.pass_name)

    @property
    def as_pass(self) -> Pass:
        return Pass(self.pass_name, self.run, self.produces)


def _single_use_reason(cx: _Ctx, i: int, what: str) -> str | None:
    """Why node ``i`` cannot be swallowed into a fused node (it escapes), or None."""
    if i in cx.outputs:
        return f"{what} is also a graph output"
    if cx.uses[i] > 1:
        return f"{what} has {cx.uses[i]} uses"
    return None


def _first_reason(cx: _Ctx, parts: Sequence[tuple[int, str]]) -> str | None:
    return next((r for i, what in parts if (r := _single_use_reason(cx, i, what))), None)


def _claim_site(cx: _Ctx, node: Node, ids: Sequence[int], anchor: int, build: Callable[[Rebuilder], Mapping[int, int]],
                pattern: str, *, note: str = "", hint: str = "") -> Site:
    """The site's rewrite (``build`` at ``anchor``) when none of ``ids`` belongs to an earlier rewrite of this pass."""
    if not cx.free(ids):
        return Site(node, reason="overlaps another fusion of the same pattern", note=note, hint=hint)
    return Site(node, match=Match(anchor, cx.claim(ids), build, pattern), note=note, hint=hint)


# --------------------------------------------------------------- matmul + bias + act
def _act_kinds() -> frozenset[str]:
    if not has_op(chains.MATMUL_BIAS_ACT.fused):
        return frozenset()
    spec = get_op(chains.MATMUL_BIAS_ACT.fused).attrs.get("activation")
    if spec is not None and spec.choices is not None:
        return frozenset(c for c in spec.choices if c is not None)
    act = get_op(chains.MATMUL_BIAS_ACT.act).attrs["kind"].choices or ()
    return frozenset(act)


def matmul_bias_act_sites(g: Graph) -> list[Site]:
    """MatMul → Add(bias of rank ≤ 1) [→ Activation]: the matmul must have the add as its only use."""
    cx = _Ctx(g)
    nodes = cx.nodes
    kinds = _act_kinds()
    users = g.users()
    out: list[Site] = []
    for mm in nodes:
        if mm.op != chains.MATMUL_BIAS_ACT.anchor:
            continue
        for add in (nodes[u] for u in dict.fromkeys(users[mm.id])):
            if not _is(add, chains.MATMUL_BIAS_ACT.step, "add") or add.inputs[0] == add.inputs[1]:
                continue
            bias = nodes[add.inputs[1] if add.inputs[0] == mm.id else add.inputs[0]]
            if len(bias.shape) > 1:
                continue  # a residual add, not a bias
            x, w = (nodes[i] for i in mm.inputs)
            hint = "give the matmul a single consumer"
            reason = _single_use_reason(cx, mm.id, "the matmul")
            tail, act = add, None
            nxt = cx.single_consumer(add.id)
            if reason is None and nxt is not None and _is(nxt, chains.MATMUL_BIAS_ACT.act) and nxt.attrs["kind"] in kinds:
                if infers(chains.MATMUL_BIAS_ACT.fused, [x.type, w.type, bias.type], {"activation": nxt.attrs["kind"]}, nxt.type):
                    tail, act = nxt, nxt.attrs["kind"]
            if reason is None and act is None and not infers(
                    chains.MATMUL_BIAS_ACT.fused, [x.type, w.type, bias.type], {"activation": None}, add.type):
                reason = f"bias {bias.type} does not fit the fused op for output {add.type}"
            if reason is not None:
                out.append(Site(mm, reason=reason, hint=hint))
                continue

            def build(rb: Rebuilder, x=x, w=w, bias=bias, act=act, tail=tail, parts=(mm, add, tail)) -> dict[int, int]:
                new = rb.emit(chains.MATMUL_BIAS_ACT.fused, [rb.map[x.id], rb.map[w.id], rb.map[bias.id]], {"activation": act},
                              like=parts, name=tail.name, type=tail.type)
                return {tail.id: new}

            ids = [mm.id, add.id] + ([tail.id] if act else [])
            out.append(_claim_site(cx, mm, ids, tail.id, build, "matmul_bias_act", hint=hint))
    return out


# --------------------------------------------------------------- conv + bias + act
def _keeps_channels(r: Node, conv: Node) -> bool:
    """A reshape that keeps the conv's leading [N, C] (1-D convs run as conv2d over [N, C, 1, L])."""
    return r.op == chains.CONV_BIAS_ACT.view and len(r.shape) >= 2 and tuple(r.shape[:2]) == tuple(conv.shape[:2])


def _channel_bias(cx: _Ctx, add: Node, cur: Node, channels: int) -> Node | None:
    """The other operand of ``add`` when it is a per-channel bias of ``cur`` ([C, 1, …] or [1, C, 1, …],
    broadcast over everything but axis 1) and the add keeps ``cur``'s type."""
    if not _is(add, chains.CONV_BIAS_ACT.step, "add") or add.inputs[0] == add.inputs[1] or add.type != cur.type:
        return None
    bias = cx.nodes[add.inputs[1] if add.inputs[0] == cur.id else add.inputs[0]]
    rank, shape = len(cur.shape), tuple(bias.shape)
    if not rank - 1 <= len(shape) <= rank:
        return None
    padded = (1,) * (rank - len(shape)) + shape
    return bias if padded == (1, channels, *([1] * (rank - 2))) else None


def _conv_act_kinds() -> frozenset[str]:
    spec = get_op(chains.CONV_BIAS_ACT.fused).attrs["activation"] if has_op(chains.CONV_BIAS_ACT.fused) else None
    return frozenset(c for c in (spec.choices or ()) if c is not None) if spec is not None else frozenset()


def _conv_chain(cx: _Ctx, conv: Node, kinds: frozenset[str]) -> tuple[list[Node], Node | None, Node | None, Node | None]:
    """conv [→ reshape keeping N, C] [→ add(per-channel bias)] [→ reshape] [→ activation], every node but the
    last with one use: (parts, view, bias, act); at most one reshape, and only inside the chain."""
    parts, view, add, bias, act = [conv], None, None, None, None
    cur, channels = conv, conv.shape[1]
    while (nxt := cx.single_consumer(cur.id)) is not None:
        if view is None and _keeps_channels(nxt, conv):
            view = nxt
        elif add is None and (b := _channel_bias(cx, nxt, cur, channels)) is not None:
            add, bias = nxt, b
        elif _is(nxt, chains.CONV_BIAS_ACT.act) and nxt.attrs["kind"] in kinds and nxt.type == cur.type:
            act = nxt
        else:
            break
        parts.append(nxt)
        cur = nxt
        if act is not None:
            break
    if parts[-1] is view:  # a trailing reshape is not part of the fusion
        parts.pop()
        view = None
    return parts, view, bias, act


def _conv_missed(cx: _Ctx, conv: Node, users: list[int], kinds: frozenset[str]) -> str | None:
    """Why a conv with a fusable consumer (a per-channel bias add or an activation) stays unfused."""
    for u in users:
        n = cx.nodes[u]
        if (_is(n, chains.CONV_BIAS_ACT.act) and n.attrs["kind"] in kinds) or _channel_bias(cx, n, conv, conv.shape[1]) is not None:
            return _single_use_reason(cx, conv.id, "the conv")
    return None


def conv_bias_act_sites(g: Graph) -> list[Site]:
    """Conv2d [→ Add(per-channel bias)] [→ Activation], with one reshape keeping [N, C] allowed in between
    (1-D convs): every intermediate must have the next node as its only use."""
    cx = _Ctx(g)
    nodes = cx.nodes
    kinds = _conv_act_kinds()
    users: list[list[int]] | None = None
    out: list[Site] = []
    for conv in nodes:
        if conv.op != chains.CONV_BIAS_ACT.anchor:
            continue
        parts, view, bias, act = _conv_chain(cx, conv, kinds)
        if len(parts) == 1:
            users = g.users() if users is None else users
            reason = _conv_missed(cx, conv, users[conv.id], kinds)
            if reason is not None:
                out.append(Site(conv, reason=reason, hint="give the conv a single consumer"))
            continue
        x, w = (nodes[i] for i in conv.inputs)
        channels = conv.shape[1]
        attrs = {**{k: conv.attrs[k] for k in ("kernel_size", "stride", "padding", "dilation", "groups")},
                 "has_bias": bias is not None, "activation": None if act is None else act.attrs["kind"]}
        in_types = [x.type, w.type] + ([TensorType(Shape((channels,)), bias.dtype)] if bias is not None else [])
        if not infers(chains.CONV_BIAS_ACT.fused, in_types, attrs, conv.type):
            out.append(Site(conv, reason="the bias does not fit the fused op (dtype)"))
            continue
        tail = parts[-1]

        def build(rb: Rebuilder, x=x, w=w, bias=bias, view=view, attrs=attrs, parts=parts, tail=tail, conv=conv, cx=cx) -> dict[int, int]:
            ins = [rb.map[x.id], rb.map[w.id]]
            if bias is not None:
                src = cx.nodes[bias.inputs[0]] if bias.op == chains.CONV_BIAS_ACT.view else bias  # [C] reshaped to [C, 1, 1]: read the [C]
                src = src if len(src.shape) == 1 and src.id in rb.map else bias
                b = rb.map[src.id]
                ins.append(b if len(src.shape) == 1 else rb.emit("reshape", [b], {"new_shape": [conv.shape[1]]}, like=parts))
            new = rb.emit(chains.CONV_BIAS_ACT.fused, ins, attrs, like=parts, name=None if view else tail.name, type=conv.type)
            if view is not None:
                new = rb.emit("reshape", [new], dict(view.attrs), like=(view,), name=tail.name, type=tail.type)
            return {tail.id: new}

        out.append(_claim_site(cx, conv, [p.id for p in parts], tail.id, build, "conv_bias_act"))
    return out


# ------------------------------------------------------------- residual + norm
def _residual_norm_sites(g: Graph, row: chains.Fusion) -> list[Site]:
    """Add → norm over the last axis. An add with other uses (the residual stream of a pre-norm
    transformer) fuses into the two-result form (sum, normed), emitted at the norm, or at the add
    when the add is read before the norm (gamma and beta must then exist before the add)."""
    norm, fused = row.anchor, row.fused
    cx = _Ctx(g)
    nodes = cx.nodes
    users: list[list[int]] | None = None
    out: list[Site] = []
    for n in nodes:
        if n.op != norm:
            continue
        add = nodes[n.inputs[0]]
        if not _is(add, row.step, "add"):
            continue
        if not _last_axis(n, len(n.shape)):
            out.append(Site(n, reason="the norm is not over the last axis"))
            continue
        x, res = (nodes[i] for i in add.inputs)
        gamma, beta = nodes[n.inputs[1]], nodes[n.inputs[2]]
        with_sum, anchor = not cx.single_use(add.id), n.id
        late = ("the residual add has other uses and gamma / beta are defined after it (declare them first)"
                if with_sum and max(gamma.id, beta.id) > add.id else "")  # (an earlier form may have read the add first)
        if with_sum:
            users = g.users() if users is None else users
            if any(u < n.id for u in users[add.id]):  # read before the norm: build the fused node at the add
                if late:
                    out.append(Site(n, reason=late))
                    continue
                anchor = add.id
        attrs = {"has_bias": False, "eps": n.attrs["eps"], "with_sum": with_sum}
        if x.shape != add.shape or not infers(
                fused, [x.type, res.type, gamma.type, beta.type], attrs, (add.type, n.type) if with_sum else n.type):
            out.append(Site(n, reason="the add's operands do not fit the fused op (broadcast or dtype)"))
            continue

        def build(rb: Rebuilder, x=x, res=res, gamma=gamma, beta=beta, n=n, add=add, attrs=attrs) -> dict[int, int]:
            ins = [rb.map[i.id] for i in (x, res, gamma, beta)]
            if not attrs["with_sum"]:
                return {n.id: rb.emit(fused, ins, attrs, like=(add, n), name=n.name, type=n.type)}
            total = rb.emit(fused, ins, attrs, like=(add, n), name=add.name, type=(add.type, n.type))
            return {add.id: total, n.id: rb.dst.append(RESULT, [total], {"index": 1}, name=n.name).id}

        out.append(_claim_site(cx, n, [add.id, n.id], anchor, build, fused, note=late))
    return out


def residual_layer_norm_sites(g: Graph) -> list[Site]:
    return _residual_norm_sites(g, chains.RESIDUAL_LAYER_NORM)


def residual_rms_norm_sites(g: Graph) -> list[Site]:
    return _residual_norm_sites(g, chains.RESIDUAL_RMS_NORM)


# ------------------------------------------------------------- rms_norm → reshape
def rms_norm_reshape_sites(g: Graph) -> list[Site]:
    """RmsNorm (last axis, one use) → Reshape to [∏leading, H]: reshape first, normalise 2-D.

    rlx's rms_norm has no "declared flat output" form (upstream's fusion artefact), so the
    rewrite moves the reshape (a view for the planner) in front of the norm, which then
    runs as one 2-D kernel with the same values.
    """
    cx = _Ctx(g)
    nodes = cx.nodes
    out: list[Site] = []
    for n in nodes:
        if n.op != chains.RMS_NORM_RESHAPE.anchor or len(n.shape) < 3 or not _last_axis(n, len(n.shape)):
            continue
        r = cx.single_consumer(n.id)
        if r is None or r.op != chains.RMS_NORM_RESHAPE.view or len(r.shape) != 2 or r.shape[-1] != n.shape[-1]:
            continue
        x, gamma, beta = (nodes[i] for i in n.inputs)
        flat = infers_one("reshape", [x.type], {"new_shape": list(r.attrs["new_shape"])})
        if flat is None or flat.shape != r.shape:
            continue
        attrs = {"axis": -1, "eps": n.attrs["eps"]}
        if not infers("rms_norm", [flat, gamma.type, beta.type], attrs, r.type):
            continue

        def build(rb: Rebuilder, x=x, gamma=gamma, beta=beta, n=n, r=r, attrs=attrs) -> dict[int, int]:
            flat_id = rb.emit("reshape", [rb.map[x.id]], {"new_shape": list(r.attrs["new_shape"])}, like=(r,))
            new = rb.emit("rms_norm", [flat_id, rb.map[gamma.id], rb.map[beta.id]], attrs, like=(n, r), name=r.name or n.name, type=r.type)
            return {r.id: new}

        out.append(_claim_site(cx, n, [n.id, r.id], r.id, build, "rms_norm_reshape"))
    return out


# ---------------------------------------------------------- SwiGLU dual matmul
def _static2(t: TensorType) -> bool:
    return len(t.shape) == 2 and t.shape.is_static


def _swiglu_candidates(cx: _Ctx, mul: Node, row: chains.Fusion) -> list[tuple[Node, Node, Node]]:
    """(up, silu, gate) triples for ``mul`` = up * silu(gate) (either operand order), where up and
    gate are distinct ``row.anchor`` nodes; none unless ``mul`` multiplies two distinct operands."""
    part_op = row.anchor
    if not _is(mul, row.step, "mul") or mul.inputs[0] == mul.inputs[1]:
        return []
    nodes = cx.nodes
    found = []
    a, b = mul.inputs
    for u_id, s_id in ((a, b), (b, a)):
        s, up = nodes[s_id], nodes[u_id]
        if not _is(s, row.act, "silu") or up.op != part_op:
            continue
        gate = nodes[s.inputs[0]]
        if gate.op == part_op and gate.id != up.id:
            found.append((up, s, gate))
    return found


_SwiGLUCheck = Callable[[_Ctx, Node, Node, Node, Node, str | None], tuple[str | None, Any]]


def _swiglu_sites(g: Graph, row: Any, part: str, pattern: str, check: _SwiGLUCheck) -> list[Site]:
    """The sites of one SwiGLU form: for each (up, silu, gate) candidate, ``check(cx, mul, up, silu, gate, reason)``
    (``reason``: the first part that is not single-use, or None) gives why not, or None and the rewrite's build."""
    cx = _Ctx(g)
    out: list[Site] = []
    for mul in cx.nodes:
        for up, s, gate in _swiglu_candidates(cx, mul, row):
            reason = _first_reason(cx, ((up.id, f"the up {part}"), (gate.id, f"the gate {part}"), (s.id, "the silu")))
            reason, build = check(cx, mul, up, s, gate, reason)
            if reason is not None:
                out.append(Site(mul, reason=reason))
            else:
                out.append(_claim_site(cx, mul, [up.id, s.id, gate.id, mul.id], mul.id, build, pattern))
    return out


def _dual_matmul_check(cx: _Ctx, mul: Node, up: Node, s: Node, gate: Node, reason: str | None) -> tuple[str | None, Any]:
    if up.inputs[0] != gate.inputs[0]:
        return "up and gate matmuls read different inputs", None
    nodes = cx.nodes
    x, w_up, w_gate = nodes[up.inputs[0]], nodes[up.inputs[1]], nodes[gate.inputs[1]]
    mm_t = None
    same_weights = _static2(w_up.type) and _static2(w_gate.type) and (w_up.shape, w_up.dtype) == (w_gate.shape, w_gate.dtype)
    if reason is None and same_weights:
        cat_t = infers_one("concat", [w_up.type, w_gate.type], {"axis": 1})
        mm_t = cat_t and infers_one("matmul", [x.type, cat_t], {})
    if reason is None and not (mm_t and infers(chains.SWIGLU_DUAL_MATMUL.fused, [mm_t], {"gate_first": False}, mul.type)):
        reason = "up and gate weights differ in shape or dtype"

    def build(rb: Rebuilder, parts=(up, s, gate, mul)) -> dict[int, int]:
        cat = rb.emit("concat", [rb.map[w_up.id], rb.map[w_gate.id]], {"axis": 1}, like=parts[::2])
        mm = rb.emit("matmul", [rb.map[x.id], cat], {}, like=parts[::2])
        fused = rb.emit(chains.SWIGLU_DUAL_MATMUL.fused, [mm], {"gate_first": False}, like=parts, name=mul.name, type=mul.type)
        return {mul.id: fused}

    return reason, build


def swiglu_dual_matmul_sites(g: Graph) -> list[Site]:
    """Mul(x@W_up, silu(x@W_gate)) with single-use parts (rank-2 static weights of one shape and dtype)."""
    return _swiglu_sites(g, chains.SWIGLU_DUAL_MATMUL, "matmul", "swiglu_dual_matmul", _dual_matmul_check)


# ------------------------------------------------------------ shared-input matmul
def shared_matmul_groups(g: Graph) -> dict[int, list[Node]]:
    """MatMuls with a rank-2 static weight, grouped by lhs id (node order)."""
    groups: dict[int, list[Node]] = {}
    nodes = g.nodes
    for mm in nodes:
        if mm.op == chains.SHARED_INPUT_MATMUL.anchor and _static2(nodes[mm.inputs[1]].type) and len(nodes[mm.inputs[0]].shape) >= 2:
            groups.setdefault(mm.inputs[0], []).append(mm)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def _shared_members(g: Graph, group: list[Node]) -> list[Node]:
    nodes = g.nodes
    first = group[0]
    w0 = nodes[first.inputs[1]]
    return [
        mm for mm in group
        if (mm.inputs[1] < first.id or not nodes[mm.inputs[1]].inputs)
        and nodes[mm.inputs[1]].shape[0] == w0.shape[0] and nodes[mm.inputs[1]].dtype == w0.dtype and mm.dtype == first.dtype
    ]


def shared_input_matmul_sites(g: Graph) -> list[Site]:
    """≥ 2 MatMuls of one lhs with rank-2 weights of equal K, declared before the group's first matmul."""
    nodes = g.nodes
    out: list[Site] = []
    for lhs, group in shared_matmul_groups(g).items():
        members = _shared_members(g, group)
        if len(members) < 2:
            if len({nodes[m.inputs[1]].shape[0] for m in group}) == 1:
                out.append(Site(group[0], reason="weights are defined after the first matmul of the group",
                                hint="declare the weights before their first use"))
            continue
        ws = [nodes[m.inputs[1]] for m in members]
        cat_t = infers_one("concat", [w.type for w in ws], {"axis": 1})
        mm_t = cat_t and infers_one("matmul", [nodes[lhs].type, cat_t], {})
        if not mm_t:
            out.append(Site(group[0], reason="the packed weights do not type-check as one matmul"))
            continue
        axis = len(mm_t.shape) - 1
        starts = [0]
        for w in ws[:-1]:
            starts.append(starts[-1] + w.shape[1])
        spans = zip(starts, ws, members)
        if not all(infers("narrow", [mm_t], {"axis": axis, "start": s, "length": w.shape[1]}, m.type) for s, w, m in spans):
            out.append(Site(group[0], reason="a slice of the packed matmul does not give a member's type"))
            continue

        def build(rb: Rebuilder, lhs=lhs, ws=ws, members=members, starts=starts, axis=axis) -> dict[int, int]:
            for w in ws:  # weights declared after the first matmul are leaves: hoist them
                if w.id not in rb.map:
                    rb.copy(w, trusted=True)
            cat = rb.emit("concat", [rb.map[w.id] for w in ws], {"axis": 1}, like=members)
            mm = rb.emit("matmul", [rb.map[lhs], cat], {}, like=members)
            return {
                m.id: rb.emit("narrow", [mm], {"axis": axis, "start": s, "length": w.shape[1]}, like=(m,), name=m.name, type=m.type)
                for s, w, m in zip(starts, ws, members)
            }

        match = Match(members[0].id, frozenset(m.id for m in members), build, "shared_input_matmul")
        out.append(Site(group[0], match=match, note=f"{len(members)} matmuls share lhs %{lhs} with compatible weights"))
    return out


# ------------------------------------------------------------------- SwiGLU (narrows)
def _narrows_check(cx: _Ctx, mul: Node, up: Node, s: Node, gate: Node, reason: str | None) -> tuple[str | None, Any]:
    src = cx.nodes[up.inputs[0]]
    rank = len(src.shape)
    n = up.attrs["length"]
    starts = (up.attrs["start"], gate.attrs["start"])
    halves = (gate.inputs[0] == up.inputs[0] and _last_axis(up, rank) and _last_axis(gate, rank)
              and gate.attrs["length"] == n and src.shape[-1] == 2 * n and starts in ((0, n), (n, 0)))
    if reason is None and not halves:
        reason = "the narrows are not the two halves of the last axis of one tensor"
    gate_first = starts == (n, 0)
    if reason is None and not infers(chains.SWIGLU_NARROWS.fused, [src.type], {"gate_first": gate_first}, mul.type):
        reason = "the halves do not fit the fused op (dtype)"

    def build(rb: Rebuilder, parts=(up, s, gate, mul)) -> dict[int, int]:
        fused = rb.emit(chains.SWIGLU_NARROWS.fused, [rb.map[src.id]], {"gate_first": gate_first}, like=parts, name=mul.name,
                        type=mul.type)
        return {mul.id: fused}

    return reason, build


def swiglu_sites(g: Graph) -> list[Site]:
    """Mul(narrow(src, one half), silu(narrow(src, the other half))) on the last axis, single-use parts."""
    return _swiglu_sites(g, chains.SWIGLU_NARROWS, "narrow", "swiglu", _narrows_check)


MATMUL_BIAS_ACT = Pattern("matmul_bias_act", "fuse_matmul_bias_act", matmul_bias_act_sites, frozenset({chains.MATMUL_BIAS_ACT.fused}))
CONV_BIAS_ACT = Pattern("conv_bias_act", "fuse_conv_bias_act", conv_bias_act_sites, frozenset({chains.CONV_BIAS_ACT.fused}))
RESIDUAL_LAYER_NORM = Pattern("residual_layer_norm", "fuse_residual_layer_norm", residual_layer_norm_sites,
                              frozenset({chains.RESIDUAL_LAYER_NORM.fused}))
RESIDUAL_RMS_NORM = Pattern("residual_rms_norm", "fuse_residual_rms_norm", residual_rms_norm_sites,
                            frozenset({chains.RESIDUAL_RMS_NORM.fused}))
RMS_NORM_RESHAPE = Pattern("rms_norm_reshape", "fuse_rms_norm_reshape", rms_norm_reshape_sites, frozenset(), reported=False)
SWIGLU_DUAL_MATMUL = Pattern("swiglu", "fuse_swiglu_dual_matmul", swiglu_dual_matmul_sites, frozenset({chains.SWIGLU_DUAL_MATMUL.fused}))
SHARED_INPUT_MATMUL = Pattern("shared_input_matmul", "fuse_shared_input_matmul", shared_input_matmul_sites,
                              frozenset({chains.SHARED_INPUT_MATMUL.fused}))
SWIGLU_NARROWS = Pattern("swiglu", "fuse_swiglu", swiglu_sites, frozenset({chains.SWIGLU_NARROWS.fused}))

#: every pattern, in the order the pipeline runs their passes (the report scans the same list)
PATTERNS = (MATMUL_BIAS_ACT, CONV_BIAS_ACT, RESIDUAL_LAYER_NORM, RESIDUAL_RMS_NORM, RMS_NORM_RESHAPE, SWIGLU_DUAL_MATMUL,
            SHARED_INPUT_MATMUL, SWIGLU_NARROWS)

(FUSE_MATMUL_BIAS_ACT, FUSE_CONV_BIAS_ACT, FUSE_RESIDUAL_LN, FUSE_RESIDUAL_RMS, FUSE_RMS_NORM_RESHAPE, FUSE_SWIGLU_DUAL,
 FUSE_SHARED_MATMUL, FUSE_SWIGLU) = (p.as_pass for p in PATTERNS)
PATTERN_PASSES = (
    FUSE_MATMUL_BIAS_ACT, FUSE_CONV_BIAS_ACT, FUSE_RESIDUAL_LN, FUSE_RESIDUAL_RMS, FUSE_RMS_NORM_RESHAPE,
    FUSE_SWIGLU_DUAL, FUSE_SHARED_MATMUL, FUSE_SWIGLU,
)
fuse_matmul_bias_act = MATMUL_BIAS_ACT.run
fuse_conv_bias_act = CONV_BIAS_ACT.run
fuse_residual_layer_norm = RESIDUAL_LAYER_NORM.run
fuse_residual_rms_norm = RESIDUAL_RMS_NORM.run
fuse_rms_norm_reshape = RMS_NORM_RESHAPE.run
fuse_swiglu_dual_matmul = SWIGLU_DUAL_MATMUL.run
fuse_shared_input_matmul = SHARED_INPUT_MATMUL.run
fuse_swiglu = SWIGLU_NARROWS.run

__all__ = ["PATTERNS", "PATTERN_PASSES", "Match", "Pattern", "Site", "apply_matches", "infers"]
