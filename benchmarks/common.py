"""Shared helpers for the benchmark scripts: interleaved timing, medians, ratios, tables, the run header.

Every script measures rlx and its peer in the same process, in alternation (the order of the
contenders rotates every round, so load drift on a shared machine hits all of them alike), and
reports medians. Both wall time and process CPU time are recorded: on a loaded machine (see the
load average in the header) wall time mostly measures the neighbours, so the scripts compare
CPU-time medians and show the wall medians beside them.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)


@dataclass
class Timing:
    """Samples of one contender, in seconds per call."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    @property
    def median_wall(self) -> float:
        return statistics.median(self.wall)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)

    def get(self, clock: str) -> float:
        return self.median_cpu if clock == "cpu" else self.median_wall


Contender = Callable[[], object] | tuple[Callable[[], object], Callable[[object], object]]


def measure(fns: dict[str, Contender], repeat: int = 5, number: int = 1, gc_off: bool = True,
            warmup: bool = False, warm_calls: int = 0) -> dict[str, Timing]:
    """Interleaved timing of several contenders; ``repeat`` rounds, each contender once per round.

    A contender is ``fn`` or ``(setup, fn)``: ``setup()`` runs untimed before each sample and its
    result is passed to ``fn`` (for passes that mutate their input). ``number`` calls per sample.
    The cyclic GC is paused while a sample runs (after a collection), as the rlx loader does itself.
    ``warm_calls`` untimed calls precede each sample (the contender before it evicted this one's
    weights from the caches; a model's steady state is warm).
    """
    keys = list(fns)
    out = {k: Timing() for k in keys}
    if warmup:
        for k in keys:
            _sample(fns[k], 1, gc_off)
    for r in range(repeat):
        order = keys[r % len(keys):] + keys[: r % len(keys)]
        for k in order:
            if warm_calls:
                _sample(fns[k], warm_calls, gc_off)
            wall, cpu = _sample(fns[k], number, gc_off)
            out[k].wall.append(wall)
            out[k].cpu.append(cpu)
    return out


def _sample(contender: Contender, number: int, gc_off: bool) -> tuple[float, float]:
    setup, fn = contender if isinstance(contender, tuple) else (None, contender)
    args = [setup() for _ in range(number)] if setup is not None else None
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        if args is None:
            for _ in range(number):
                fn()
        else:
            for a in args:
                fn(a)
        return (time.perf_counter() - w0) / number, (time.process_time() - c0) / number
    finally:
        gc.enable()


def calls_for(fn: Callable[[], object], seconds: float = 0.02, cap: int = 2000) -> int:
    """How many calls of ``fn`` make one sample of about ``seconds`` (fn is called twice here)."""
    fn()
    t0 = time.process_time()
    fn()
    return max(1, min(cap, int(seconds / max(time.process_time() - t0, 1e-7))))


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs, in seconds."""
    return measure({"fn": fn}, repeat, gc_off=False)["fn"].median_wall


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int = 5) -> dict[str, float]:
    """Median wall times of several functions measured in alternation."""
    return {k: t.median_wall for k, t in measure(fns, repeat, gc_off=False).items()}


def ratio(a: float, b: float) -> float:
    """a / b, NaN when either side is missing."""
    if a != a or b != b or b == 0:
        return float("nan")
    return a / b


def fmt(c: object) -> str:
    if isinstance(c, float):
        if c != c:
            return "n/a"
        if abs(c) >= 1000:
            return f"{c:,.0f}"
        return f"{c:.3g}" if abs(c) < 100 else f"{c:.0f}"
    if isinstance(c, int):
        return f"{c:,}"
    return str(c)


def print_table(headers: list[str], rows: list[list[object]], title: str | None = None) -> None:
    """A Markdown table (it pastes into benchmarks/README.md as it is)."""
    if title:
        print(f"\n{title}\n")
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 1) + ":" if j else "-" * (w + 2) for j, w in enumerate(widths)) + "|")
    sys.stdout.flush()


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover
        return "n/a"
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def print_header(title: str, extra: str = "") -> None:
    """Date, machine and load average, printed above every table."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"## {title}\n")
    print(f"{now}; python {platform.python_version()} on {os.cpu_count()} CPU(s); "
          f"load average (1/5/15 min) at start: {load_average()}" + (f"; {extra}" if extra else ""))
    sys.stdout.flush()


def print_footer() -> None:
    print(f"\nload average at end: {load_average()}")


def add_common_args(ap: argparse.ArgumentParser, sizes: str, repeat: int) -> None:
    ap.add_argument("--sizes", default=sizes, help=f"comma-separated graph sizes (default {sizes})")
    ap.add_argument("--repeat", type=int, default=repeat, help=f"interleaved rounds; medians are reported (default {repeat})")
    ap.add_argument("--quick", action="store_true", help="small sizes and few rounds: a smoke run (run_all.py --quick)")


def parse_sizes(text: str) -> list[int]:
    return [int(s.replace("_", "").replace("k", "000")) for s in text.replace(" ", ",").split(",") if s]


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_growth(per_node: dict[int, float], limit: float = 1.5) -> None:
    """The issues' scaling target: time per node at the largest size over that at the smallest."""
    if len(per_node) > 1:
        lo, hi = min(per_node), max(per_node)
        growth = per_node[hi] / per_node[lo]
        print(f"\ntime per node at {hi} / at {lo}: {growth:.2f}x (target <= {limit}x: {verdict(growth <= limit)})")
