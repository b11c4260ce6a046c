"""State of one ONNX import: the :class:`Importer` (values, folding, limits, function-body expansion) and the converter registry.

Converters live in the ``import_*`` modules, one family each; they register themselves in
:data:`CONVERTERS` with :func:`converter` when :mod:`rlx.frontends.onnx.importer` imports them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.frontends.onnx import import_symbolic, loading
from rlx.frontends.onnx.validate import check_arity
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.graph import Graph, Origin, Value
from rlx.ir.onnx_format import (
    DeclaredTypeError,
    OnnxError,
    OnnxFormatError,
    OnnxLimitError,
    OnnxUnsupported,
    UnsupportedOpsError,
    onnx_dtype,
    rlx_dtype,
)
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits
from rlx.ir.symbolic import fresh_symbol, ranges_in_effect
from rlx.runtime.reference import eval_node

Converter = Callable[["Importer", Any, list, dict], Any]


CONVERTERS: dict[str, Converter] = {}


FOLD_LIMIT = 1 << 22  # elements: larger computed constants are left as graph nodes


class NeedsStatic(OnnxUnsupported):
    """An operand that must be known at import time (a shape, axes …) is a runtime value.

    ``inputs`` names the graph inputs it depends on; binding them (``static_inputs=``) makes
    the import succeed (specialization)."""

    def __init__(self, what: str, inputs: frozenset[str]):
        self.inputs = inputs
        super().__init__(f"{what} must be static, but depends on graph inputs {sorted(inputs)}")


class NeedsShapes(OnnxUnsupported):
    """A converter needs a static shape (``Shape`` of a symbolic tensor, a branch typed by a size)
    where the model's inputs have symbolic dims: importing with the fed inputs' shapes
    (``input_shapes=``) makes the import succeed (shape specialization, see
    :func:`rlx.onnx.import_runnable`)."""


class SeqValue:
    """An ONNX sequence whose length is known at import time: its items, rlx values, in order.

    Sequence ops (import_sequence) rearrange the items while importing; only tensors reach
    the rlx graph, so a sequence cannot be a graph input or output."""

    def __init__(self, items: Sequence[Value], dtype: DType | None = None):
        self.items = tuple(items)
        self.dtype = self.items[0].dtype if self.items else dtype


def converter_key(node) -> str:
    """A node's key in :data:`CONVERTERS`: its op type, prefixed by its domain outside the default one."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def converter(*op_types: str):
    """Register a converter for ONNX op types (``domain.OpType`` for an op outside the default domain)."""
    def wrap(fn: Converter) -> Converter:
        for op in op_types:
            CONVERTERS[op] = fn
        return fn

    return wrap


_onnx = loading.onnx_module


def _attrs(node) -> dict[str, Any]:
    onnx = _onnx()
    out = {}
    for a in node.attribute:
        try:
            v = onnx.helper.get_attribute_value(a)
        except Exception as exc:  # an attribute whose type field names no value
            raise OnnxFormatError(f"attribute {a.name!r}: {type(exc).__name__}: {exc}") from None
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


def _dim_name(dim_param: str, axis: int) -> str:
    """An ONNX ``dim_param`` as an rlx symbol name (an identifier)."""
    return "".join(c if c.isalnum() else "_" for c in dim_param).lstrip("0123456789") or f"d{axis}"


def _module_of(node) -> str | None:
    """The ``nn.Module`` path torch.onnx records for a node: the innermost module scope of its metadata
    ``namespace`` (``": M/layers.0: Layer/layers.0.fc: Linear/linear: aten.linear.default"`` -> ``layers.0.fc``)."""
    for p in node.metadata_props:
        if p.key == "namespace":
            scopes = [s.partition(": ") for s in p.value.split("/")]
            mods = [n.strip() for n, _, kind in scopes if n.strip() and not kind.startswith(("aten.", "prims."))]
            return mods[-1] if mods else None
    return None


