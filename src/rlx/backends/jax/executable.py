"""``JaxExecutable``: an MIR graph as one ``jax.jit`` function, on CPU, GPU or a device mesh.

The graph is interpreted once at trace time through the lowering table
(:mod:`rlx.backends.jax.lowering`); XLA sees a single program and fuses it. The jitted
function is cached by the graph's content fingerprint (plus the x64 mode, matmul precision,
placement, and the lowering and registry entry of every op the graph and its bodies use, so
re-registering a custom op with ``replace=True`` never reuses the old op's executable), so
compiling the same graph twice reuses one XLA executable per input shape.

Thread-safe: one executable may be run from many threads; ``run(params=...)`` uses those params
for that call (and binds them for later calls) without affecting a concurrent call's.

Params are placed on the device (or sharded over the mesh) once, by ``compile(params=...)``,
:meth:`JaxExecutable.set_params` or ``run(params=...)``, and stay there between calls.

64-bit types: JAX computes in 32 bits unless x64 is enabled. A graph that holds an ``f64``, ``c128`` or
``i64`` tensor is traced and run inside ``jax.enable_x64(True)`` (a scoped, thread-local
switch), so its dtypes are kept exactly; other graphs run in the process's default mode and
are not affected. Every other dtype (bf16, f16, fp8, i8 …) is kept as declared.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rlx.backends.common import live_nodes
from rlx.backends.jax import lowering as L
from rlx.backends.jax import sharding as S
from rlx.backends.jax.index_checks import rlx_error_of
from rlx.ir.dtype import DType
from rlx.ir.errors import FeedError, RlxError
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.opdef import get_op
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import bind_symbols
from rlx.lir.specialize import bind_attrs
from rlx.runtime.executable import ExecutableBase, Feed

_X64_TYPES = (DType.F64, DType.I64, DType.U64, DType.C128)
_PRECISIONS = {"highest": lax.Precision.HIGHEST, "high": lax.Precision.HIGH, "default": lax.Precision.DEFAULT, None: None}

_CACHE: dict[tuple, Any] = {}
_CACHE_LOCK = threading.Lock()
_STATS = {"hits": 0, "misses": 0}


def cache_info() -> dict[str, int]:
    """Jit-cache counters: entries, hits, misses (compile() calls that reused a jitted function)."""
    return {"entries": len(_CACHE), **_STATS}


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def needs_x64(g: Graph) -> bool:
    return any(n.dtype in _X64_TYPES for n in g.nodes)


def x64_scope(enabled: bool) -> Any:
    return jax.enable_x64(True) if enabled else contextlib.nullcontext()


# ---------------------------------------------------------------------------- interpreter
def _bind_symbols(g: Graph, leaves: Mapping[int, Any]) -> dict[str, int]:
    binding, problems = bind_symbols(((f"%{nid}", g.node(nid).shape, arr.shape) for nid, arr in leaves.items()), g.symbol_ranges)
    if problems:
        raise FeedError("; ".join(problems))
    return binding


def evaluate(g: Graph, leaves: Mapping[int, Any], *, host_fallback: bool = False) -> list[Any]:
    """Trace ``g`` with jax: ``leaves`` maps input / param node ids to arrays; returns the outputs."""
    binding = _bind_symbols(g, leaves)
    live = live_nodes(g)
    env: dict[int, Any] = {}
    for node in g.nodes:
        if not live[node.id]:
            continue
        if node.op == RESULT:  # lowered with its producer
            continue
        if node.op in L.LEAVES:
            env[node.id] = leaves[node.id]
            continue
        attrs = bind_attrs(node.op, node.attrs, binding) if binding else None
        outs = tuple(TensorType(t.shape.bind(binding), t.dtype) if binding else t for t in node.types)
        got = lower_node(node, [env[i] for i in node.inputs], outs if node.extra_types else outs[0],
                         host_fallback=host_fallback, attrs=attrs)
        if node.extra_types:
            env.update(zip(range(node.id, node.id + node.num_results), got))
        else:
            env[node.id] = got
    return [env[o] for o in g.output_ids]


def lower_node(node: Node, args: list[Any], out: TensorType | tuple[TensorType, ...], *, host_fallback: bool = False,
               attrs: Mapping[str, Any] | None = None) -> Any:
    """One node through the lowering table (``attrs``: the node's, bound to the run's symbol
    sizes); the result has exactly ``out``'s shape and dtype. A multi-result node's ``out`` is a
    tuple of types; its lowering returns (and this returns) a tuple of arrays."""
    op = node.op
    if attrs is not None and attrs is not node.attrs:
        node = dataclasses.replace(node, attrs=attrs)
    fn = L.LOWERINGS.get(op)
    if fn is not None:
        if op not in L.NATIVE_LOW_PRECISION:
            args = [a.astype(jnp.float32) if _low(a) else a for a in args]
        result = fn(args, node.attrs, out)
    elif op in L.DECOMPOSED:
        result = lower_decomposed(node, args, out, host_fallback=host_fallback)
    elif op in L.REFUSED:
        raise RlxError(f"jax backend: op {op!r} (node %{node.id}) is not lowered: {L.REFUSED[op]}")
    elif host_fallback and get_op(op).kernel is not None:
        result = _host_callback(node, args, out)
    else:
        raise RlxError(
            f"jax backend: no lowering for op {op!r} (node %{node.id}); add one with "
            "rlx.backends.jax.register_lowering, or compile with host_fallback=True to run its NumPy kernel on the host"
        )
    if out.__class__ is tuple:
        if not isinstance(result, (tuple, list)) or len(result) != len(out):
            raise RlxError(f"jax lowering of {op!r} (node %{node.id}) must give {len(out)} results")
        return tuple(_fitted(node, r, t) for r, t in zip(result, out))
    return _fitted(node, result, out)


def _fitted(node: Node, result: Any, out: TensorType) -> Any:
    if tuple(result.shape) != tuple(out.shape):
        raise RlxError(f"jax lowering of {node.op!r} (node %{node.id}) gave shape {list(result.shape)}, expected {out.shape!r}")
    want = L.jnp_dtype(out.dtype)
    return result if result.dtype == want else result.astype(want)


def _low(a: Any) -> bool:
    return a.dtype in (jnp.bfloat16, jnp.float16) or (jnp.dtype(a.dtype).itemsize == 1 and jnp.issubdtype(a.dtype, jnp.floating))


def lower_decomposed(node: Node, args: list[Any], out: TensorType | tuple[TensorType, ...], *, host_fallback: bool = False) -> Any:
    """An op through its registry decomposition (rlx.backends.lowering_table), in f32 scratch for narrow
    floats (as its kernel); a multi-result node gives a tuple."""
    wide = [a.astype(jnp.float32) if _low(a) else a for a in args]
    sub, operands = L.TABLE.decomposition(node, [TensorType(Shape(tuple(a.shape)), DType.of(np.dtype(a.dtype))) for a in wide])
    got = evaluate(sub, {v.id: a for v, a in zip(operands, wide)}, host_fallback=host_fallback)
    return tuple(got) if node.extra_types else got[0]


def _host_callback(node: Node, args: list[Any], out: TensorType) -> Any:
    from rlx.backends.jax.lowering_ext import host_lowering

    return host_lowering(node.op)(args, node.attrs, out)


def _ops_used(g: Graph, seen: set[str] | None = None) -> set[str]:
    """The op names of ``g`` and of every graph held in its nodes' attributes (bodies, custom_fn)."""
    seen = set() if seen is None else seen
    for node in g.nodes:
        seen.add(node.op)
        for value in node.attrs.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(sub, Graph):
                    _ops_used(sub, seen)
    return seen


