"""An ONNX model run as shipped, including models whose shapes depend on input values.

:func:`rlx.onnx.import_model` needs every shape-like operand (Reshape's shape, Slice's starts,
a Reduce's axes, Range's limits ...) at import time; fed by a graph input it raises
:class:`~rlx.frontends.onnx.import_context.NeedsStatic`. :func:`import_runnable` takes such a
model as it is: the inputs the import asked for become the *value inputs* of a
:class:`rlx.runtime.specialize.ValueSpecialized` model, so each distinct set of their values is
imported with them folded in (``static_inputs=``) and compiled once (LRU-cached). Binding some
values can reveal the next ones (a Reshape whose shape is computed from a Range fed by an
input): the set grows on the run that needs it. A model that needs no values is imported and
compiled once, at construction.

A converter that needs a static *shape* where the inputs have symbolic dims (``Shape`` of a
symbolic tensor feeding an ``If`` that squeezes in one branch only, as silero-vad does) raises
:class:`~rlx.frontends.onnx.import_context.NeedsShapes`: the model is then specialised on the
fed inputs' shapes too, one value-specialised runnable per distinct set of shapes (LRU).
A feed with an empty axis where the model declares a named or unknown dim (symbols range over
sizes >= 1) runs the same way, on a runnable imported with the fed shapes.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.frontends.onnx import loading
from rlx.frontends.onnx.import_context import Importer, NeedsShapes, NeedsStatic
from rlx.ir.errors import FeedError
from rlx.ir.graph import Graph
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits
from rlx.runtime.compile import compile as compile_graph
from rlx.runtime.specialize import DEFAULT_MAXSIZE, ValueSpecialized


class OnnxRunnable:
    """``run(inputs) -> list[np.ndarray]`` for an ONNX model, value-specialised where it must be.

    ``input_shapes`` imports with those shapes (as :func:`rlx.onnx.import_model`; a
    shape-specialised runnable makes its children so). ``value_inputs`` names the inputs whose
    values shape the graph (empty for a model that imports without them); ``shape_specialized``
    says whether it is specialised on input shapes too; ``graph`` / ``params`` are the last
    graph imported.
    """

    def __init__(self, model: Any, *, backend: str = "numpy", base_dir: str | os.PathLike | None = None,
                 limits: LoadLimits | None = None, maxsize: int = DEFAULT_MAXSIZE,
                 input_shapes: Mapping[str, Sequence[int]] | None = None, **options: Any):
        self.limits = limits or DEFAULT_LIMITS
        self.proto = loading.read_model(model, base_dir, self.limits)
        self.backend, self.maxsize, self.options = backend, maxsize, options
        self.input_shapes = {n: tuple(s) for n, s in (input_shapes or {}).items()}
        self.graph: Graph | None = None
        self.params: dict[str, np.ndarray] = {}
        self._specialized: ValueSpecialized | None = None
        self._static = None
        self._by_shapes: OrderedDict[tuple, OnnxRunnable] = OrderedDict()
        self._shapes_always = False
        inits = {t.name for t in self.proto.graph.initializer}
        self._fed = [vi.name for vi in self.proto.graph.input if vi.name not in inits]
        try:
            self._static = compile_graph(self._build({}), backend, **options)
        except NeedsStatic as exc:
            self._specialize(exc.inputs)
        except NeedsShapes as exc:
            self._shape_specialize(exc)

    @property
    def shape_specialized(self) -> bool:
        return self._shapes_always

    @property
    def value_inputs(self) -> tuple[str, ...]:
        if self._shapes_always:  # the children imported per shape specialise on values themselves
            return tuple(sorted({name for child in self._by_shapes.values() for name in child.value_inputs}))
        return () if self._specialized is None else self._specialized.value_inputs

    def _build(self, values: Mapping[str, np.ndarray]) -> Graph:
        graph, params = Importer(self.proto, static_inputs=values, input_shapes=self.input_shapes, limits=self.limits).run()
        self.graph, self.params = graph, params
        return graph

    def _specialize(self, names: frozenset[str]) -> None:
        declared = {vi.name for vi in self.proto.graph.input}
        unknown = sorted(set(names) - declared)
        if unknown:
            raise NeedsStatic(f"shape-like value(s) from {unknown} (not graph inputs)", frozenset(names))
        names = sorted(set(self.value_inputs) | set(names))
        self._specialized = ValueSpecialized(self._build, names, self.backend, self.maxsize, **self.options)

    def _shape_specialize(self, exc: NeedsShapes) -> None:
        if self.input_shapes:  # imported with the fed shapes and still short of one: not a shape problem
            raise exc
        self._static = self._specialized = None
        self._shapes_always = True

    def _empty_symbolic_axis(self, inputs: Mapping[str, Any]) -> bool:
        """Whether a fed input is empty along an axis the model declares with a named or unknown dim."""
        for vi in self.proto.graph.input:
            if vi.name not in inputs or not vi.type.HasField("tensor_type"):
                continue
            dims = vi.type.tensor_type.shape.dim
            shape = np.shape(inputs[vi.name])
            if len(shape) == len(dims) and any(n == 0 and d.dim_value <= 0 for n, d in zip(shape, dims)):
                return True
        return False

    def _for_shapes(self, inputs: Mapping[str, Any]) -> OnnxRunnable:
        """The runnable imported with the fed inputs' shapes (built on first use, LRU of ``maxsize``)."""
        missing = sorted(n for n in self._fed if n not in inputs)
        if missing:
            raise FeedError(f"missing input(s) {missing}: the model is specialised on its inputs' shapes")
        shapes = {n: tuple(np.shape(inputs[n])) for n in self._fed}
        key = tuple(sorted(shapes.items()))
        child = self._by_shapes.pop(key, None)
        if child is None:
            child = OnnxRunnable(self.proto, backend=self.backend, limits=self.limits, maxsize=self.maxsize,
                                 input_shapes=shapes, **self.options)
        self._by_shapes[key] = child
        while len(self._by_shapes) > self.maxsize:
            self._by_shapes.popitem(last=False)
        return child

    def run(self, inputs: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        inputs = dict(inputs or {})
        if self._shapes_always or (not self.input_shapes and self._empty_symbolic_axis(inputs)):
            child = self._for_shapes(inputs)
            out = child.run(inputs)
            self.graph, self.params = child.graph, child.params
            return out
        if self._static is not None:
            return self._static.run(inputs, self.params)
        while True:
            try:
                self._specialized.executable(inputs)
                break
            except NeedsShapes as exc:
                self._shape_specialize(exc)
                return self.run(inputs)
            except NeedsStatic as exc:
                new = set(exc.inputs) - set(self.value_inputs)
                if not new:
                    raise
                missing = sorted(n for n in new if n not in inputs)
                if missing:
                    raise FeedError(f"missing shape-determining input(s) {missing}") from None
                self._specialize(frozenset(new))
        return self._specialized.run(inputs, self.params)


def import_runnable(model: Any, *, backend: str = "numpy", base_dir: str | os.PathLike | None = None,
                    limits: LoadLimits | None = None, **options: Any) -> OnnxRunnable:
    """An ONNX model (path, bytes or ``onnx.ModelProto``) ready to run as shipped: see :class:`OnnxRunnable`.

    ``backend`` and ``options`` go to :func:`rlx.compile`; ``base_dir`` and ``limits`` as for
    :func:`rlx.onnx.import_model`.
    """
    return OnnxRunnable(model, backend=backend, base_dir=base_dir, limits=limits, **options)
