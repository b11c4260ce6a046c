"""Shared by the thread tests: run one callable from many threads at once and count wrong answers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def hammer(run_one: Callable[[Any], bool], cases: Sequence[Any], runs: int) -> list[tuple[int, int]]:
    """Thread t calls ``run_one(cases[t])`` ``runs`` times (all threads start together); returns the
    (thread, run) pairs where it returned False. An exception in any thread fails the caller."""
    wrong: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(cases))

    def worker(t: int) -> None:
        try:
            start.wait()
            for r in range(runs):
                if not run_one(cases[t]):
                    wrong.append((t, r))
        except BaseException as exc:  # surfaced below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(len(cases))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return wrong
