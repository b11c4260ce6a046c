"""``TorchExecutable``: an MIR graph as one ``torch.fx.GraphModule`` of torch calls, run eagerly or
through ``torch.compile`` (Inductor), on CPU or CUDA.

Each MIR node becomes one ``call_function`` node of the fx graph, whose target applies the op's
row of the lowering table (:mod:`.lowering`) and casts the result to the node's dtype; in an eager
module a node whose lowering is one torch call for its types is that call (:mod:`.direct`: no Python
wrapper per node and run), and the result shapes are checked on the first run; fused ops
without a row are inlined through their registry decomposition; the few ops in ``HOST`` run
their NumPy reference kernel on the host (a graph break under ``torch.compile``). Constants are
buffers of the module; params are moved to the device once (``compile(params=...)``,
:meth:`TorchExecutable.set_params` or ``run(params=...)``) and stay there. A graph with
symbolic dims gets one module per binding of its symbols (built on first use).

Thread-safe as the JAX executable: ``run(params=...)`` uses those params for that call.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from rlx.backends.common import live_nodes
from rlx.backends.torch_backend import lowering as L
from rlx.backends.torch_backend.direct import Call, direct_call
from rlx.backends.torch_backend.weights import CONVS, WeightSplit, inference_graph, split_weights
from rlx.ir.dtype import DType
from rlx.ir.errors import FeedError, RlxError
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.opdef import all_ops, get_op
from rlx.ir.shape import TensorType
from rlx.lir.specialize import bind_attrs
from rlx.ops.facts import VIEW
from rlx.runtime.executable import ExecutableBase, Feed
from rlx.runtime.reference import eval_node

MODES = ("eager", "inductor", "reduce-overhead", "max-autotune")
MEMORY_FORMATS = ("channels_last", "contiguous")

# NumPy dtypes torch cannot wrap directly travel as same-width integers and are re-viewed.
# Types torch has no usable dtype for (its int4 / uint4 / float4 are packed or shell types) travel as
# their bytes in uint8 tensors, and every node reading or making one runs its NumPy kernel on the host.
HOSTED = frozenset({DType.I4, DType.U4, DType.I2, DType.U2, DType.F4E2M1})
_BIT_VIEWS = {DType.BF16: (np.int16, torch.int16), **{d: (np.uint8, torch.uint8) for d in (
    DType.F8E4M3, DType.F8E5M2, DType.F8E4M3FNUZ, DType.F8E5M2FNUZ, DType.F8E8M0, *HOSTED)}}


def to_torch(arr: np.ndarray, dtype: DType, device: torch.device) -> torch.Tensor:
    """A tensor holding ``arr`` on ``device`` (no copy for a writable C-contiguous array on CPU)."""
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        arr = np.array(arr, copy=True, order="C")
    view = _BIT_VIEWS.get(dtype)
    t = torch.from_numpy(arr.view(view[0])) if view else torch.from_numpy(arr)
    if view and dtype not in HOSTED:
        t = t.view(L.torch_dtype(dtype))
    return t.to(device) if t.device != device else t


def to_numpy(t: torch.Tensor, dtype: DType) -> np.ndarray:
    if t.requires_grad:
        t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    view = _BIT_VIEWS.get(dtype)
    if view:
        return t.contiguous().view(view[1]).numpy().view(dtype.numpy)
    return t.numpy()


def _low(t: torch.Tensor) -> bool:
    return t.dtype in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                       torch.float8_e5m2fnuz, torch.float8_e8m0fnu)


def _named(fn: Any, name: str) -> Any:
    fn.__name__ = fn.__qualname__ = name
    return fn


def _lowered(node: Node, out: TensorType, in_types: list[TensorType], check: bool = True) -> Any:
    """The wrapper running ``node``'s lowering: operands widened where the op needs it, the result's shape
    checked against the node's type (``check``; an eager module checks on its first run instead:
    :class:`_FirstRun`) and cast to the node's dtype."""
    fn, op, attrs = L.LOWERINGS[node.op], node.op, node.attrs
    widen = op not in L.NATIVE_LOW_PRECISION and any(t.dtype.is_low_precision_float for t in in_types)
    want, shape = L.torch_dtype(out.dtype), tuple(out.shape)

    def call(*args: torch.Tensor) -> torch.Tensor:
        r = fn([a.float() if _low(a) else a for a in args] if widen else list(args), attrs, out)
        if check and r.shape != shape:
            raise _shape_error(op, node.id, r.shape, shape)
        return r if r.dtype == want else r.to(want)

    return _named(call, op)


