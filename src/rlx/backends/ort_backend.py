"""The ``"onnxruntime"`` backend: ``rlx.compile(g, backend="onnxruntime", providers=[...], threads=None)``.

The MIR graph goes through the ONNX exporter (:func:`rlx.backends.onnx.export`, which unfuses
fused ops and checks the model) with the bound params as initializers, so onnxruntime can
pre-pack the weights; before that, inference BatchNorm chains are folded into their convolutions
and weight-only subgraphs computed once (:func:`export_for_session`). Sessions are cached by the graph's
fingerprint, the params' digest, the providers, the thread count and the session settings, in the
bounded LRU of :mod:`rlx.backends.session_cache` (shared with the OpenVINO backend): compiling
the same graph with the same weights twice reuses one session. Binding other params (``set_params`` or
``run(params=...)``) selects (or builds) the session of those params.

Errors onnxruntime raises at run time (an out-of-range gather index, say) surface as
``RlxError`` naming the graph. Importing this module imports onnx and onnxruntime lazily.

Session settings: ``config={key: value}`` sets onnxruntime session config entries
(``SessionOptions.add_session_config_entry``); ``disabled_optimizers=[...]`` names onnxruntime
graph transformers to skip. By default a session on the CPU provider alone skips
:data:`SLOW_CPU_FUSIONS`, the fusions whose kernel is slower on the CPU than the nodes it replaces
(measured by ``benchmarks/ort_fusions.py``); ``disabled_optimizers=()`` keeps every fusion.
``bind_inputs=True`` runs through an IO binding that binds an input again only when another array object
comes, so arrays fed again and updated in place between calls (the LLM decode step's KV cache) are not
re-wrapped each call; the plain ``session.run`` is cheaper for everything else. With it,
``inplace_outputs={output index: input name}`` binds those outputs to their input's own array: the engine writes
the result there and ``run`` returns that array. Only for outputs whose ONNX node updates that input in place
(onnxruntime's GroupQueryAttention appends to its past cache when present and past share a buffer:
``cached_attention`` exported for onnxruntime), where no copy of the whole input is made per call. The other
cache results of such nodes (:func:`updated_inputs`) get the same binding to a copy of their input made for the
call: GroupQueryAttention writes only the cache's filled slots into an output buffer of its own, so this keeps
the op's result (the input's other slots unchanged) without touching the caller's array.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.backends.engine import EngineExecutable, digest
from rlx.backends.session_cache import SESSIONS
from rlx.ir.errors import RlxError
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.shape import TensorType

__all__ = ["SLOW_CPU_FUSIONS", "OrtExecutable", "compile_ort", "coverage", "digest", "export_for_session", "node_session",
           "session_count"]

_OPTIONS = ("params", "providers", "threads", "config", "disabled_optimizers", "bind_inputs", "inplace_outputs")

# onnxruntime 1.32 on x86-64, 1 thread (benchmarks/ort_fusions.py, 2026-12-03): with SkipLayerNormalization
# off, BERT runs 0.89-0.91x, DistilBERT 0.90-0.91x, GPT-2 0.97x the time of the default session, and no
# model where the fusion fires runs slower (ViT-Ti 0.997x). Re-measure after an onnxruntime upgrade.
SLOW_CPU_FUSIONS: tuple[str, ...] = ("SkipLayerNormFusion",)


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise RlxError("onnxruntime backend: the onnxruntime package is not installed (pip install onnxruntime)") from None
    return onnxruntime


def _config_entries(config: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """``config`` as sorted (key, value) pairs (part of the session cache key); both must be strings."""
    if config is None:
        return ()
    if not isinstance(config, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()):
        raise RlxError(f"onnxruntime backend: config must map session config keys to string values, got {config!r}")
    return tuple(sorted(config.items()))


def session_count() -> int:
    """How many onnxruntime sessions the shared cache holds (one per graph, params, providers, threads and settings)."""
    return SESSIONS.count("onnxruntime")


class OrtExecutable(EngineExecutable):
    """``exe.run(inputs={...}, params={...}) -> list[np.ndarray]``; ``exe(**inputs)`` also works."""

    backend = "onnxruntime"

    def __init__(self, graph: Graph, params: Mapping[str, Any] | None = None, *,
                 providers: Sequence[str] | None = None, threads: int | None = None,
                 config: Mapping[str, str] | None = None, disabled_optimizers: Sequence[str] | None = None,
                 bind_inputs: bool = False, inplace_outputs: Mapping[int, str] | None = None):
        ort = _ort()
        available = ort.get_available_providers()
        self.providers = list(providers) if providers else ["CPUExecutionProvider"]
        missing = [p for p in self.providers if p not in available]
        if missing:
            raise RlxError(f"onnxruntime backend: provider(s) {missing} not available; available: {available}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise RlxError(f"onnxruntime backend: threads must be a positive int, got {threads!r}")
        self.config = _config_entries(config)
        if disabled_optimizers is None:
            disabled_optimizers = SLOW_CPU_FUSIONS if self.providers == ["CPUExecutionProvider"] else ()
        elif isinstance(disabled_optimizers, str) or not all(isinstance(n, str) for n in disabled_optimizers):
            raise RlxError(f"onnxruntime backend: disabled_optimizers must be a sequence of transformer names, got {disabled_optimizers!r}")
        self.disabled_optimizers = tuple(disabled_optimizers)
        self.bind_inputs = bool(bind_inputs)
        self._local = threading.local()
        super().__init__(graph, threads)
        self.inplace = self._check_inplace(dict(inplace_outputs or {}))
        #: cache results bound to a per-call copy of their input (see the module doc): output index -> input name
        self.copied = {i: name for i, name in updated_inputs(graph).items() if i not in self.inplace}
        if params:
            self.set_params(params)

    def _check_inplace(self, inplace: dict[int, str]) -> dict[int, str]:
        if inplace and not self.bind_inputs:
            raise RlxError("onnxruntime backend: inplace_outputs needs bind_inputs=True (the outputs are bound to the inputs' arrays)")
        outs = self.graph.outputs
        for index, name in inplace.items():
            if not (isinstance(index, int) and 0 <= index < len(outs)) or name not in self.input_names:
                raise RlxError(f"onnxruntime backend: inplace_outputs entry {index!r}: {name!r} must map an output index "
                               f"(0..{len(outs) - 1}) to an input name ({list(self.input_names)})")
            want, got = self.feed.inputs[name].node.type, outs[index].node.type
            if want != got:
                raise RlxError(f"onnxruntime backend: inplace output {index} ({got}) does not match input {name!r} ({want})")
        return inplace

    def _key_settings(self) -> tuple[Any, ...]:
        return tuple(self.providers), self.config, self.disabled_optimizers

    def _build(self, params: Mapping[str, np.ndarray]) -> Any:
        ort = _ort()
        external: dict[str, np.ndarray] = {}  # large initializers handed over as arrays, not serialized
        proto = export_for_session(self.graph, params, engine="onnxruntime", external=external, threads=self.threads)
        opts = ort.SessionOptions()
        values = [ort.OrtValue.ortvalue_from_numpy(a) for a in external.values()]
        if external:
            opts.add_external_initializers(list(external), values)
        opts.log_severity_level = 3  # errors only: onnxruntime's optimizer notes (unused initializers it drops) are not ours to print
        if self.threads is not None:
            opts.intra_op_num_threads = self.threads
        for k, v in self.config:
            opts.add_session_config_entry(k, v)
        try:
            sess = ort.InferenceSession(proto.SerializeToString(), sess_options=opts, providers=self.providers,
                                        disabled_optimizers=list(self.disabled_optimizers))
        except Exception as exc:  # onnxruntime's own exception types
            raise RlxError(f"onnxruntime backend: cannot load graph {self.graph.name!r}: {exc}") from exc
        sess.rlx_external = values  # the arrays its initializers were read from live as long as the session
        return sess

    def _call(self, sess: Any, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self.copied:  # new arrays each call: rebound, and written by the engine
            feed = {**feed, **{name: np.array(feed[name], copy=True) for name in self.copied.values()}}
            return self._bound_call(sess, feed)
        if self.bind_inputs:
            return self._bound_call(sess, feed)
        try:  # the plain call: ~5 us less per call than a binding on small models
            return sess.run(None, feed)
        except Exception as exc:  # onnxruntime raises its own types (Fail, InvalidArgument, RuntimeException)
            raise RlxError(f"onnxruntime backend: running graph {self.graph.name!r} failed: {exc}") from exc

    def _bound_call(self, sess: Any, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        # through an IO binding (one per thread and session): an input is bound again only when the caller feeds
        # another array object than last time; the bound one is read in place (its memory is shared), so an array
        # updated between calls, as the LLM decode loop's KV cache, costs nothing per call (0.35 ms per token of
        # the benchmark model's decode step: 24 cache wraps)
        state = self._binding(sess)
        binding, wrapped = state.binding, state.wrapped
        try:
            for name, a in feed.items():
                if wrapped.get(name) is not a:
                    c = np.ascontiguousarray(a)
                    binding.bind_cpu_input(name, c)
                    wrapped[name] = c  # held: the binding reads this memory until the input is bound again
                    for i in state.written_by.get(name, ()):  # an in-place output follows its input's array
                        binding.bind_ortvalue_output(state.names[i], _ort().OrtValue.ortvalue_from_numpy(c))
            inplace = state.inplace
            if state.kept is None:  # outputs bound afresh each run: the arrays returned view onnxruntime's memory
                binding.clear_binding_outputs()
                for i, name in enumerate(state.names):
                    if i in inplace:
                        binding.bind_ortvalue_output(name, _ort().OrtValue.ortvalue_from_numpy(wrapped[inplace[i]]))
                    else:
                        binding.bind_output(name)
                sess.run_with_iobinding(binding)
                return [wrapped[inplace[i]] if i in inplace else v.numpy() for i, v in enumerate(binding.get_outputs())]
            sess.run_with_iobinding(binding)  # outputs bound once (see _Binding): no per-run binding or wrapping
            return [wrapped[inplace[i]] if i in inplace else state.kept[i].copy() for i in range(len(state.names))]
        except Exception as exc:  # onnxruntime raises its own types (Fail, InvalidArgument, RuntimeException)
            wrapped.clear()
            raise RlxError(f"onnxruntime backend: running graph {self.graph.name!r} failed: {exc}") from exc

    def _binding(self, sess: Any) -> _Binding:
        """This thread's IO binding of ``sess`` (built on its first call)."""
        state = self._local.__dict__.get("binding")
        if state is None or state.session is not sess:
            state = self._local.binding = _Binding(sess, self.graph, {**self.copied, **self.inplace})
        return state

    def __repr__(self) -> str:
        return f"<OrtExecutable {self.graph.name!r} on {self.providers}>"


