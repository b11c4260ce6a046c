"""Progress indication for steps that can take about a second or more (import, optimize,
plan, draw, conformance): a ``rich`` spinner with the step's name and elapsed time on
stderr, shown only when stderr is a terminal and ``--quiet`` is not given; otherwise (pipes,
CI, ``--quiet``, no ``rich``) nothing at all is printed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

_QUIET = False


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = quiet


def _enabled(stream: Any) -> bool:
    return not _QUIET and hasattr(stream, "isatty") and stream.isatty()


@contextlib.contextmanager
def step(text: str, stream: Any = None) -> Iterator[None]:
    """``with step("optimizing model.rlx"): ...`` — a transient spinner while the body runs."""
    stream = stream if stream is not None else sys.stderr
    if not _enabled(stream):
        yield
        return
    try:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    except ImportError:
        yield
        return
    console = Console(file=stream, force_terminal=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        bar.add_task(text, total=None)
        yield


def track(items: Sequence[T], text: str, stream: Any = None) -> Iterator[T]:
    """Iterate ``items`` with a progress bar (count, elapsed, remaining) under the same rules as :func:`step`."""
    stream = stream if stream is not None else sys.stderr
    if not _enabled(stream):
        yield from items
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    except ImportError:
        yield from items
        return
    console = Console(file=stream, force_terminal=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task(text, total=len(items))
        for item in items:
            yield item
            bar.advance(task)
