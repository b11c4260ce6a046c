"""Pipeline dumps: every stage's text form and each pass's before / after diff, in a folder.

    with rlx.ir.dump.dump_to("dumps/"):
        mir = module.lower_to_mir()          # 00-hir.txt, 01-mir.txt
        opt, _ = rlx.optimize(mir)           # 02-pass-cse.diff, ..., NN-optimized.txt
        lir = rlx.plan(opt)                  # NN-lir.txt (graph + plan report)

Setting ``RLX_IR_DUMP=folder`` does the same for a whole process (each graph in its own
subfolder, named after the graph). Files are numbered in the order they are written;
``index.txt`` lists them with one line per pass (nodes before → after, seconds, what it
changed). A pass that changed nothing writes no diff, only its index line.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import os
import re
import threading
from collections.abc import Iterator, Mapping

from rlx.ir.atomic import atomic_open
from rlx.ir.errors import RlxError

ENV_VAR = "RLX_IR_DUMP"
_ACTIVE: contextvars.ContextVar[IrDump | None] = contextvars.ContextVar("rlx_ir_dump", default=None)
_ENV_DUMPS: dict[str, IrDump] = {}
_ENV_LOCK = threading.Lock()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "graph"


class IrDump:
    """Writes numbered stage and pass files into ``folder`` (created when first needed)."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = os.fspath(folder)
        self._n = 0
        self._lock = threading.Lock()

    def _files(self, label: str | None, text: str | None, index_line: str) -> str | None:
        """Append ``index_line`` to index.txt and, with a label, write ``text`` as the next numbered file."""
        with self._lock:
            try:
                os.makedirs(self.folder, exist_ok=True)
                path = None
                if label is not None and text is not None:
                    path = os.path.join(self.folder, f"{self._n:02d}-{_slug(label)}")
                    self._n += 1
                    with atomic_open(path, "w") as f:
                        f.write(text if text.endswith("\n") else text + "\n")
                    index_line = f"{index_line} ({os.path.basename(path)})"
                with open(os.path.join(self.folder, "index.txt"), "a", encoding="utf-8") as f:
                    f.write(index_line + "\n")
            except OSError as exc:
                raise RlxError(f"IR dump: cannot write into {self.folder!r}: {exc.strerror or exc}") from None
        return path

    def stage(self, name: str, text: str) -> str:
        """Write a whole stage (``hir``, ``mir``, ``optimized``, ``lir`` …) as ``NN-name.txt``."""
        path = self._files(f"{name}.txt", text, f"stage {name}")
        assert path is not None
        return path

    def pass_diff(self, name: str, before: str, after: str, stats: Mapping[str, int], nodes: tuple[int, int],
                  seconds: float) -> str | None:
        """Record one pass: its index line, and a unified diff when it changed the graph."""
        did = ", ".join(f"{k}={v}" for k, v in sorted(stats.items()) if v) or "no change"
        line = f"pass {name}: nodes {nodes[0]} -> {nodes[1]}, {seconds * 1e3:.2f} ms, {did}"
        if before == after:
            return self._files(None, None, line)
        diff = difflib.unified_diff(before.splitlines(), after.splitlines(), f"before {name}", f"after {name}", lineterm="")
        return self._files(f"pass-{name}.diff", "\n".join(diff), line)


@contextlib.contextmanager
def dump_to(folder: str | os.PathLike[str]) -> Iterator[IrDump]:
    """Dump every stage and pass run inside the ``with`` block (this thread / context) into ``folder``."""
    dump = IrDump(folder)
    token = _ACTIVE.set(dump)
    try:
        yield dump
    finally:
        _ACTIVE.reset(token)


def active_dump(graph_name: str) -> IrDump | None:
    """The dump that stages and passes of graph ``graph_name`` go to: the ``dump_to`` block's, else
    ``$RLX_IR_DUMP/<graph name>/`` when the variable is set, else None."""
    dump = _ACTIVE.get()
    if dump is not None:
        return dump
    root = os.environ.get(ENV_VAR)
    if not root:
        return None
    key = os.path.join(root, _slug(graph_name))
    with _ENV_LOCK:
        return _ENV_DUMPS.setdefault(key, IrDump(key))
