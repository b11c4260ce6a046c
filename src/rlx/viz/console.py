"""Console output for the command line: tables through ``rich`` when it is installed, plain
aligned text otherwise (``rich`` is optional and imported lazily).

``RLX_PLAIN=1`` in the environment forces plain text. Without a terminal, rich prints
without colour at a width of at least 120 columns, so piped output stays readable.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["Console", "get_console"]


class Console:
    """``table(title, columns, rows)``, ``rule(title)``, ``line(text)`` on stdout."""

    def __init__(self, plain: bool | None = None, file: Any = None):
        self.file = file or sys.stdout
        self._rich: Any = None
        if plain is None:
            plain = os.environ.get("RLX_PLAIN", "") not in ("", "0")
        if not plain:
            try:
                from rich.console import Console as RichConsole
            except ImportError:
                RichConsole = None
            if RichConsole is not None:
                tty = hasattr(self.file, "isatty") and self.file.isatty()
                width = None if tty else max(120, shutil.get_terminal_size((120, 24)).columns)
                self._rich = RichConsole(file=self.file, width=width, highlight=False, soft_wrap=False)

    @property
    def rich(self) -> bool:
        return self._rich is not None

    def line(self, text: str = "") -> None:
        if self._rich is not None:
            self._rich.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.file)
        self.file.flush()

    def rule(self, title: str) -> None:
        if self._rich is not None:
            self._rich.rule(title, style="cyan")
        else:
            print(f"\n== {title} " + "=" * max(3, 72 - len(title)), file=self.file)
        self.file.flush()

    def table(self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
              right: Sequence[str] = ()) -> None:
        """A table; columns named in ``right`` are right-aligned (numbers)."""
        cells = [[str(c) for c in row] for row in rows]
        if self._rich is not None:
            from rich.table import Table

            if title:
                self._rich.print(title, markup=False, highlight=False, soft_wrap=True)
            t = Table(show_lines=False, header_style="bold")
            for c in columns:
                t.add_column(c, justify="right" if c in right else "left", overflow="fold")
            for row in cells:
                t.add_row(*row)
            self._rich.print(t)
        else:
            widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

            def fmt(row: Sequence[str]) -> str:
                return "  ".join(v.rjust(w) if c in right else v.ljust(w) for v, w, c in zip(row, widths, columns)).rstrip()

            if title:
                print(title, file=self.file)
            print(fmt(list(columns)), file=self.file)
            print("  ".join("-" * w for w in widths), file=self.file)
            for row in cells:
                print(fmt(row), file=self.file)
        self.file.flush()


_DEFAULT: Console | None = None


def get_console() -> Console:
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT.file is not sys.stdout:
        _DEFAULT = Console()
    return _DEFAULT
