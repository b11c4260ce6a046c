"""Per-size and per-value specialisation: one model, compiled once per binding, LRU-cached.

* :class:`PlanCache`: a bounded LRU map; the arena executor keeps its per-binding plans of a
  graph with symbolic dims in one (``rlx.compile(g).run`` at many sizes re-plans only for a
  binding it has not seen recently).
* :class:`ValueSpecialized`: for models whose *shapes* depend on the *values* of some inputs
  (ONNX Reshape / Expand / Tile / Range / ConstantOfShape / Slice fed a runtime shape tensor).
  A ``build(values)`` callback makes the graph for given values of those inputs (the
  importer folds them in as constants); each distinct set of values (and of symbol sizes of
  the remaining inputs) is built and compiled once and kept in a :class:`PlanCache`.
  See docs/shapes.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.errors import FeedError, RlxError
from rlx.ir.graph import Graph

DEFAULT_MAXSIZE = 16


class PlanCache(OrderedDict):
    """An LRU dict: ``get`` refreshes an entry, storing beyond ``maxsize`` drops the oldest."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        if maxsize < 1:
            raise RlxError(f"PlanCache maxsize must be >= 1, got {maxsize}")
        super().__init__()
        self.maxsize = maxsize

    def get(self, key: Hashable, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)


def value_key(values: Mapping[str, np.ndarray]) -> tuple:
    """A hashable key of input values: name, dtype, shape and bytes of each."""
    return tuple((name, a.dtype.str, a.shape, a.tobytes()) for name, a in sorted(values.items()))


class ValueSpecialized:
    """Run a model whose graph depends on the values of ``value_inputs``.

    ``build(values)`` returns the :class:`Graph` for those values (a mapping name -> ndarray);
    the graph's own inputs are the remaining feeds (it may also declare a value input as an
    ordinary input, which then is fed too). Executables are compiled with
    ``rlx.compile(graph, backend, **options)`` and cached by the values (LRU, ``maxsize``).
    ``stats`` counts ``builds`` and ``hits``.
    """

    def __init__(self, build: Callable[[Mapping[str, np.ndarray]], Graph], value_inputs: Sequence[str],
                 backend: str = "numpy", maxsize: int = DEFAULT_MAXSIZE, **options: Any):
        self.build, self.value_inputs = build, tuple(value_inputs)
        self.backend, self.options = backend, options
        self._cache = PlanCache(maxsize)
        self._lock = threading.Lock()
        self.stats = {"builds": 0, "hits": 0}

    def executable(self, values: Mapping[str, Any]) -> Any:
        """The compiled executable for these values (built on first use)."""
        from rlx.runtime.compile import compile as compile_graph

        missing = [n for n in self.value_inputs if n not in values]
        if missing:
            raise FeedError(f"missing shape-determining input(s) {missing}")
        arrays = {n: np.asarray(values[n]) for n in self.value_inputs}
        key = value_key(arrays)
        with self._lock:
            exe = self._cache.get(key)
            if exe is not None:
                self.stats["hits"] += 1
                return exe
        graph = self.build(arrays)
        if not isinstance(graph, Graph):
            raise RlxError(f"ValueSpecialized: build returned {type(graph).__name__}, expected a Graph")
        exe = compile_graph(graph, self.backend, **self.options)
        with self._lock:
            self._cache[key] = exe
            self.stats["builds"] += 1
        return exe

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        if not isinstance(inputs, Mapping | None):
            raise FeedError(f"bad feed: inputs= must be a mapping name -> array, got a {type(inputs).__name__}")
        inputs = dict(inputs or {})
        exe = self.executable(inputs)
        declared = exe.graph.inputs() if hasattr(exe, "graph") else None
        feed = inputs if declared is None else {n: v for n, v in inputs.items() if n in declared or n not in self.value_inputs}
        return exe.run(feed, params)

    def __call__(self, **inputs: Any) -> list[np.ndarray]:
        return self.run(inputs=inputs)