def _shape_error(op: str, nid: int, got: Any, shape: tuple) -> RlxError:
    return RlxError(f"torch lowering of {op!r} (node %{nid}) gave shape {list(got)}, expected {list(shape)}")


class _FirstRun(fx.Interpreter):
    """An eager module's first run: node by node, each lowered or direct call's result shape checked
    against its node's type (``meta["rlx_shape"]``); a static module's shapes cannot change after a
    successful run, so later runs call the module's ``forward`` bare."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.extra_traceback = False  # errors keep their own message

    def run_node(self, n: fx.Node) -> Any:
        r = super().run_node(n)
        want = n.meta.get("rlx_shape")
        if want is not None and r.shape != want[2]:
            raise _shape_error(want[0], want[1], r.shape, want[2])
        return r


def _host(node: Node, out: TensorType | tuple[TensorType, ...], in_types: list[TensorType], device: torch.device) -> Any:
    """The node's NumPy reference kernel on the host (tensors copied out and back; a tuple of them for
    a multi-result node)."""
    def call(*args: torch.Tensor) -> Any:
        arrays = [to_numpy(a, t.dtype) for a, t in zip(args, in_types)]
        got = eval_node(node, arrays, out)
        if out.__class__ is tuple:
            return tuple(to_torch(np.asarray(r, order="C"), t.dtype, device) for r, t in zip(got, out))
        return to_torch(np.asarray(got, order="C"), out.dtype, device)  # ascontiguousarray would make a 0-d result [1]

    return _named(call, f"host_{node.op}")


def _to_channels_last(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


def _to_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous()


class _Builder:
    """Emits the fx graph of one MIR graph (with its symbols bound); ``channels_last`` gives every 2-D
    convolution its operands in that memory format (a no-op for those already in it). ``eager``: the
    module runs op by op (no tracing compiler), so a node whose lowering is one torch call for its types
    is that call (:mod:`.direct`), and the shape checks move to the first run (:class:`_FirstRun`)."""

    def __init__(self, graph: Graph, binding: Mapping[str, int], device: torch.device, eager: bool = False,
                 channels_last: bool = False):
        self.graph, self.binding, self.device, self.eager = graph, dict(binding), device, eager
        self.channels_last = channels_last
        self.fx = fx.Graph()
        self.root = torch.nn.Module()
        self._consts = 0

    def typed(self, node: Node) -> TensorType:
        return TensorType(node.shape.bind(self.binding), node.dtype) if self.binding else node.type

    def constant(self, arr: np.ndarray, dtype: DType) -> fx.Node:
        name = f"c{self._consts}"
        self._consts += 1
        self.root.register_buffer(name, to_torch(np.array(arr, copy=True), dtype, self.device))
        return self.fx.get_attr(name)

    def emit_graph(self, g: Graph, env: dict[int, fx.Node], types: dict[int, TensorType]) -> None:
        for node in g.nodes:
            if node.id not in env:
                self.place(node, env, types)

    def place(self, node: Node, env: dict[int, fx.Node], types: dict[int, TensorType]) -> None:
        """Emit ``node``; a multi-result node's results become ``getitem`` nodes under its result nodes' ids."""
        if node.op == RESULT:  # placed with its producer
            return
        if node.op == "constant":
            env[node.id] = self.constant(node.attrs["value"].array, node.dtype)
            types[node.id] = node.type
            return
        outs = tuple(TensorType(t.shape.bind(self.binding), t.dtype) if self.binding else t for t in node.types)
        made = self.emit(node, [env[i] for i in node.inputs], [types[i] for i in node.inputs], outs if node.extra_types else outs[0])
        if not node.extra_types:
            env[node.id], types[node.id] = made, outs[0]
            return
        for r, t in enumerate(outs):
            env[node.id + r], types[node.id + r] = self.fx.call_function(operator.getitem, (made, r)), t

    def emit(self, node: Node, args: list[fx.Node], in_types: list[TensorType], out: Any) -> fx.Node:
        op = node.op
        if self.binding:  # size attributes naming symbols, bound to this module's sizes
            attrs = bind_attrs(op, node.attrs, self.binding)
            node = node if attrs is node.attrs else dataclasses.replace(node, attrs=attrs)
        if (node.extra_types and op not in L.DECOMPOSED) or node.dtype in HOSTED or any(t.dtype in HOSTED for t in in_types):
            # multi-result ops have no torch lowerings yet, HOSTED types no torch dtype: the NumPy kernel runs on the host
            return self.fx.call_function(_host(node, out, in_types, self.device), tuple(args))
        if op in L.LOWERINGS:
            if self.channels_last and op in CONVS and len(in_types[0].shape) == 4:
                args = [self.fx.call_function(_to_channels_last, (a,)) for a in args[:2]] + args[2:]
            return self.lowered(node, args, in_types, out)
        if op in L.DECOMPOSED:
            return self.decomposed(node, args, in_types)
        if op in L.REFUSED:
            raise RlxError(f"torch backend: op {op!r} (node %{node.id}) is not lowered: {L.REFUSED[op]}")
        if get_op(op).kernel is None:
            raise RlxError(f"torch backend: op {op!r} (node %{node.id}) has neither a torch lowering nor a reference kernel")
        return self.fx.call_function(_host(node, out, in_types, self.device), tuple(args))

    def lowered(self, node: Node, args: list[fx.Node], in_types: list[TensorType], out: TensorType) -> fx.Node:
        """The node's lowering: its direct torch call where there is one (eager), else the wrapper."""
        if not self.eager:
            return self.fx.call_function(_lowered(node, out, in_types), tuple(args))
        call = direct_call(node.op, args, node.attrs, in_types, out)
        made = self.call(call) if call is not None else self.fx.call_function(_lowered(node, out, in_types, check=False),
                                                                               tuple(args))
        made.meta["rlx_shape"] = (node.op, node.id, tuple(out.shape))
        return made

    def call(self, call: Call) -> fx.Node:
        """A direct call's fx node (the calls among its arguments first)."""
        target, args, kwargs = call
        return self.fx.call_function(target, tuple(self.call(a) if isinstance(a, Call) else a for a in args), kwargs)

    def decomposed(self, node: Node, args: list[fx.Node], in_types: list[TensorType]) -> fx.Node:
        """The node's registry decomposition (rlx.backends.lowering_table) inlined; a multi-result node
        gives a tuple (its result nodes read it with getitem)."""
        sub, operands = L.TABLE.decomposition(node, in_types)
        env: dict[int, fx.Node] = {}
        for v, a, t in zip(operands, args, in_types):
            env[v.id] = a if t.dtype == v.dtype else self.fx.call_function(_named(lambda x: x.float(), "widen"), (a,))
        inner = _Builder(sub, {}, self.device, self.eager, self.channels_last)
        inner.fx, inner.root, inner._consts = self.fx, self.root, self._consts
        types = {v.id: v.type for v in operands}
        inner.emit_graph(sub, env, types)
        self._consts = inner._consts
        results = []
        for o, t in zip(sub.output_ids, node.types):
            want = L.torch_dtype(t.dtype)
            results.append(self.fx.call_function(_named(lambda x, want=want: x if x.dtype == want else x.to(want), "cast_out"),
                                                 (env[o],)))
        return results[0] if not node.extra_types else self.fx.call_function(_named(lambda *xs: xs, "results"), tuple(results))

    def build(self, received: list[int], outputs: list[int] | None = None, convert: Mapping[int, Any] | None = None,
              kind: str = "") -> fx.GraphModule:
        """The module taking the values of the nodes ``received`` (in order) and returning those of
        ``outputs`` (default: the graph's), ``convert[id]`` applied to an output where given. In
        channels-last mode a rank-4 graph output leaves contiguous (a conv's result may not be)."""
        env: dict[int, fx.Node] = {}
        types: dict[int, TensorType] = {}
        for nid in received:
            env[nid] = self.fx.placeholder(f"leaf{nid}")
            types[nid] = self.typed(self.graph.node(nid))
        if outputs is None:
            outputs = list(self.graph.output_ids)
            if self.channels_last:
                convert = {o: _to_contiguous for o in outputs if len(self.graph.node(o).shape) == 4}
        live = live_nodes(self.graph, outputs, given=env)
        for node in self.graph.nodes:
            if live[node.id] and node.id not in env:
                self.place(node, env, types)
        convert = convert or {}
        self.fx.output(tuple(self.fx.call_function(convert[o], (env[o],)) if o in convert else env[o] for o in outputs))
        return fx.GraphModule(self.root, self.fx, class_name=f"rlx_{kind}{_ident(self.graph.name)}")