class _Budget:
    """What one import (its subgraph importers included) may still spend: see :class:`rlx.LoadLimits`."""

    def __init__(self, limits: LoadLimits):
        self.limits = limits
        self.constant_bytes = limits.max_constant_bytes
        self.unroll = limits.max_unroll


class Importer:
    """Converts one ONNX graph into an rlx Graph (state of one import)."""

    def __init__(self, model, *, static_inputs: Mapping[str, np.ndarray] | None = None,
                 input_shapes: Mapping[str, Sequence[Any]] | None = None, name: str | None = None,
                 limits: LoadLimits = DEFAULT_LIMITS, budget: _Budget | None = None, depth: int = 0):
        self.model = model
        self.limits = limits
        self.budget = budget or _Budget(limits)
        self.depth = depth
        if depth > limits.max_depth:
            raise OnnxLimitError(f"subgraphs / function bodies nested deeper than LoadLimits.max_depth={limits.max_depth}")
        self.where = "graph"  # the node being converted, for limit messages
        self.opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.opset = self.opsets.get("ai.onnx", 1)
        self.g = Graph(name or model.graph.name or "onnx")
        self.env: dict[str, Value] = {}
        self.deps: dict[str, frozenset[str]] = {}
        self.known: dict[int, np.ndarray] = {}
        self.dims: dict[int, np.ndarray] = {}  # value id -> object array of dims (import_symbolic)
        self.sized: set[str] = set()  # symbolic sizes already checked by import_symbolic.narrow_to_sizes
        self.static_inputs = dict(static_inputs or {})
        self.input_shapes = dict(input_shapes or {})
        self.params: dict[str, np.ndarray] = {}
        self._uid = itertools.count()
        self.declared: dict[str, Any] = {}  # value name -> its TensorTypeProto in value_info / graph outputs
        self._symbols: set[str] = set()

    # ------------------------------------------------------------------ values
    def value(self, name: str) -> Value:
        try:
            return self.env[name]
        except KeyError:
            raise OnnxError(f"value {name!r} is used before it is defined") from None

    def static(self, name: str, what: str = "operand") -> np.ndarray:
        v = self.value(name)
        arr = self.known.get(v.id)
        if arr is None and v.id in self.dims:
            raise NeedsShapes(f"{what} {name!r} is {list(self.dims[v.id].reshape(-1))[:8]}: it depends on the "
                              "inputs' symbolic sizes")
        if arr is None:
            deps = self.deps.get(name, frozenset())
            if not deps:
                arr = self._from_params(v)
                if arr is not None:
                    return arr
            why = "" if deps else (" (it is computed from float initializers, which are params, or from an intermediate"
                                   f" over the import-time folding limit of {FOLD_LIMIT} elements)")
            raise NeedsStatic(f"{what} {name!r}{why}", deps)
        return arr

    def sizes(self, name: str, what: str = "operand") -> list[Any]:
        """An int operand as a flat list of dims: ints when known, symbolic expressions where it is
        computed from the inputs' shapes (``Shape`` → arithmetic); else as :meth:`static`."""
        v = self.value(name)
        got = self.dims.get(v.id)
        if got is not None:
            return [d if isinstance(d, str) else int(d) for d in got.reshape(-1)]
        return [int(d) for d in np.asarray(self.static(name, what)).reshape(-1)]

    def _from_params(self, v: Value) -> np.ndarray | None:
        """``v`` evaluated from the initializers it is computed from (float initializers are params,
        so folding skips them): a Pad's pads or a Reshape's shape computed from weights. Bounded by
        the folding limits; None when it reads a graph input or cannot be evaluated."""
        order, seen, stack = [], set(), [v.id]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            order.append(nid)
            if len(seen) > 4096:
                return None
            node = self.g.node(nid)
            if node.op == "input":
                return None
            stack.extend(i for i in node.inputs if i not in self.known)
        values: dict[int, np.ndarray] = {}
        work = 0  # elements computed: the whole evaluation stays within the folding limit
        for nid in sorted(order):
            node = self.g.node(nid)
            if nid in self.known:
                values[nid] = self.known[nid]
                continue
            if node.op == "param":
                arr = self.params.get(node.attrs["name"])
                if arr is None:
                    return None
                values[nid] = arr
                continue
            if node.op == "result" or not node.shape.is_static:
                return None
            work += node.shape.numel
            if work > min(FOLD_LIMIT, self.limits.max_constant_elements):
                return None
            ins = [values[i] if i in values else self.known.get(i) for i in node.inputs]
            if any(a is None for a in ins):
                return None
            try:
                got = eval_node(node, ins, node.types if node.extra_types else node.type)
            except RlxError:
                return None
            for r, arr in enumerate(got if node.extra_types else (got,)):
                values[nid + r] = arr
        return values.get(v.id)

    def maybe_static(self, v: Value) -> np.ndarray | None:
        return self.known.get(v.id)

    def check_elements(self, n: int, what: str) -> None:
        """Refuse to build an import-time array of ``n`` elements beyond ``LoadLimits.max_constant_elements``."""
        if n > self.limits.max_constant_elements:
            raise OnnxLimitError(f"{self.where}: {what} of {n} elements exceeds LoadLimits.max_constant_elements="
                                 f"{self.limits.max_constant_elements}")

    def unroll(self, n: int, what: str) -> None:
        """Spend ``n`` unrolled steps of the import's ``LoadLimits.max_unroll`` budget."""
        if n > self.budget.unroll:
            raise OnnxLimitError(f"{self.where}: unrolling {what} ({n} steps) exceeds LoadLimits.max_unroll="
                                 f"{self.limits.max_unroll} (over the whole import)")
        self.budget.unroll -= n

    def tensor(self, t) -> np.ndarray:
        """A TensorProto of the model as NumPy (checked against the limits)."""
        return loading.tensor_to_array(t, self.limits)

    def const(self, arr: Any, dtype: Any = None, computed: bool = True) -> Value:
        """A constant node; ``computed`` ones (made at import, not read from the file) spend the constant budget."""
        arr = np.asarray(arr) if dtype is None else np.asarray(arr).astype(DType.of(dtype).numpy)
        if computed:
            self.check_elements(arr.size, "a computed constant")
            if arr.nbytes > self.budget.constant_bytes:
                raise OnnxLimitError(f"{self.where}: computed constants exceed LoadLimits.max_constant_bytes="
                                     f"{self.limits.max_constant_bytes}")
            self.budget.constant_bytes -= arr.nbytes
        v = self.g.constant(arr)
        self.known[v.id] = v.node.attrs["value"].array
        return v

    def scalar(self, value: Any, like: Value) -> Value:
        """A rank-0 constant in ``like``'s dtype."""
        return self.const(np.array(value).astype(like.dtype.numpy))

    def _fold_from(self, start: int) -> None:
        """Evaluate every new node whose operands are all known (constant folding)."""
        for node in self.g.nodes[start:]:
            if node.id in self.known:
                continue
            if node.op == "constant":
                self.known[node.id] = node.attrs["value"].array
                continue
            if node.op in ("input", "param", "result") or not node.inputs:  # a result is folded with its producer
                continue
            types = node.types
            if not all(i in self.known for i in node.inputs) or not all(t.shape.is_static for t in types):
                continue
            numel = sum(t.shape.numel for t in types)
            nbytes = sum(t.shape.numel * t.dtype.itemsize for t in types)
            if numel > min(FOLD_LIMIT, self.limits.max_constant_elements) or nbytes > self.budget.constant_bytes:
                continue
            try:
                got = eval_node(node, [self.known[i] for i in node.inputs], types if node.extra_types else node.type)
            except RlxError:
                continue
            for r, arr in enumerate(got if node.extra_types else (got,)):
                self.known[node.id + r] = arr

    # ------------------------------------------------------------------ graph
    def run(self) -> tuple[Graph, dict[str, np.ndarray]]:
        graph = self.model.graph
        self._check_supported(graph.node)
        for vi in [*graph.value_info, *graph.output]:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                self.declared[vi.name] = vi.type.tensor_type
        inits = {t.name: t for t in graph.initializer}
        for t in graph.initializer:
            arr = self.tensor(t)
            if DType.of(arr.dtype).is_float and t.name not in self.static_inputs:
                v = self.g.param(self._leaf_name(t.name), arr.shape, DType.of(arr.dtype))
                self.params[v.node.attrs["name"]] = arr
                self.env[t.name] = v
            else:
                self.env[t.name] = self.const(arr, computed=False)
            self.deps[t.name] = frozenset()
        for vi in graph.input:
            if vi.name in inits:
                continue
            if vi.name in self.static_inputs:
                self.env[vi.name] = self.const(np.asarray(self.static_inputs[vi.name]))
                self.deps[vi.name] = frozenset()
                continue
            self.env[vi.name] = self._declare_input(vi)
            self.deps[vi.name] = frozenset({vi.name})
        for node in graph.node:
            self.convert_node(node, self.opsets)
        outs = []
        for vi in graph.output:
            v = self.value(vi.name)
            if isinstance(v, SeqValue):
                raise OnnxUnsupported(f"graph output {vi.name!r} is a sequence (only tensors are modelled)")
            self.check_declared(vi.name, v, "graph output")
            if v.node.op not in ("input", "param") and v.id not in [o.id for o in outs]:
                self.g.rename(v, vi.name)  # an output keeps its ONNX name (over an intermediate one)
            outs.append(v)
        self.g.set_outputs(outs)
        from rlx.opt.cleanup import dce

        g = dce(self.g, keep_leaves=True).graph
        from rlx.ir.verify import verify

        verify(g)
        return g, self.params

    def check_declared(self, name: str, v: Value, where: str) -> None:
        """The model's declared type of value ``name`` (value_info, graph outputs) must be what rlx computed.

        Declared positive dims are compared with static dims; named / missing / -1 / 0 dims, and
        element types rlx lacks, are not checked. A disagreement is a converter bug or a model
        contradicting itself: :class:`DeclaredTypeError` names the value and the node."""
        tt = self.declared.get(name)
        if tt is None:
            return
        try:
            want = rlx_dtype(tt.elem_type)
        except OnnxUnsupported:
            want = None
        if want is not None and want != v.dtype:
            raise DeclaredTypeError(f"{where}: value {name!r} is declared {want} but rlx computes {v.dtype}")
        if not tt.HasField("shape"):
            return
        dims = list(tt.shape.dim)
        got = list(v.shape)
        if len(dims) != len(got) or any(d.HasField("dim_value") and d.dim_value > 0 and isinstance(s, int)
                                        and d.dim_value != s for d, s in zip(dims, got)):  # -1 / 0: unknown
            shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            raise DeclaredTypeError(f"{where}: value {name!r} is declared with shape {shown} but rlx computes {got}")

    def _leaf_name(self, name: str) -> str:
        return name if name else f"onnx_{next(self._uid)}"

    def _declare_input(self, vi) -> Value:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            raise OnnxUnsupported(f"input {vi.name!r}: only tensor inputs are supported (not sequence / map / optional)")
        dtype = rlx_dtype(tt.elem_type, f"input {vi.name!r}: ")
        if vi.name in self.input_shapes:
            shape = list(self.input_shapes[vi.name])
        elif not tt.HasField("shape"):  # rank unknown: no graph can be typed before the input is seen
            raise NeedsShapes(f"input {vi.name!r} declares no shape (its rank is unknown): import it with input_shapes")
        else:
            shape = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    if d.dim_value > self.limits.max_dim:
                        raise OnnxFormatError(f"input {vi.name!r}: dim {i} = {d.dim_value} exceeds "
                                              f"LoadLimits.max_dim={self.limits.max_dim}")
                    shape.append(int(d.dim_value))
                elif d.dim_param:
                    shape.append(_dim_name(d.dim_param, i))
                elif d.HasField("dim_value") and d.dim_value < -1:
                    raise OnnxFormatError(f"input {vi.name!r}: dim {i} = {d.dim_value} is negative (-1 means unknown)")
                else:  # anonymous, 0 or -1 (as some exporters write "unknown"; an empty input is imported
                    # with input_shapes): a fresh symbol named from the input and axis, distinct from every named dim
                    sym = fresh_symbol(vi.name, i, self._symbol_names())
                    self._symbols.add(str(sym))
                    shape.append(sym)
        return self.g.input(vi.name, shape, dtype)

    def _symbol_names(self) -> set[str]:
        """Symbols the inputs name (``dim_param``) and the fresh ones made so far."""
        if not self._symbols:
            self._symbols = {_dim_name(d.dim_param, i) for vi in self.model.graph.input
                             if vi.type.HasField("tensor_type")
                             for i, d in enumerate(vi.type.tensor_type.shape.dim) if d.dim_param}
        return self._symbols

    def _check_supported(self, nodes) -> None:
        missing: Counter = Counter()
        for node in nodes:
            if not self._convertible(node):
                missing[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"] += 1
        if missing:
            raise UnsupportedOpsError(missing)

    def _convertible(self, node) -> bool:
        if converter_key(node) in CONVERTERS:
            return True
        return self._function_of(node, probe=True) is not None

    def _function_of(self, node, probe: bool = False, opsets: Mapping[str, int] | None = None):
        onnx = _onnx()
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        version = (opsets or self.opsets).get(domain or "ai.onnx")
        if version is None:
            return None
        try:
            schema = onnx.defs.get_schema(node.op_type, version, domain)
        except Exception:
            return None
        if schema.has_function:
            if probe:
                return True
            fn = onnx.FunctionProto()
            versions = [v for v in schema.function_opset_versions if v <= version]
            if not versions:
                return None
            fn.ParseFromString(schema.get_function_with_opset_version(max(versions)))
            return fn
        if schema.has_context_dependent_function:
            if probe:
                return True
            versions = [v for v in schema.context_dependent_function_opset_versions if v <= version]
            if not versions:
                return None
            types = []
            for name in node.input:
                if not name:
                    types.append(onnx.TypeProto())
                    continue
                v = self.value(name)
                if isinstance(v, SeqValue):
                    raise OnnxError(f"{node.op_type} node {node.name!r}: input {name!r} is a sequence, a tensor is expected")
                types.append(onnx.helper.make_tensor_type_proto(onnx_dtype(v.dtype), [d if isinstance(d, int) else None for d in v.shape]))
            with_defaults = onnx.NodeProto()
            with_defaults.CopyFrom(node)
            given = {a.name for a in node.attribute}
            for key, spec in schema.attributes.items():
                if key not in given and spec.default_value.name:
                    with_defaults.attribute.append(spec.default_value)
            try:
                raw = schema.get_context_dependent_function_with_opset_version(
                    max(versions), with_defaults.SerializeToString(), [t.SerializeToString() for t in types])
            except Exception as exc:
                raise OnnxUnsupported(f"{node.op_type}: its ONNX function body could not be built: {exc}") from None
            fn = onnx.FunctionProto()
            fn.ParseFromString(raw)
            if len([o for o in fn.output if o]) < len([o for o in node.output if o]):
                if any(d is None for t in types if t.HasField("tensor_type") for d in
                       [x.dim_value if x.HasField("dim_value") else None for x in t.tensor_type.shape.dim]):
                    raise NeedsShapes(f"{node.op_type}: its ONNX function body needs static input shapes")
                raise OnnxUnsupported(f"{node.op_type}: its ONNX function body has no outputs for these inputs")
            return fn
        return None

    # ------------------------------------------------------------------ nodes
    def convert_node(self, node, opsets: Mapping[str, int]) -> None:
        start = len(self.g)
        # graph inputs this node's runtime operands depend on (operands known at import time add none)
        reads = [n for n in node.input if n]
        for a in node.attribute:
            if a.type == 5:  # GRAPH: a subgraph reads outer values by name
                reads += _outer_names(a.g)
        deps = frozenset().union(*(self.deps.get(n, frozenset()) for n in reads
                                   if not (n in self.env and self._is_known(self.env[n]))))
        fn = CONVERTERS.get(converter_key(node))
        if fn is None:
            body = self._function_of(node, opsets=opsets)
            if body is None:
                raise UnsupportedOpsError(Counter({node.op_type: 1}))
            self._expand(node, body, opsets)
            self.g.stamp_origin(start, Origin("onnx", node.op_type, node.name, _module_of(node)))
            return
        saved, saved_where = self.opset, self.where
        self.opset = opsets.get("ai.onnx", self.opset)
        self.where = f"{node.op_type} node {node_label(node)!r}"
        try:
            ins = [self.value(n) if n else None for n in node.input]
            check_arity(node, ins, self.opset)
            with ranges_in_effect(self.g.symbol_ranges):  # converters decide with the ranges narrowed so far
                result = fn(self, node, ins, _attrs(node))
        except OnnxError as exc:  # name the node (kept as it is: NeedsStatic / UnsupportedOpsError carry data)
            if exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith(self.where):
                exc.args = (f"{self.where}: {exc.args[0]}", *exc.args[1:])
            raise
        except (RlxError, KeyError, ValueError, IndexError, TypeError, AttributeError, ArithmeticError) as exc:
            what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, RlxError) else str(exc)
            if isinstance(exc, ShapeError) and any(isinstance(v, Value) and not v.shape.is_static for v in ins):
                # a shape rule undecided on symbolic sizes: importing with the fed shapes decides it
                raise NeedsShapes(f"{self.where}: {what}") from exc
            raise OnnxError(f"{self.where}: {what}") from exc
        finally:
            self.opset, self.where = saved, saved_where
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        self.g.stamp_origin(start, Origin("onnx", node.op_type, node.name, _module_of(node)))  # provenance: viewers show the source op
        self._check_new(start, node)
        self._fold_from(start)
        with ranges_in_effect(self.g.symbol_ranges):  # decided with the ranges narrowed so far, as the converters
            import_symbolic.propagate(self, node, ins, _attrs(node), results)
        import_symbolic.narrow_to_sizes(self, results)
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(results) or results[i] is None:
                raise OnnxUnsupported(f"{node.op_type}: output {i} ({name!r}) is not supported")
            v = results[i]
            if isinstance(v, SeqValue):
                self.env[name] = v
                self.deps[name] = frozenset() if self._is_known(v) else deps
                continue
            self.check_declared(name, v, f"{node.op_type} node {node_label(node)!r}")
            if v.id in self.known and self.g.node(v.id).op != "constant":
                v = self.const(self.known[v.id])
            self._keep_name(name, v)
            self.env[name] = v
            self.deps[name] = frozenset() if v.id in self.known else deps

    def _is_known(self, v: Value | SeqValue) -> bool:
        if isinstance(v, SeqValue):
            return all(item.id in self.known for item in v.items)
        return v.id in self.known

    def _keep_name(self, name: str, v: Value) -> None:
        """A value of the model's own graph (not of a function body or subgraph) names its unnamed node."""
        if self.depth == 0 and v.node.name is None and v.node.op not in ("input", "param"):
            self.g.rename(v, name)

    def _check_new(self, start: int, node) -> None:
        """Bound what one node added: the graph's node count and every new value's declared bytes."""
        if len(self.g) > self.limits.max_nodes:
            raise OnnxLimitError(f"{node.op_type} node {node_label(node)!r}: the graph exceeds LoadLimits.max_nodes="
                                 f"{self.limits.max_nodes}")
        for n in self.g.nodes[start:]:
            if n.shape.is_static and n.shape.numel * n.dtype.itemsize > self.limits.max_tensor_bytes:
                raise OnnxLimitError(f"{node.op_type} node {node_label(node)!r}: a value of shape {list(n.shape)} "
                                     f"{n.dtype} exceeds LoadLimits.max_tensor_bytes={self.limits.max_tensor_bytes}")

    def nested(self) -> Any:
        """Context of one more level of inlined subgraph / function body (bounded by LoadLimits.max_depth)."""
        return _Nested(self)

    def _expand(self, node, fn, opsets: Mapping[str, int]) -> None:
        """Import an op through its ONNX function body (attributes substituted, names scoped)."""
        onnx = _onnx()
        prefix = f"__{node.op_type}_{next(self._uid)}_"
        rename = {formal: actual for formal, actual in zip(fn.input, node.input)}
        rename.update({formal: "" for formal in list(fn.input)[len(node.input):]})
        attrs = {a.name: a for a in node.attribute}
        try:
            schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "ai.onnx", 1), node.domain or "")
            for key, spec in schema.attributes.items():
                if key not in attrs and spec.default_value.name:
                    attrs[key] = spec.default_value
        except Exception:
            pass
        with self.nested():
            self._expand_body(node, fn, opsets, prefix, rename, attrs)
        for formal, actual in zip(fn.output, node.output):
            if actual:
                src = rename.get(formal, prefix + formal)
                self.check_declared(actual, self.value(src), f"{node.op_type} node {node_label(node)!r}")
                self._keep_name(actual, self.value(src))
                self.env[actual] = self.value(src)
                self.deps[actual] = self.deps.get(src, frozenset())

    def _expand_body(self, node, fn, opsets, prefix, rename, attrs) -> None:
        onnx = _onnx()
        inner_opsets = dict(opsets)
        inner_opsets.update({o.domain or "ai.onnx": o.version for o in fn.opset_import})
        for inner in fn.node:
            new = onnx.NodeProto()
            new.CopyFrom(inner)
            del new.attribute[:]
            for a in inner.attribute:
                if a.ref_attr_name:
                    if a.ref_attr_name in attrs:
                        copy = onnx.AttributeProto()
                        copy.CopyFrom(attrs[a.ref_attr_name])
                        copy.name = a.name
                        new.attribute.append(copy)
                elif a.type == onnx.AttributeProto.GRAPH:
                    copy = onnx.AttributeProto()
                    copy.CopyFrom(a)
                    _rename_outer(copy.g, lambda nm: rename.get(nm, prefix + nm))
                    new.attribute.append(copy)
                else:
                    new.attribute.append(a)
            new.input[:] = [rename.get(n, prefix + n) if n else "" for n in inner.input]
            new.output[:] = [prefix + n if n else "" for n in inner.output]
            self.convert_node(new, inner_opsets)
            for n in inner.output:
                if n:
                    rename[n] = prefix + n


