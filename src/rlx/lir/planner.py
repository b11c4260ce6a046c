"""Placement heuristics: assign byte offsets to buffers with closed lifetime intervals.

Each heuristic visits the buffers in its own order and puts each one into the *best-fit*
gap among the already placed buffers that overlap it in time (the smallest gap that
holds it, lowest offset on ties), or on top of them when no gap fits. Orders:

``size``     greedy by size (TFLite's greedy-by-size): largest first, equal sizes by birth.
``order``    execution order (a heap simulator): by birth step, largest first on ties.
``breadth``  greedy by breadth (TFLite): steps by decreasing live bytes; at each step its
             unplaced buffers, largest first.
``area``     by size x lifetime, largest first.
``first_fit`` largest first, lowest feasible offset (upstream rlx's rule), for reference.

:func:`upstream_greedy` is upstream rlx's whole placement (persistent buffers included, one
pool, candidate offsets at the end of every placed buffer); the planner runs it beside its
own best-of set so that it can never produce a larger arena than upstream's.

Every tie is broken by the buffer key, so a plan is a pure function of its input.
:func:`place_best` runs the heuristics, keeps the smallest arena and stops early when
one reaches the lower bound.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlx.ir.errors import RlxError


@dataclass(frozen=True, slots=True)
class Item:
    key: int
    size: int
    birth: int
    death: int


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class _TimeIndex:
    """Placed buffers bucketed by time, to find the ones overlapping an interval quickly."""

    def __init__(self, n_steps: int, width: int):
        self.width = max(1, width)
        self.buckets: list[list[tuple[int, int, int, int]]] = [[] for _ in range(n_steps // self.width + 2)]

    def add(self, birth: int, death: int, offset: int, end: int) -> None:
        entry = (birth, death, offset, end)
        w = self.width
        for b in range(birth // w, death // w + 1):
            self.buckets[b].append(entry)

    def overlapping(self, birth: int, death: int) -> list[tuple[int, int]]:
        w = self.width
        lo, hi = birth // w, death // w
        if lo == hi:
            return [(o, e) for b, d, o, e in self.buckets[lo] if b <= death and d >= birth]
        seen = set()
        for k in range(lo, hi + 1):
            for b, d, o, e in self.buckets[k]:
                if b <= death and d >= birth:
                    seen.add((o, e))
        return list(seen)


def _best_fit(occupied: list[tuple[int, int]], size: int, align: int, floor: int, first_fit: bool) -> int:
    occupied.sort()
    cur = floor
    best, best_gap = -1, -1
    for off, end in occupied:
        start = align_up(cur, align)
        if off - start >= size:
            gap = off - start
            if first_fit:
                return start
            if best < 0 or gap < best_gap:
                best, best_gap = start, gap
                if gap == size:
                    return start
        if end > cur:
            cur = end
    if best >= 0:
        return best
    return align_up(cur, align)


def _width(items: Sequence[Item]) -> int:
    if not items:
        return 1
    total = sum(it.death - it.birth + 1 for it in items)
    return max(1, total // len(items))


def _place_in_order(items: Sequence[Item], order: Sequence[int], n_steps: int, align: int, floor: int,
                    first_fit: bool = False) -> dict[int, int]:
    index = _TimeIndex(n_steps, _width(items))
    out: dict[int, int] = {}
    for i in order:
        it = items[i]
        off = _best_fit(index.overlapping(it.birth, it.death), it.size, align, floor, first_fit)
        index.add(it.birth, it.death, off, off + it.size)
        out[it.key] = off
    return out


def by_size(items, n_steps, align, floor):
    # equal sizes in birth order: for one size class that is the optimal interval colouring
    order = sorted(range(len(items)), key=lambda i: (-items[i].size, items[i].birth, items[i].key))
    return _place_in_order(items, order, n_steps, align, floor)


def by_order(items, n_steps, align, floor):
    order = sorted(range(len(items)), key=lambda i: (items[i].birth, -items[i].size, items[i].key))
    return _place_in_order(items, order, n_steps, align, floor)


def by_area(items, n_steps, align, floor):
    order = sorted(range(len(items)), key=lambda i: (-items[i].size * (items[i].death - items[i].birth + 1), -items[i].size, items[i].key))
    return _place_in_order(items, order, n_steps, align, floor)


def first_fit(items, n_steps, align, floor):
    order = sorted(range(len(items)), key=lambda i: (-items[i].size, items[i].key))
    return _place_in_order(items, order, n_steps, align, floor, first_fit=True)


def by_breadth(items, n_steps, align, floor):
    """TFLite's greedy by breadth: the widest steps first, each step's buffers largest first."""
    delta = [0] * (n_steps + 3)
    for it in items:
        delta[it.birth] += it.size
        delta[it.death + 1] -= it.size
    breadth, cur = [], 0
    for t in range(n_steps + 1):
        cur += delta[t]
        breadth.append(cur)
    live = _TimeIndex(n_steps + 1, _width(items))
    for i, it in enumerate(items):
        live.add(it.birth, it.death, i, i)
    order: list[int] = []
    placed = [False] * len(items)
    for t in sorted(range(n_steps + 1), key=lambda t: (-breadth[t], t)):
        if len(order) == len(items):
            break
        here = [i for b, d, i, _ in live.buckets[t // live.width] if b <= t <= d and not placed[i]]
        for i in sorted(set(here), key=lambda i: (-items[i].size, items[i].key)):
            placed[i] = True
            order.append(i)
    return _place_in_order(items, order, n_steps, align, floor)


def compact(items: Sequence[Item], offsets: dict[int, int], n_steps: int, align: int, floor: int, rounds: int = 1) -> dict[int, int]:
    """Local improvement: re-place every buffer, lowest first, at its lowest feasible offset.

    Visiting buffers by their current offset, each one's old place stays feasible (everything
    below it only moved down), so nothing moves up and the arena never grows. ``rounds`` passes.
    """
    for _ in range(rounds):
        order = sorted(range(len(items)), key=lambda i: (offsets[items[i].key], items[i].key))
        new = _place_in_order(items, order, n_steps, align, floor, first_fit=True)
        if new == offsets:
            break
        offsets = new
    return offsets


def upstream_greedy(items: Sequence[Item], n_steps: int, align: int) -> dict[int, int]:
    """Upstream rlx's placement, exactly: largest first (ties in key order); the candidate
    offsets are 0 and the aligned end of every placed buffer; each buffer takes the lowest
    candidate that overlaps no placed buffer in both memory and time (closed intervals).

    The candidates are kept sorted; per buffer the free gaps between the time-overlapping
    buffers are walked upward and the first candidate that fits a gap is taken."""
    order = sorted(range(len(items)), key=lambda i: (-items[i].size, items[i].key))
    index = _TimeIndex(n_steps + 1, _width(items))
    cands = [0]
    out: dict[int, int] = {}
    for i in order:
        it = items[i]
        gap_start, chosen = 0, None
        for off, end in [*sorted(index.overlapping(it.birth, it.death)), (1 << 62, 1 << 62)]:
            if off > gap_start:
                k = bisect.bisect_left(cands, gap_start)
                if k < len(cands) and cands[k] + it.size <= off:
                    chosen = cands[k]
                    break
            gap_start = max(gap_start, end)
        assert chosen is not None  # the last gap is unbounded
        index.add(it.birth, it.death, chosen, chosen + it.size)
        c = align_up(chosen + it.size, align)
        k = bisect.bisect_left(cands, c)
        if k == len(cands) or cands[k] != c:
            cands.insert(k, c)
        out[it.key] = chosen
    return out


def perturbed(seed: int) -> Callable[..., dict[int, int]]:
    """Greedy by size with sizes jittered by a seeded random factor (a deterministic restart)."""

    def run(items, n_steps, align, floor):
        import random

        rnd = random.Random(seed)
        noise = [1.0 + 0.3 * rnd.random() for _ in items]
        order = sorted(range(len(items)), key=lambda i: (-items[i].size * noise[i], items[i].key))
        return _place_in_order(items, order, n_steps, align, floor)

    return run


HEURISTICS: dict[str, Callable[..., dict[int, int]]] = {
    "size": by_size,
    "order": by_order,
    "breadth": by_breadth,
    "area": by_area,
    "first_fit": first_fit,
}
DEFAULT_HEURISTICS = ("size", "order", "breadth", "area")
SEARCH_ROUNDS = 8  # seeded restarts tried when no heuristic reaches the lower bound
SEARCH_WORK = 10_000  # restarts x buffers: bounds the search by problem size, not by time


@dataclass
class Placement:
    offsets: dict[int, int]
    arena: int
    heuristic: str
    tried: dict[str, int]
    seconds: dict[str, float]


def place_best(items: Sequence[Item], n_steps: int, align: int, floor: int, lower_bound: int,
               heuristics: Sequence[str] = DEFAULT_HEURISTICS, fixed_top: int = 0, search: int | None = None) -> Placement:
    """Run the heuristics in order and keep the smallest arena; stop once one reaches ``lower_bound``.

    When none does, the best placement is compacted (:func:`compact`) and up to ``search``
    seeded restarts follow (jittered greedy by size, each compacted). The default number of
    restarts shrinks with the problem (``SEARCH_WORK // len(items)``, at most
    :data:`SEARCH_ROUNDS`), never with the clock, so a plan is the same on every machine.
    """
    if align <= 0 or align & (align - 1):
        raise RlxError(f"alignment must be a power of two, got {align}")
    unknown = [h for h in heuristics if h not in HEURISTICS]
    if unknown or not heuristics:
        raise RlxError(f"unknown placement heuristic(s) {unknown}; known: {sorted(HEURISTICS)}")
    best: Placement | None = None
    tried: dict[str, int] = {}
    secs: dict[str, float] = {}
    if search is None:
        search = min(SEARCH_ROUNDS, SEARCH_WORK // max(1, len(items)))

    def top_of(offsets: dict[int, int]) -> int:
        return max([fixed_top, *(offsets[it.key] + it.size for it in items)])

    runs: list[tuple[str, Callable[..., dict[int, int]]]] = [(h, HEURISTICS[h]) for h in heuristics]
    runs.append(("compact", lambda *a: compact(items, best.offsets, n_steps, align, floor)))  # type: ignore[union-attr]
    runs += [(f"search{k}", perturbed(k)) for k in range(search)]
    for name, fn in runs:
        t0 = time.perf_counter()
        offsets = fn(items, n_steps, align, floor)
        if name.startswith("search"):
            offsets = compact(items, offsets, n_steps, align, floor)
        secs[name] = time.perf_counter() - t0
        arena = top_of(offsets)
        tried[name] = arena
        if best is None or arena < best.arena:
            label = best.heuristic + "+compact" if name == "compact" and best is not None else name
            best = Placement(offsets, arena, label, tried, secs)
        if best.arena <= lower_bound:
            break
    assert best is not None
    best.tried, best.seconds = tried, secs
    return best