class _Binding:
    """One thread's IO binding of a session: the arrays its inputs wrap, and for outputs written into inputs
    (``inplace``: output index -> input name) the indices each input's array receives. With such outputs and every
    other output of a static shape, all outputs stay bound between runs (``kept``: the other outputs' own buffers,
    copied out per run): the LLM decode step's 24 cache outputs cost ~0.5 ms of Python per token when bound afresh
    each run (wrapping 24 arrays and reading back 25 outputs)."""

    def __init__(self, session: Any, graph: Graph, inplace: dict[int, str]):
        self.session, self.binding, self.inplace = session, session.io_binding(), inplace
        self.wrapped: dict[str, np.ndarray] = {}
        self.names = tuple(o.name for o in session.get_outputs())
        self.written_by: dict[str, list[int]] = {}  # kept mode only; otherwise every output is bound before each run
        self.kept: dict[int, np.ndarray] | None = None
        others = [(i, v.node.type) for i, v in enumerate(graph.outputs) if i not in inplace]
        if inplace and all(t.shape.is_static for _, t in others):
            self.kept = {i: np.empty(tuple(t.shape), t.dtype.numpy) for i, t in others}
            for i, buf in self.kept.items():
                self.binding.bind_ortvalue_output(self.names[i], _ort().OrtValue.ortvalue_from_numpy(buf))
            for i, name in inplace.items():
                self.written_by.setdefault(name, []).append(i)