def node_module(node: Node, in_types: list[TensorType], out: TensorType | tuple[TensorType, ...],
                device: torch.device) -> fx.GraphModule:
    """``node`` alone as the executable emits it (lowering row, decomposition or host kernel), for per-node
    traces: a module taking the operands in order (a repeated operand twice) and returning the result(s)."""
    b = _Builder(Graph(f"{node.op}_alone"), {}, device)
    env: dict[int, fx.Node] = {}
    types: dict[int, TensorType] = {}
    holders = [b.fx.placeholder(f"a{k}") for k in range(len(node.inputs))]
    for k, (i, t) in enumerate(zip(node.inputs, in_types)):  # a repeated operand reads its first placeholder
        env.setdefault(i, holders[k])
        types[i] = t
    first, *rest = out if isinstance(out, tuple) else (out,)
    node = dataclasses.replace(node, type=first, extra_types=tuple(rest))  # the run's sizes
    b.place(node, env, types)
    outs = tuple(env[node.id + r] for r in range(node.num_results))
    b.fx.output(outs if node.extra_types else outs[0])
    return fx.GraphModule(b.root, b.fx, class_name=f"rlx_node_{_ident(node.op)}")


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "graph"


def _device(device: Any) -> torch.device:
    try:
        dev = torch.device(device if device is not None else "cpu")
    except (RuntimeError, TypeError) as exc:
        raise RlxError(f"torch backend: bad device {device!r} ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RlxError("torch backend: device 'cuda' requested but torch.cuda.is_available() is False")
    return dev


class TorchExecutable(ExecutableBase):
    """``exe.run(inputs={...}, params={...}) -> list[np.ndarray]``; ``exe(**inputs)`` also works.

    ``exe.module`` is the fx GraphModule (of the static graph, or of the last binding);
    ``exe.run_device`` returns the torch tensors on the device without copying them to the host.
    Inputs may be torch tensors of the declared dtype: those on the device are used as they are,
    so a run fed with device tensors and read with ``run_device`` never touches the host.

    ``fold_weights`` (default True): inference BatchNorm chains are folded into their convs, conv +
    bias + activation become one call, and the weight-only nodes run once per params binding on the
    device (:mod:`.weights`; ``exe.prepared`` is the graph the modules are built from; numbers move
    by rounding only). ``memory_format="channels_last"`` (the default) runs 2-D convolutions with
    channels-last operands, the layout torch's CPU (oneDNN) and cuDNN kernels prefer; conv weights
    are converted once; ``"contiguous"`` keeps every tensor as torch makes it.
    """

    backend = "torch"

    def __init__(self, graph: Graph, params: Mapping[str, Any] | None = None, *, device: Any = None, mode: str = "eager",
                 fold_weights: bool = True, memory_format: str = "channels_last"):
        if mode not in MODES:
            raise RlxError(f"torch backend: mode must be one of {list(MODES)}, got {mode!r}")
        if memory_format not in MEMORY_FORMATS:
            raise RlxError(f"torch backend: memory_format must be one of {list(MEMORY_FORMATS)}, got {memory_format!r}")
        if not isinstance(fold_weights, bool):
            raise RlxError(f"torch backend: fold_weights must be True or False, got {fold_weights!r}")
        self.graph, self.mode, self.device = graph, mode, _device(device)
        self.memory_format = memory_format
        self.prepared = inference_graph(graph) if fold_weights else graph
        self.feed = Feed(graph)
        self._inputs, self._param_decl = self.feed.inputs, self.feed.params
        ready_inputs, ready_params = self.prepared.inputs(), self.prepared.params()
        self._split = split_weights(self.prepared, [ready_params[n].id for n in self._param_decl], fold_weights,
                                    memory_format == "channels_last")
        self._received = [ready_inputs[n].id for n in self._inputs] + list(self._split.boundary)
        self._prelude: fx.GraphModule | None = None if self._split.trivial else self._build_prelude(self._split)
        self._params: dict[str, torch.Tensor] = {}
        self._lock = threading.Lock()
        self._modules: dict[tuple[tuple[str, int], ...], Any] = {}
        self._static = all(v.node.shape.is_static for v in [*self._inputs.values(), *self._param_decl.values()])
        self._plain = self.feed.plain
        self._input_dtypes = [(name, v.node.dtype) for name, v in self._inputs.items()]
        self._wrap_plain = self.device.type == "cpu" and not any(d in _BIT_VIEWS for _, d in self._input_dtypes)
        self.module: fx.GraphModule | None = None
        if self._static:
            self.module = self._build({})
        self._bound: list[torch.Tensor] | None = None  # the prelude's results for the bound params, once all are bound
        host, ready = self.device.type == "cpu", self.prepared
        self._out_convs = [_output_converter(ready.node(o), host, copy=host and (
            o in self._split.computed or _aliases_leaf(ready, ready.node(o)))) for o in ready.output_ids]
        self.set_params(params or {})  # a graph without params is bound already (the per-run fast paths apply)

    # ----------------------------------------------------------------- building
    def _build(self, binding: Mapping[str, int]) -> fx.GraphModule:
        builder = _Builder(self.prepared, binding, self.device, self.mode == "eager", self.memory_format == "channels_last")
        return builder.build(self._received)

    def _build_prelude(self, split: WeightSplit) -> fx.GraphModule:
        convert = dict.fromkeys(split.conv_weights, _to_channels_last)
        params = list(split.boundary[:len(self._param_decl)])
        return _Builder(self.prepared, {}, self.device).build(params, list(split.boundary), convert, kind="prelude_")

    def _from_params(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """What the run module receives for these params (declaration order): the prelude's results."""
        if self._prelude is None:
            return tensors
        try:
            return list(self._prelude(*tensors))
        except RlxError:
            raise
        except (RuntimeError, IndexError, ValueError) as exc:
            raise RlxError(f"torch backend: the weight prelude of graph {self.graph.name!r} failed: {exc}") from exc

    def _module(self, binding: Mapping[str, int]) -> Any:
        key = tuple(sorted(binding.items()))
        fn = self._modules.get(key)
        if fn is None:
            with self._lock:
                fn = self._modules.get(key)
                if fn is None:
                    gm = self.module if (not key and self._static) else self._build(binding)
                    self.module = gm
                    fn = self._checked_first(key, gm) if self.mode == "eager" else torch.compile(
                        gm, mode=None if self.mode == "inductor" else self.mode, dynamic=False)
                    self._modules[key] = fn
        return fn

    def _checked_first(self, key: tuple, gm: fx.GraphModule) -> Any:
        """``gm`` whose first successful run checks every result's shape (:class:`_FirstRun`); later runs
        call its ``forward`` bare (a failing run leaves the checks on)."""
        def first(*tensors: torch.Tensor) -> Any:
            out = _FirstRun(gm).run(*tensors)
            self._modules[key] = gm.forward
            return out

        return first

    # ------------------------------------------------------------------ feeding
    def set_params(self, params: Mapping[str, Any]) -> None:
        """Bind weights by name; they are moved to the device once and persist across runs."""
        self._place(params)

    def _place(self, params: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        decl, checked = self._param_decl, self.feed.check_params(params)
        placed = {n: to_torch(np.array(a, copy=True), decl[n].node.dtype, self.device) for n, a in checked.items()}
        with self._lock:
            self._params.update(placed)
            complete = len(self._params) == len(self._param_decl)
            self._bound = self._from_params([self._params[n] for n in self._param_decl]) if complete else None
        return placed

    def _feed(self, inputs: Mapping[str, Any] | None, params: Mapping[str, Any] | None) -> tuple[list[torch.Tensor], dict[str, int]]:
        bound_list = self._bound
        if bound_list is not None and not params and self._static:  # the per-run fast paths
            if self._plain(inputs):
                return self._plain_tensors(inputs) + bound_list, {}
            resident = self._resident(inputs)
            if resident is not None:
                return resident + bound_list, {}
        inputs = self._tensors_to_host(inputs)
        inputs, params = self.feed.maps(inputs, params)
        with self._lock:
            bound = dict(self._params)
        if params:
            bound.update(self._place(params))
            bound_list = self._bound
        binding: dict[str, int] = {}
        if not (self._static and len(bound) == len(self._param_decl) and self._plain(inputs)):
            _, binding = self.feed.check(inputs, self._shaped(bound))  # the full check, naming every problem
        tensors = []
        for name, v in self._inputs.items():
            value = inputs[name]
            arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=v.node.dtype.numpy)
            tensors.append(to_torch(arr, v.node.dtype, self.device))
        # the prelude ran once for the bound params (in _place for this call's): symbolic inputs do not rerun it
        return tensors + (bound_list or self._from_params([bound[n] for n in self._param_decl])), binding

    def _plain_tensors(self, inputs: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
        """A plain feed (``PlainFeed`` said yes) as tensors in declaration order, wrapped where possible."""
        if self._wrap_plain:  # on the host, no bit-view dtype: a C-contiguous writable array is wrapped as it is
            return [torch.from_numpy(a) if (f := (a := inputs[name]).flags).c_contiguous and f.writeable
                    else to_torch(a, dtype, self.device) for name, dtype in self._input_dtypes]
        return [_tensor(inputs[name], dtype, self.device) for name, dtype in self._input_dtypes]

    def _resident(self, inputs: Any) -> list[torch.Tensor] | None:
        """The inputs in declaration order when every one is a torch tensor on the device of the declared
        dtype and shape (they are used as they are); None otherwise."""
        if inputs.__class__ is not dict or len(inputs) != len(self._inputs):
            return None
        out = []
        for name, v in self._inputs.items():
            t = inputs.get(name)
            if not (isinstance(t, torch.Tensor) and t.device == self.device and v.node.dtype not in HOSTED
                    and t.dtype == L.torch_dtype(v.node.dtype) and tuple(t.shape) == tuple(v.node.shape)):
                return None
            out.append(t.detach() if t.requires_grad else t)
        return out

    def _tensors_to_host(self, inputs: Any) -> Any:
        """``inputs`` with its torch tensors as NumPy arrays, for the full feed check; a tensor whose dtype
        is not the declared one is refused here (its NumPy form could not say which it was)."""
        if not isinstance(inputs, Mapping) or not any(isinstance(t, torch.Tensor) for t in inputs.values()):
            return inputs
        out = dict(inputs)
        for name, t in inputs.items():
            v = self._inputs.get(name)
            if not isinstance(t, torch.Tensor) or v is None:
                continue  # an unknown name: the full check names it
            want = None if v.node.dtype in HOSTED else L.torch_dtype(v.node.dtype)
            if t.dtype != want:
                raise FeedError(f"torch backend: input {name!r} of graph {self.graph.name!r} is a torch {t.dtype} tensor; "
                                f"declared {v.node.dtype}")
            out[name] = np.array(to_numpy(t, v.node.dtype), copy=True)
        return out

    def _shaped(self, bound: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """Shape-only stand-ins for the bound params (bind_feed checks names, dtypes and sizes)."""
        out = {}
        for n, t in bound.items():
            node = self._param_decl[n].node
            out[n] = np.lib.stride_tricks.as_strided(np.zeros(1, node.dtype.numpy), tuple(t.shape), (0,) * t.ndim)
        return out

    # -------------------------------------------------------------------- running
    def run_device(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[torch.Tensor]:
        """Run and return the outputs as torch tensors on the device."""
        tensors, binding = self._feed(inputs, params)
        return list(self._call(self._module(binding), tensors))

    def _call(self, fn: Any, tensors: list[torch.Tensor]) -> Any:
        try:  # no autograd context needed: no fed, bound or constant tensor requires grad, so nothing is recorded
            return fn(*tensors)
        except RlxError:
            raise
        except (RuntimeError, IndexError, ValueError) as exc:
            raise RlxError(f"torch backend: running graph {self.graph.name!r} failed: {exc}") from exc

    def run(self, inputs: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        bound, fn = self._bound, self._modules.get(())
        if fn is not None and bound is not None and not params and self._plain(inputs):  # the per-run fast path
            outs = self._call(fn, self._plain_tensors(inputs) + bound)
        else:
            outs = self.run_device(inputs, params)
        return [conv(t) for conv, t in zip(self._out_convs, outs)]

    def __repr__(self) -> str:
        return f"<TorchExecutable {self.graph.name!r} on {self.device} ({self.mode}): {len(self.graph)} nodes>"


#: ops torch may return as a view of their operand (OpDef flag VIEW)
_VIEWS = frozenset(o.name for o in all_ops() if VIEW in o.flags)


def _tensor(arr: np.ndarray, dtype: DType, device: torch.device) -> torch.Tensor:
    """``to_torch`` with the common case first: a writable C-contiguous CPU array torch wraps as it is."""
    if device.type == "cpu" and dtype not in _BIT_VIEWS and arr.flags.c_contiguous and arr.flags.writeable:
        return torch.from_numpy(arr)
    return to_torch(arr, dtype, device)


def _output_converter(node: Node, host: bool, copy: bool) -> Any:
    """tensor -> NumPy array of ``node``'s dtype, decided once per output: on the host a plain dtype is
    ``Tensor.numpy`` itself (no result of a run requires grad: fed tensors are detached, bound and constant
    ones never do); ``copy`` for a possible view of a fed / bound / constant array."""
    dtype = node.dtype
    if copy:
        return lambda t: np.array(to_numpy(t, dtype), copy=True)
    if host and dtype not in _BIT_VIEWS:
        return torch.Tensor.numpy
    return lambda t: to_numpy(t, dtype)


def _aliases_leaf(g: Graph, node: Node) -> bool:
    """Whether ``node`` may be a torch view of an input, param or constant (a chain of view ops from a leaf)."""
    while node.op in _VIEWS:
        node = g.node(node.inputs[0])
    return node.op in L.LEAVES or node.op == "constant"
