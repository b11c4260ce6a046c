"""``rlx.plan``: MIR graph -> :class:`LirModule` (the graph plus a :class:`BufferPlan`).

Boundary policy (keyword options of :func:`plan`):

``inputs``     ``"arena"`` (copied into their slot when a run starts) or ``"outside"``
               (the caller's arrays are used in place, read-only).
``params``     ``"arena"`` (copied in once, persistent), ``"reserved"`` (same, packed at the
               bottom of the arena in name order, so that the forward and backward plans of
               one model agree on every weight's offset), or ``"outside"``.
``constants``  ``"arena"`` or ``"outside"``.
``outputs``    ``"arena"`` (outputs have slots; a runtime copies them out) or ``"outside"``
               (no slot: the runtime writes each output root into a fresh array).
``weight_layout`` a ``{param name: offset}`` map (e.g. ``forward.plan.weight_layout()``):
               params of that name are pinned there and every other buffer is placed above
               the whole weight region, so backward activations never overlap weights.

Persistent buffers (params, constants) are live at every step, so they overlap everything
in time; the planner packs them at the bottom and places the rest above them with the
heuristics of :mod:`rlx.lir.planner`; unless params are reserved or pinned, upstream rlx's
single-pool greedy is also tried and kept when smaller. :func:`check` re-derives liveness on its own and
proves that no two buffers overlap in both time and memory.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.dump import active_dump
from rlx.ir.errors import RlxError
from rlx.ir.flags import BLAS, EPILOGUE
from rlx.ir.graph import RESULT, Graph, producer_id
from rlx.ir.opdef import get_op, has_op
from rlx.lir import liveness as _liveness
from rlx.lir.planner import DEFAULT_HEURISTICS, Item, align_up, place_best, upstream_greedy
from rlx.lir.views import resolve_views


class PlanError(RlxError):
    """A buffer plan breaks a rule (overlap, alignment, missing slot …)."""


@dataclass(frozen=True, slots=True)
class Slot:
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True, slots=True)
class ViewAlias:
    root: int
    byte_offset: int


@dataclass(frozen=True)
class IoManifest:
    inputs: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, int], ...]
    outputs: tuple[int, ...]


PHASES = ("prologue", "steady", "epilogue")


@dataclass
class BufferPlan:
    """Where every tensor of a graph lives in one arena, and when.

    ``assignments[id]`` is the slot of every node with one (roots and views; a view's slot
    lies inside its root's). ``view_aliases[id]`` names a view's root and byte offset;
    ``inplace[id]`` the operand whose dying buffer node ``id`` overwrites. ``lifetimes``
    are the closed ``[birth, death]`` step intervals of the arena roots. ``lower_bound`` is
    the most bytes live at one step; ``arena_size / lower_bound`` is the planner's waste.
    """

    schedule: tuple[int, ...]
    assignments: dict[int, Slot]
    view_aliases: dict[int, ViewAlias]
    inplace: dict[int, int]
    io: IoManifest
    alignment: int
    arena_size: int
    lower_bound: int
    peak_step: int
    lifetimes: dict[int, tuple[int, int]]
    phases: dict[int, str]
    dynamic_symbols: tuple[str, ...]
    policy: dict[str, str]
    outside: tuple[int, ...] = ()
    unplanned: tuple[int, ...] = ()
    weight_region: tuple[int, int] | None = None
    lower_bound_aligned: int = 0
    heuristic: str = ""
    tried: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict, compare=False)  # seconds per heuristic; not serialized

    @property
    def ratio(self) -> float:
        return self.arena_size / self.lower_bound if self.lower_bound else 1.0

    @property
    def total_unshared_bytes(self) -> int:
        """Bytes with no reuse at all: every root in its own aligned slot (views not counted)."""
        roots = [s for i, s in self.assignments.items() if i not in self.view_aliases]
        return sum(align_up(s.size, self.alignment) for s in roots)

    @property
    def bytes_saved(self) -> int:
        return max(0, self.total_unshared_bytes - self.arena_size)

    def weight_layout(self) -> dict[str, int]:
        """Param name -> offset, to pin the same weights in another plan (training)."""
        return {name: self.assignments[i].offset for name, i in self.io.params if i in self.assignments}

    def to_dict(self) -> dict[str, Any]:
        """Canonical, JSON-ready form (ids as sorted ``[id, …]`` rows)."""
        return {
            "schedule": list(self.schedule),
            "assignments": [[i, s.offset, s.size] for i, s in sorted(self.assignments.items())],
            "view_aliases": [[i, a.root, a.byte_offset] for i, a in sorted(self.view_aliases.items())],
            "inplace": [[i, j] for i, j in sorted(self.inplace.items())],
            "io": {"inputs": [list(x) for x in self.io.inputs], "params": [list(x) for x in self.io.params],
                   "outputs": list(self.io.outputs)},
            "alignment": self.alignment,
            "arena_size": self.arena_size,
            "lower_bound": self.lower_bound,
            "peak_step": self.peak_step,
            "lifetimes": [[i, b, d] for i, (b, d) in sorted(self.lifetimes.items())],
            "phases": [[i, p] for i, p in sorted(self.phases.items())],
            "dynamic_symbols": list(self.dynamic_symbols),
            "policy": dict(sorted(self.policy.items())),
            "outside": list(self.outside),
            "unplanned": list(self.unplanned),
            "weight_region": list(self.weight_region) if self.weight_region else None,
            "lower_bound_aligned": self.lower_bound_aligned,
            "heuristic": self.heuristic,
            "tried": dict(sorted(self.tried.items())),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BufferPlan:
        io = d["io"]
        return cls(
            schedule=tuple(int(i) for i in d["schedule"]),
            assignments={int(i): Slot(int(o), int(s)) for i, o, s in d["assignments"]},
            view_aliases={int(i): ViewAlias(int(r), int(o)) for i, r, o in d["view_aliases"]},
            inplace={int(i): int(j) for i, j in d["inplace"]},
            io=IoManifest(tuple((str(n), int(i)) for n, i in io["inputs"]), tuple((str(n), int(i)) for n, i in io["params"]),
                          tuple(int(i) for i in io["outputs"])),
            alignment=int(d["alignment"]), arena_size=int(d["arena_size"]), lower_bound=int(d["lower_bound"]),
            peak_step=int(d["peak_step"]),
            lifetimes={int(i): (int(b), int(e)) for i, b, e in d["lifetimes"]},
            phases={int(i): str(p) for i, p in d["phases"]},
            dynamic_symbols=tuple(str(s) for s in d["dynamic_symbols"]),
            policy={str(k): str(v) for k, v in d["policy"].items()},
            outside=tuple(int(i) for i in d["outside"]), unplanned=tuple(int(i) for i in d["unplanned"]),
            weight_region=tuple(d["weight_region"]) if d["weight_region"] else None,  # type: ignore[arg-type]
            lower_bound_aligned=int(d.get("lower_bound_aligned", 0)),
            heuristic=str(d["heuristic"]), tried={str(k): int(v) for k, v in d["tried"].items()},
        )

    def report(self) -> str:
        """``# arena=… lower_bound=… ratio=…`` then ``offset size %id sched=… [view->%r+o]`` rows by offset."""
        lines = [
            f"# arena_size={self.arena_size} lower_bound={self.lower_bound} (aligned {self.lower_bound_aligned}) ratio={self.ratio:.4f} "
            f"no_reuse={self.total_unshared_bytes} saved={self.bytes_saved} align={self.alignment} "
            f"heuristic={self.heuristic} views={len(self.view_aliases)} inplace={len(self.inplace)}"
        ]
        if self.dynamic_symbols:
            lines.append("# dynamic: " + ", ".join(self.dynamic_symbols))
        pos = {nid: t for t, nid in enumerate(self.schedule)}
        for nid, slot in sorted(self.assignments.items(), key=lambda kv: (kv[1].offset, kv[0])):
            extra = ""
            if nid in self.view_aliases:
                a = self.view_aliases[nid]
                extra = f" [view->%{a.root}+{a.byte_offset}]"
            elif nid in self.inplace:
                extra = f" [inplace over %{self.inplace[nid]}]"
            lines.append(f"{slot.offset}\t{slot.size}\t%{nid} sched={pos[nid]}{extra} {self.phases.get(nid, '')}")
        return "\n".join(lines)


class LirModule:
    """An MIR graph with its buffer plan. ``lir.graph``, ``lir.plan``, ``lir.fingerprint()``."""

    stage = "lir"

    def __init__(self, graph: Graph, plan: BufferPlan, options: Mapping[str, Any] | None = None):
        self.graph = graph
        self.plan = plan
        self.options = dict(options or {})

    @property
    def name(self) -> str:
        return self.graph.name

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical encoding of graph and plan."""
        try:
            from rlx.ir.serialize import fingerprint
        except ImportError:  # serialization not available: hash graph text + plan instead
            return self._text_fingerprint()
        import rlx.lir.codec  # noqa: F401  (registers the "lir" codec)

        return fingerprint(self)

    def _text_fingerprint(self) -> str:
        import hashlib

        doc = json.dumps({"graph": str(self.graph), "plan": self.plan.to_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()

    def check(self) -> LirModule:
        check(self)
        return self

    def manifest(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The binding manifest for a runtime outside Python (:mod:`rlx.lir.manifest`)."""
        from rlx.lir.manifest import binding_manifest

        return binding_manifest(self, params)

    def report(self) -> str:
        return f"lir @{self.name} {{\n{self.plan.report()}\n}}"

    def draw(self, path: str, **kw: Any) -> str:
        from rlx.lir.picture import draw_plan

        return draw_plan(self, path, **kw)

    def __repr__(self) -> str:
        p = self.plan
        return (f"<LirModule {self.name!r}: {len(self.graph)} nodes, arena {p.arena_size} B, "
                f"lower bound {p.lower_bound} B ({p.ratio:.3f}x), {p.heuristic}>")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LirModule):
            return NotImplemented
        return self.graph == other.graph and self.plan.to_dict() == other.plan.to_dict()

    __hash__ = None  # type: ignore[assignment]