def updated_inputs(graph: Graph) -> dict[int, str]:
    """Output index -> input name for the results of ops that update an operand (:data:`rlx.ir.flags.UPDATES_OPERANDS`:
    result r is operand r with some entries replaced) where that operand is a graph input and the result that graph
    output: ``cached_attention``'s caches, which the exporter hands to GroupQueryAttention's shared past / present
    buffer (:mod:`rlx.backends.onnx.export_kv_attention`)."""
    from rlx.ir.flags import UPDATES_OPERANDS
    from rlx.ir.opdef import get_op

    out_index = {v: i for i, v in enumerate(graph.output_ids)}
    found = {}
    for node in graph.nodes:
        if node.op == RESULT or UPDATES_OPERANDS not in get_op(node.op).flags:
            continue
        for r in range(1, node.num_results):
            operand = graph.node(node.inputs[r])
            if operand.op == "input" and node.id + r in out_index:
                found[out_index[node.id + r]] = operand.name
    return found


def export_for_session(graph: Graph, params: Mapping[str, np.ndarray], engine: str | None = None,
                       external: dict[str, np.ndarray] | None = None, threads: int | None = None) -> Any:
    """``graph`` with ``params`` bound as the ONNX model a session runs: inference BatchNorm chains
    folded into their convolutions (:func:`rlx.opt.fold_affine.fold_conv_affine`; onnxruntime folds
    a conv's Mul / Add but not the Sub of the mean, so the chain would stay four passes; after any other
    activation the chain becomes a 1x1 depthwise conv, one onnxruntime Conv), every
    weight-only subgraph computed once (:func:`rlx.opt.fold_weights.fold_weights`), the algebraic identities
    those weights make and the gradient stops (:func:`rlx.opt.cleanup.simplify` with their values and
    ``keep_gradients=False``: x + a mask of zeros, an embedding's padding-row rule) and the convolution
    branches summed over one activation merged into one conv
    (:func:`rlx.backends.conv_branches.merge_conv_branches`); ``engine`` as for
    :func:`rlx.backends.onnx.export` (``external`` and ``threads`` too)."""
    from rlx.backends.conv_branches import merge_conv_branches
    from rlx.backends.onnx import export
    from rlx.ir.verify import verify
    from rlx.opt.cleanup import dce, simplify
    from rlx.opt.fold_affine import fold_conv_affine
    from rlx.opt.fold_weights import fold_weights

    folded = fold_conv_affine(graph, depthwise=True)
    g = verify(folded.graph) if folded.changed else graph
    g2, bound = fold_weights(g, params)
    # identities on the folded weights (a mask of zeros, a guard that never fires) and of gradient stops
    simpler = simplify(g2, bound, keep_gradients=False)
    if simpler.changed:
        g2 = dce(simpler.graph).graph
    g2 = verify(g2) if g2 is not g else g2
    g3, bound = merge_conv_branches(g2, bound)
    return export(verify(g3) if g3 is not g2 else g3, bound, engine=engine, external=external, threads=threads)


