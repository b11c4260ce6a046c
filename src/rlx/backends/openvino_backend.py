"""The ``"openvino"`` backend: ``rlx.compile(g, backend="openvino", params=None, threads=None, device="CPU",
precision="f32", config=None)``.

The graph goes the onnxruntime backend's way (:func:`rlx.backends.ort_backend.export_for_session`: BatchNorm
chains folded into their convolutions, weight-only subgraphs computed once, the ONNX exporter with the
params as initializers) and OpenVINO reads the ONNX bytes (``Core.read_model``) and compiles them for
``device``. Through ONNX, not OpenVINO's own graph API: one exporter for both engines, which already writes
the ops in the forms engines fuse; on 9 real models (``benchmarks/README.md``) this path ran 0.97x the time of
OpenVINO on torch's own ONNX file (geomean; faster on 8). Building the OpenVINO graph directly with its opset
(``benchmarks/ov_graph_api.py``) ran inference in the same time (within 3%) and only compiled faster, so the one
exporter stays the route.

``precision`` sets ``INFERENCE_PRECISION_HINT``: ``"f32"`` by default, because the CPU plugin's own default
is bf16 (or f16) where the CPU supports it, which misses rlx's float32 tolerances (a 1e-3 check fails on a
transformer encoder); ``precision=None`` leaves the plugin's choice. ``threads`` sets
``INFERENCE_NUM_THREADS``; one stream and the latency hint, the setting for one call at a time. Compiled
models live in the bounded session cache shared with onnxruntime (:mod:`rlx.backends.session_cache`).
Each thread calling ``run`` gets its own infer request (a request serves one call at a time).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.backends.engine import EngineExecutable
from rlx.backends.session_cache import SESSIONS
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph

__all__ = ["BoundRequest", "OpenVinoExecutable", "compile_openvino", "coverage", "session_count"]

_OPTIONS = ("params", "threads", "device", "precision", "config")
_PRECISIONS = ("f32", "bf16", "f16", None)
_CORE: list[Any] = []
_CORE_LOCK = threading.Lock()


def _core() -> Any:
    """One ``openvino.Core`` per process (creating one loads the plugins: ~50 ms)."""
    with _CORE_LOCK:
        if not _CORE:
            try:
                import openvino
            except ImportError:
                raise RlxError("openvino backend: the openvino package is not installed (pip install openvino)") from None
            _CORE.append(openvino.Core())
        return _CORE[0]


def session_count() -> int:
    """How many OpenVINO compiled models the shared session cache holds."""
    return SESSIONS.count("openvino")


class _Compiled:
    """A compiled model, the port of each declared input it kept (OpenVINO may drop an input no output
    reads), which ports take a copy into the request's own tensor (static shape, at most :data:`COPY_BYTES`),
    and per-thread infer requests."""

    def __init__(self, compiled: Any, input_names: tuple[str, ...]):
        import openvino

        self.compiled = compiled
        self.tensor = openvino.Tensor
        ports = {name: i for i, port in enumerate(compiled.inputs) for name in port.get_names()}
        self.ports = tuple((i, n) for n in input_names if (i := ports.get(n)) is not None)
        self.copied = frozenset(i for i, _ in self.ports if _copied(compiled.inputs[i]))
        self.outputs = range(len(compiled.outputs))
        self._local = threading.local()

    def request(self) -> tuple[Any, dict[int, np.ndarray]]:
        """This thread's infer request and the arrays its shared-memory ports wrap (port -> array)."""
        local = getattr(self._local, "request", None)
        if local is None:
            local = self._local.request = (self.compiled.create_infer_request(), {})
        return local


#: inputs of a static shape up to this size are copied into the request's own tensor (a few us) rather than
#: wrapped (an ``ov.Tensor`` per call plus ``set_input_tensor``: ~5-10 us each, measured on the LLM decode step)
COPY_BYTES = 1 << 16


def _copied(port: Any) -> bool:
    shape = port.get_partial_shape()
    return shape.is_static and port.get_element_type().size * int(np.prod(shape.to_shape(), dtype=np.int64)) <= COPY_BYTES


