"""Liveness over a schedule: buffer intervals, view aliasing, in-place reuse, lower bound.

A *root* is a non-view node with a static, non-zero byte size that lives inside the
arena under the boundary policy. Its interval is closed, ``[birth, death]`` in schedule
steps: born at its own step, dead after the last step that reads it or any view of it
(views keep their root alive). Graph outputs (through their roots) live to ``n`` (one
past the last step). Params and constants inside the arena are *persistent*: ``[0, n]``,
they survive across runs. Inputs inside the arena are copied in when a run starts, so
they live ``[0, last use]``. With ``outputs="outside"`` the roots of graph outputs get no
slot: the runtime writes them into fresh arrays that it hands to the caller.

In-place reuse: an op flagged ``elementwise`` may write into the buffer of an operand
whose root dies at that very step, when both have the same shape, dtype and bytes, the
operand covers its whole root, and the root is neither persistent nor an output. The
output then joins the operand's *storage group*: one slot, the union of the intervals.

The lower bound is the maximum over the schedule of the bytes of the storage groups
live at each step (each root counted once): no placement of these intervals can use less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rlx.ir.graph import RESULT, Graph, producer_id
from rlx.ir.opdef import get_op, has_op
from rlx.lir.views import resolve_views

LEAVES = ("input", "param", "constant")


@dataclass
class Group:
    """One storage slot to place: a root, plus the roots that reuse it in place."""

    id: int
    size: int
    birth: int
    death: int
    members: list[int] = field(default_factory=list)
    persistent: bool = False
    kind: str = "temp"  # temp | input | param | constant | output


@dataclass
class Liveness:
    schedule: tuple[int, ...]
    step: dict[int, int]
    views: dict[int, tuple[int, int]]  # view id -> (root, byte offset)
    intervals: dict[int, tuple[int, int]]  # arena root id -> (birth, death)
    groups: dict[int, Group]  # group id -> group
    group_of: dict[int, int]  # arena root id -> group id
    inplace: dict[int, int]  # node id -> operand id whose buffer it overwrites
    outside: set[int]  # roots kept outside the arena (policy)
    unplanned: set[int]  # dynamic / zero-sized roots: no slot
    lower_bound: int
    peak_step: int
    lower_bound_aligned: int = 0

    @property
    def n(self) -> int:
        return len(self.schedule)


def _in_arena(op: str, policy: Mapping[str, str]) -> bool:
    if op == "input":
        return policy.get("inputs", "arena") == "arena"
    if op == "param":
        return policy.get("params", "arena") in ("arena", "reserved")
    if op == "constant":
        return policy.get("constants", "arena") == "arena"
    return True


def analyze(g: Graph, policy: Mapping[str, str] | None = None, schedule: Sequence[int] | None = None,
            inplace: bool = True, alignment: int = 1) -> Liveness:
    """Compute views, intervals, in-place storage groups and the lower bound of ``g``."""
    policy = dict(policy or {})
    nodes = g.nodes
    sched = tuple(range(len(nodes))) if schedule is None else tuple(int(i) for i in schedule)
    _check_schedule(g, sched)
    step = {nid: t for t, nid in enumerate(sched)}
    n = len(sched)
    views = resolve_views(g)
    outputs = set(g.output_ids)

    def root_of(v: int) -> int:
        return views[v][0] if v in views else v

    last: dict[int, int] = {}
    for nid in sched:
        t = step[nid]
        if nodes[nid].op == RESULT:  # computed with its producer: reads nothing at its own step
            continue
        for src in nodes[nid].inputs:
            r = root_of(src)
            if last.get(r, -1) < t:
                last[r] = t
    for o in outputs:
        last[root_of(o)] = n

    intervals: dict[int, tuple[int, int]] = {}
    kinds: dict[int, str] = {}
    outside: set[int] = set()
    unplanned: set[int] = set()
    for nid in sched:
        node = nodes[nid]
        if nid in views:
            continue
        size = node.type.nbytes
        if not size:
            unplanned.add(nid)
            continue
        if node.op in LEAVES and not _in_arena(node.op, policy):
            outside.add(nid)
            continue
        if node.op not in LEAVES and last.get(nid, -1) >= n and policy.get("outputs", "arena") == "outside":
            outside.add(nid)  # written straight into a fresh array handed to the caller
            continue
        t = step[producer_id(node)]  # result nodes are written by their producer's step
        death = max(t, last.get(nid, t))
        if node.op in ("param", "constant"):
            intervals[nid] = (0, n)
            kinds[nid] = node.op
        elif node.op == "input":
            intervals[nid] = (0, death)
            kinds[nid] = "input"
        else:
            intervals[nid] = (t, death)
            kinds[nid] = "output" if death >= n else "temp"

    groups: dict[int, Group] = {}
    group_of: dict[int, int] = {}
    done_inplace: dict[int, int] = {}
    for nid in sched:
        if nid not in intervals:
            continue
        node = nodes[nid]
        birth, death = intervals[nid]
        size = node.type.nbytes or 0
        target = None
        if inplace and node.op not in LEAVES and _elementwise(node.op):
            target = _inplace_operand(g, nid, step[nid], views, intervals, group_of, groups, kinds)
        if target is not None:
            gid = group_of[root_of(target)]
            grp = groups[gid]
            grp.members.append(nid)
            grp.death = max(grp.death, death)
            if kinds[nid] == "output":
                grp.kind = "output"
            group_of[nid] = gid
            done_inplace[nid] = target
            continue
        kind = kinds[nid]
        groups[nid] = Group(nid, size, birth, death, [nid], kind in ("param", "constant"), kind)
        group_of[nid] = nid

    lower, peak = _peak(groups.values(), n)
    live = Liveness(sched, step, views, intervals, groups, group_of, done_inplace, outside, unplanned, lower, peak)
    live.lower_bound_aligned = aligned_bound(groups.values(), n, alignment)
    return live


def aligned_bound(groups, n: int, alignment: int) -> int:
    """The lower bound when every slot starts at a multiple of ``alignment``.

    Live buffers stacked at aligned offsets take at least ``align_up(size)`` each, except
    the topmost: so at each step, the sum of aligned sizes minus the largest padding.
    """
    a = max(1, alignment)
    delta = [0] * (n + 2)
    pads: list[list[tuple[int, int]]] = [[] for _ in range(n + 2)]
    for grp in groups:
        padded = (grp.size + a - 1) // a * a
        delta[grp.birth] += padded
        delta[grp.death + 1] -= padded
        pads[grp.birth].append((padded - grp.size, grp.death))
    import heapq

    best, cur = 0, 0
    heap: list[tuple[int, int]] = []  # (-padding, death) of live buffers
    for t in range(n + 1):
        cur += delta[t]
        for pad, death in pads[t]:
            heapq.heappush(heap, (-pad, death))
        while heap and heap[0][1] < t:
            heapq.heappop(heap)
        if cur:
            best = max(best, cur + (heap[0][0] if heap else 0))
    return best


def _elementwise(op: str) -> bool:
    return has_op(op) and "elementwise" in get_op(op).flags


def _inplace_operand(g, nid, t, views, intervals, group_of, groups, kinds) -> int | None:
    node = g.nodes[nid]
    size = node.type.nbytes
    aliases: dict[int, set[tuple[int, int]]] = {}
    for src in node.inputs:
        root, off = views.get(src, (src, 0))
        aliases.setdefault(root, set()).add((off, g.nodes[src].type.nbytes or 0))
    for src in node.inputs:
        root, off = views.get(src, (src, 0))
        if root not in intervals or root not in group_of or kinds[root] in ("param", "constant", "output"):
            continue
        grp = groups[group_of[root]]
        if grp.persistent or grp.death != t or intervals[root][1] != t:
            continue
        s = g.nodes[src]
        if off != 0 or s.type != node.type or s.type.nbytes != size or g.nodes[root].type.nbytes != size:
            continue
        if len(aliases[root]) != 1:  # another operand reads a different part of the same root
            continue
        return src
    return None


def _peak(groups, n: int) -> tuple[int, int]:
    delta = [0] * (n + 2)
    for grp in groups:
        delta[grp.birth] += grp.size
        delta[grp.death + 1] -= grp.size
    best, at, cur = 0, 0, 0
    for t in range(n + 1):
        cur += delta[t]
        if cur > best:
            best, at = cur, t
    return best, at


def _check_schedule(g: Graph, sched: tuple[int, ...]) -> None:
    from rlx.ir.errors import RlxError

    if sorted(sched) != list(range(len(g.nodes))):
        raise RlxError(f"schedule must be a permutation of the {len(g.nodes)} node ids of graph {g.name!r}")
    pos = {nid: t for t, nid in enumerate(sched)}
    for node in g.nodes:
        for src in node.inputs:
            if pos[src] >= pos[node.id]:
                raise RlxError(f"schedule runs node %{node.id} before its operand %{src}")
