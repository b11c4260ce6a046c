"""ONNX → rlx MIR importer.

``import_model(model) -> (graph, params)``: initializers become params (floats) or constants
(integer / bool tensors, which are shape-like in practice); every ONNX node is converted by a
small function in :data:`CONVERTERS` (keyed by op type) into one or several MIR ops. Ops with
no converter whose ONNX schema defines a function body (``MeanVarianceNormalization``,
``Celu``, context-dependent ones like ``LayerNormalization``…) are expanded into that body and
imported node by node. Values computable at import time (``Shape`` of a static tensor and
everything downstream of constants: ``Gather``, ``Concat``, ``ConstantOfShape``, ``Range`` …)
are folded with rlx's own reference kernels, so static shape chains end up as attributes.

An unsupported model raises :class:`UnsupportedOpsError` listing every unsupported op type
with its count before anything is converted.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.backends.onnx import loading
from rlx.backends.onnx.common import (
    OnnxError,
    OnnxFormatError,
    OnnxLimitError,
    OnnxUnsupported,
    UnsupportedOpsError,
    onnx_dtype,
    rlx_dtype,
)
from rlx.backends.onnx.validate import check_arity
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Value
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, UNARY_MATH_KINDS
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


def converter(*op_types: str):
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
        self.static_inputs = dict(static_inputs or {})
        self.input_shapes = dict(input_shapes or {})
        self.params: dict[str, np.ndarray] = {}
        self._uid = itertools.count()
        self.expected: dict[str, int] = {}

    # ------------------------------------------------------------------ values
    def value(self, name: str) -> Value:
        try:
            return self.env[name]
        except KeyError:
            raise OnnxError(f"value {name!r} is used before it is defined") from None

    def static(self, name: str, what: str = "operand") -> np.ndarray:
        v = self.value(name)
        arr = self.known.get(v.id)
        if arr is None:
            raise NeedsStatic(f"{what} {name!r}", self.deps.get(name, frozenset()))
        return arr

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
            if node.op in ("input", "param") or not node.inputs:
                continue
            if not all(i in self.known for i in node.inputs) or not node.shape.is_static:
                continue
            nbytes = node.shape.numel * node.dtype.itemsize
            if node.shape.numel > min(FOLD_LIMIT, self.limits.max_constant_elements) or nbytes > self.budget.constant_bytes:
                continue
            try:
                self.known[node.id] = eval_node(node, [self.known[i] for i in node.inputs], node.type)
            except RlxError:
                continue

    # ------------------------------------------------------------------ graph
    def run(self) -> tuple[Graph, dict[str, np.ndarray]]:
        graph = self.model.graph
        self._check_supported(graph.node)
        for vi in [*graph.value_info, *graph.output]:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                self.expected[vi.name] = vi.type.tensor_type.elem_type
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
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                want = rlx_dtype(vi.type.tensor_type.elem_type, f"output {vi.name!r}: ")
                if v.dtype != want:
                    v = self.g.cast(v, to=want)
            outs.append(v)
        self.g.set_outputs(outs)
        from rlx.opt.cleanup import dce

        g = dce(self.g, keep_leaves=True).graph
        from rlx.ir.verify import verify

        verify(g)
        return g, self.params

    def _leaf_name(self, name: str) -> str:
        return name if name else f"onnx_{next(self._uid)}"

    def _declare_input(self, vi) -> Value:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            raise OnnxUnsupported(f"input {vi.name!r}: only tensor inputs are supported (not sequence / map / optional)")
        dtype = rlx_dtype(tt.elem_type, f"input {vi.name!r}: ")
        if vi.name in self.input_shapes:
            shape = list(self.input_shapes[vi.name])
        else:
            shape = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    if not 0 <= d.dim_value <= self.limits.max_dim:
                        raise OnnxFormatError(f"input {vi.name!r}: dim {i} = {d.dim_value} is negative or exceeds "
                                              f"LoadLimits.max_dim={self.limits.max_dim}")
                    shape.append(int(d.dim_value))
                elif d.dim_param:
                    shape.append("".join(c if c.isalnum() else "_" for c in d.dim_param).lstrip("0123456789") or f"d{i}")
                else:
                    raise OnnxUnsupported(f"input {vi.name!r}: dim {i} has no size or name (pass input_shapes=)")
        return self.g.input(vi.name, shape, dtype)

    def _check_supported(self, nodes) -> None:
        missing: Counter = Counter()
        for node in nodes:
            if not self._convertible(node):
                missing[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"] += 1
        if missing:
            raise UnsupportedOpsError(missing)

    def _convertible(self, node) -> bool:
        if node.domain in ("", "ai.onnx") and node.op_type in CONVERTERS:
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
                                   if not (n in self.env and self.env[n].id in self.known)))
        fn = CONVERTERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if fn is None:
            body = self._function_of(node, opsets=opsets)
            if body is None:
                raise UnsupportedOpsError(Counter({node.op_type: 1}))
            self._expand(node, body, opsets)
            return
        saved, saved_where = self.opset, self.where
        self.opset = opsets.get("ai.onnx", self.opset)
        self.where = f"{node.op_type} node {node_label(node)!r}"
        try:
            ins = [self.value(n) if n else None for n in node.input]
            check_arity(node, ins, self.opset)
            result = fn(self, node, ins, _attrs(node))
        except OnnxError as exc:  # name the node (kept as it is: NeedsStatic / UnsupportedOpsError carry data)
            if exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith(self.where):
                exc.args = (f"{self.where}: {exc.args[0]}", *exc.args[1:])
            raise
        except (RlxError, KeyError, ValueError, IndexError, TypeError, AttributeError, ArithmeticError) as exc:
            what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, RlxError) else str(exc)
            raise OnnxError(f"{self.where}: {what}") from exc
        finally:
            self.opset, self.where = saved, saved_where
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        self._check_new(start, node)
        self._fold_from(start)
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(results) or results[i] is None:
                raise OnnxUnsupported(f"{node.op_type}: output {i} ({name!r}) is not supported")
            v = results[i]
            want = self.expected.get(name)
            if want:  # ONNX shape inference says which element type this value has
                try:
                    wd = rlx_dtype(want)
                except OnnxUnsupported:
                    wd = None
                if wd is not None and wd != v.dtype:
                    v = self.g.cast(v, to=wd)
                    self._fold_from(v.id)
            if v.id in self.known and self.g.node(v.id).op != "constant":
                v = self.const(self.known[v.id])
            self.env[name] = v
            self.deps[name] = frozenset() if v.id in self.known else deps

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


def import_model(model: Any, *, static_inputs: Mapping[str, np.ndarray] | None = None,
                 input_shapes: Mapping[str, Sequence[Any]] | None = None, base_dir: str | os.PathLike | None = None,
                 limits: LoadLimits | None = None) -> tuple[Graph, dict[str, np.ndarray]]:
    """Import an ONNX model (path, bytes or ``onnx.ModelProto``) as an rlx MIR graph and its params.

    ``static_inputs`` binds graph inputs to constant values (specialization: shape-like
    inputs become attributes); ``input_shapes`` overrides the declared input shapes.
    External data is read only from inside the model's folder: a path's own folder, or
    ``base_dir`` (required for bytes / a ``ModelProto`` that has external data). ``limits``
    (default :class:`rlx.LoadLimits`) bounds the file and the work done at import; every
    refusal is an :class:`rlx.RlxError`. onnx's own (C++) checker and shape inference are
    never run on the model: rlx infers types itself.
    """
    limits = limits or DEFAULT_LIMITS
    proto = loading.read_model(model, base_dir, limits)
    return Importer(proto, static_inputs=static_inputs, input_shapes=input_shapes, limits=limits).run()


# ====================================================================== converter helpers
def _axis(a: int, rank: int) -> int:
    if not -max(rank, 1) <= a < max(rank, 1):
        raise OnnxUnsupported(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0


def _ints(cx: Importer, node, idx: int, attr: str | None, attrs: dict, default=None):
    """An int list given as attribute (older opsets) or as a static input (newer)."""
    if attr is not None and attr in attrs:
        return [int(v) for v in attrs[attr]]
    if idx < len(node.input) and node.input[idx]:
        return [int(v) for v in np.asarray(cx.static(node.input[idx], attr or "operand")).reshape(-1)]
    return default


def _reshape(cx: Importer, v: Value, shape: Sequence[int]) -> Value:
    if tuple(v.shape) == tuple(shape):
        return v
    return cx.g.reshape(v, new_shape=[int(s) for s in shape])


def _static_shape(v: Value) -> list[int]:
    if not v.shape.is_static:
        raise OnnxUnsupported(f"a static shape is needed, got {v.shape!r}")
    return [int(d) for d in v.shape]


def _broadcast_to(cx: Importer, v: Value, shape: Sequence[int]) -> Value:
    if tuple(v.shape) == tuple(shape):
        return v
    return cx.g.expand(v, target_shape=list(shape))


def _cast(cx: Importer, v: Value, dtype: DType) -> Value:
    return v if v.dtype == dtype else cx.g.cast(v, to=dtype)


# ====================================================================== elementwise
_ACT = {row.onnx: k for k, row in ACTIVATION_KINDS.items() if row.onnx}
_MATH = {row.onnx: k for k, row in UNARY_MATH_KINDS.items() if row.onnx}


def _act(cx, node, ins, attrs):
    x = ins[0]
    if node.op_type == "Relu" and x.dtype.is_int:
        return cx.g.maximum(x, cx.scalar(0, x))
    return cx.g.activation(x, kind=_ACT[node.op_type])


def _math(cx, node, ins, attrs):
    return cx.g.unary_math(ins[0], kind=_MATH[node.op_type])


@converter("Reciprocal")
def _reciprocal(cx, node, ins, attrs):
    return cx.scalar(1.0, ins[0]) / ins[0]


@converter("Identity")
def _identity(cx, node, ins, attrs):
    return ins[0]


_VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}  # n-ary in ONNX: a chain of binary ops
_BIN = {row.onnx: k for k, row in BINARY_KINDS.items() if row.onnx not in _VARIADIC}


@converter(*_BIN)
def _binary(cx, node, ins, attrs):
    a, b = ins
    op = _BIN[node.op_type]
    if op == "pow" and a.dtype != b.dtype:
        b = _cast(cx, b, a.dtype) if a.dtype.is_float else b
    if a.dtype.is_int and b.dtype.is_int and a.dtype != b.dtype:
        b = _cast(cx, b, a.dtype)
    out = cx.g.binary(a, b, op=op)
    return _cast(cx, out, a.dtype)


@converter(*_VARIADIC)
def _variadic(cx, node, ins, attrs):
    op = _VARIADIC[node.op_type]
    acc = ins[0]
    for v in ins[1:]:
        m = cx.g.binary(acc, v, op=op)
        if op in ("max", "min") and m.dtype.is_float:  # ONNX propagates NaN (rlx's max / min ignore it)
            m = cx.g.where(cx.g.ne(v, v), _broadcast_to(cx, v, list(m.shape)), m)
            m = cx.g.where(cx.g.ne(acc, acc), _broadcast_to(cx, acc, list(m.shape)), m)
        acc = m
    if node.op_type == "Mean":
        acc = acc / cx.scalar(float(len(ins)), acc)
    return acc


_CMP = {row.onnx: k for k, row in COMPARE_KINDS.items() if row.onnx}


@converter(*_CMP)
def _compare(cx, node, ins, attrs):
    return cx.g.compare(ins[0], ins[1], op=_CMP[node.op_type])


@converter("And", "Or", "Xor")
def _logical(cx, node, ins, attrs):
    a, b = ins
    if node.op_type == "Xor":
        return cx.g.ne(a, b)
    return cx.g.binary(a, b, op="mul" if node.op_type == "And" else "add")


@converter("Not")
def _not(cx, node, ins, attrs):
    return cx.g.eq(ins[0], cx.const(np.array(False)))


@converter("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _bitwise(cx, node, ins, attrs):
    ops = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}
    return cx.g.binary_ext(ins[0], ins[1], op=ops[node.op_type])


@converter("BitwiseNot")
def _bitwise_not(cx, node, ins, attrs):
    x = ins[0]
    ones = np.array(-1).astype(x.dtype.numpy) if x.dtype.numpy.kind == "i" else np.array(np.iinfo(x.dtype.numpy).max, x.dtype.numpy)
    return cx.g.binary_ext(x, cx.const(ones), op="bitwise_xor")


@converter("BitShift")
def _bitshift(cx, node, ins, attrs):
    return cx.g.binary_ext(ins[0], ins[1], op="shift_left" if attrs["direction"] == "LEFT" else "shift_right")


@converter("Mod")
def _mod(cx, node, ins, attrs):
    a, b = ins
    fmod = attrs.get("fmod", 0)
    return cx.g.binary_ext(a, b, op="fmod" if fmod else "mod")


@converter("IsNaN")
def _isnan(cx, node, ins, attrs):
    return cx.g.ne(ins[0], ins[0])


@converter("IsInf")
def _isinf(cx, node, ins, attrs):
    x = ins[0]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    parts = []
    if pos:
        parts.append(cx.g.eq(x, cx.scalar(np.inf, x)))
    if neg:
        parts.append(cx.g.eq(x, cx.scalar(-np.inf, x)))
    if not parts:
        return cx.g.lt(x, x)  # nothing detected: all False
    return parts[0] if len(parts) == 1 else cx.g.add(parts[0], parts[1])


@converter("Where")
def _where(cx, node, ins, attrs):
    return cx.g.where(ins[0], ins[1], ins[2])


@converter("Cast")
def _cast_op(cx, node, ins, attrs):
    to = rlx_dtype(attrs["to"], "Cast: ")
    return _cast_saturating(cx, ins[0], to, attrs.get("saturate", 1))


@converter("CastLike")
def _castlike(cx, node, ins, attrs):
    return _cast_saturating(cx, ins[0], ins[1].dtype, attrs.get("saturate", 1))


def _cast_saturating(cx, x: Value, to: DType, saturate: int) -> Value:
    if to in (DType.F8E4M3, DType.F8E5M2) and x.dtype.is_float and x.dtype not in (DType.F8E4M3, DType.F8E5M2):
        if saturate:
            import ml_dtypes  # only fp8 targets need it; rlx.onnx imports without it

            big = float(ml_dtypes.finfo(to.numpy).max)
            hi, lo = cx.scalar(big, x), cx.scalar(-big, x)
            x = cx.g.where(cx.g.gt(x, hi), hi, cx.g.where(cx.g.lt(x, lo), lo, x))  # NaN stays NaN
        elif to == DType.F8E4M3:
            raise OnnxUnsupported("Cast to FLOAT8E4M3FN with saturate=0 (overflow to NaN) is not modelled")
    return _cast(cx, x, to)


# activations with parameters
@converter("Elu")
def _elu(cx, node, ins, attrs):
    x, alpha = ins[0], attrs.get("alpha", 1.0)
    return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, (cx.g.exp(x) - cx.scalar(1.0, x)) * cx.scalar(alpha, x))


@converter("Selu")
def _selu(cx, node, ins, attrs):
    x = ins[0]
    alpha, gamma = attrs.get("alpha", 1.67326319217681884765625), attrs.get("gamma", 1.05070102214813232421875)
    neg = cx.g.exp(x) * cx.scalar(alpha, x) - cx.scalar(alpha, x)
    return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, neg) * cx.scalar(gamma, x)


@converter("LeakyRelu")
def _leaky(cx, node, ins, attrs):
    x = ins[0]
    return cx.g.where(cx.g.lt(x, cx.scalar(0.0, x)), x * cx.scalar(attrs.get("alpha", 0.01), x), x)


@converter("PRelu")
def _prelu(cx, node, ins, attrs):
    x, slope = ins
    return cx.g.where(cx.g.lt(x, cx.scalar(0, x)), x * slope, x)


@converter("ThresholdedRelu")
def _thresholded(cx, node, ins, attrs):
    x = ins[0]
    return cx.g.where(cx.g.gt(x, cx.scalar(attrs.get("alpha", 1.0), x)), x, cx.scalar(0.0, x))


@converter("HardSigmoid")
def _hard_sigmoid(cx, node, ins, attrs):
    x = ins[0]
    y = x * cx.scalar(attrs.get("alpha", 0.2), x) + cx.scalar(attrs.get("beta", 0.5), x)
    return cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))


@converter("HardSwish")
def _hard_swish(cx, node, ins, attrs):
    x = ins[0]
    y = x * cx.scalar(1.0 / 6.0, x) + cx.scalar(0.5, x)
    return x * cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))


@converter("Softplus")
def _softplus(cx, node, ins, attrs):
    x = ins[0]
    return cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x))


@converter("Softsign")
def _softsign(cx, node, ins, attrs):
    x = ins[0]
    return x / (cx.g.abs(x) + cx.scalar(1.0, x))


@converter("Mish")
def _mish(cx, node, ins, attrs):
    x = ins[0]
    return x * cx.g.tanh(cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x)))


@converter("Gelu")
def _gelu(cx, node, ins, attrs):
    return cx.g.activation(ins[0], kind="gelu_approx" if attrs.get("approximate", "none") == "tanh" else "gelu")


@converter("Swish")
def _swish(cx, node, ins, attrs):
    x = ins[0]
    alpha = attrs.get("alpha", 1.0)
    return x * cx.g.sigmoid(x * cx.scalar(alpha, x)) if alpha != 1.0 else cx.g.silu(x)


@converter("Shrink")
def _shrink(cx, node, ins, attrs):
    x = ins[0]
    lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    zero = cx.scalar(0, x)
    hi = cx.g.where(cx.g.gt(x, cx.scalar(lambd, x)), x - cx.scalar(bias, x), zero)
    return cx.g.where(cx.g.lt(x, cx.scalar(-lambd, x)), x + cx.scalar(bias, x), hi)


@converter("Clip")
def _clip(cx, node, ins, attrs):
    x = ins[0]
    if cx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
        lo = cx.scalar(lo, x) if lo is not None else None
        hi = cx.scalar(hi, x) if hi is not None else None
    else:
        lo = ins[1] if len(ins) > 1 else None
        hi = ins[2] if len(ins) > 2 else None
    if lo is not None:
        x = cx.g.where(cx.g.lt(x, lo), lo, x)
    if hi is not None:
        x = cx.g.where(cx.g.gt(x, hi), hi, x)
    return x


# ====================================================================== linear algebra
@converter("MatMul")
def _matmul(cx, node, ins, attrs):
    a, b = ins
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if a_vec:
        a = _reshape(cx, a, [1, *a.shape])
    if b_vec:
        b = _reshape(cx, b, [*b.shape, 1])
    y = cx.g.matmul(a, b)
    if a_vec or b_vec:
        shape = list(y.shape)
        if b_vec:
            shape.pop(-1)
        if a_vec:
            shape.pop(-2 if not b_vec else -1)
        y = _reshape(cx, y, shape)
    return y


@converter("Gemm")
def _gemm(cx, node, ins, attrs):
    a, b = ins[0], ins[1]
    if attrs.get("transA", 0):
        a = cx.g.transpose(a, perm=[1, 0])
    if attrs.get("transB", 0):
        b = cx.g.transpose(b, perm=[1, 0])
    y = cx.g.matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = y * cx.scalar(alpha, y)
    if len(ins) > 2 and ins[2] is not None:
        c = ins[2]
        if beta != 1.0:
            c = c * cx.scalar(beta, c)
        y = y + c
    return y


@converter("Einsum")
def _einsum(cx, node, ins, attrs):
    eq = attrs["equation"].replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ins):
        raise OnnxUnsupported(f"Einsum {eq!r}: {len(terms)} terms for {len(ins)} operands")
    letters = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq)
    ell: list[str] = []

    def expand(term: str, rank: int) -> str:
        if "..." not in term:
            return term
        n = rank - (len(term) - 3)
        while len(ell) < n:
            ell.insert(0, next(letters))
        return term.replace("...", "".join(ell[len(ell) - n:]))

    terms = [expand(t, len(v.shape)) for t, v in zip(terms, ins)]
    if not _:
        counts = Counter("".join(terms))
        out = "".join(ell) + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    else:
        out = rhs.replace("...", "".join(ell))
    for t, v in zip(terms, ins):
        if len(set(t)) != len(t):
            raise OnnxUnsupported(f"Einsum {eq!r}: repeated index in one operand (diagonal) is not expressible")
        if len(t) != len(v.shape):
            raise OnnxUnsupported(f"Einsum {eq!r}: term {t!r} does not match rank {len(v.shape)}")
    operands = list(zip(terms, ins))

    def reduce_unused(t: str, v: Value, keep: str) -> tuple[str, Value]:
        drop = [i for i, c in enumerate(t) if c not in keep]
        if drop:
            v = cx.g.reduce(v, op="sum", axes=drop, keep_dim=False)
            t = "".join(c for c in t if c in keep)
        return t, v

    t0, v0 = operands[0]
    rest = "".join(t for t, _v in operands[1:]) + out
    t0, v0 = reduce_unused(t0, v0, rest)
    for k in range(1, len(operands)):
        t1, v1 = operands[k]
        later = "".join(t for t, _v in operands[k + 1:]) + out
        t1, v1 = reduce_unused(t1, v1, t0 + later)
        batch = [c for c in t0 if c in t1 and c in later]
        contract = [c for c in t0 if c in t1 and c not in later]
        v0 = cx.g.dot_general(v0, v1, lhs_contracting=[t0.index(c) for c in contract], rhs_contracting=[t1.index(c) for c in contract],
                              lhs_batch=[t0.index(c) for c in batch], rhs_batch=[t1.index(c) for c in batch])
        t0 = "".join(batch) + "".join(c for c in t0 if c not in t1) + "".join(c for c in t1 if c not in t0)
    t0, v0 = reduce_unused(t0, v0, out)
    if t0 != out:
        if sorted(t0) != sorted(out):
            raise OnnxUnsupported(f"Einsum {eq!r}: output {out!r} not expressible")
        v0 = cx.g.transpose(v0, perm=[t0.index(c) for c in out])
    return v0


# ====================================================================== shape ops
@converter("Reshape")
def _reshape_op(cx, node, ins, attrs):
    x = ins[0]
    shape = _ints(cx, node, 1, "shape" if cx.opset < 5 else None, attrs)
    allowzero = attrs.get("allowzero", 0)
    src = list(x.shape)
    out = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            out.append(src[i])
        else:
            out.append(d)
    if all(isinstance(d, int) for d in out) and -1 not in out:
        return _reshape(cx, x, out)
    if not x.shape.is_static and any(isinstance(d, str) for d in out):
        return cx.g.reshape(x, new_shape=[-1 if isinstance(d, str) else d for d in out])
    return cx.g.reshape(x, new_shape=out)


@converter("Flatten")
def _flatten(cx, node, ins, attrs):
    x = ins[0]
    shape = _static_shape(x)
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise OnnxError(f"Flatten: axis {attrs.get('axis')} out of range for rank {len(shape)}")
    return _reshape(cx, x, [math.prod(shape[:axis]), math.prod(shape[axis:])])


@converter("Transpose")
def _transpose(cx, node, ins, attrs):
    perm = attrs.get("perm")
    return cx.g.transpose(ins[0], perm=list(perm) if perm is not None else None)


@converter("Squeeze")
def _squeeze(cx, node, ins, attrs):
    x = ins[0]
    axes = _ints(cx, node, 1, "axes" if cx.opset < 13 else None, attrs)
    shape = list(x.shape)
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = {_axis(a, len(shape)) for a in axes}
    return _reshape(cx, x, [d for i, d in enumerate(shape) if i not in axes])


@converter("Unsqueeze")
def _unsqueeze(cx, node, ins, attrs):
    x = ins[0]
    axes = _ints(cx, node, 1, "axes" if cx.opset < 13 else None, attrs)
    rank = len(x.shape) + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return _reshape(cx, x, shape)


@converter("Concat")
def _concat(cx, node, ins, attrs):
    parts = [v for v in ins if v is not None]
    return cx.g.concat(parts, axis=attrs["axis"])


@converter("Split")
def _split(cx, node, ins, attrs):
    x = ins[0]
    axis = _axis(attrs.get("axis", 0), len(x.shape))
    size = x.shape[axis]
    split = _ints(cx, node, 1, "split" if cx.opset < 13 else None, attrs)
    n = len(node.output)
    if not isinstance(size, int):
        raise OnnxUnsupported(f"Split along symbolic axis {axis}")
    if split is None:
        parts = attrs.get("num_outputs", n)
        if parts != n or parts < 1:
            raise OnnxFormatError(f"Split num_outputs={parts} disagrees with its {n} outputs")
        chunk = -(-size // parts)
        split = [max(min(chunk, size - i * chunk), 0) for i in range(parts)]
    if len(split) != n or any(s < 0 for s in split) or sum(split) != size:
        raise OnnxFormatError(f"Split sizes {split[:16]} must be {n} non-negative sizes summing to {size}")
    outs, start = [], 0
    for s in split:
        outs.append(cx.g.narrow(x, axis=axis, start=start, length=s))
        start += s
    return outs


def _first(arr: np.ndarray, what: str) -> Any:
    """The single value of a scalar operand (a shape-[1] tensor too)."""
    flat = np.asarray(arr).reshape(-1)
    if flat.size != 1:
        raise OnnxFormatError(f"{what} must be one value, got {flat.size}")
    return flat[0]


def _index_along(cx, x: Value, axis: int, index: np.ndarray) -> Value:
    """x restricted to ``index`` (static positions) on ``axis``: narrow when contiguous, else gather."""
    n = x.shape[axis]
    if len(index) == n and (index == np.arange(n)).all():
        return x
    if len(index) and (np.diff(index) == 1).all():
        return cx.g.narrow(x, axis=axis, start=int(index[0]), length=len(index))
    return cx.g.gather(x, cx.const(index.astype(np.int64)), axis=axis)


@converter("Slice")
def _slice(cx, node, ins, attrs):
    x = ins[0]
    if cx.opset < 10:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends = _ints(cx, node, 1, None, attrs), _ints(cx, node, 2, None, attrs)
        axes, steps = _ints(cx, node, 3, None, attrs), _ints(cx, node, 4, None, attrs)
    rank = len(x.shape)
    axes = list(range(len(starts))) if axes is None else [_axis(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for a, s, e, st in zip(axes, starts, ends, steps):
        n = x.shape[a]
        if not isinstance(n, int):
            raise OnnxUnsupported(f"Slice on symbolic axis {a}")
        cx.check_elements(n, "the Slice index")
        if int(st) == 0:
            raise OnnxFormatError(f"Slice step 0 on axis {a}")
        idx = np.arange(*slice(int(s), int(e), int(st)).indices(n))  # (a stop of -1 means "past index 0" here)
        x = _index_along(cx, x, a, idx)
    return x


@converter("Expand")
def _expand_op(cx, node, ins, attrs):
    x = ins[0]
    shape = _ints(cx, node, 1, None, attrs)
    out = broadcast_shapes(x.shape, tuple(shape))
    return _broadcast_to(cx, x, list(out))


@converter("Tile")
def _tile(cx, node, ins, attrs):
    x = ins[0]
    reps = _ints(cx, node, 1, None, attrs)
    shape = _static_shape(x)
    if all(r == 1 for r in reps):
        return x
    inter = []
    for d, r in zip(shape, reps):
        inter += [r, d]
    y = _reshape(cx, x, [s for pair in zip([1] * len(shape), shape) for s in pair])
    y = _broadcast_to(cx, y, inter)
    return _reshape(cx, y, [d * r for d, r in zip(shape, reps)])


@converter("Pad")
def _pad(cx, node, ins, attrs):
    x = ins[0]
    rank = len(x.shape)
    mode = attrs.get("mode", "constant")
    if cx.opset < 11:
        pads, value, axes = attrs["pads"], attrs.get("value", 0.0), None
    else:
        pads = _ints(cx, node, 1, None, attrs)
        value = 0
        if len(node.input) > 2 and node.input[2]:
            value = cx.static(node.input[2], "constant_value").reshape(-1)[0] if ins[2].shape.numel else 0
        axes = _ints(cx, node, 3, None, attrs)
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    k = len(axes)
    return pad_value(cx, x, {a: (pads[i], pads[i + k]) for i, a in enumerate(axes)}, mode, value)


def pad_value(cx, x: Value, pads: dict[int, tuple[int, int]], mode: str = "constant", value: Any = 0) -> Value:
    """Pad (or crop, for negative amounts) x axis by axis, exactly: concat / gather of static indices."""
    for axis, (before, after) in sorted(pads.items()):
        n = x.shape[axis]
        if not isinstance(n, int):
            raise OnnxUnsupported(f"Pad on symbolic axis {axis}")
        if before < 0 or after < 0:
            x = cx.g.narrow(x, axis=axis, start=max(-before, 0), length=n + min(before, 0) + min(after, 0))
            before, after = max(before, 0), max(after, 0)
            n = x.shape[axis]
        if before == 0 and after == 0:
            continue
        if mode == "constant":
            parts = []
            fill = cx.const(np.array(value).astype(x.dtype.numpy))
            for amount in (before, after):
                shape = list(x.shape)
                shape[axis] = amount
                parts.append(cx.g.expand(fill, target_shape=shape) if amount else None)
            pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
            x = cx.g.concat(pieces, axis=axis)
            continue
        cx.check_elements(n + before + after, f"the {mode} padding index")
        pos = np.arange(-before, n + after)
        if mode == "edge":
            idx = np.clip(pos, 0, n - 1)
        elif mode == "reflect":
            if n == 1:
                idx = np.zeros_like(pos)
            else:
                period = 2 * (n - 1)
                m = np.mod(pos, period)
                idx = np.where(m < n, m, period - m)
        elif mode == "wrap":
            idx = np.mod(pos, n)
        else:
            raise OnnxUnsupported(f"Pad mode {mode!r}")
        x = cx.g.gather(x, cx.const(idx.astype(np.int64)), axis=axis)
    return x


@converter("Gather")
def _gather(cx, node, ins, attrs):
    x, idx = ins
    axis = _axis(attrs.get("axis", 0), len(x.shape))
    if not idx.dtype.is_int:
        raise OnnxUnsupported("Gather with non-integer indices")
    return cx.g.gather(x, idx, axis=axis)


@converter("GatherElements")
def _gather_elements(cx, node, ins, attrs):
    return cx.g.gather_elements(ins[0], ins[1], axis=attrs.get("axis", 0))


@converter("ScatterElements", "Scatter")
def _scatter_elements(cx, node, ins, attrs):
    return cx.g.scatter_elements(ins[0], ins[1], ins[2], axis=attrs.get("axis", 0), reduction=attrs.get("reduction", "none"))


@converter("Shape")
def _shape(cx, node, ins, attrs):
    shape = ins[0].shape
    if not shape.is_static:
        raise OnnxUnsupported(f"Shape of a symbolic shape {shape!r}")
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return cx.const(np.array(list(shape)[start:end], dtype=np.int64))


@converter("Size")
def _size(cx, node, ins, attrs):
    return cx.const(np.array(math.prod(_static_shape(ins[0])), dtype=np.int64))


@converter("Constant")
def _constant(cx, node, ins, attrs):
    if "value" in attrs:
        return cx.const(cx.tensor(attrs["value"]))
    if "value_float" in attrs:
        return cx.const(np.array(attrs["value_float"], np.float32))
    if "value_floats" in attrs:
        return cx.const(np.array(attrs["value_floats"], np.float32))
    if "value_int" in attrs:
        return cx.const(np.array(attrs["value_int"], np.int64))
    if "value_ints" in attrs:
        return cx.const(np.array(attrs["value_ints"], np.int64))
    raise OnnxUnsupported(f"Constant with attributes {sorted(attrs)}")


@converter("ConstantOfShape")
def _constant_of_shape(cx, node, ins, attrs):
    shape = [int(d) for d in cx.static(node.input[0], "shape").reshape(-1)]
    value = cx.tensor(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    if math.prod(shape) > FOLD_LIMIT:  # a large splat stays a broadcast, not a materialized constant
        return cx.g.expand(cx.const(value[:1].reshape(())), target_shape=shape)
    return cx.const(np.full(shape, value[0], dtype=value.dtype))


@converter("Range")
def _range(cx, node, ins, attrs):
    start, limit, delta = (_first(cx.static(n, "Range operand"), "Range operand") for n in node.input[:3])
    span = (float(limit) - float(start)) / float(delta) if float(delta) else math.nan
    if not math.isfinite(span):
        raise OnnxFormatError(f"Range({start}, {limit}, {delta}) has no finite length")
    n = max(math.ceil(span), 0)
    cx.check_elements(n, "the Range")
    return cx.const((start + np.arange(n) * delta).astype(start.dtype))


@converter("EyeLike")
def _eyelike(cx, node, ins, attrs):
    x = ins[0]
    shape = _static_shape(x)
    if len(shape) != 2:
        raise OnnxFormatError(f"EyeLike needs a rank-2 input, got {shape}")
    cx.check_elements(math.prod(shape), "the EyeLike matrix")
    dtype = rlx_dtype(attrs["dtype"]) if "dtype" in attrs else x.dtype
    return cx.const(np.eye(shape[0], shape[1], k=attrs.get("k", 0), dtype=dtype.numpy))


@converter("OneHot")
def _onehot(cx, node, ins, attrs):
    idx, values = ins[0], ins[2]
    depth = int(_first(cx.static(node.input[1], "depth"), "depth"))
    if depth < 1:
        raise OnnxFormatError(f"OneHot depth {depth} must be positive")
    cx.check_elements(depth, "the OneHot iota")
    axis = attrs.get("axis", -1)
    rank = len(idx.shape) + 1
    axis = _axis(axis, rank)
    idx = _cast(cx, idx, DType.I64)
    idx = cx.g.where(cx.g.lt(idx, cx.scalar(0, idx)), idx + cx.scalar(depth, idx), idx)
    shape = [1] * rank
    shape[axis] = depth
    iota = cx.const(np.arange(depth, dtype=np.int64).reshape(shape))
    idx_shape = list(idx.shape)
    idx_shape.insert(axis, 1)
    hit = cx.g.eq(_reshape(cx, idx, idx_shape), iota)
    off = cx.g.narrow(values, axis=0, start=0, length=1)
    on = cx.g.narrow(values, axis=0, start=1, length=1)
    return cx.g.where(hit, _reshape(cx, on, []), _reshape(cx, off, []))


@converter("Trilu")
def _trilu(cx, node, ins, attrs):
    x = ins[0]
    k = 0
    if len(node.input) > 1 and node.input[1]:
        k = int(cx.static(node.input[1], "k").reshape(-1)[0])
    n, m = _static_shape(x)[-2:]
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    keep = (cols - rows >= k) if attrs.get("upper", 1) else (cols - rows <= k)
    return cx.g.where(cx.const(keep), x, cx.const(np.zeros((), x.dtype.numpy)))


@converter("DepthToSpace")
def _depth_to_space(cx, node, ins, attrs):
    x = ins[0]
    b = attrs["blocksize"]
    n, c, h, w = _static_shape(x)
    if attrs.get("mode", "DCR") == "DCR":
        y = _reshape(cx, x, [n, b, b, c // (b * b), h, w])
        y = cx.g.transpose(y, perm=[0, 3, 4, 1, 5, 2])
    else:
        y = _reshape(cx, x, [n, c // (b * b), b, b, h, w])
        y = cx.g.transpose(y, perm=[0, 1, 4, 2, 5, 3])
    return _reshape(cx, y, [n, c // (b * b), h * b, w * b])


@converter("SpaceToDepth")
def _space_to_depth(cx, node, ins, attrs):
    x = ins[0]
    b = attrs["blocksize"]
    n, c, h, w = _static_shape(x)
    y = _reshape(cx, x, [n, c, h // b, b, w // b, b])
    y = cx.g.transpose(y, perm=[0, 1, 3, 5, 2, 4] if attrs.get("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4])
    return _reshape(cx, y, [n, c * b * b, h // b, w // b])


@converter("Dropout")
def _dropout(cx, node, ins, attrs):
    x = ins[0]
    training = False
    if len(node.input) > 2 and node.input[2]:
        training = bool(cx.static(node.input[2], "training_mode").reshape(-1)[0])
    ratio = 0.0
    if len(node.input) > 1 and node.input[1]:
        ratio = float(cx.static(node.input[1], "ratio").reshape(-1)[0])
    if training and ratio != 0.0:
        raise OnnxUnsupported("Dropout in training mode (random) is not modelled")
    mask = cx.const(np.ones(_static_shape(x), dtype=bool))
    return [x, mask]


@converter("Compress")
def _compress(cx, node, ins, attrs):
    x = ins[0]
    cond = np.asarray(cx.static(node.input[1], "condition")).reshape(-1).astype(bool)
    axis = attrs.get("axis")
    if axis is None:
        x = _reshape(cx, x, [math.prod(_static_shape(x))])
        axis = 0
    axis = _axis(axis, len(x.shape))
    return cx.g.gather(x, cx.const(np.nonzero(cond)[0].astype(np.int64)), axis=axis)


# ====================================================================== reductions
def _reduce_axes(cx, node, ins, attrs, from_input_since: int) -> list[int] | None:
    if cx.opset >= from_input_since:
        axes = _ints(cx, node, 1, None, attrs)
    else:
        axes = attrs.get("axes")
    rank = len(ins[0].shape)
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({_axis(a, rank) for a in axes})


def _reduce_generic(cx, node, ins, attrs, op: str, since: int = 18):
    x = ins[0]
    axes = _reduce_axes(cx, node, ins, attrs, since)
    keep = bool(attrs.get("keepdims", 1))
    if axes is None:
        return x, None, keep
    return x, axes, keep


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}


@converter(*_REDUCE, "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce(cx, node, ins, attrs):
    x, axes, keep = _reduce_generic(cx, node, ins, attrs, "", 13 if node.op_type == "ReduceSum" else 18)
    kind = node.op_type
    if axes is None:
        if kind in ("ReduceL1",):
            return cx.g.abs(x)
        if kind == "ReduceL2":
            return cx.g.abs(x)
        if kind == "ReduceSumSquare":
            return x * x
        if kind == "ReduceLogSum":
            return cx.g.log(x)
        return x
    if kind in _REDUCE:
        op = _REDUCE[kind]
        if op == "mean" and not x.dtype.is_float:
            y = cx.g.reduce(x, op="sum", axes=axes, keep_dim=keep)
            return cx.g.div(y, cx.scalar(math.prod(x.shape[a] for a in axes), y))
        return cx.g.reduce(x, op=op, axes=axes, keep_dim=keep)
    if kind == "ReduceL1":
        return cx.g.reduce(cx.g.abs(x), op="sum", axes=axes, keep_dim=keep)
    if kind == "ReduceL2":
        y = cx.g.reduce(x * x, op="sum", axes=axes, keep_dim=keep)
        return _cast(cx, cx.g.sqrt(_cast(cx, y, DType.F32) if not y.dtype.is_float else y), x.dtype)
    if kind == "ReduceSumSquare":
        return cx.g.reduce(x * x, op="sum", axes=axes, keep_dim=keep)
    if kind == "ReduceLogSum":
        return cx.g.log(cx.g.reduce(x, op="sum", axes=axes, keep_dim=keep))
    # ReduceLogSumExp, stabilised by the max
    m = cx.g.reduce(x, op="max", axes=axes, keep_dim=True)
    m = cx.g.where(cx.g.eq(cx.g.abs(m), cx.scalar(np.inf, m)), cx.scalar(0.0, m), m)
    s = cx.g.log(cx.g.reduce(cx.g.exp(x - m), op="sum", axes=axes, keep_dim=True)) + m
    return s if keep else _reshape(cx, s, [d for i, d in enumerate(x.shape) if i not in axes])


@converter("ArgMax", "ArgMin")
def _argreduce(cx, node, ins, attrs):
    return cx.g.arg_reduce(ins[0], op=node.op_type.lower(), axis=attrs.get("axis", 0), keep_dim=bool(attrs.get("keepdims", 1)),
                           select_last=bool(attrs.get("select_last_index", 0)))


def _coerced(cx, node, x: Value, attrs, fn):
    """Softmax-family semantics: opset >= 13 acts on one axis; older opsets flatten to 2-D at axis."""
    rank = len(x.shape)
    if cx.opset >= 13:
        return fn(x, _axis(attrs.get("axis", -1), rank))
    axis = _axis(attrs.get("axis", 1), rank) if rank else 0
    shape = _static_shape(x)
    flat = _reshape(cx, x, [math.prod(shape[:axis]), math.prod(shape[axis:])])
    return _reshape(cx, fn(flat, 1), shape)


@converter("Softmax")
def _softmax(cx, node, ins, attrs):
    return _coerced(cx, node, ins[0], attrs, lambda v, a: cx.g.softmax(v, axis=a))


def _log_softmax(cx, v: Value, a: int) -> Value:
    m = cx.g.reduce(v, op="max", axes=[a], keep_dim=True)
    d = v - m
    return d - cx.g.log(cx.g.reduce(cx.g.exp(d), op="sum", axes=[a], keep_dim=True))


@converter("LogSoftmax")
def _logsoftmax(cx, node, ins, attrs):
    return _coerced(cx, node, ins[0], attrs, lambda v, a: _log_softmax(cx, v, a))


@converter("Hardmax")
def _hardmax(cx, node, ins, attrs):
    def fn(v, a):
        idx = cx.g.arg_reduce(v, op="argmax", axis=a, keep_dim=True)
        shape = [1] * len(v.shape)
        shape[a] = v.shape[a]
        hit = cx.g.eq(idx, cx.const(np.arange(v.shape[a], dtype=np.int64).reshape(shape)))
        return cx.g.cast(hit, to=v.dtype)

    return _coerced(cx, node, ins[0], attrs, fn)


@converter("CumSum", "CumProd")
def _cumsum(cx, node, ins, attrs):
    axis = int(cx.static(node.input[1], "axis").reshape(-1)[0])
    return cx.g.cumulative(ins[0], op="sum" if node.op_type == "CumSum" else "prod", axis=axis,
                           exclusive=bool(attrs.get("exclusive", 0)), reverse=bool(attrs.get("reverse", 0)))


@converter("TopK")
def _topk(cx, node, ins, attrs):
    x = ins[0]
    k = int(cx.static(node.input[1], "K").reshape(-1)[0]) if cx.opset >= 10 else attrs["k"]
    axis = attrs.get("axis", -1)
    # sorted=0 leaves the order unspecified, so top_k's sorted order (ties: lower index first) satisfies it
    largest = bool(attrs.get("largest", 1))
    return [cx.g.top_k(x, k=k, axis=axis, largest=largest, output=out) for out in ("values", "indices")]


# ====================================================================== normalization
def _moments(cx, x: Value, axes: list[int]):
    mu = cx.g.reduce(x, op="mean", axes=axes, keep_dim=True)
    d = x - mu
    var = cx.g.reduce(d * d, op="mean", axes=axes, keep_dim=True)
    return mu, d, var


@converter("BatchNormalization")
def _batchnorm(cx, node, ins, attrs):
    x, scale, bias, mean, var = ins[:5]
    eps = attrs.get("epsilon", 1e-5)
    rank = len(x.shape)
    shape = [1] * rank
    if rank > 1:
        shape[1] = x.shape[1]
    stats_wanted = len(node.output) > 1 and any(node.output[1:])
    training = attrs.get("training_mode", 0) or (cx.opset < 7 and not attrs.get("is_test", 1)) or stats_wanted
    if training:
        axes = [i for i in range(rank) if i != 1]
        mu, d, v = _moments(cx, x, axes)
        y = d / cx.g.sqrt(v + cx.scalar(eps, v)) * _reshape(cx, scale, shape) + _reshape(cx, bias, shape)
        mom = attrs.get("momentum", 0.9)
        bm = _reshape(cx, mu, [x.shape[1]])
        bv = _reshape(cx, v, [x.shape[1]])
        run_mean = mean * cx.scalar(mom, mean) + bm * cx.scalar(1 - mom, bm)
        run_var = var * cx.scalar(mom, var) + bv * cx.scalar(1 - mom, bv)
        return [y, run_mean, run_var]
    inv = cx.g.rsqrt(_reshape(cx, var, shape) + cx.scalar(eps, var))
    return (x - _reshape(cx, mean, shape)) * (inv * _reshape(cx, scale, shape)) + _reshape(cx, bias, shape)


@converter("InstanceNormalization")
def _instancenorm(cx, node, ins, attrs):
    x, scale, bias = ins
    rank = len(x.shape)
    shape = [1, x.shape[1]] + [1] * (rank - 2)
    _mu, d, var = _moments(cx, x, list(range(2, rank)))
    y = d / cx.g.sqrt(var + cx.scalar(attrs.get("epsilon", 1e-5), var))
    return y * _reshape(cx, scale, shape) + _reshape(cx, bias, shape)


@converter("LayerNormalization")
def _layernorm(cx, node, ins, attrs):
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    rank = len(x.shape)
    axis = _axis(attrs.get("axis", -1), rank)
    eps = attrs.get("epsilon", 1e-5)
    axes = list(range(axis, rank))
    stash = DType.F32 if attrs.get("stash_type", 1) == 1 and x.dtype != DType.F64 else x.dtype
    xs = _cast(cx, x, stash)
    want_stats = len(node.output) > 1 and any(node.output[1:])
    if (axis == rank - 1 and len(scale.shape) == 1 and (bias is None or len(bias.shape) == 1) and not want_stats
            and stash == x.dtype):
        b = bias if bias is not None else cx.const(np.zeros(scale.shape, scale.dtype.numpy))
        return cx.g.layer_norm(x, scale, b, axis=-1, eps=eps)
    mu, d, var = _moments(cx, xs, axes)
    inv = cx.g.rsqrt(var + cx.scalar(eps, var))
    y = _cast(cx, d * inv, x.dtype) * scale
    if bias is not None:
        y = y + bias
    return [y, mu, inv]


@converter("RMSNormalization")
def _rmsnorm(cx, node, ins, attrs):
    x, scale = ins
    rank = len(x.shape)
    axis = _axis(attrs.get("axis", -1), rank)
    stash = DType.F32 if attrs.get("stash_type", 1) == 1 and x.dtype != DType.F64 else x.dtype
    xs = _cast(cx, x, stash)
    ms = cx.g.reduce(xs * xs, op="mean", axes=list(range(axis, rank)), keep_dim=True)
    y = xs * cx.g.rsqrt(ms + cx.scalar(attrs.get("epsilon", 1e-5), ms))
    return _cast(cx, y, x.dtype) * scale


@converter("GroupNormalization")
def _groupnorm(cx, node, ins, attrs):
    x, scale, bias = ins
    g_ = attrs["num_groups"]
    shape = _static_shape(x)
    n, c = shape[:2]
    eps = attrs.get("epsilon", 1e-5)
    if cx.opset < 21:
        raise OnnxUnsupported("GroupNormalization-18 (per-group scale) is deprecated; use opset 21")
    if len(shape) == 4 and scale.shape == (c,) and c % g_ == 0 and x.dtype == scale.dtype:
        return cx.g.group_norm(x, scale, bias, num_groups=g_, eps=eps)
    grouped = _reshape(cx, x, [n, g_, math.prod(shape[1:]) // g_])
    _mu, d, var = _moments(cx, grouped, [2])
    y = _reshape(cx, d / cx.g.sqrt(var + cx.scalar(eps, var)), shape)
    cs = [1, c] + [1] * (len(shape) - 2)
    return y * _reshape(cx, scale, cs) + _reshape(cx, bias, cs)


@converter("LpNormalization")
def _lpnorm(cx, node, ins, attrs):
    x = ins[0]
    axis = _axis(attrs.get("axis", -1), len(x.shape))
    p = attrs.get("p", 2)
    if p == 1:
        norm = cx.g.reduce(cx.g.abs(x), op="sum", axes=[axis], keep_dim=True)
    else:
        norm = cx.g.sqrt(cx.g.reduce(x * x, op="sum", axes=[axis], keep_dim=True))
    return x / cx.g.where(cx.g.eq(norm, cx.scalar(0, norm)), cx.scalar(1, norm), norm)  # a zero vector stays zero


# ====================================================================== conv and pooling
def _spatial(x: Value, what: str) -> int:
    n = len(x.shape) - 2
    if n not in (1, 2):
        raise OnnxUnsupported(f"{what}: only 1-D and 2-D spatial inputs are supported (rank {len(x.shape)})")
    return n


def _auto_pads(auto_pad: str, sizes, kernel, strides, dilations) -> list[int]:
    n = len(sizes)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i in range(n):
            out = -(-sizes[i] // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - sizes[i], 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return pads
    return [0] * (2 * n)


def _to2d(cx, x: Value) -> Value:
    return _reshape(cx, x, [*x.shape[:2], 1, x.shape[2]])


@converter("Conv")
def _conv(cx, node, ins, attrs):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    nsp = _spatial(x, "Conv")
    kernel = list(attrs.get("kernel_shape", _static_shape(w)[2:]))
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    group = attrs.get("group", 1)
    auto = attrs.get("auto_pad", "NOTSET")
    sizes = _static_shape(x)[2:]
    check_window(cx, nsp, kernel, strides, dil, list(attrs.get("pads", [0] * (2 * nsp))))
    pads = list(attrs.get("pads", [0] * (2 * nsp))) if auto in ("NOTSET", "VALID") else _auto_pads(auto, sizes, kernel, strides, dil)
    if auto == "VALID":
        pads = [0] * (2 * nsp)
    if nsp == 1:
        x, w = _to2d(cx, x), _to2d(cx, w)
        kernel, strides, dil, pads = [1, *kernel], [1, *strides], [1, *dil], [0, pads[0], 0, pads[1]]
    sym = [pads[0], pads[1]] if pads[0] == pads[2] and pads[1] == pads[3] else [0, 0]
    if sym == [0, 0] and any(pads):
        x = pad_value(cx, x, {2: (pads[0], pads[2]), 3: (pads[1], pads[3])})
    y = cx.g.conv2d(x, w, stride=strides, padding=sym, dilation=dil, groups=group)
    if b is not None:
        y = y + _reshape(cx, b, [1, b.shape[0], 1, 1])
    if nsp == 1:
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


@converter("ConvTranspose")
def _conv_transpose(cx, node, ins, attrs):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    nsp = _spatial(x, "ConvTranspose")
    if nsp != 2:
        x, w = _to2d(cx, x), _to2d(cx, w)
    kernel = list(_static_shape(w)[2:])
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    outpad = list(attrs.get("output_padding", [0] * nsp))
    pads = list(attrs.get("pads", [0] * (2 * nsp)))
    sizes = _static_shape(x)[2:][-nsp:]
    auto = attrs.get("auto_pad", "NOTSET")
    check_window(cx, nsp, kernel[-nsp:], strides, dil, pads)
    if len(outpad) != nsp or any(not 0 <= p < max(s, d) for p, s, d in zip(outpad, strides, dil)):
        raise OnnxFormatError(f"output_padding {outpad} must be {nsp} values below the stride or dilation")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = list(attrs["output_shape"])[-nsp:] if "output_shape" in attrs else [sizes[i] * strides[i] for i in range(nsp)]
        pads = [0] * (2 * nsp)
        for i in range(nsp):
            total = strides[i] * (sizes[i] - 1) + outpad[i] + ((kernel[-nsp + i] - 1) * dil[i] + 1) - out_shape[i]
            if total < 0:
                outpad[i] += -total
                total = 0
            if auto == "SAME_UPPER" or (auto != "SAME_LOWER" and "output_shape" in attrs):
                pads[i], pads[i + nsp] = total // 2, total - total // 2
            else:
                pads[i], pads[i + nsp] = total - total // 2, total // 2
    if nsp == 1:
        strides, dil, outpad, pads = [1, *strides], [1, *dil], [0, *outpad], [0, pads[0], 0, pads[1]]
    group = attrs.get("group", 1)
    if pads[0] == pads[2] and pads[1] == pads[3] and not any(outpad):
        y = cx.g.conv_transpose2d(x, w, stride=strides, padding=[pads[0], pads[1]], dilation=dil, groups=group)
    else:  # the full transposed conv, cropped by the pads; output_padding extends the end (zeros past the full result)
        y = cx.g.conv_transpose2d(x, w, stride=strides, padding=[0, 0], dilation=dil, groups=group)
        y = pad_value(cx, y, {2 + i: (-pads[i], outpad[i] - pads[i + 2]) for i in range(2)})
    if b is not None:
        y = y + _reshape(cx, b, [1, b.shape[0], 1, 1])
    if nsp == 1:
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


def check_window(cx, nsp: int, kernel, strides, dil, pads) -> None:
    """Window attributes of a conv / pool: one per spatial axis, positive (pads non-negative), bounded."""
    lim = cx.limits.max_dim
    for name, vals, n, low in (("kernel_shape", kernel, nsp, 1), ("strides", strides, nsp, 1),
                               ("dilations", dil, nsp, 1), ("pads", pads, 2 * nsp, 0)):
        if len(vals) != n or any(not low <= v <= lim for v in vals):
            raise OnnxFormatError(f"{name} {list(vals)} must be {n} values in [{low}, {lim}] for {nsp} spatial axes")


def _pool_geometry(cx, x: Value, attrs, nsp: int):
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    sizes = _static_shape(x)[2:]
    auto = attrs.get("auto_pad", "NOTSET")
    check_window(cx, nsp, kernel, strides, dil, list(attrs.get("pads", [0] * (2 * nsp))))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _auto_pads(auto, sizes, kernel, strides, dil)
    elif auto == "VALID":
        pads = [0] * (2 * nsp)
    else:
        pads = list(attrs.get("pads", [0] * (2 * nsp)))
    extra = [0] * nsp
    outs = []
    for i in range(nsp):
        span = (kernel[i] - 1) * dil[i] + 1
        total = sizes[i] + pads[i] + pads[i + nsp] - span
        if attrs.get("ceil_mode", 0):
            out = -(-total // strides[i]) + 1
            if (out - 1) * strides[i] >= sizes[i] + pads[i]:
                out -= 1
        else:
            out = total // strides[i] + 1
        need = (out - 1) * strides[i] + span - (sizes[i] + pads[i] + pads[i + nsp])
        extra[i] = max(need, 0)
        if out < 1:
            raise OnnxFormatError(f"the window (kernel {kernel[i]}, dilation {dil[i]}) is larger than padded axis {2 + i}")
        outs.append(out)
    return kernel, strides, dil, pads, extra, outs


def _pool_separable(cx, node, x: Value, attrs, kernel, strides, dil, pads, extra, outs) -> Value:
    """N-d pooling with dilation as separable per-axis window reductions over constant-index gathers (exact)."""
    nsp = len(kernel)
    kind = node.op_type
    is_max = kind == "MaxPool"
    src = x
    if kind == "LpPool":
        p = attrs.get("p", 2)
        src = cx.g.abs(x) ** cx.scalar(float(p), x) if p != 2 else x * x
    fill = (-np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min) if is_max else 0
    amounts = {2 + i: (pads[i], pads[i + nsp] + extra[i]) for i in range(nsp)}
    y = pad_value(cx, src, amounts, value=fill)
    sizes = _static_shape(x)[2:]
    count = None
    cx.unroll(sum(kernel), "the pooling window taps")
    if kind == "AveragePool":
        full = [sizes[i] + pads[i] + pads[i + nsp] + extra[i] for i in range(nsp)]
        cx.check_elements(math.prod(full), "the AveragePool divisor")
        count = np.zeros(full)
        if attrs.get("count_include_pad", 0):
            count[tuple(slice(0, sizes[i] + pads[i] + pads[i + nsp]) for i in range(nsp))] = 1
        else:
            count[tuple(slice(pads[i], pads[i] + sizes[i]) for i in range(nsp))] = 1
    for i in range(nsp):
        axis = 2 + i
        cx.check_elements(outs[i] * kernel[i], "the pooling window index")
        taps = [np.arange(outs[i]) * strides[i] + k * dil[i] for k in range(kernel[i])]
        acc = None
        for idx in taps:
            part = cx.g.gather(y, cx.const(idx.astype(np.int64)), axis=axis)
            acc = part if acc is None else (cx.g.maximum(acc, part) if is_max else acc + part)
        y = acc
        if count is not None:
            count = sum(np.take(count, idx, axis=i) for idx in taps)
    if count is not None:
        y = y / cx.const(count.astype(x.dtype.numpy))
    if kind == "LpPool":
        p = attrs.get("p", 2)
        y = cx.g.sqrt(y) if p == 2 else y ** cx.scalar(1.0 / p, y)
    return y


@converter("MaxPool", "AveragePool", "LpPool")
def _pool(cx, node, ins, attrs):
    x = ins[0]
    if len(node.output) > 1 and node.output[1]:
        raise OnnxUnsupported("MaxPool Indices output is not supported")
    nsp = len(x.shape) - 2
    if nsp < 1:
        raise OnnxUnsupported(f"{node.op_type} on rank {len(x.shape)}")
    kernel, strides, dil, pads, extra, outs = _pool_geometry(cx, x, attrs, nsp)
    if nsp > 2 or any(d != 1 for d in dil):
        return _pool_separable(cx, node, x, attrs, kernel, strides, dil, pads, extra, outs)
    if nsp == 1:
        x = _to2d(cx, x)
        kernel, strides, pads, extra, outs = [1, *kernel], [1, *strides], [0, pads[0], 0, pads[1]], [0, *extra], [1, *outs]
    is_max = node.op_type == "MaxPool"
    lp = node.op_type == "LpPool"
    src = x
    if lp:
        p = attrs.get("p", 2)
        src = cx.g.abs(x) ** cx.scalar(float(p), x) if p != 2 else x * x
    fill = (-np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min) if is_max else 0
    amounts = {2: (pads[0], pads[2] + extra[0]), 3: (pads[1], pads[3] + extra[1])}
    padded = pad_value(cx, src, amounts, value=fill) if any(a or b for a, b in amounts.values()) else src
    y = cx.g.pool2d(padded, kind="max" if is_max else "sum", kernel_size=kernel, stride=strides, padding=[0, 0])
    if tuple(y.shape[2:]) != tuple(outs):
        y = pad_value(cx, y, {2: (0, outs[0] - y.shape[2]), 3: (0, outs[1] - y.shape[3])})
    if node.op_type == "AveragePool":
        h, w = _static_shape(x)[2:]
        cx.check_elements((h + pads[0] + pads[2] + extra[0]) * (w + pads[1] + pads[3] + extra[1]), "the AveragePool divisor")
        ones = np.zeros((h + pads[0] + pads[2] + extra[0], w + pads[1] + pads[3] + extra[1]))
        if attrs.get("count_include_pad", 0):
            ones[: h + pads[0] + pads[2], : w + pads[1] + pads[3]] = 1
        else:
            ones[pads[0]: pads[0] + h, pads[1]: pads[1] + w] = 1
        win = np.lib.stride_tricks.sliding_window_view(ones, kernel)[:: strides[0], :: strides[1]].sum(axis=(-2, -1))
        count = win[: outs[0], : outs[1]]
        y = y / cx.const(count.astype(x.dtype.numpy))
    if lp:
        p = attrs.get("p", 2)
        y = cx.g.sqrt(y) if p == 2 else y ** cx.scalar(1.0 / p, y)
    if nsp == 1:
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


@converter("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(cx, node, ins, attrs):
    x = ins[0]
    axes = list(range(2, len(x.shape)))
    if node.op_type == "GlobalLpPool":
        p = attrs.get("p", 2)
        s = cx.g.reduce(cx.g.abs(x) ** cx.scalar(float(p), x), op="sum", axes=axes, keep_dim=True)
        return s ** cx.scalar(1.0 / p, s)
    return cx.g.reduce(x, op="mean" if node.op_type == "GlobalAveragePool" else "max", axes=axes, keep_dim=True)


@converter("LRN")
def _lrn(cx, node, ins, attrs):
    x = ins[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    c = _static_shape(x)[1]
    if size < 1:
        raise OnnxFormatError(f"LRN size {size} must be positive")
    cx.unroll(size, "the LRN window")
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = pad_value(cx, x * x, {1: (lo, hi)})
    acc = None
    for i in range(size):
        part = cx.g.narrow(sq, axis=1, start=i, length=c)
        acc = part if acc is None else acc + part
    return x / (cx.scalar(bias, x) + acc * cx.scalar(alpha / size, x)) ** cx.scalar(beta, x)


# ====================================================================== losses
@converter("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _nll(cx, node, ins, attrs):
    x, target = ins[0], ins[1]
    weight = ins[2] if len(ins) > 2 else None
    reduction = attrs.get("reduction", "mean")
    ignore = attrs.get("ignore_index")
    log_prob = None
    if node.op_type == "SoftmaxCrossEntropyLoss":
        log_prob = _log_softmax(cx, x, 1)
        x = log_prob
    shape = _static_shape(x)
    n = shape[0]
    t = _cast(cx, target, DType.I64)
    if ignore is not None:
        ign = cx.g.eq(t, cx.scalar(ignore, t))
        t_safe = cx.g.where(ign, cx.scalar(0, t), t)
    else:
        ign, t_safe = None, t
    t_exp = _reshape(cx, t_safe, [n, 1, *shape[2:]])
    picked = _reshape(cx, cx.g.gather_elements(x, t_exp, axis=1), [n, *shape[2:]])
    loss = -picked
    w = None
    if weight is not None:
        w = cx.g.gather(weight, t_safe, axis=0)
    if ign is not None:
        zero = cx.scalar(0.0, loss)
        w = cx.g.where(ign, zero, w if w is not None else cx.scalar(1.0, loss))
        w = _broadcast_to(cx, w, list(loss.shape))
    if w is not None:
        loss = loss * w
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = cx.g.reduce(loss, op="sum", axes=None, keep_dim=False)
    elif w is not None:
        out = cx.g.reduce(loss, op="sum", axes=None) / cx.g.reduce(w, op="sum", axes=None)
    else:
        out = cx.g.reduce(loss, op="mean", axes=None)
    return [out, log_prob] if node.op_type == "SoftmaxCrossEntropyLoss" else out


# ====================================================================== quantization
@converter("DequantizeLinear")
def _dequantize(cx, node, ins, attrs):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    if len(scale.shape) > 1 or attrs.get("block_size", 0):
        raise OnnxUnsupported("DequantizeLinear with blocked scales")
    per_axis = len(scale.shape) == 1 and scale.shape[0] != 1
    axis = _axis(attrs.get("axis", 1), max(len(x.shape), 1)) if per_axis else 0

    def lay(v):
        return _zero_point(cx, v, len(x.shape), axis)

    out_dtype = rlx_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else scale.dtype
    xf = _cast(cx, x, DType.F32)
    if zp is not None:
        xf = xf - _cast(cx, lay(zp), DType.F32)
    return _cast(cx, xf * _cast(cx, lay(scale), DType.F32), out_dtype)


@converter("QuantizeLinear")
def _quantize(cx, node, ins, attrs):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    if len(scale.shape) > 1 or attrs.get("block_size", 0):
        raise OnnxUnsupported("QuantizeLinear with blocked scales")
    out = zp.dtype if zp is not None else (rlx_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else DType.U8)
    if out not in (DType.U8, DType.I8, DType.I16, DType.F8E4M3, DType.F8E5M2):
        raise OnnxUnsupported(f"QuantizeLinear to {out}")
    per_axis = len(scale.shape) == 1 and scale.shape[0] != 1
    axis = _axis(attrs.get("axis", 1), max(len(x.shape), 1)) if per_axis else 0
    if out in (DType.F8E4M3, DType.F8E5M2):  # float8: x / scale (+ zero point), then the saturating cast
        xs = _cast(cx, x, DType.F32) / _cast(cx, _zero_point(cx, scale, len(x.shape), axis), DType.F32)
        if zp is not None:
            xs = xs + _cast(cx, _zero_point(cx, zp, len(x.shape), axis), DType.F32)
        return _cast_saturating(cx, xs, out, attrs.get("saturate", 1))

    def lay(v):
        return _zero_point(cx, v, len(x.shape), axis)

    xf = _cast(cx, x, DType.F32)
    y = cx.g.unary_math(xf / _cast(cx, lay(scale), DType.F32), kind="round_even")
    if zp is not None:
        y = y + _cast(cx, lay(zp), DType.F32)
    info = np.iinfo(out.numpy)
    y = cx.g.minimum(cx.g.maximum(y, cx.scalar(float(info.min), y)), cx.scalar(float(info.max), y))
    return _cast(cx, y, out)


# ====================================================================== control flow
# How If / Loop / Scan are imported (decided per node; bodies become rlx subgraphs through
# rlx.backends.onnx.control_flow.convert_body, outer runtime values passed as captures):
#
# * If: a condition known at import time inlines the taken branch (what folding the if_ would
#   give); a runtime condition becomes one structured ``if_`` per output, so an untaken branch
#   that would fail (out-of-range index, ...) never runs. Branches giving different types
#   cannot be an ``if_``: NeedsStatic (bind the condition with static_inputs=).
# * Loop: a static trip count with conditions known at every iteration is unrolled (exact,
#   folds, and supports scan outputs); a runtime trip count or a data-dependent condition
#   becomes ``while_`` (one node per state; a static trip count -> max_iterations, a runtime
#   one carried and tested in cond). Scan outputs or states whose type changes across
#   iterations have no ``while_`` form: unrolled when possible, else unsupported.
# * Scan: one state, inputs on axis 0 and scan outputs that are the new state itself (a prefix
#   scan) become ``scan`` (final state) / ``scan(save_trajectory)`` (stacked states); every
#   scan input reversed and every scan output prepended is ``scan(reverse=True)`` (row t stays
#   the state after the step reading x[t]). Everything else (several states, other per-step
#   outputs, mixed directions, other axes) is unrolled over the static sequence length.
def _inline_graph(cx: Importer, body, bindings: Mapping[str, Value], deps: frozenset[str]) -> list[Value]:
    """Convert a subgraph inline: its inputs bound to ``bindings``, its local names scoped, outer names shared."""
    onnx = _onnx()
    prefix = f"__sub{next(cx._uid)}_"
    local = {vi.name for vi in body.input} | {t.name for t in body.initializer} | {o for n in body.node for o in n.output if o}
    for vi in body.input:
        cx.env[prefix + vi.name] = bindings[vi.name]
        cx.deps[prefix + vi.name] = deps
    for t in body.initializer:
        cx.env[prefix + t.name] = cx.const(cx.tensor(t))
        cx.deps[prefix + t.name] = frozenset()
    for inner in body.node:
        new = onnx.NodeProto()
        new.CopyFrom(inner)
        for a in new.attribute:
            if a.type == onnx.AttributeProto.GRAPHS:
                raise OnnxUnsupported(f"{inner.op_type} with a list of subgraphs")
            if a.type == onnx.AttributeProto.GRAPH:
                _rename_outer(a.g, lambda nm: prefix + nm if nm in local else nm)
        new.input[:] = [prefix + n if n in local else n for n in inner.input]
        new.output[:] = [prefix + n if n else "" for n in inner.output]
        cx.convert_node(new, cx.opsets)
    return [cx.value(prefix + o.name if o.name in local else o.name) for o in body.output]


@converter("Scan")
def _scan(cx, node, ins, attrs):
    if cx.opset < 9:
        raise OnnxUnsupported("Scan-8 (batch axis and sequence_lens) is not supported; use opset >= 9")
    body = attrs["body"]
    m = attrs["num_scan_inputs"]
    n = len(ins) - m
    states, xs = list(ins[:n]), ins[n:]
    k = len(body.output) - n
    in_axes = [_axis(a, len(x.shape)) for a, x in zip(attrs.get("scan_input_axes", [0] * m), xs)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * m))
    out_dirs = list(attrs.get("scan_output_directions", [0] * k))
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise OnnxUnsupported(f"Scan needs one static sequence length, got {sorted(map(str, lengths))}")
    steps = next(iter(lengths))
    reverse = _scan_fits(body, n, m, k, in_axes, in_dirs, out_dirs, attrs.get("scan_output_axes", [0] * k), steps)
    if reverse is not None:
        try:
            return _scan_structured(cx, node, body, states[0], xs, k, reverse)
        except (OnnxError, RlxError):
            pass  # e.g. a state whose type changes across steps: unroll
    deps = frozenset().union(*(cx.deps.get(nm, frozenset()) for nm in node.input if nm))
    cx.unroll(steps * _body_cost(body), f"a Scan of {steps} steps")
    per_step: list[list[Value]] = []
    for t in range(steps):
        bind = {}
        for i, vi in enumerate(body.input):
            if i < n:
                bind[vi.name] = states[i]
            else:
                j = i - n
                pos = steps - 1 - t if in_dirs[j] else t
                sl = cx.g.narrow(xs[j], axis=in_axes[j], start=pos, length=1)
                bind[vi.name] = _reshape(cx, sl, [d for a, d in enumerate(xs[j].shape) if a != in_axes[j]])
        outs = _inline_graph(cx, body, bind, deps)
        states = outs[:n]
        per_step.append(outs[n:])
    results = list(states)
    out_axes = attrs.get("scan_output_axes", [0] * k)
    for j in range(k):
        items = [step[j] for step in per_step]
        if out_dirs[j]:
            items = items[::-1]
        rank = len(items[0].shape) + 1
        axis = _axis(out_axes[j], rank)
        parts = []
        for v in items:
            shape = list(v.shape)
            shape.insert(axis, 1)
            parts.append(_reshape(cx, v, shape))
        results.append(cx.g.concat(parts, axis=axis) if len(parts) > 1 else parts[0])
    return results


def _scan_fits(body, n, m, k, in_axes, in_dirs, out_dirs, out_axes, steps) -> bool | None:
    """Whether an ONNX Scan maps onto one rlx ``scan``: its ``reverse`` flag, or None (unrolled).

    rlx ``scan`` carries one value and yields its final value or its stacked trajectory, so
    the Scan must have exactly one state, scan inputs along axis 0, and every scan output
    must be the new state itself (same body output name) stacked along axis 0 (a cumulative
    sum / prefix scan). Directions: all forward, or every scan input reversed and every scan
    output prepended, which is rlx's ``reverse`` (iteration i reads x[length-1-i] and writes
    row length-1-i: row t is the state after the step reading x[t], as in rlx). Several
    states, other per-step outputs, mixed directions or non-leading axes are unrolled.
    (Identity chains in the body are looked through.)"""
    if n != 1 or m < 1 or steps < 1:
        return None
    dirs = {bool(d) for d in [*in_dirs, *out_dirs]}
    if any(in_axes) or any(out_axes) or len(dirs) != 1:
        return None
    ident = {nd.output[0]: nd.input[0] for nd in body.node if nd.op_type == "Identity" and nd.output and nd.input}

    def root(name: str) -> str:
        while name in ident:
            name = ident[name]
        return name

    if not all(root(body.output[n + j].name) == root(body.output[0].name) for j in range(k)):
        return None
    return dirs.pop()


def _scan_structured(cx, node, body, init: Value, xs: list[Value], k: int, reverse: bool) -> list[Value | None]:
    from rlx.backends.onnx import control_flow as cf

    caps = cf.captures_of(cx, body)
    step_types = [TensorType(Shape(list(x.shape)[1:]), x.dtype) for x in xs]
    slots = [(("body", 0), init.type), *[(("cap", c), cx.env[c].type) for c in caps],
             *[(("body", 1 + j), t) for j, t in enumerate(step_types)]]

    def finish(child, vals, outs):
        cf.same_type(outs[0], init.type, "Scan state")
        return [outs[0]]

    sub = cf.convert_body(cx, body, f"{node.name or 'scan'}_body", slots, finish)
    ops = [init, *[cx.env[c] for c in caps], *xs]
    common = dict(body=sub, length=int(xs[0].shape[0]), num_bcast=len(caps), num_xs=len(xs), reverse=reverse)
    results: list[Value | None] = [cx.g.scan(*ops, **common) if node.output[0] else None]
    traj = None
    for j in range(k):
        name = node.output[1 + j] if 1 + j < len(node.output) else ""
        if not name:
            results.append(None)
            continue
        if traj is None:
            traj = cx.g.scan(*ops, save_trajectory=True, **common)
        results.append(traj)
    return results


@converter("If")
def _if(cx, node, ins, attrs):
    """A condition known at import time inlines the taken branch (the folded ``if_``); a runtime
    condition gives one structured ``if_`` node per If output, its branches rlx subgraphs taking
    every outer runtime value either branch reads as captures (only the taken branch runs)."""
    known = cx.maybe_static(ins[0])
    if known is not None:
        branch = attrs["then_branch"] if bool(np.asarray(known).reshape(-1)[0]) else attrs["else_branch"]
        return _inline_graph(cx, branch, {}, cx.deps.get(node.input[0], frozenset()))
    try:
        return _if_structured(cx, node, ins, attrs)
    except (OnnxError, RlxError) as exc:
        raise NeedsStatic(f"If condition {node.input[0]!r} (structured if_ failed: {exc})",
                          cx.deps.get(node.input[0], frozenset())) from exc


def _if_structured(cx, node, ins, attrs) -> list[Value]:
    from rlx.backends.onnx import control_flow as cf

    then_b, else_b = attrs["then_branch"], attrs["else_branch"]
    caps = cf.captures_of(cx, then_b, else_b)
    slots = [(("cap", c), cx.env[c].type) for c in caps]
    pred = ins[0]
    if pred.dtype.is_complex:
        raise OnnxUnsupported("If with a complex condition")
    results: list[Value] = []
    for j, name in enumerate(node.output):
        if not name:
            results.append(None)
            continue

        def pick(child, vals, outs, j=j):
            return [outs[j]]

        tg = cf.convert_body(cx, then_b, f"{node.name or 'if'}_then{j}", slots, pick)
        eg = cf.convert_body(cx, else_b, f"{node.name or 'if'}_else{j}", slots, pick)
        results.append(cx.g.if_([pred, *[cx.env[c] for c in caps]], then_branch=tg, else_branch=eg))
    return results


# ====================================================================== Resize (static geometry)
def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel (coefficient ``a``), elementwise."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _resize_weights(mode: str, ratio: np.ndarray, scale: float, attrs) -> np.ndarray:
    """Interpolation weights [rows, k] of the k neighbours of source coordinates with fractional part ``ratio`` in (0, 1]."""
    a = attrs.get("cubic_coeff_a", -0.75)
    r = ratio[:, None]
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        pick_hi = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": np.zeros_like(ratio, bool),
                   "ceil": np.ones_like(ratio, bool)}[nm] | (ratio == 1.0)
        return np.stack([~pick_hi, pick_hi], axis=1).astype(np.float64)
    antialias = attrs.get("antialias", 0) and scale < 1.0
    if not antialias:
        if mode == "linear":
            return np.concatenate([1.0 - r, r], axis=1)
        return _cubic(np.concatenate([r + 1, r, 1 - r, 2 - r], axis=1), a)
    start = int(np.floor((-1 if mode == "linear" else -2) / scale) + 1)
    args = (np.arange(start, 2 - start)[None, :] - r) * scale
    w = np.clip(1 - np.abs(args), 0, 1) if mode == "linear" else _cubic(args, a)
    return w / w.sum(axis=1, keepdims=True)


def _resize_axis(cx, n_in: int, n_out: int, scale: float, attrs, roi: tuple[float, float] | None):
    """The 1-D resize along one axis as a matrix [n_out, n_in] plus the rows to extrapolate (vectorised:
    the work is the matrix's, bounded by ``LoadLimits.max_constant_elements`` before it is built)."""
    cx.check_elements(n_out * n_in, "the Resize matrix")
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    width = scale * n_in
    if mode not in ("nearest", "linear") and attrs.get("antialias", 0) and scale < 1.0:
        cx.check_elements(n_out * (2 * int(2 / scale) + 4), "the Resize antialias window")
    elif mode == "linear" and attrs.get("antialias", 0) and scale < 1.0:
        cx.check_elements(n_out * (2 * int(1 / scale) + 4), "the Resize antialias window")
    y = np.arange(n_out, dtype=np.float64)
    extrap = np.zeros(n_out, bool)
    if ctm == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(n_out, (hi - lo) * (n_in - 1) / 2) if width == 1 else y * (hi - lo) * (n_in - 1) / (width - 1)
        x = x + lo * (n_in - 1)
        extrap = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = (n_in / 2) * (1 - n_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise OnnxUnsupported(f"Resize coordinate_transformation_mode {ctm!r}")
    if not np.isfinite(x).all():
        raise OnnxError(f"{cx.where}: Resize source coordinates are not finite (scale {scale})")
    m = np.zeros((n_out, n_in))
    rows = np.flatnonzero(~extrap)
    xo = x[rows]
    base = np.floor(xo)
    ratio = np.where(xo == base, 1.0, xo - base)  # an integer coordinate counts as ratio 1 above base - 1
    base = (base - (xo == base)).astype(np.int64)
    w = _resize_weights(mode, ratio, scale, attrs)
    k = w.shape[1]
    pad = -(-k // 2)
    # the k source indices nearest x (ties to the lower one), kept within [-pad, n_in + pad)
    first = np.clip(base - (k // 2 - 1), -pad, n_in + pad - k)
    idx = first[:, None] + np.arange(k)[None, :]
    if attrs.get("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        w = w / w.sum(axis=1, keepdims=True)
    np.add.at(m, (np.broadcast_to(rows[:, None], idx.shape), np.clip(idx, 0, n_in - 1)), w)
    return m, extrap


@converter("Resize")
def _resize(cx, node, ins, attrs):
    if cx.opset < 11:
        raise OnnxUnsupported("Resize-10 (asymmetric, no coordinate modes) is not supported")
    x = ins[0]
    shape = _static_shape(x)
    rank = len(shape)
    axes = [_axis(a, rank) for a in attrs.get("axes", range(rank))]
    roi = np.asarray(cx.static(node.input[1], "roi")).reshape(-1).astype(np.float64) if len(node.input) > 1 and node.input[1] else None
    scales = None
    if len(node.input) > 2 and node.input[2]:
        arr = np.asarray(cx.static(node.input[2], "scales")).reshape(-1)
        scales = arr.astype(np.float64) if arr.size else None
    sizes = _ints(cx, node, 3, None, attrs) if len(node.input) > 3 and node.input[3] else None
    if sizes is not None:
        scale_of = {a: sizes[i] / shape[a] for i, a in enumerate(axes)}
        out = {a: sizes[i] for i, a in enumerate(axes)}
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = min(scale_of.values()) if policy == "not_larger" else max(scale_of.values())
            scale_of = dict.fromkeys(axes, s)
            out = {a: int(s * shape[a] + 0.5) for a in axes}
    elif scales is not None:
        scale_of = {a: float(scales[i]) for i, a in enumerate(axes)}
        out = {a: int(scale_of[a] * shape[a]) for a in axes}
    else:
        raise OnnxUnsupported("Resize needs scales or sizes")
    mode = attrs.get("mode", "nearest")
    if mode == "nearest" and attrs.get("antialias", 0):
        raise OnnxUnsupported("Resize nearest with antialias")
    extrapolation = attrs.get("extrapolation_value", 0.0)
    for a in axes:
        r = None if roi is None else (float(roi[axes.index(a)]), float(roi[axes.index(a) + len(axes)])) if len(roi) == 2 * len(axes) \
            else (float(roi[a]), float(roi[a + rank]))
        if math.isclose(scale_of[a], 1.0) and out[a] == x.shape[a] and (r is None or (math.isclose(r[0], 0) and math.isclose(r[1], 1))):
            continue
        m, extrap = _resize_axis(cx, x.shape[a], out[a], scale_of[a], attrs, r)
        if mode == "nearest":
            idx = np.argmax(m, axis=1).astype(np.int64)
            y = cx.g.gather(x, cx.const(idx), axis=a)
        else:
            xf = _cast(cx, x, DType.F32) if not x.dtype.is_float else x
            y = cx.g.dot_general(xf, cx.const(m.astype(xf.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
            perm = list(range(rank - 1))
            perm.insert(a, rank - 1)
            y = cx.g.transpose(y, perm=perm) if perm != list(range(rank)) else y
            if not x.dtype.is_float:
                y = _cast(cx, cx.g.unary_math(y, kind="round_even"), x.dtype)
        if extrap.any():
            mshape = [1] * rank
            mshape[a] = out[a]
            y = cx.g.where(cx.const(extrap.reshape(mshape)), cx.scalar(extrapolation, y), y)
        x = y
    return x


@converter("Upsample")
def _upsample(cx, node, ins, attrs):
    scales = attrs.get("scales") if cx.opset < 9 else np.asarray(cx.static(node.input[1], "scales")).reshape(-1)
    mode = attrs.get("mode", "nearest")
    fake = {"mode": "linear" if mode in ("linear", "bilinear") else "nearest", "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor"}
    x = ins[0]
    for a, s in enumerate(scales):
        n_out = int(x.shape[a] * float(s))
        if n_out == x.shape[a]:
            continue
        m, _ = _resize_axis(cx, x.shape[a], n_out, float(s), fake, None)
        if fake["mode"] == "nearest":
            x = cx.g.gather(x, cx.const(np.argmax(m, axis=1).astype(np.int64)), axis=a)
        else:
            y = cx.g.dot_general(x, cx.const(m.astype(x.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
            perm = list(range(len(x.shape) - 1))
            perm.insert(a, len(x.shape) - 1)
            x = cx.g.transpose(y, perm=perm)
    return x


# ====================================================================== recurrent layers (unrolled)
def _rnn_activation(cx, name: str, x: Value, alpha: float | None, beta: float | None) -> Value:
    name = name.lower()
    if name in ("tanh", "sigmoid", "relu"):
        return cx.g.activation(x, kind=name)
    if name == "leakyrelu":
        return cx.g.where(cx.g.lt(x, cx.scalar(0.0, x)), x * cx.scalar(alpha if alpha is not None else 0.01, x), x)
    if name == "hardsigmoid":
        y = x * cx.scalar(alpha if alpha is not None else 0.2, x) + cx.scalar(beta if beta is not None else 0.5, x)
        return cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))
    if name == "affine":
        return x * cx.scalar(alpha, x) + cx.scalar(beta, x)
    if name == "scaledtanh":
        return cx.g.tanh(x * cx.scalar(beta, x)) * cx.scalar(alpha, x)
    if name == "softsign":
        return x / (cx.g.abs(x) + cx.scalar(1.0, x))
    if name == "softplus":
        return cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x))
    if name == "elu":
        return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, (cx.g.exp(x) - cx.scalar(1.0, x)) * cx.scalar(alpha or 1.0, x))
    if name == "thresholdedrelu":
        return cx.g.where(cx.g.gt(x, cx.scalar(alpha if alpha is not None else 1.0, x)), x, cx.scalar(0.0, x))
    raise OnnxUnsupported(f"recurrent activation {name!r}")


@converter("RNN", "GRU", "LSTM")
def _recurrent(cx, node, ins, attrs):
    kind = node.op_type
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    x, w, r = ins[0], ins[1], ins[2]
    get = lambda i: ins[i] if len(ins) > i and ins[i] is not None else None
    b, seq_lens, h0 = get(3), get(4), get(5)
    c0, peep = (get(6), get(7)) if kind == "LSTM" else (None, None)
    if seq_lens is not None:
        lens = cx.static(node.input[4], "sequence_lens")
        if not (np.asarray(lens) == (x.shape[1] if not attrs.get("layout", 0) else x.shape[0])).all():
            raise OnnxUnsupported(f"{kind} with per-batch sequence_lens shorter than the sequence")
    layout = attrs.get("layout", 0)
    if layout:
        x = cx.g.transpose(x, perm=[1, 0, 2])
    seq, batch, _ = _static_shape(x)
    hidden = attrs["hidden_size"]
    direction = attrs.get("direction", "forward")
    nd = 2 if direction == "bidirectional" else 1
    cx.unroll(seq * nd * 16, f"{kind} over {seq} steps")
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = list(attrs.get("activations", defaults * nd))
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    clip = attrs.get("clip")
    ys, hs, cs = [], [], []
    for d in range(nd):
        reverse = direction == "reverse" or d == 1
        na = len(defaults)
        fns = []
        for j in range(na):
            k = d * na + j
            fns.append((acts[k], alphas[k] if k < len(alphas) else None, betas[k] if k < len(betas) else None))

        def act(j, v, fns=fns):
            name, al, be = fns[j]
            return _rnn_activation(cx, name, v, al, be)

        wd = _reshape(cx, cx.g.narrow(w, axis=0, start=d, length=1), list(w.shape[1:]))
        rd = _reshape(cx, cx.g.narrow(r, axis=0, start=d, length=1), list(r.shape[1:]))
        wt, rt = cx.g.transpose(wd, perm=[1, 0]), cx.g.transpose(rd, perm=[1, 0])
        if b is not None:
            bd = _reshape(cx, cx.g.narrow(b, axis=0, start=d, length=1), [b.shape[1]])
            wb = cx.g.narrow(bd, axis=0, start=0, length=gates * hidden)
            rb = cx.g.narrow(bd, axis=0, start=gates * hidden, length=gates * hidden)
        else:
            wb = rb = cx.const(np.zeros(gates * hidden, x.dtype.numpy))
        h = _reshape(cx, cx.g.narrow(h0, axis=0, start=d, length=1), [batch, hidden]) if h0 is not None else \
            cx.const(np.zeros((batch, hidden), x.dtype.numpy))
        c = _reshape(cx, cx.g.narrow(c0, axis=0, start=d, length=1), [batch, hidden]) if c0 is not None else \
            cx.const(np.zeros((batch, hidden), x.dtype.numpy))
        pd = _reshape(cx, cx.g.narrow(peep, axis=0, start=d, length=1), [3 * hidden]) if peep is not None else None

        def part(v, i):
            return cx.g.narrow(v, axis=-1 if len(v.shape) > 1 else 0, start=i * hidden, length=hidden) if len(v.shape) > 1 else \
                cx.g.narrow(v, axis=0, start=i * hidden, length=hidden)

        def clipped(v):
            if clip is None:
                return v
            return cx.g.maximum(cx.g.minimum(v, cx.scalar(clip, v)), cx.scalar(-clip, v))

        outs = [None] * seq
        for step in (range(seq - 1, -1, -1) if reverse else range(seq)):
            xt = _reshape(cx, cx.g.narrow(x, axis=0, start=step, length=1), [batch, x.shape[2]])
            xw = cx.g.matmul(xt, wt) + wb
            if kind == "RNN":
                h = act(0, clipped(xw + cx.g.matmul(h, rt) + rb))
            elif kind == "GRU":
                hr = cx.g.matmul(h, cx.g.narrow(rt, axis=1, start=0, length=2 * hidden))
                z = act(0, clipped(part(xw, 0) + part(hr, 0) + part(rb, 0)))
                rr = act(0, clipped(part(xw, 1) + part(hr, 1) + part(rb, 1)))
                rh = cx.g.narrow(rt, axis=1, start=2 * hidden, length=hidden)
                if attrs.get("linear_before_reset", 0):
                    hh = act(1, clipped(part(xw, 2) + rr * (cx.g.matmul(h, rh) + part(rb, 2))))
                else:
                    hh = act(1, clipped(part(xw, 2) + cx.g.matmul(rr * h, rh) + part(rb, 2)))
                h = (cx.scalar(1.0, z) - z) * hh + z * h
            else:
                pre = xw + cx.g.matmul(h, rt) + rb
                gi, go, gf, gc = (part(pre, i) for i in range(4))
                if pd is not None:
                    gi = gi + part(pd, 0) * c
                    gf = gf + part(pd, 2) * c
                i_ = act(0, clipped(gi))
                f_ = act(0, clipped(gf))
                if attrs.get("input_forget", 0):
                    f_ = cx.scalar(1.0, i_) - i_
                c = f_ * c + i_ * act(1, clipped(gc))
                if pd is not None:
                    go = go + part(pd, 1) * c
                o_ = act(0, clipped(go))
                h = o_ * act(2, c)
            outs[step] = h
        ys.append(cx.g.concat([_reshape(cx, o, [1, 1, batch, hidden]) for o in outs], axis=0))
        hs.append(_reshape(cx, h, [1, batch, hidden]))
        cs.append(_reshape(cx, c, [1, batch, hidden]))
    y = cx.g.concat(ys, axis=1) if nd > 1 else ys[0]
    yh = cx.g.concat(hs, axis=0) if nd > 1 else hs[0]
    yc = cx.g.concat(cs, axis=0) if nd > 1 else cs[0]
    if layout:
        y = cx.g.transpose(y, perm=[2, 0, 1, 3])
        yh, yc = cx.g.transpose(yh, perm=[1, 0, 2]), cx.g.transpose(yc, perm=[1, 0, 2])
    return [y, yh, yc] if kind == "LSTM" else [y, yh]


# ====================================================================== N-d gather / scatter (flat-index decompositions)
def _flat_index(cx, idx: Value, dims: Sequence[int]) -> Value:
    """Row-major flat position of the index tuples in ``idx[..., k]`` over ``dims`` (negative entries wrap)."""
    idx = _cast(cx, idx, DType.I64)
    k = len(dims)
    sizes = cx.const(np.array(dims, np.int64))
    idx = cx.g.where(cx.g.lt(idx, cx.scalar(0, idx)), idx + sizes, idx)
    strides = np.array([math.prod(dims[j + 1:]) for j in range(k)], np.int64)
    return cx.g.reduce(idx * cx.const(strides), op="sum", axes=[len(idx.shape) - 1], keep_dim=False)


@converter("GatherND")
def _gather_nd(cx, node, ins, attrs):
    data, idx = ins
    b = attrs.get("batch_dims", 0)
    dshape, ishape = _static_shape(data), _static_shape(idx)
    if not ishape or not 0 <= b < min(len(dshape), len(ishape)) or not 1 <= ishape[-1] <= len(dshape) - b:
        raise OnnxFormatError(f"GatherND batch_dims {b} / index depth {ishape[-1:]} do not fit data {dshape}, indices {ishape}")
    if not idx.dtype.is_int:
        raise OnnxFormatError("GatherND indices must be integers")
    k = ishape[-1]
    cx.check_elements(math.prod(dshape[:b]), "the GatherND batch offsets")
    nb = math.prod(dshape[:b])
    inner = math.prod(dshape[b:b + k])
    flat = _flat_index(cx, idx, dshape[b:b + k])
    if b:
        offs = np.arange(nb, dtype=np.int64).reshape(list(dshape[:b]) + [1] * (len(ishape) - 1 - b)) * inner
        flat = flat + cx.const(offs)
    table = _reshape(cx, data, [nb * inner, *dshape[b + k:]])
    out = cx.g.gather(table, flat, axis=0)
    return _reshape(cx, out, [*ishape[:-1], *dshape[b + k:]])


@converter("ScatterND")
def _scatter_nd(cx, node, ins, attrs):
    data, idx, upd = ins
    dshape, ishape = _static_shape(data), _static_shape(idx)
    if not ishape or not 1 <= ishape[-1] <= len(dshape) or not idx.dtype.is_int:
        raise OnnxFormatError(f"ScatterND indices {ishape} {idx.dtype} do not fit data {dshape}")
    k = ishape[-1]
    n, rest = math.prod(dshape[:k]), math.prod(dshape[k:])
    m = math.prod(ishape[:-1])
    flat = _reshape(cx, _flat_index(cx, idx, dshape[:k]), [m, 1])
    table = _reshape(cx, data, [n, rest])
    rows = _broadcast_to(cx, flat, [m, rest])
    out = cx.g.scatter_elements(table, rows, _reshape(cx, upd, [m, rest]), axis=0, reduction=attrs.get("reduction", "none"))
    return _reshape(cx, out, dshape)


# ====================================================================== integer / quantized linear algebra
def _zero_point(cx, v: Value | None, rank: int, axis: int | None) -> Value | None:
    """A zero point / scale laid out to broadcast: scalars as they are, a vector along ``axis``."""
    if v is None:
        return None
    if len(v.shape) == 1 and v.shape[0] != 1 and axis is not None:
        shape = [1] * rank
        shape[axis] = v.shape[0]
        return _reshape(cx, v, shape)
    return _reshape(cx, v, []) if v.shape.numel == 1 else v


@converter("MatMulInteger")
def _matmul_integer(cx, node, ins, attrs):
    a, b = (_cast(cx, v, DType.I32) for v in ins[:2])
    azp = ins[2] if len(ins) > 2 else None
    bzp = ins[3] if len(ins) > 3 else None
    if azp is not None:
        a = a - _cast(cx, _zero_point(cx, azp, len(a.shape), len(a.shape) - 2), DType.I32)
    if bzp is not None:
        b = b - _cast(cx, _zero_point(cx, bzp, len(b.shape), len(b.shape) - 1), DType.I32)
    return _matmul(cx, node, [a, b], {})


@converter("ConvInteger")
def _conv_integer(cx, node, ins, attrs):
    x, w = (_cast(cx, v, DType.F64) for v in ins[:2])
    xzp = ins[2] if len(ins) > 2 else None
    wzp = ins[3] if len(ins) > 3 else None
    if xzp is not None:
        x = x - _cast(cx, _zero_point(cx, xzp, len(x.shape), 1), DType.F64)
    if wzp is not None:
        w = w - _cast(cx, _zero_point(cx, wzp, len(w.shape), 0), DType.F64)
    return _cast(cx, _conv(cx, node, [x, w], attrs), DType.I32)  # exact: integer sums far below 2**53


@converter("QLinearMatMul")
def _qlinear_matmul(cx, node, ins, attrs):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins
    out = y_zp.dtype
    if out not in (DType.U8, DType.I8):
        raise OnnxUnsupported(f"QLinearMatMul to {out}")
    af = _cast(cx, a, DType.F64) - _cast(cx, _zero_point(cx, a_zp, len(a.shape), len(a.shape) - 2), DType.F64)
    bf = _cast(cx, b, DType.F64) - _cast(cx, _zero_point(cx, b_zp, len(b.shape), len(b.shape) - 1), DType.F64)
    acc = _matmul(cx, node, [af, bf], {})
    scale = _cast(cx, (_reshape(cx, a_s, []) * _reshape(cx, b_s, [])) / _reshape(cx, y_s, []), DType.F64)
    y = cx.g.unary_math(acc * scale, kind="round_even") + _cast(cx, _reshape(cx, y_zp, []), DType.F64)
    info = np.iinfo(out.numpy)
    y = cx.g.minimum(cx.g.maximum(y, cx.scalar(float(info.min), y)), cx.scalar(float(info.max), y))
    return _cast(cx, y, out)


# ====================================================================== DFT (constant matrices)
def _twiddles(k: np.ndarray, t: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2*pi*k*t/length, with the angle reduced mod 2*pi and exact values at quarter turns."""
    m = (k * t) % length
    ang = 2 * np.pi * m / length
    c, s = np.cos(ang), np.sin(ang)
    quarter = (4 * m) % length == 0
    q = (4 * m) // length
    c = np.where(quarter, np.choose(q % 4, [1.0, 0.0, -1.0, 0.0]), c)
    s = np.where(quarter, np.choose(q % 4, [0.0, 1.0, 0.0, -1.0]), s)
    return c, s


def _along(cx, v: Value, m: np.ndarray, axis: int) -> Value:
    """Apply the matrix ``m`` [out, in] along ``axis`` of ``v``."""
    rank = len(v.shape)
    y = cx.g.dot_general(v, cx.const(m.astype(v.dtype.numpy)), lhs_contracting=[axis], rhs_contracting=[1])
    perm = list(range(rank - 1))
    perm.insert(axis, rank - 1)
    return cx.g.transpose(y, perm=perm) if perm != list(range(rank)) else y


@converter("DFT")
def _dft(cx, node, ins, attrs):
    x = ins[0]
    shape = _static_shape(x)
    rank = len(shape)
    if cx.opset >= 20:
        axis = int(cx.static(node.input[2], "axis").reshape(-1)[0]) if len(node.input) > 2 and node.input[2] else -2
    else:
        axis = attrs.get("axis", 1)
    axis %= rank
    if axis == rank - 1:
        raise OnnxUnsupported("DFT along the real / imaginary axis")
    inverse, onesided = attrs.get("inverse", 0), attrs.get("onesided", 0)
    n = shape[axis]
    length = int(cx.static(node.input[1], "dft_length").reshape(-1)[0]) if len(node.input) > 1 and node.input[1] else \
        (2 * (n - 1) if inverse and onesided else n)
    xf = _cast(cx, x, DType.F64)
    re = _reshape(cx, cx.g.narrow(xf, axis=rank - 1, start=0, length=1), shape[:-1])
    im = _reshape(cx, cx.g.narrow(xf, axis=rank - 1, start=1, length=1), shape[:-1]) if shape[-1] == 2 else None
    k = length // 2 + 1
    n_in = min(n, k if inverse and onesided else length)  # samples beyond the transform length are dropped
    if n_in < n:
        re = cx.g.narrow(re, axis=axis, start=0, length=n_in)
        im = cx.g.narrow(im, axis=axis, start=0, length=n_in) if im is not None else None
    if inverse and onesided:
        kk = np.arange(n_in)[None, :]
        t = np.arange(length)[:, None]
        w = np.where((kk == 0) | ((length % 2 == 0) & (kk == length // 2)), 1.0, 2.0) / length
        cos, sin = _twiddles(kk, t, length)
        y = _along(cx, re, w * cos, axis)
        if im is not None:
            y = y - _along(cx, im, w * sin, axis)
        return _cast(cx, _reshape(cx, y, [*y.shape, 1]), x.dtype)
    rows = k if onesided and not inverse else length
    kk = np.arange(rows)[:, None]
    t = np.arange(n_in)[None, :]
    c, s = _twiddles(kk, t, length)
    if inverse:
        c, s = c / length, -s / length
    out_re = _along(cx, re, c, axis)
    out_im = -_along(cx, re, s, axis)
    if im is not None:
        out_re = out_re + _along(cx, im, s, axis)
        out_im = out_im + _along(cx, im, c, axis)
    parts = [_reshape(cx, v, [*v.shape, 1]) for v in (out_re, out_im)]
    return _cast(cx, cx.g.concat(parts, axis=rank - 1), x.dtype)


# ====================================================================== static index rearrangements
@converter("ReverseSequence")
def _reverse_sequence(cx, node, ins, attrs):
    x = ins[0]
    lens = np.asarray(cx.static(node.input[1], "sequence_lens")).reshape(-1).astype(np.int64)
    shape = _static_shape(x)
    b_ax, t_ax = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    grid = np.indices(shape)
    t, b = grid[t_ax], grid[b_ax]
    n = lens[b]
    idx = np.where(t < n, n - 1 - t, t)
    return cx.g.gather_elements(x, cx.const(idx), axis=t_ax)


@converter("Col2Im")
def _col2im(cx, node, ins, attrs):
    x = ins[0]
    image = [int(v) for v in cx.static(node.input[1], "image_shape").reshape(-1)]
    block = [int(v) for v in cx.static(node.input[2], "block_shape").reshape(-1)]
    nd = len(image)
    dil = list(attrs.get("dilations", [1] * nd))
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    strides = list(attrs.get("strides", [1] * nd))
    check_window(cx, nd, block, strides, dil, pads)
    if len(x.shape) != 3 or any(not 1 <= d <= cx.limits.max_dim for d in image):
        raise OnnxFormatError(f"Col2Im needs a rank-3 input and positive image_shape, got {list(x.shape)}, {image}")
    n, ck, length = _static_shape(x)
    kprod = math.prod(block)
    c = ck // kprod
    outs = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    if math.prod(outs) != length:
        raise OnnxError(f"Col2Im: {length} columns, geometry gives {outs}")
    hw = math.prod(image)
    cx.check_elements(n * c * kprod * length + hw, "the Col2Im scatter index")
    # row-major positions: kernel offsets (kprod, nd) and output positions (length, nd)
    kidx = np.indices(block).reshape(nd, -1).T
    lidx = np.indices(outs).reshape(nd, -1).T
    pos = lidx[None, :, :] * np.array(strides) + kidx[:, None, :] * np.array(dil) - np.array(pads[:nd])
    inside = ((pos >= 0) & (pos < np.array(image))).all(axis=-1)
    flat = np.ravel_multi_index(tuple(np.clip(pos, 0, np.array(image) - 1).transpose(2, 0, 1)), image)
    dest = np.where(inside, flat, hw).astype(np.int64)  # hw = a spare slot for taps that land in the padding
    cols = _reshape(cx, x, [n, c, kprod * length])
    idx = cx.const(np.broadcast_to(dest.reshape(1, 1, -1), (n, c, kprod * length)).copy())
    zeros = cx.g.expand(cx.const(np.zeros((), x.dtype.numpy)), target_shape=[n, c, hw + 1])
    out = cx.g.scatter_elements(zeros, idx, cols, axis=2, reduction="add")
    return _reshape(cx, cx.g.narrow(out, axis=2, start=0, length=hw), [n, c, *image])


@converter("Loop")
def _loop(cx, node, ins, attrs):
    """Unrolled when the trip count and every iteration's condition are known at import time;
    otherwise (a runtime trip count or a data-dependent condition) a structured ``while_`` (see
    :func:`_loop_structured`) when the Loop has no scan outputs and its states keep their types."""
    has_trip = bool(node.input[0])
    has_cond = len(node.input) > 1 and bool(node.input[1])
    trip_known = cx.maybe_static(ins[0]) if has_trip else None
    cond_known = cx.maybe_static(ins[1]) if has_cond else np.array(True)
    if (has_trip and trip_known is None) or cond_known is None:
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError) as exc:
            if not has_trip:
                raise OnnxUnsupported(f"Loop without a static trip count ({exc})") from exc
            if trip_known is None:
                cx.static(node.input[0], "Loop trip count")
            cx.static(node.input[1], "Loop condition")
            raise
    trip = int(_first(trip_known, "Loop trip count")) if has_trip else None
    if trip is not None and trip * _body_cost(attrs["body"]) > cx.budget.unroll:  # too long to unroll: keep it a loop
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError) as exc:
            cx.unroll(trip * _body_cost(attrs["body"]), f"a Loop of {trip} iterations (no while_ form: {exc})")
    try:
        return _loop_unrolled(cx, node, ins, attrs)
    except OnnxUnsupported as exc:
        try:
            return _loop_structured(cx, node, ins, attrs)
        except (OnnxError, RlxError):
            raise exc from None


def _body_cost(body) -> int:
    """Unroll budget one iteration of a subgraph spends: its node count (at least 1)."""
    return max(len(body.node), 1)


def _loop_structured(cx, node, ins, attrs) -> list[Value | None]:
    """Loop as ``while_``: carried = [iteration (i64 scalar), cond (bool scalar), *states, (trip count), *captures].

    A static trip count becomes ``max_iterations``; a runtime one is carried and checked in
    ``cond``. One ``while_`` node per state output (they share operands and subgraphs). Loops
    with scan outputs (per-iteration values stacked) have no ``while_`` form and are rejected
    here (the caller unrolls them when it can)."""
    from rlx.backends.onnx import control_flow as cf

    body = attrs["body"]
    n = len(ins) - 2
    k = len(body.output) - 1 - n
    if k:
        raise OnnxUnsupported("Loop with scan outputs and a runtime condition / trip count")
    if len(body.input) != 2 + n:
        raise OnnxUnsupported(f"Loop body takes {len(body.input)} inputs for {n} state(s)")
    g = cx.g
    trip_v = ins[0]
    trip_known = cx.maybe_static(trip_v) if trip_v is not None else None
    max_iter = int(np.asarray(trip_known).reshape(-1)[0]) if trip_known is not None else None
    i64 = DType.of("i64")
    scalar_i64 = TensorType(Shape([]), i64)
    scalar_b = TensorType(Shape([]), DType.of("bool"))
    cond0 = ins[1] if len(ins) > 1 and ins[1] is not None else cx.const(np.array(True))
    cond0 = _reshape(cx, cond0 if cond0.dtype.is_bool else g.cast(g.ne(cond0, cx.scalar(0, cond0)), to="bool"), [])
    states = list(ins[2:])
    dyn_trip = trip_v is not None and trip_known is None
    extra = [_reshape(cx, _cast(cx, trip_v, i64), [])] if dyn_trip else []
    caps = cf.captures_of(cx, body)
    carried = [cx.const(np.array(0, np.int64)), cond0, *states, *extra, *[cx.env[c] for c in caps]]
    slots = [(("body", 0), scalar_i64), (("body", 1), scalar_b), *[(("body", 2 + j), s.type) for j, s in enumerate(states)],
             *[(("extra", "trip"), scalar_i64) for _ in extra], *[(("cap", c), cx.env[c].type) for c in caps]]

    def finish(child, vals, outs):
        h = child.g
        c = outs[0]
        if not c.dtype.is_bool:
            c = h.ne(c, child.scalar(0, c))
        c = h.reshape(c, new_shape=[]) if len(c.shape) else c
        new = []
        for j, (o, s) in enumerate(zip(outs[1:1 + n], states)):
            if o.dtype != s.dtype:
                o = h.cast(o, to=s.dtype)
            cf.same_type(o, s.type, f"Loop state {j}")
            new.append(o)
        nxt = h.add(vals[("body", 0)], child.const(np.array(1, np.int64)))
        return [nxt, c, *new, *[vals[slot] for slot, _ in slots[2 + n:]]]

    sub = cf.convert_body(cx, body, f"{node.name or 'loop'}_body", slots, finish)

    def cond_fn(h, vals):
        c = vals[1]
        if dyn_trip:
            c = h.binary(c, h.compare(vals[0], vals[2 + n], op="lt"), op="mul")
        return [c]

    from rlx.ops.control_flow import make_graph

    cond = make_graph(f"{node.name or 'loop'}_cond", [(f"a{j}", t) for j, (_, t) in enumerate(slots)], cond_fn)
    out: list[Value | None] = []
    for j in range(n):
        name = node.output[j] if j < len(node.output) else ""
        out.append(g.while_(carried, cond=cond, body=sub, max_iterations=max_iter, output=2 + j) if name else None)
    return out


def _loop_unrolled(cx, node, ins, attrs):
    body = attrs["body"]
    trip = int(np.asarray(cx.static(node.input[0], "Loop trip count")).reshape(-1)[0]) if node.input[0] else None
    cond = bool(np.asarray(cx.static(node.input[1], "Loop condition")).reshape(-1)[0]) if len(node.input) > 1 and node.input[1] else True
    if trip is None:
        raise OnnxUnsupported("Loop without a static trip count")
    states = list(ins[2:])
    n = len(states)
    k = len(body.output) - 1 - n
    deps = frozenset().union(*(cx.deps.get(nm, frozenset()) for nm in node.input if nm))
    scans: list[list[Value]] = [[] for _ in range(k)]
    i = 0
    while i < trip and cond:
        cx.unroll(_body_cost(body), "a Loop iteration")
        bind = {body.input[0].name: cx.const(np.array(i, np.int64))}
        if len(body.input) > 1:
            bind[body.input[1].name] = cx.const(np.array(cond))
        for j, vi in enumerate(body.input[2:]):
            bind[vi.name] = states[j]
        outs = _inline_graph(cx, body, bind, deps)
        c = cx.maybe_static(outs[0])
        if c is None:
            raise OnnxUnsupported("Loop whose condition is computed at run time")
        cond = bool(np.asarray(c).reshape(-1)[0])
        states = outs[1:1 + n]
        for j in range(k):
            scans[j].append(outs[1 + n + j])
        i += 1
    results = list(states)
    for items in scans:
        if not items:
            raise OnnxUnsupported("Loop with zero iterations and scan outputs (empty tensor of unknown shape)")
        parts = [_reshape(cx, v, [1, *v.shape]) for v in items]
        results.append(cx.g.concat(parts, axis=0) if len(parts) > 1 else parts[0])
    return results


# The kind rows' ONNX ops register last: a row names the ONNX op computing exactly its kind, so
# it wins over a composite converter above (rlx.ops.kinds; CONTRIBUTING.md).
for _op_type in _ACT:
    CONVERTERS[_op_type] = _act
for _op_type in _MATH:
    CONVERTERS[_op_type] = _math
