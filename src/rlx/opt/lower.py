"""Lowering toward what a backend runs (docs/pipeline.md#lowering-for-a-backend): control flow, dot_general, and the
claim-set driven ``rewrite_for_backend``.

**lower_control_flow** (upstream's ``LowerControlFlow`` = ``inline_if`` + ``unroll_while``,
fixed; the structured ops stay the default in rlx, this pass is for backends that cannot run
them):

* ``if_(pred, *captures)`` → both branches inlined (their ``input`` nodes bound positionally to
  the captures) and ``where(p, then, else)``, where ``p`` is the predicate as a rank-0 **bool**
  (a numeric predicate is true when != 0, as in ``if_`` itself; upstream typed its predicate
  expand with the output dtype, which the verifier rejects). **Both branches now run**: an
  untaken branch that fails (an out-of-range ``gather``, a singular ``dense_solve``, …) makes the
  whole graph fail, and its effects (``sample``'s random draw, a custom op) happen.
  ``only_pure=True`` leaves such an ``if_`` structured (see :func:`eager_unsafe_ops`); the
  default, ``False``, lowers every ``if_`` as upstream does. Values of the untaken branch are
  selected away, but a non-finite one can still poison a gradient taken *after* lowering
  (``0 * inf``): differentiate the structured graph, lower afterwards.
* ``while_`` with a static ``max_iterations`` N → N copies of cond and body, each carried value
  frozen with ``where`` once cond fails (``rlx.ops.control_flow.unrolled_while``, the unroll
  autodiff uses); the node's results become the carried values it yields (every one for
  ``output=None``, a multi-result node). Every copy of cond and body runs, also after the loop is done, so ``only_pure`` guards
  loops the same way as conditionals. Without a bound the node stays (counted in the stats as
  ``kept_while_unbounded``).
* ``scan`` (static length) → unrolled (final carry, trajectory, reverse, checkpoints), exactly
  the evaluation the op performs.
* ``custom_fn`` (only when listed in ``ops``; ``rewrite_for_backend`` does it for a backend that
  does not claim it) → its ``body`` inlined (its custom derivative bodies are dropped).

Bodies are lowered recursively (nested control flow), also those of nodes that stay. Large
bounds blow the graph up (docs/pipeline.md#upstream-bugs-fixed): ``max_unroll`` keeps loops with more steps.

**lower_dot_general**: ``dot_general`` → transposes, reshapes and a batched ``matmul`` (the
lowering ``prepare_graph_for_ad`` uses; general batch / contracting dims, not only upstream's
2-D pattern). A ``dot_general`` whose groups cannot be spelled statically stays.

**rewrite_for_backend(g, claims)**: up to ``max_rounds`` rounds, until every op is claimed (empty
claims accept everything): each round applies to the unclaimed ops, in order, unfuse of fused ops
(``unfuse_unclaimed``), control-flow lowering (and ``custom_fn`` inlining), dot_general lowering
and decomposition through an op's ``decompose`` hook; bodies of the remaining nodes are rewritten
the same way. :func:`rlx.opt.legalize.legalize_for_backend` lists what is still unsupported;
``strict=True`` raises a :class:`PassError` naming each remaining op kind with its count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from rlx.ir.flags import EAGER_UNSAFE
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import all_ops, get_op, has_op
from rlx.ops import custom as _custom  # noqa: F401  (registers the ops CONTROL_FLOW_OPS / UNROLLABLE_OPS read)
from rlx.ops.control_flow import UnrollPolicy
from rlx.ops.patterns import DOT_GENERAL_LOWERING
from rlx.opt.dot_general import lower_dot_general_pass
from rlx.opt.legalize import legalize_for_backend, unclaimed
from rlx.opt.manager import Pass, PassError, PassResult, compose, graph_attrs, run_passes
from rlx.opt.rebuild import Rebuilder
from rlx.opt.unfuse import unfuse, unfuse_unclaimed

#: the ops with subgraph bodies this module lowers (the registry's control_flow family)
CONTROL_FLOW_OPS = frozenset(o.name for o in all_ops() if o.family == "control_flow")
#: every op with a straight-line lowering (``OpDef.unroll``): control flow and ``custom_fn``
UNROLLABLE_OPS = frozenset(o.name for o in all_ops() if o.unroll is not None)



def _opaque_checker() -> Callable[[str], bool]:
    """``op -> True`` for user ops: registered with ``rlx.custom_op``, or whose kernel lives outside rlx."""
    from rlx.ops.custom import custom_ops  # lazy: keeps rlx.opt importable before rlx.ops

    custom = frozenset(custom_ops())
    cache: dict[str, bool] = {}

    def opaque(op: str) -> bool:
        got = cache.get(op)
        if got is None:
            kernel = get_op(op).kernel if has_op(op) else None
            module = getattr(kernel, "__module__", None) or ""
            got = cache[op] = op in custom or (kernel is not None and not module.startswith("rlx."))
        return got

    return opaque


def eager_unsafe_ops(g: Graph) -> list[str]:
    """Ops of ``g`` (bodies included) that make it unsafe to evaluate when its result is not used:
    ops flagged :data:`rlx.ir.flags.EAGER_UNSAFE` (they may raise or draw random numbers), user
    ops (registered with ``rlx.custom_op`` or with a kernel defined outside rlx: opaque, they may
    fail or have effects) and
    ``while_`` without ``max_iterations`` (it may not terminate). Sorted, each once; empty means
    the graph may run eagerly (``lower_control_flow(only_pure=True)`` lowers only such bodies)."""
    opaque = _opaque_checker()
    found: set[str] = set()
    seen: set[int] = set()

    def walk(h: Graph) -> None:
        if id(h) in seen:
            return
        seen.add(id(h))
        for node in h.nodes:
            op = node.op
            if opaque(op) or (has_op(op) and EAGER_UNSAFE in get_op(op).flags):
                found.add(op)
            elif (unroll := get_op(op).unroll if has_op(op) else None) is not None and unroll.unbounded(node.attrs):
                found.add(f"{op} (unbounded)")
            for name in graph_attrs(op):
                sub = node.attrs.get(name)
                if isinstance(sub, Graph):
                    walk(sub)

    walk(g)
    return sorted(found)


# ------------------------------------------------------------------------------ control flow
class _ControlFlowLowering:
    def __init__(self, ops: frozenset[str], only_pure: bool, max_unroll: int | None):
        self.ops = ops
        self.policy = UnrollPolicy(only_pure, max_unroll, self.pure)
        self.stats: Counter[str] = Counter()
        self.memo: dict[int, tuple[Graph, Graph]] = {}
        self.safe: dict[int, bool] = {}

    def body(self, sub: Graph) -> Graph:
        hit = self.memo.get(id(sub))
        if hit is None or hit[0] is not sub:
            hit = (sub, self.run(sub)[0])
            self.memo[id(sub)] = hit
        return hit[1]

    def pure(self, *subs: Graph) -> bool:
        ok = True
        for sub in subs:
            got = self.safe.get(id(sub))
            if got is None:
                got = self.safe[id(sub)] = not eager_unsafe_ops(sub)
            ok = ok and got
        return ok

    def run(self, g: Graph) -> tuple[Graph, dict[int, int] | None]:
        if not any(graph_attrs(n.op) for n in g.nodes):
            return g, None
        rb = Rebuilder(g, "lower_control_flow")
        changed = False
        for node in g.nodes:
            names = graph_attrs(node.op)
            if not names:
                rb.copy(node)
                continue
            bodies = {k: node.attrs[k] for k in names if isinstance(node.attrs.get(k), Graph)}
            lowered = {k: self.body(v) for k, v in bodies.items()}
            new = self.lower(rb, node, bodies, lowered)
            if new is not None:
                for r, nid in enumerate(new):
                    rb.alias(node.id + r, nid)
                changed = True
            elif any(lowered[k] is not bodies[k] for k in bodies):
                attrs = {**node.attrs, **lowered}
                v = rb.dst.append(node.op, [rb.map[i] for i in node.inputs], attrs, name=node.name, prov=node.prov)
                rb.alias(node.id, v.id)
                changed = True
            else:
                rb.copy(node)
        if not changed:
            return g, None
        return rb.finish()

    def lower(self, rb: Rebuilder, node: Node, orig: dict[str, Graph], bodies: dict[str, Graph]) -> list[int] | None:
        """New ids of the values replacing ``node``'s results, or None to keep it (the op's ``OpDef.unroll``)."""
        op = node.op
        unroll = get_op(op).unroll if op in self.ops and has_op(op) else None
        if unroll is None:
            return None
        dst = rb.dst
        ins = [rb.value(rb.map[i]) for i in node.inputs]
        start = len(dst.nodes)
        stat, outs = unroll.run(dst, node.attrs, orig, bodies, ins, self.policy)
        self.stats[stat] += 1
        if outs is None:
            return None
        if [v.type for v in outs] != list(node.types):  # pragma: no cover - the unrollers keep types
            raise PassError(f"lower_control_flow: %{node.id} ({op}) became {[str(v.type) for v in outs]}, expected "
                            f"{[str(t) for t in node.types]}")
        if outs[0].id >= start:
            rb.stamp(start, [node], name=node.name, last=outs[0].id)
        return [v.id for v in outs]


def lower_control_flow(g: Graph, *, only_pure: bool = False, ops: Iterable[str] = CONTROL_FLOW_OPS,
                       max_unroll: int | None = None) -> PassResult:
    """Replace ``if_`` / bounded ``while_`` / ``scan`` nodes (those in ``ops``) by straight-line
    ops, bodies included (see the module doc: an ``if_`` then runs both branches and an unrolled
    loop runs every copy of its body). ``only_pure``: keep an ``if_`` / ``while_`` whose bodies
    hold an op of :func:`eager_unsafe_ops`. ``max_unroll``: keep loops and scans longer than this.
    Stats: ``lowered_if`` / ``lowered_while`` / ``lowered_scan`` / ``inlined_custom_fn``, and
    ``kept_*`` for nodes left structured (``kept_while_unbounded``, ``kept_if_impure``, ``kept_while_impure``,
    ``kept_*_too_long``)."""
    lowering = _ControlFlowLowering(frozenset(ops), only_pure, max_unroll)
    graph, id_map = lowering.run(g)
    return PassResult(graph, id_map, dict(lowering.stats))


# ------------------------------------------------------------------------------- dot_general
def lower_dot_general(g: Graph) -> PassResult:
    """Every ``dot_general`` (bodies included) whose groups are static or a single symbol becomes
    transposes, reshapes and a batched ``matmul`` (:mod:`rlx.opt.dot_general`, also run by
    autodiff's preparation). Stat: ``lowered_dot_general``."""
    stats: Counter[str] = Counter()

    def step(h: Graph) -> PassResult:
        res = lower_dot_general_pass(h)
        stats["lowered_dot_general"] += res.stats["lowered"]
        return res

    return _everywhere(g, step, "lower_dot_general", stats)


def _everywhere(g: Graph, fn: Callable[[Graph], PassResult], name: str, stats: Counter[str]) -> PassResult:
    """``fn`` on ``g`` and then, recursively, on the bodies of the nodes it leaves (the pass
    manager's body recursion: shared bodies rewritten once, signatures checked); ``fn`` adds its
    counters to ``stats``."""
    res = run_passes(g, [Pass(name, fn)], check=False)
    if res.graph is g:
        return PassResult(g, None, dict(stats))
    return PassResult(res.graph, res.id_map, dict(stats))


# ------------------------------------------------------------------------ rewrite_for_backend
def _decompose_unclaimed(g: Graph, claims: frozenset[str]) -> PassResult:
    def pick(node: Node) -> bool:
        return node.op not in claims and has_op(node.op) and get_op(node.op).decompose is not None

    res = unfuse(g, pick, "decompose_unclaimed")
    return PassResult(res.graph, res.id_map, {"decomposed": res.stats["unfused"]})


def _rewrite_steps(claims: frozenset[str], only_pure: bool, max_unroll: int | None) -> list[Callable[[Graph], PassResult]]:
    steps: list[Callable[[Graph], PassResult]] = [lambda h: unfuse_unclaimed(h, claims)]
    cf = UNROLLABLE_OPS - claims
    if cf:
        steps.append(lambda h: lower_control_flow(h, only_pure=only_pure, ops=cf, max_unroll=max_unroll))
    if DOT_GENERAL_LOWERING.op not in claims:
        steps.append(lower_dot_general)
    steps.append(lambda h: _decompose_unclaimed(h, claims))
    return steps


def rewrite_for_backend(g: Graph, claims: Iterable[str] = (), *, strict: bool = False, max_rounds: int = 16,
                        only_pure: bool = False, max_unroll: int | None = None) -> PassResult:
    """Rewrite ``g`` toward a backend claiming the op kinds ``claims`` (empty: everything; then
    ``g`` is returned unchanged). See the module doc for the rewrites and their order.

    With ``strict`` a :class:`PassError` names every op kind still unclaimed (with counts and
    node ids, and why control flow stayed); otherwise the stat ``unsupported`` counts the pairs
    :func:`rlx.opt.legalize.legalize_for_backend` still reports. ``only_pure`` / ``max_unroll``
    are passed to :func:`lower_control_flow`."""
    claimed = frozenset(claims)
    if not claimed:
        return PassResult(g, None, {"rounds": 0})
    steps = _rewrite_steps(claimed, only_pure, max_unroll)
    stats: Counter[str] = Counter()

    top = [True]

    def one(h: Graph) -> PassResult:
        id_map: dict[int, int] | None = None
        n0 = len(h.nodes)
        for _ in range(max_rounds):
            if not unclaimed(h, claimed):
                break
            progressed = False
            for step in steps:
                res = step(h)
                done = {k: v for k, v in res.stats.items() if v and not k.startswith("kept_")}
                if done and res.graph is not h:  # a step that rewrote nothing may still return a copy
                    id_map = compose(id_map, res.id_map, n0)
                    h = res.graph
                    progressed = True
                    stats.update(done)
            if top[0]:
                stats["rounds"] += 1
            if not progressed:
                break
        top[0] = False  # the manager then runs ``one`` on the bodies of the nodes left
        return PassResult(h, id_map, {})

    res = _everywhere(g, one, "rewrite_for_backend", stats)
    graph, id_map = res.graph, res.id_map
    left = legalize_for_backend(graph, claimed)
    if left and strict:
        raise PassError("rewrite_for_backend: " + unsupported_message(graph, left, claimed))
    stats["unsupported"] = len(left)
    return PassResult(graph, id_map, dict(stats))


def _why(g: Graph, op: str, ids: list[int]) -> str:
    """Why lowering left ``op`` (at top-level ``ids``) in place, when it is a lowerable kind."""
    nodes = [g.nodes[i] for i in ids if g.nodes[i].op == op]
    unroll = get_op(op).unroll if has_op(op) else None
    if unroll is not None:
        return unroll.why_kept([n.attrs for n in nodes])
    if op == DOT_GENERAL_LOWERING.op:
        return DOT_GENERAL_LOWERING.why_kept
    if has_op(op) and get_op(op).level == "hir":
        return "a HIR op (lower the module to MIR first)"
    return ""


def unsupported_message(g: Graph, left: list[tuple[int, str]], claims: Iterable[str]) -> str:
    """A readable list of :func:`~rlx.opt.legalize.legalize_for_backend` pairs: each op kind with
    its node count, a few node ids and, for kinds the lowering passes handle, why they stayed."""
    by_op: dict[str, list[int]] = {}
    for nid, op in left:
        by_op.setdefault(op, []).append(nid)
    parts = []
    for op in sorted(by_op, key=lambda o: (-len(by_op[o]), o)):
        ids = list(dict.fromkeys(by_op[op]))
        where = [f"%{i}" if g.nodes[i].op == op else f"inside %{i} ({g.nodes[i].op})" for i in ids[:6]]
        shown = ", ".join(where) + (", ..." if len(ids) > 6 else "")
        why = _why(g, op, ids)
        parts.append(f"{op} x{len(by_op[op])} ({shown})" + (f": {why}" if why else ""))
    return (f"the backend does not support {len(left)} node(s) of {len(by_op)} op kind(s): " + "; ".join(parts)
            + f" [claims: {', '.join(sorted(claims))}]")


def rewrite_pass(claims: Iterable[str], *, strict: bool = True, **options: Any) -> Pass:
    """A :class:`Pass` running :func:`rewrite_for_backend` toward ``claims`` (strict by default)."""
    return REWRITE_FOR_BACKEND.with_options(claims=frozenset(claims), strict=strict, **options)


LOWER_CONTROL_FLOW = Pass("lower_control_flow", lower_control_flow)
LOWER_DOT_GENERAL = Pass("lower_dot_general", lower_dot_general)
REWRITE_FOR_BACKEND = Pass("rewrite_for_backend", rewrite_for_backend, options={"claims": frozenset()})
