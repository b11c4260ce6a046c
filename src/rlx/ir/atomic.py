"""Atomic file writes: every file rlx writes goes through here.

The data goes to a fresh temporary file in the destination's folder (so the rename cannot cross
file systems), is flushed and ``fsync``-ed, then ``os.replace``-d over the destination and the
folder is synced. A reader, or a process killed at any moment, sees the old complete file or the
new complete one, never a truncated or mixed one. On failure the temporary file is removed; a
writer only ever removes its own temporaries (their names carry the writer's pid and a random
tag, :func:`rlx.ir.fileio.temp_name`).

- :func:`write_bytes` / :func:`write_text`: the whole content at once;
- :func:`atomic_open`: a file object to write into (``with atomic_open(p, "w") as f: ...``);
- :func:`atomic_path`: a temporary path for writers that want a file name (``np.savez``,
  a library's ``save(path)``); whatever they wrote there replaces ``path`` when the block ends.

Multi-file outputs commit their parts in an order that never pairs a new part with an old one
(content-named parts first, the file that names them last).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from rlx.ir import fileio

__all__ = ["atomic_open", "atomic_path", "write_bytes", "write_text"]


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path next to ``path``; when the block exits normally the file written there is
    synced and renamed over ``path``. On an exception it is removed and ``path`` is untouched.
    (The temporary name has no extension: give ``np.savez`` a file object, :func:`atomic_open`.)"""
    with _staged(path) as tmp:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open(temp, mode)`` for writing (``"w"`` / ``"wb"``; ``kwargs`` as ``open``'s, text defaults to
    UTF-8); the file replaces ``path`` atomically when the block exits normally."""
    if mode not in ("w", "wb", "wt"):
        raise ValueError(f"atomic_open writes a new file: mode must be 'w' or 'wb', got {mode!r}")
    if mode != "wb":
        kwargs.setdefault("encoding", "utf-8")
    with _staged(path) as tmp:
        with open(tmp, mode.replace("w", "x"), **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


@contextmanager
def _staged(path: str | os.PathLike[str]) -> Iterator[str]:
    dest = os.fspath(path)
    tmp = fileio.temp_name(dest)
    try:
        yield tmp
        fileio.commit(tmp, dest)
    except BaseException:
        fileio.remove_quietly(tmp)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically."""
    write_bytes(path, text.encode(encoding))
