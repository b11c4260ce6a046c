"""File handling shared by the loaders and :func:`rlx.save`.

Reading: only regular files. The file is opened without blocking and checked with ``fstat``
before any read, so a FIFO, device or directory is refused instead of hanging or raising a
bare ``OSError``, and the bytes read are those of the file that was checked.

Writing: never in place. Data goes to a temporary name in the destination folder, is flushed
and ``fsync``-ed, then renamed over the destination (atomic on POSIX) and the folder is synced,
so a reader (or a process killed mid-write) sees the old file or the new one, never a mix.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from typing import Any, BinaryIO

from rlx.ir.errors import FormatError

_TEMP = r"\.tmp-(\d+)-[0-9a-f]{8}"


def open_regular(path: str, what: str = "file") -> int:
    """A read-only descriptor of the regular file ``path``; FormatError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FormatError(f"cannot read {what} {path!r}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise FormatError(f"cannot read {what} {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise FormatError(f"{what} {path!r} is {kind}, not a regular file")
    return fd


def read_regular(path: str, max_bytes: int, what: str = "file", limit_name: str = "the limit") -> bytes:
    """All bytes of the regular file ``path``, refused before reading if larger than ``max_bytes``."""
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise FormatError(f"{what} {path!r}: {size} bytes exceeds {limit_name}={max_bytes}")
        try:
            data = f.read(size)  # read(n) allocates n bytes up front: never the limit
        except OSError as exc:
            raise FormatError(f"cannot read {what} {path!r}: {exc.strerror}") from None
    if len(data) != size:
        raise FormatError(f"{what} {path!r} changed size while being read")
    return data


def temp_name(path: str) -> str:
    """A fresh temporary name next to ``path`` (matched by :func:`is_temp_of`)."""
    return f"{path}.tmp-{os.getpid()}-{os.urandom(4).hex()}"


def is_temp_of(name: str, base: str) -> bool:
    """Whether the file name ``name`` is a :func:`temp_name` of the file name ``base`` left behind by a
    writer that is gone: a temporary whose process still runs (this one included: another thread)
    belongs to a write in progress, and a cleanup must not remove it."""
    m = re.fullmatch(re.escape(base) + _TEMP, name)
    return m is not None and not _alive(int(m.group(1)))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (or a pid no process can have)
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sync_folder(path: str) -> None:
    """``fsync`` the folder holding ``path`` so a rename in it survives a crash (best effort)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory
    finally:
        os.close(fd)


def write_temp(path: str, write: Callable[[BinaryIO], Any]) -> tuple[str, Any]:
    """``write(f)`` into a new temporary file next to ``path``, flushed and fsync-ed.

    Returns ``(temp path, write's result)``; on any failure the temporary file is removed."""
    tmp = temp_name(path)
    try:
        with open(tmp, "xb") as f:
            result = write(f)
            f.flush()
            os.fsync(f.fileno())
        return tmp, result
    except BaseException:
        remove_quietly(tmp)
        raise


def commit(tmp: str, path: str) -> None:
    """Rename ``tmp`` over ``path`` (atomic) and make the rename durable."""
    os.replace(tmp, path)
    sync_folder(path)


def remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
