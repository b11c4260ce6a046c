"""Shared helpers for the benchmark scripts: timing medians and table printing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int = 5) -> dict[str, float]:
    """Median times of several functions measured in alternation, so machine noise hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    cells = [[str(h) for h in headers]] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
