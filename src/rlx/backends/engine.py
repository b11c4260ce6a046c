"""What the backends that hand a whole graph to another engine (onnxruntime, OpenVINO) share: params bound
by name, one engine session per (graph, params, settings) from the bounded cache
(:mod:`rlx.backends.session_cache`), and a per-call fast path that skips the full feed check when the
feed is exactly the declared NumPy inputs. A subclass says how to key, build and call a session."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from rlx.backends.session_cache import SESSIONS
from rlx.ir.graph import Graph
from rlx.runtime.executable import ExecutableBase, Feed


def digest(params: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of the params' names, dtypes, shapes and bytes (part of a session's cache key)."""
    h = hashlib.sha256()
    for name in sorted(params):
        a = np.ascontiguousarray(params[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.view(np.uint8).reshape(-1).data)
    return h.hexdigest()


class EngineExecutable(ExecutableBase):
    """``exe.run(inputs={...}, params={...}) -> list[np.ndarray]``; ``exe(**inputs)`` also works.

    Subclasses set ``backend`` and define ``_key_settings()`` (the settings that change a session),
    ``_build(params)`` (a new session holding ``params``) and ``_call(session, feed)`` (one run, the
    feed a dict of declared input name to array)."""

    backend = "engine"

    def __init__(self, graph: Graph, threads: int | None):
        from rlx.ir.serialize import fingerprint

        self.graph, self.threads = graph, threads
        self.fingerprint = fingerprint(graph)
        self.feed = Feed(graph)
        self.input_names = tuple(self.feed.input_names)
        self._params: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._session: Any = None  # the session of the bound params, once built
        self._version = 0
        self._plain = self.feed.plain

    def _key_settings(self) -> tuple[Hashable, ...]:
        raise NotImplementedError

    def _build(self, params: Mapping[str, np.ndarray]) -> Any:
        raise NotImplementedError

    def _call(self, session: Any, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Bind weights by name; the session holding them as initializers is built (or found) on the next run."""
        self._bind(self.feed.check_params(params))

    def _bind(self, checked: Mapping[str, np.ndarray], session: Any = None) -> None:
        with self._lock:
            self._params.update(checked)
            self._version += 1
            self._session = session

    def _session_for(self, params: Mapping[str, np.ndarray]) -> Any:
        key = (self.backend, self.fingerprint, digest(params), self.threads, *self._key_settings())
        return SESSIONS.get(key, lambda: self._build(params))

    def session(self) -> Any:
        """The engine session of the bound params (built now if needed), e.g. to read its settings."""
        sess = self._session
        if sess is None:
            with self._lock:
                bound, version = dict(self._params), self._version
            sess = self._session_for(bound)
            with self._lock:
                if self._version == version:
                    self._session = sess
        return sess

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        sess = self._session
        if sess is not None and not params and inputs is not None and self._plain(inputs):  # the per-run fast path
            return self._call(sess, inputs)
        inputs, params = self.feed.maps(inputs, params)
        with self._lock:
            bound, sess, version = dict(self._params), self._session, self._version
        checked = self.feed.check_params(params) if params else {}
        bound.update(checked)
        fed, _ = self.feed.check(inputs, bound)
        if sess is None or checked:
            sess = self._session_for(bound)
            if checked:  # this call's params stay bound for later runs
                self._bind(checked, sess)
            else:
                with self._lock:
                    if self._version == version:  # nobody bound other params meanwhile
                        self._session = sess
        return self._call(sess, {name: fed[v.id] for name, v in self.feed.inputs.items()})