class OpenVinoExecutable(EngineExecutable):
    """``exe.run(inputs={...}, params={...}) -> list[np.ndarray]``; ``exe(**inputs)`` also works."""

    backend = "openvino"

    def __init__(self, graph: Graph, params: Mapping[str, Any] | None = None, *, threads: int | None = None,
                 device: str = "CPU", precision: str | None = "f32", config: Mapping[str, Any] | None = None):
        core = _core()
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise RlxError(f"openvino backend: threads must be a positive int, got {threads!r}")
        if not isinstance(device, str) or device.split(".")[0] not in core.available_devices:
            raise RlxError(f"openvino backend: device {device!r} not available; available: {core.available_devices}")
        if precision not in _PRECISIONS:
            raise RlxError(f"openvino backend: precision must be one of {list(_PRECISIONS)}, got {precision!r}")
        if config is not None and (not isinstance(config, Mapping) or not all(isinstance(k, str) for k in config)):
            raise RlxError(f"openvino backend: config must map OpenVINO property names to values, got {config!r}")
        self.device, self.precision = device, precision
        self.config = tuple(sorted((k, str(v)) for k, v in (config or {}).items()))
        super().__init__(graph, threads)
        if params:
            self.set_params(params)

    def properties(self) -> dict[str, Any]:
        """The properties the model is compiled with: rlx's defaults, then ``config`` over them."""
        props: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
        if self.precision is not None:
            props["INFERENCE_PRECISION_HINT"] = self.precision
        if self.threads is not None:
            props["INFERENCE_NUM_THREADS"] = str(self.threads)
        props.update(self.config)
        return props

    def _key_settings(self) -> tuple[Any, ...]:
        return self.device, self.precision, self.config

    def _build(self, params: Mapping[str, np.ndarray]) -> _Compiled:
        from rlx.backends.ort_backend import export_for_session

        proto = export_for_session(self.graph, params)
        core = _core()
        try:
            model = core.read_model(proto.SerializeToString())
            compiled = core.compile_model(model, self.device, self.properties())
        except Exception as exc:  # OpenVINO raises RuntimeError / its own types
            raise RlxError(f"openvino backend: cannot compile graph {self.graph.name!r}: {exc}") from exc
        return _Compiled(compiled, self.input_names)

    def _call(self, sess: _Compiled, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        # the cheapest path through OpenVINO's Python API (measured by benchmarks/engine_overhead.py and the LLM
        # decode loop): small static inputs copied into the request's own tensors; larger ones wrapped without a
        # copy, and not wrapped again while the caller feeds the same array object (a KV cache it updates in
        # place: the request reads its memory); a bare infer; each output's memory copied out once (the request
        # reuses it on the next call)
        req, wrapped = sess.request()
        tensor, copied = sess.tensor, sess.copied
        try:
            for i, name in sess.ports:
                a = feed[name]
                if i in copied or not a.ndim:  # a wrapped 0-d array reads as shape (1,): copied too
                    req.get_input_tensor(i).data[...] = a
                elif wrapped.get(i) is not a:
                    c = np.ascontiguousarray(a)
                    req.set_input_tensor(i, tensor(c, shared_memory=True))
                    wrapped[i] = c  # held: the request reads this memory until the port is set again
            req.infer()
            return [req.get_output_tensor(i).data.copy() for i in sess.outputs]
        except Exception as exc:  # OpenVINO raises RuntimeError / its own types
            raise RlxError(f"openvino backend: running graph {self.graph.name!r} failed: {exc}") from exc

    def bind(self, inputs: Mapping[str, np.ndarray]) -> BoundRequest:
        """A request of its own that reads ``inputs`` in place: every array is wrapped once, the caller updates
        them between calls and calls the result (see :class:`BoundRequest`). For a loop that runs one graph many
        times on the same buffers (an LLM decode step): no feed check, copy or wrap per call. The request runs the
        session of the params bound now (a later ``set_params`` needs a new ``bind``)."""
        if not self.feed.plain(dict(inputs)) or not all(a.flags.c_contiguous and a.flags.writeable for a in inputs.values()):
            self.feed.check(inputs, self._params)  # names every problem
            raise RlxError(f"openvino backend: bind needs every input of {self.graph.name!r} as a writable C-contiguous "
                           f"array of its declared dtype and static shape")
        return BoundRequest(self.session(), inputs, self.graph.name)

    def __repr__(self) -> str:
        return f"<OpenVinoExecutable {self.graph.name!r} on {self.device}>"


class BoundRequest:
    """``step() -> list[np.ndarray]``: one infer of a request whose inputs wrap the caller's arrays (shared memory,
    set once: OpenVINO reads their current contents at each call); the outputs are views of the request's own
    memory, valid until the next call (copy what must outlive it). Per call this is the infer and one view per
    output, where ``exe.run`` checks the feed, copies the small inputs and copies every output out (~0.1 ms per
    step of the benchmark LLM's decode graph, 28 inputs)."""

    def __init__(self, sess: _Compiled, inputs: Mapping[str, np.ndarray], name: str):
        self.request, self.name = sess.compiled.create_infer_request(), name
        self.inputs = dict(inputs)  # held: the request reads this memory
        try:
            for i, n in sess.ports:
                a = self.inputs[n]
                self.request.set_input_tensor(i, sess.tensor(a, shared_memory=True))
        except Exception as exc:  # OpenVINO raises RuntimeError / its own types
            raise RlxError(f"openvino backend: cannot bind the inputs of graph {name!r}: {exc}") from exc
        self.outputs = tuple(sess.outputs)

    def __call__(self) -> list[np.ndarray]:
        req = self.request
        try:
            req.infer()
            return [req.get_output_tensor(i).data for i in self.outputs]
        except Exception as exc:  # OpenVINO raises RuntimeError / its own types
            raise RlxError(f"openvino backend: running graph {self.name!r} failed: {exc}") from exc


def compile_openvino(obj: Any, **options: Any) -> OpenVinoExecutable:
    """``rlx.compile(obj, backend="openvino", params=None, threads=None, device="CPU", precision="f32", config=None)``."""
    from rlx.runtime.compile import to_mir

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"openvino backend: unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    params = options.pop("params", None)
    return OpenVinoExecutable(to_mir(obj), params, **options)


def coverage() -> dict[str, str]:
    """The ops the backend runs: those of the ONNX export (OpenVINO reads every standard ONNX op the exporter writes)."""
    from rlx.backends.ort_backend import coverage as onnx_coverage

    return onnx_coverage()