_POLICY_CHOICES = {"inputs": ("arena", "outside"), "params": ("arena", "reserved", "outside"), "constants": ("arena", "outside"),
                   "outputs": ("arena", "outside")}


def plan(
    g: Graph | Any,
    alignment: int = 64,
    *,
    inputs: str = "arena",
    params: str = "arena",
    constants: str = "arena",
    outputs: str = "arena",
    inplace: bool = True,
    heuristics: Sequence[str] = DEFAULT_HEURISTICS,
    schedule: Sequence[int] | None = None,
    weight_layout: Mapping[str, int] | None = None,
    search: int | None = None,
    verify: bool = True,
    check_plan: bool = True,
) -> LirModule:
    """Plan the memory of ``g`` (a MIR graph, or an LirModule to re-plan) into one arena.

    ``heuristics`` are tried in order (each followed by a compaction pass), then up to
    ``search`` seeded restarts; the smallest arena wins and the search stops as soon as one
    reaches the lower bound. ``check_plan`` runs :func:`check` on the result.
    """
    if isinstance(g, LirModule):
        g = g.graph
    if not isinstance(g, Graph):
        raise RlxError(f"rlx.plan expects a Graph or LirModule, got {type(g).__name__}")
    if alignment <= 0 or alignment & (alignment - 1):
        raise RlxError(f"alignment must be a power of two, got {alignment}")
    policy = {"inputs": inputs, "params": params, "constants": constants, "outputs": outputs}
    for key, value in policy.items():
        if value not in _POLICY_CHOICES[key]:
            raise RlxError(f"rlx.plan: {key}={value!r}; choose one of {_POLICY_CHOICES[key]}")
    if weight_layout is not None and params == "outside":
        raise RlxError("rlx.plan: weight_layout needs params inside the arena")
    if verify:
        from rlx.ir.verify import verify as _verify

        _verify(g)
    live = _liveness.analyze(g, policy, schedule, inplace, alignment)
    nodes = g.nodes
    n = live.n

    # 1. persistent buffers (params, constants) at the bottom.
    offsets: dict[int, int] = {}
    top = 0
    persistent = [grp for grp in live.groups.values() if grp.persistent]
    pinned: list[tuple[int, int]] = []
    if weight_layout is not None:
        for grp in persistent:
            node = nodes[grp.id]
            if node.op == "param" and node.attrs["name"] in weight_layout:
                off = int(weight_layout[node.attrs["name"]])
                if off % alignment:
                    raise PlanError(f"weight_layout puts param {node.attrs['name']!r} at offset {off}, not {alignment}-aligned")
                offsets[grp.id] = off
                pinned.append((off, off + grp.size))
        pinned.sort()
        for (_, e1), (s2, _) in itertools.pairwise(pinned):
            if s2 < e1:
                raise PlanError("weight_layout has overlapping params")
        top = max((e for _, e in pinned), default=0)
    if params == "reserved":
        rank = {"param": 0, "constant": 1}
        persistent.sort(key=lambda grp: (rank[nodes[grp.id].op], str(nodes[grp.id].attrs.get("name", "")), grp.id))
    else:
        persistent.sort(key=lambda grp: (-grp.size, grp.id))
    for grp in persistent:
        if grp.id in offsets:
            continue
        offsets[grp.id] = align_up(top, alignment)
        top = offsets[grp.id] + grp.size
    weights_top = max([0, *(offsets[grp.id] + grp.size for grp in persistent if nodes[grp.id].op == "param")])
    floor = align_up(top, alignment) if persistent else 0

    # 2. everything else above them.
    items = [Item(grp.id, grp.size, grp.birth, grp.death) for grp in live.groups.values() if not grp.persistent]
    lower = live.lower_bound
    stop_at = max(lower, live.lower_bound_aligned)  # nothing aligned can do better than this
    placement = place_best(items, n, alignment, floor, stop_at, heuristics, fixed_top=top, search=search)
    offsets.update(placement.offsets)
    arena = max([top, placement.arena])
    tried = dict(placement.tried)
    heuristic = placement.heuristic
    if params != "reserved" and weight_layout is None:
        # upstream's single-pool greedy may beat "persistent at the bottom": keep the smaller
        pooled = [Item(grp.id, grp.size, grp.birth, grp.death) for grp in live.groups.values()]
        joint = upstream_greedy(pooled, n, alignment)
        tried["upstream"] = max([0, *(joint[it.key] + it.size for it in pooled)])
        if tried["upstream"] < arena:
            offsets, arena, heuristic = joint, tried["upstream"], "upstream"

    # 3. slots for every root and view.
    assignments: dict[int, Slot] = {}
    for rid, gid in live.group_of.items():
        assignments[rid] = Slot(offsets[gid], nodes[rid].type.nbytes or 0)
    view_aliases: dict[int, ViewAlias] = {}
    for vid, (root, off) in live.views.items():
        view_aliases[vid] = ViewAlias(root, off)
        if root in assignments:
            assignments[vid] = Slot(assignments[root].offset + off, nodes[vid].type.nbytes or 0)

    symbols = sorted({s for node in nodes for s in node.type.shape.symbols})
    io = IoManifest(
        tuple((name, v.id) for name, v in g.inputs().items()),
        tuple((name, v.id) for name, v in g.params().items()),
        tuple(g.output_ids),
    )
    bp = BufferPlan(
        schedule=live.schedule,
        assignments=assignments,
        view_aliases=view_aliases,
        inplace=dict(live.inplace),
        io=io,
        alignment=alignment,
        arena_size=arena,
        lower_bound=lower,
        peak_step=live.peak_step,
        lifetimes=dict(live.intervals),
        phases=derive_phases(g, live.schedule),
        dynamic_symbols=tuple(symbols),
        policy=policy,
        outside=tuple(sorted(live.outside)),
        unplanned=tuple(sorted(live.unplanned)),
        weight_region=(0, weights_top) if (params == "reserved" or weight_layout is not None) else None,
        lower_bound_aligned=live.lower_bound_aligned,
        heuristic=heuristic,
        tried=tried,
        timings=dict(placement.seconds),
    )
    options = {"alignment": alignment, "inputs": inputs, "params": params, "constants": constants, "outputs": outputs,
               "inplace": inplace,
               "heuristics": tuple(heuristics), "weight_layout": dict(weight_layout) if weight_layout else None,
               "search": search}
    lir = LirModule(g, bp, options)
    if check_plan:
        check(lir)
    dump = active_dump(g.name)
    if dump is not None:
        dump.stage("lir", f"{g}\n{lir.report()}")
    return lir


