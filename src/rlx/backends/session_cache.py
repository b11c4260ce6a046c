"""One bounded least-recently-used cache of engine sessions (onnxruntime ``InferenceSession``, OpenVINO
``CompiledModel``), shared by the engine backends.

A session holds its own copy of the weights (pre-packed for the engine's kernels), so an unbounded cache
grows by the model's size each time new params are bound (``run(params=...)``). This one keeps at most
:func:`cache_size` sessions (default :data:`DEFAULT_SIZE`, or the ``RLX_SESSION_CACHE_SIZE`` environment
variable read at import) and drops the least recently used; an executable still holding a dropped
session keeps it alive until it binds other params. Keys start with the backend's name, so one backend's
sessions never answer for another's.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from rlx.ir.errors import RlxError

DEFAULT_SIZE = 8


def _checked_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise RlxError(f"session cache: size must be a positive int, got {size!r}")
    return size


def _env_size() -> int:
    raw = os.environ.get("RLX_SESSION_CACHE_SIZE")
    if raw is None:
        return DEFAULT_SIZE
    try:
        return _checked_size(int(raw))
    except ValueError:
        raise RlxError(f"session cache: RLX_SESSION_CACHE_SIZE must be a positive int, got {raw!r}") from None


class SessionCache:
    """``get(key, build)``: the session under ``key``, built by ``build()`` on a miss (outside the lock:
    building takes seconds, and other keys stay served meanwhile). ``builds`` and ``evictions`` count
    what happened since creation, for tests and benchmarks."""

    def __init__(self, size: int = DEFAULT_SIZE):
        self._size = _checked_size(size)
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0
        self.evictions = 0

    @property
    def size(self) -> int:
        return self._size

    def resize(self, size: int) -> None:
        """Keep at most ``size`` sessions from now on (the least recently used go first)."""
        with self._lock:
            self._size = _checked_size(size)
            self._trim()

    def _trim(self) -> None:
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
            self.evictions += 1

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        session = build()
        with self._lock:
            self.builds += 1
            if key in self._entries:  # another thread built it meanwhile: keep one
                self._entries.move_to_end(key)
                return self._entries[key]
            self._entries[key] = session
            self._trim()
            return session

    def count(self, backend: str | None = None) -> int:
        """How many sessions are held (those of ``backend`` alone when given: keys start with its name)."""
        with self._lock:
            return sum(1 for k in self._entries if backend is None or (isinstance(k, tuple) and k[:1] == (backend,)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return self.count()


SESSIONS = SessionCache(_env_size())


def cache_size() -> int:
    """How many engine sessions the shared cache keeps."""
    return SESSIONS.size


def set_cache_size(size: int) -> None:
    """Keep at most ``size`` engine sessions (all engine backends together); a smaller size evicts at once."""
    SESSIONS.resize(size)
