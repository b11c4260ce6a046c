"""The :class:`Executable` protocol every backend's compiled graph implements, and the feed checks
they share (written once here).

``rlx.compile(graph, backend=...)`` returns an object with ``graph``, ``backend``,
``run(inputs=None, params=None) -> list[np.ndarray]``, ``exe(**inputs)``, ``set_params(params)``
and ``dispatch_report()``: the NumPy arena executor, the jax, torch and onnxruntime executables.
:class:`ExecutableBase` gives the shared parts: ``exe(**inputs)``, the dispatch report, and a
:class:`Feed` for the graph — the per-run fast path (exactly the declared inputs as NumPy arrays
of the declared dtype and static shape), the full check naming every problem (missing / unknown
names, dtype, rank, dims, a symbol fed two sizes), the param check, and the leaves in
declaration order (how each executable binds inputs and params to its program).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlx.ir.graph import Graph
from rlx.runtime.dispatch import DispatchReport, ReportsDispatch
from rlx.runtime.reference import bind_feed, checked_params, feed_maps

__all__ = ["Executable", "ExecutableBase", "Feed", "PlainFeed"]


@runtime_checkable
class Executable(Protocol):
    """A graph compiled for one backend."""

    graph: Graph
    backend: str

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]: ...

    def __call__(self, **inputs: Any) -> list[np.ndarray]: ...

    def set_params(self, params: Mapping[str, Any]) -> None: ...

    def dispatch_report(self) -> DispatchReport: ...


class PlainFeed:
    """The fast path of the feed check, run before the full one (:meth:`Feed.check`): exactly the
    declared inputs, as NumPy arrays of the declared dtype and static shape. Anything else (a list,
    another dtype, a symbolic graph) takes the full check, which names every problem."""

    def __init__(self, g: Graph):
        inputs = g.inputs()
        self.static = all(v.node.shape.is_static for v in inputs.values())
        self.expect = {n: (v.node.dtype.numpy, tuple(v.node.shape)) for n, v in inputs.items()} if self.static else {}

    def __call__(self, inputs: Any) -> bool:
        if not self.static or inputs.__class__ is not dict or len(inputs) != len(self.expect):
            return False
        for name, (dtype, shape) in self.expect.items():
            a = inputs.get(name)
            if a.__class__ is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return False
        return True


class Feed:
    """The feed checks and leaf order of one graph."""

    def __init__(self, g: Graph):
        self.graph = g
        self.inputs = g.inputs()
        self.params = g.params()
        self.input_names = list(self.inputs)
        self.param_names = list(self.params)
        self.plain = PlainFeed(g)

    def maps(self, inputs: Any, params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``inputs`` and ``params`` as dicts (a FeedError for a list, a bare array, non-string keys)."""
        return feed_maps(self.graph, inputs, params)

    def check(self, inputs: Mapping[str, Any] | None, params: Mapping[str, Any] | None) -> tuple[dict[int, np.ndarray], dict[str, int]]:
        """The full check (a FeedError naming every problem): arrays by leaf node id, and the symbol sizes."""
        return bind_feed(self.graph, inputs, params)

    def check_params(self, params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Params to bind, each checked against its declaration (unknown names, dtype, static shape)."""
        return checked_params(self.graph, params)

    def ordered(self, fed: Mapping[int, Any]) -> tuple[list[Any], list[Any]]:
        """The fed inputs and params (by node id) in declaration order: how programs take their leaves."""
        return [fed[v.id] for v in self.inputs.values()], [fed[v.id] for v in self.params.values() if v.id in fed]


class ExecutableBase(ReportsDispatch):
    """What every executable shares: ``exe(**inputs)``, ``exe.dispatch_report()`` and ``exe.feed``."""

    graph: Graph
    backend: str
    feed: Feed

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        raise NotImplementedError

    def __call__(self, **inputs: Any) -> list[np.ndarray]:
        return self.run(inputs=inputs)