class _Nested:
    def __init__(self, cx: Importer):
        self.cx = cx

    def __enter__(self) -> None:
        if self.cx.depth + 1 > self.cx.limits.max_depth:
            raise OnnxLimitError(f"{self.cx.where}: subgraphs / function bodies nested deeper than "
                                 f"LoadLimits.max_depth={self.cx.limits.max_depth}")
        self.cx.depth += 1

    def __exit__(self, *exc: Any) -> None:
        self.cx.depth -= 1


def node_label(node) -> str:
    return node.name or next((o for o in node.output if o), "") or "<unnamed>"


def _outer_names(graph) -> list[str]:
    """Names a subgraph (or its nested subgraphs) reads from the enclosing scope."""
    local = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    out = [x for n in graph.node for x in n.input if x and x not in local]
    for n in graph.node:
        for a in n.attribute:
            if a.type == 5:
                out += [x for x in _outer_names(a.g) if x not in local]
    out += [o.name for o in graph.output if o.name not in local]
    return out


def _rename_outer(graph, rename: Callable[[str], str]) -> None:
    """Rename, in place, the outer-scope names a subgraph reads (its own names are left alone)."""
    local = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    for n in graph.node:
        n.input[:] = [x if not x or x in local else rename(x) for x in n.input]
        for a in n.attribute:
            if a.g is not None and a.type == 5:  # GRAPH
                _rename_outer(a.g, lambda nm, local=local: nm if nm in local else rename(nm))
    for o in graph.output:
        if o.name not in local:
            o.name = rename(o.name)
