"""The numpy executor's ``threads=``: NumPy's BLAS thread pool limited for the length of each run.

NumPy's OpenBLAS runs a matmul on every core whatever the caller asked for, and its idle workers keep spinning
about 0.1 s after: a ``threads=1`` executable used two cores, and whatever the process timed next paid for it
(``backend="auto"``'s calibration picked the slower engine: docs/backends.md). The limit is threadpoolctl's (the
``onnx`` / ``openvino`` extras install it), set around each run and restored after it; it is process-wide while
it holds, as BLAS's own setting is.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlx.ir.errors import RlxError

_CONTROLLER: Any = None  # threadpoolctl's view of the loaded libraries
_LIMITER: Any = None  # the limit in force, while any run holds it
_HOLDERS = 0
_LOCK = threading.Lock()


def available() -> bool:
    """Whether ``threads=`` can be honoured here (threadpoolctl installed)."""
    return importlib.util.find_spec("threadpoolctl") is not None


def check_threads(threads: Any) -> int | None:
    """``threads`` as given to the numpy backend, validated: None (BLAS's own count) or a positive int."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise RlxError(f"numpy backend: threads must be a positive int or None, got {threads!r}")
    if not available():
        raise RlxError("numpy backend: threads= limits NumPy's BLAS through threadpoolctl, which is not installed "
                       "(pip install 'rlx[onnx]' or threadpoolctl)")
    return threads


@contextmanager
def blas_limit(threads: int) -> Iterator[None]:
    """A context in which NumPy's BLAS runs on at most ``threads`` threads. Counted: runs that overlap (one
    executable called from several threads) share the first one's limit, and the last to leave restores the
    count BLAS had (nested save / restore pairs would leave the limit behind when they end out of order)."""
    global _CONTROLLER, _LIMITER, _HOLDERS
    with _LOCK:
        if _CONTROLLER is None:  # inspecting the loaded libraries takes ~0.2 ms: once per process
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = ThreadpoolController()
        if _HOLDERS == 0:
            _LIMITER = _CONTROLLER.limit(limits=threads, user_api="blas")
        _HOLDERS += 1
    try:
        yield
    finally:
        with _LOCK:
            _HOLDERS -= 1
            if _HOLDERS == 0:
                _LIMITER.restore_original_limits()
                _LIMITER = None