def derive_phases(g: Graph, schedule: Sequence[int]) -> dict[int, str]:
    """Leaves: prologue; ops flagged :data:`~rlx.ir.flags.EPILOGUE` (sample, top_k) and anything
    after the last one or after the last :data:`~rlx.ir.flags.BLAS` (compute-bound) op: epilogue;
    else steady. The flags are the ops' own (their ``defop``), not a list kept here."""
    nodes = g.nodes

    def flags(op: str) -> frozenset[str]:
        return get_op(op).flags if has_op(op) else frozenset()

    last_compute = last_sample = -1
    for t, nid in enumerate(schedule):
        f = flags(nodes[nid].op)
        if EPILOGUE in f:
            last_sample = t
        elif BLAS in f:
            last_compute = t
    out: dict[int, str] = {}
    for t, nid in enumerate(schedule):
        op = nodes[nid].op
        if op in _liveness.LEAVES:
            out[nid] = "prologue"
        elif EPILOGUE in flags(op) or (last_sample >= 0 and t > last_sample) or (last_compute >= 0 and t > last_compute):
            out[nid] = "epilogue"
        else:
            out[nid] = "steady"
    return out


# --------------------------------------------------------------------------- checker
def check(lir: LirModule) -> None:
    """Prove a plan sound, independently of the planner; raise :class:`PlanError` listing problems.

    Liveness is re-derived here from the graph and the schedule (not read from the plan).
    Rules: every non-view static non-zero node inside the arena has a slot of its byte size,
    inside the arena, aligned; every view slot is its root's slot plus the view offset, and
    the views are exactly those the view rules give; no two roots overlap in both time
    (closed intervals) and memory, except an elementwise op writing the exact slot of an
    operand that dies at that op; graph outputs are therefore never overwritten.
    """
    g, p = lir.graph, lir.plan
    nodes = g.nodes
    problems: list[str] = []
    n = len(p.schedule)
    if sorted(p.schedule) != list(range(len(nodes))):
        raise PlanError(f"plan of {g.name!r}: schedule is not a permutation of the node ids")
    step = {nid: t for t, nid in enumerate(p.schedule)}
    for node in nodes:
        for src in node.inputs:
            if step[src] >= step[node.id]:
                problems.append(f"%{node.id} is scheduled before its operand %{src}")

    views = resolve_views(g)
    if {v: (r, o) for v, (r, o) in views.items()} != {v: (a.root, a.byte_offset) for v, a in p.view_aliases.items()}:
        problems.append("view_aliases differ from the view rules")
    policy = p.policy
    out_roots = set()
    for o in g.output_ids:
        while o in views:
            o = views[o][0]
        out_roots.add(o)
    roots: list[int] = []
    for node in nodes:
        if node.id in views:
            continue
        size = node.type.nbytes
        if node.op in _liveness.LEAVES:
            inside = _liveness._in_arena(node.op, policy)
        else:
            inside = not (node.id in out_roots and policy.get("outputs", "arena") == "outside")
        if not size or not inside:
            if node.id in p.assignments:
                problems.append(f"%{node.id} ({node.op}) has a slot but should have none")
            continue
        slot = p.assignments.get(node.id)
        if slot is None:
            problems.append(f"%{node.id} ({node.op}) has no slot")
            continue
        roots.append(node.id)
        if slot.size != size:
            problems.append(f"%{node.id}: slot size {slot.size} != {size} bytes")
        if slot.offset % p.alignment:
            problems.append(f"%{node.id}: offset {slot.offset} is not {p.alignment}-aligned")
        if slot.offset < 0 or slot.end > p.arena_size:
            problems.append(f"%{node.id}: slot [{slot.offset}, {slot.end}) is outside the arena of {p.arena_size} B")
    for vid, (root, off) in views.items():
        if root in p.assignments:
            want = Slot(p.assignments[root].offset + off, nodes[vid].type.nbytes or 0)
            if p.assignments.get(vid) != want:
                problems.append(f"view %{vid}: slot {p.assignments.get(vid)} != root %{root} + {off} = {want}")
            if off + want.size > p.assignments[root].size:
                problems.append(f"view %{vid} runs past the end of its root %{root}")

    # independent liveness: closed [birth, death]
    def root_of(v: int) -> int:
        while v in views:
            v = views[v][0]
        return v

    birth_step = {r: step[producer_id(nodes[r])] for r in roots}  # a result node is written with its producer
    death = dict(birth_step)
    for node in nodes:
        if node.op == RESULT:
            continue
        for src in node.inputs:
            r = root_of(src)
            if r in death and step[node.id] > death[r]:
                death[r] = step[node.id]
    for o in g.output_ids:
        if root_of(o) in death:
            death[root_of(o)] = n
    birth = {}
    for r in roots:
        op = nodes[r].op
        if op in ("param", "constant"):
            birth[r], death[r] = 0, n
        elif op == "input":
            birth[r] = 0
        else:
            birth[r] = birth_step[r]

    def legal_inplace(a: int, b: int) -> bool:
        """b overwrites a: b's op is elementwise, reads a (or a full view of it), a dies exactly there."""
        nb = nodes[b]
        if death[a] != birth[b] or birth[b] != step[b] or nodes[a].op in ("param", "constant"):
            return False
        if not (has_op(nb.op) and "elementwise" in get_op(nb.op).flags):
            return False
        sa, sb = p.assignments[a], p.assignments[b]
        if sa != sb:
            return False
        return any(root_of(src) == a and views.get(src, (a, 0))[1] == 0 and nodes[src].type == nb.type for src in nb.inputs)

    # Sweep over time with the live slots kept sorted by offset. Live slots are disjoint (or
    # a problem was already reported), so a new slot overlaps one iff it overlaps a neighbour.
    import bisect
    import heapq

    order = sorted(roots, key=lambda r: (birth[r], r))
    offs: list[tuple[int, int]] = []  # (offset, id) of live slots, sorted
    ends: dict[int, int] = {}
    dying: list[tuple[int, int]] = []  # (death, id)
    gone: set[int] = set()

    def drop(r: int) -> None:
        i = bisect.bisect_left(offs, (p.assignments[r].offset, r))
        if i < len(offs) and offs[i][1] == r:
            del offs[i]
        gone.add(r)

    for r in order:
        b = birth[r]
        while dying and dying[0][0] < b:
            _, a = heapq.heappop(dying)
            if a not in gone:
                drop(a)
        sr = p.assignments[r]
        lo, hi = sr.offset, sr.offset + sr.size
        while True:
            i = bisect.bisect_left(offs, (lo, r))
            clash = [offs[j][1] for j in (i - 1, i) if 0 <= j < len(offs)
                     and offs[j][0] < hi and lo < ends[offs[j][1]]]
            legal = [a for a in clash if legal_inplace(a, r)]
            for a in legal:
                drop(a)  # a dies right here and r takes its exact slot
            clash = [a for a in clash if a not in legal]
            if not legal:
                break
        for a in clash:
            sa = p.assignments[a]
            problems.append(
                f"%{a} [{sa.offset}, {sa.end}) x steps [{birth[a]}, {death[a]}] overlaps "
                f"%{r} [{lo}, {hi}) x steps [{birth[r]}, {death[r]}]"
            )
        if len(problems) > 50:
            break
        ends[r] = hi
        bisect.insort(offs, (lo, r))
        heapq.heappush(dying, (death[r], r))
    top = max([0, *(p.assignments[r].end for r in roots)])
    if top > p.arena_size:
        problems.append(f"arena_size {p.arena_size} < highest slot end {top}")
    if p.weight_region is not None:
        lo, hi = p.weight_region
        for r in roots:
            if nodes[r].op != "param":
                s = p.assignments[r]
                if s.offset < hi and lo < s.end:
                    problems.append(f"%{r} ({nodes[r].op}) lies in the weight region [{lo}, {hi})")
    if problems:
        head = f"buffer plan of graph {g.name!r} is invalid ({len(problems)} problem(s)):\n  - "
        raise PlanError(head + "\n  - ".join(problems[:50]))