def node_session(node: Node, in_types: list[TensorType], out: TensorType | tuple[TensorType, ...]) -> Any:
    """``node`` alone as a one-node ONNX model in its own session (built here, before any timing), for
    per-node traces: a callable taking the operands in order and returning the result(s). A node with no
    standalone ONNX form raises :class:`RlxError`."""
    from rlx.backends.onnx import export

    sub = Graph(f"{node.op}_alone")
    operands = [sub.input(f"a{k}", t.shape, t.dtype) for k, t in enumerate(in_types)]
    first = sub.append(node.op, operands, node.attrs)
    sub.set_outputs([first.id + r for r in range(node.num_results)])
    ort = _ort()
    try:
        sess = ort.InferenceSession(export(sub, {}).SerializeToString(), providers=["CPUExecutionProvider"])
    except RlxError:
        raise
    except Exception as exc:  # onnxruntime's own exception types
        raise RlxError(f"onnxruntime: cannot load node %{node.id} ({node.op}) alone: {exc}") from exc
    names = [f"a{k}" for k in range(len(in_types))]

    def call(args: list[np.ndarray]) -> Any:
        outs = sess.run(None, dict(zip(names, args)))
        return tuple(outs) if node.extra_types else outs[0]

    return call


def compile_ort(obj: Any, **options: Any) -> OrtExecutable:
    """``rlx.compile(obj, backend="onnxruntime", params=None, providers=None, threads=None, config=None,
    disabled_optimizers=None)``."""
    from rlx.runtime.compile import to_mir

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"onnxruntime backend: unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    params = options.pop("params", None)
    return OrtExecutable(to_mir(obj), params, **options)


def coverage() -> dict[str, str]:
    """How the backend handles each op (for ``exe.dispatch_report()``): what the ONNX exporter
    writes as ONNX nodes runs natively in onnxruntime, fused ops are unfused first, the rest is refused."""
    from rlx.backends.onnx.exporter import EXPORTERS, REFUSED
    from rlx.ir.opdef import all_ops

    table: dict[str, str] = {}
    for op in all_ops():
        if op.name in ("input", "param", "constant", "result"):  # result: one more output of its producer's node
            table[op.name] = "leaf"
        elif op.name in EXPORTERS:
            table[op.name] = "lowered"
        elif op.level == "fused" and op.decompose is not None:
            table[op.name] = "decomposed"
        else:
            table[op.name] = "refused: " + REFUSED.get(op.name, "no ONNX export for this op")
    return table