def _semantics_key(g: Graph) -> tuple[tuple[tuple[str, int, int], ...], tuple[Any, ...]]:
    """Identity of the lowering and OpDef of each op used: ``(key, objects the key's ids refer to)``."""
    rows, refs = [], []
    for op in sorted(_ops_used(g)):
        fn, opdef = L.LOWERINGS.get(op), get_op(op)
        rows.append((op, id(fn), id(opdef)))
        refs += [fn, opdef]
    return tuple(rows), tuple(refs)


# ------------------------------------------------------------------------------ executable
def _device(device: Any) -> Any:
    if device is None or isinstance(device, jax.Device):
        return device
    if isinstance(device, int):
        return jax.devices()[device]
    if isinstance(device, str):
        platform = {"cuda": "gpu", "rocm": "gpu"}.get(device, device)
        try:
            return jax.devices(platform)[0]
        except RuntimeError as exc:
            raise RlxError(f"jax backend: no {device!r} device ({exc})") from None
    raise RlxError(f"device must be a jax.Device, an index or a platform name, got {device!r}")


class JaxExecutable(ExecutableBase):
    """``exe.run(inputs={...}, params={...}) -> list[np.ndarray]``; ``exe(**inputs)`` also works.

    ``exe.run_device`` returns the jax arrays without copying them to the host.
    """

    backend = "jax"

    def __init__(
        self,
        graph: Graph,
        params: Mapping[str, Any] | None = None,
        *,
        device: Any = None,
        mesh: Any = None,
        in_shardings: Mapping[str, Any] | None = None,
        out_shardings: Any = None,
        precision: str | None = "highest",
        host_fallback: bool = False,
    ):
        if precision not in _PRECISIONS:
            raise RlxError(f"precision must be one of {sorted(k for k in _PRECISIONS if k)} or None, got {precision!r}")
        if device is not None and mesh is not None:
            raise RlxError("give either device= or mesh=, not both")
        if in_shardings and mesh is None and not all(isinstance(s, jax.sharding.Sharding) for s in in_shardings.values()):
            raise RlxError("in_shardings given as partition specs need mesh=")
        self.graph = graph
        self.device = _device(device)
        self.mesh = mesh
        self.precision = precision
        self.host_fallback = host_fallback
        self.x64 = needs_x64(graph)
        self.feed = Feed(graph)
        self._input_names, self._param_names = self.feed.input_names, self.feed.param_names
        self._leaf_nodes = {**{n: v.node for n, v in graph.inputs().items()}, **{n: v.node for n, v in graph.params().items()}}
        self._symbolic = any(not n.shape.is_static for n in self._leaf_nodes.values())
        self._expect = {name: (node.dtype.numpy, tuple(d if isinstance(d, int) else None for d in node.shape))
                        for name, node in self._leaf_nodes.items()}
        self._shardings = self._placement(in_shardings)
        self._out_shardings = S.output_shardings(graph, mesh, out_shardings) if (mesh is not None or out_shardings is not None) else None
        if self.device is not None and self._out_shardings is None:
            self._out_shardings = tuple(S.single_device(self.device) for _ in graph.output_ids)
        self._params: dict[str, Any] = {}
        self._params_lock = threading.Lock()
        self._jitted = self._jit()
        if params:
            self.set_params(params)

    # ----------------------------------------------------------------- building
    def _placement(self, in_shardings: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if self.mesh is not None:
            return S.leaf_shardings(self.graph, self.mesh, in_shardings)
        if in_shardings:
            return {n: in_shardings.get(n) or S.single_device(jax.devices()[0]) for n in self._leaf_nodes}
        if self.device is not None:
            one = S.single_device(self.device)
            return dict.fromkeys(self._leaf_nodes, one)
        return None

    def _placement_key(self) -> tuple:
        if self._shardings is None:
            return ("default",)
        return (tuple((n, repr(s)) for n, s in sorted(self._shardings.items())), repr(self._out_shardings))

    def _platform(self) -> str:
        if self.device is not None:
            return self.device.platform
        if self.mesh is not None:
            return self.mesh.devices.flat[0].platform
        return jax.default_backend()

    def _jit(self) -> Any:
        from rlx.ir.serialize import fingerprint

        self.fingerprint = fingerprint(self.graph)
        semantics, refs = _semantics_key(self.graph)
        key = (self.fingerprint, self.x64, self.precision, self.host_fallback, self._placement_key(), semantics)
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
            if cached is not None:
                _STATS["hits"] += 1
                return cached[0]
            _STATS["misses"] += 1
        g, input_ids, param_ids = self.graph, [v.id for v in self.graph.inputs().values()], [v.id for v in self.graph.params().values()]
        precision, host_fallback = _PRECISIONS[self.precision], self.host_fallback
        platform = self._platform()

        def program(inputs: Sequence[Any], params: Sequence[Any]) -> tuple[Any, ...]:
            with L.tracing_precision(precision), L.tracing_platform(platform):
                leaves = dict(zip(input_ids, inputs))
                leaves.update(zip(param_ids, params))
                return tuple(evaluate(g, leaves, host_fallback=host_fallback))

        kw: dict[str, Any] = {}
        if self._shardings is not None:
            sh = self._shardings
            kw["in_shardings"] = (tuple(sh[n] for n in self._input_names), tuple(sh[n] for n in self._param_names))
        if self._out_shardings is not None:
            kw["out_shardings"] = self._out_shardings
        jitted = jax.jit(program, **kw)
        with _CACHE_LOCK:  # the entry keeps the keyed lowerings / OpDefs alive, so their ids stay unique
            return _CACHE.setdefault(key, (jitted, refs))[0]

    # ------------------------------------------------------------------ feeding
    def _check(self, kind: str, name: str, value: Any) -> Any:
        want, dims = self._expect[name]
        if isinstance(value, jax.Array):
            if value.dtype != want:
                raise FeedError(f"{kind} {name!r}: dtype {value.dtype} given, {DType.of(want)} declared (use .astype)")
            arr = value
        else:
            arr = value if value.__class__ is np.ndarray else np.asarray(value, dtype=want)
            if arr.dtype != want:
                raise FeedError(f"{kind} {name!r}: dtype {arr.dtype} given, {DType.of(want)} declared (use .astype)")
        shape = arr.shape
        if len(shape) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shape)):
            raise FeedError(f"{kind} {name!r}: shape {list(shape)} given, {self._leaf_nodes[name].shape!r} declared")
        return arr

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Bind weights by name; they are placed (or sharded) on the device(s) once and persist across runs."""
        self._place(params)

    def _place(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Check and place ``params`` on the device(s), bind them, and return the placed arrays."""
        unknown = sorted(set(params) - set(self._param_names))
        if unknown:
            raise FeedError(f"unknown param(s) {unknown}; the graph's params are {sorted(self._param_names)}")
        placed: dict[str, Any] = {}
        with x64_scope(self.x64):
            for name, value in params.items():
                arr = self._check("param", name, value)
                target = self._shardings[name] if self._shardings is not None else self.device
                placed[name] = jax.device_put(arr, target) if target is not None else jnp.asarray(arr)
        with self._params_lock:
            self._params.update(placed)
        return placed

    def _feed(self, inputs: Mapping[str, Any] | None, params: Mapping[str, Any] | None) -> tuple[tuple, tuple]:
        inputs, params = self.feed.maps(inputs, params)
        with self._params_lock:
            bound = dict(self._params)
        if params:
            bound.update(self._place(params))  # this call's params, whatever another thread binds meanwhile
        names = self._input_names
        if len(inputs) != len(names) or len(bound) != len(self._param_names) or not all(n in inputs for n in names):
            self.feed.check(inputs, {n: np.asarray(a) for n, a in bound.items()})  # raises, naming every problem
        check = self._check
        ins = tuple([check("input", n, inputs[n]) for n in self._input_names])
        ps = tuple([bound[n] for n in self._param_names])
        if self._symbolic:
            _bind_symbols(self.graph, {self._leaf_nodes[n].id: a for n, a in zip(self._input_names + self._param_names, ins + ps)})
        return ins, ps

    # -------------------------------------------------------------------- running
    def run_device(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run and return the outputs as jax arrays (on the device, sharded as XLA left them)."""
        with x64_scope(self.x64):
            ins, ps = self._feed(inputs, params)
            return list(self._jitted(ins, ps))

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        with x64_scope(self.x64):
            ins, ps = self._feed(inputs, params)
            return [np.asarray(o) for o in self._call(ins, ps)]

    def _call(self, ins: Any, ps: Any) -> Any:
        """The jitted program; an RlxError a lowering's host check raised comes back as that RlxError."""
        try:
            return jax.block_until_ready(self._jitted(ins, ps))
        except Exception as exc:  # the check's RlxError itself on the first call; a ValueError / JaxRuntimeError later
            err = rlx_error_of(exc)
            if err is None:
                raise
            raise err from None

    def lower_text(self, inputs: Mapping[str, Any] | None = None) -> str:
        """The StableHLO text of the program for a feed (for inspection)."""
        with x64_scope(self.x64):
            ins, ps = self._feed(inputs, None)
            return self._jitted.lower(ins, ps).as_text()

    def __repr__(self) -> str:
        where = f"mesh {dict(self.mesh.shape)}" if self.mesh is not None else str(self.device or jax.devices()[0])
        return f"<JaxExecutable {self.graph.name!r} on {where}: {len(self.graph)} nodes, x64={self.x64}>"
