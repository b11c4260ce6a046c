"""Graph, Node and Value: one append-only DAG type for HIR, MIR and LIR graphs.

Insertion order is topological order: a node's inputs always have smaller ids. Nodes are
immutable; passes build new graphs.

Multi-result nodes: a node with ``n`` results stores result 0's type as ``type`` and the
others as ``extra_types``; the graph keeps, right after it, one ``result`` node per extra
result (``result(%k) {index=r}`` at id ``k + r``). So a value is always one plain int id
(result ``r`` of node ``k`` is ``k + r``), every single-result graph is stored exactly as
before, and passes that copy nodes in order keep the layout: :meth:`Graph._push` appends a
multi-result node's ``result`` nodes itself and maps a re-appended ``result`` node onto them.

Builder methods (``g.matmul``, ``g.gelu`` …) are not written here: they are looked up in the
op registry on first use.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx.ir.attrs import FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import AttributeSchemaError, InternalError, RlxError, ShapeError
from rlx.ir.opdef import OpDef, builder_method, get_op
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import Range, check_range, ranges_in_effect

if TYPE_CHECKING:  # the registry's builder methods, for IDEs and type checkers (rlx.ir.builder_stubs)
    from rlx.ir._builders import GraphBuilders
else:
    GraphBuilders = object


class GraphStage(enum.Enum):
    """Which level a graph is at: HIR (block ops), MIR (tensor DAG), LIR (MIR + plan)."""

    HIR = "hir"
    MIR = "mir"
    LIR = "lir"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Origin:
    """A node of the model a graph was imported from, so tools speak the source's language:
    ``framework`` (``"onnx"`` / ``"torch"``), ``op`` (the ONNX op type, the aten target),
    ``name`` (the ONNX node name, the FX node name) and ``module`` (the ``nn.Module`` path)."""

    framework: str
    op: str
    name: str = ""
    module: str | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a node came from: the HIR block id and label, the passes that made it, and the
    source-model nodes it computes (``origins``: one for a node converted 1:1, several once
    fused). Origins are descriptive only: they take no part in equality (a graph read back from
    a file that does not store them equals the one written)."""

    hir: int | None = None
    label: str | None = None
    passes: tuple[str, ...] = ()
    origins: tuple[Origin, ...] = dataclasses.field(default=(), compare=False)

    def with_pass(self, name: str) -> Provenance:
        return Provenance(self.hir, self.label, (*self.passes, name), self.origins)


@dataclass(frozen=True, slots=True)
class Node:
    """One immutable graph node. ``attrs`` is a read-only mapping of canonical values."""

    id: int
    op: str
    attrs: Mapping[str, Any]
    inputs: tuple[int, ...]
    type: TensorType
    name: str | None = None
    prov: Provenance | None = None
    extra_types: tuple[TensorType, ...] = ()  # the types of results 1.. of a multi-result node

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def types(self) -> tuple[TensorType, ...]:
        """Every result's type, result 0 first."""
        return (self.type, *self.extra_types)

    @property
    def num_results(self) -> int:
        return 1 + len(self.extra_types)


#: The op of the nodes that hold results 1.. of a multi-result node (see the module doc).
RESULT = "result"


def producer_id(node: Node) -> int:
    """The id of the node computing ``node``'s value: its producer for a ``result`` node, else itself."""
    return node.id - node.attrs["index"] if node.op == RESULT else node.id


class Value:
    """A handle on a node of a graph, with NumPy-style operators that append ops."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: Graph, node_id: int):
        self.graph = graph
        self.id = node_id

    @property
    def node(self) -> Node:
        return self.graph._nodes[self.id]

    @property
    def shape(self) -> Shape:
        return self.graph._nodes[self.id].type.shape

    @property
    def dtype(self) -> DType:
        return self.graph._nodes[self.id].type.dtype

    @property
    def type(self) -> TensorType:
        return self.graph._nodes[self.id].type

    @property
    def name(self) -> str | None:
        return self.graph._nodes[self.id].name

    @property
    def index(self) -> int:
        """Which result of its producer this value is (0 for a single-result node)."""
        node = self.graph._nodes[self.id]
        return node.attrs["index"] if node.op == RESULT else 0

    @property
    def producer(self) -> Node:
        """The node computing this value (for result ``r`` of a multi-result node, that node)."""
        return self.graph._nodes[self.id - self.index]

    def __repr__(self) -> str:
        node = self.graph.node(self.id)
        label = f" {node.name!r}" if node.name else ""
        return f"<Value %{self.id}{label} {node.op} {node.type}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Value):
            return self.graph is other.graph and self.id == other.id
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return self.id == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.id)

    def __index__(self) -> int:
        return self.id

    def __bool__(self) -> bool:
        raise RlxError("a graph Value has no truth value (comparisons are methods: g.lt(a, b))")

    def _binary(self, kind: str, other: Any, reverse: bool = False) -> Value:
        if not isinstance(other, Value):
            other = self.graph.scalar(other, self.dtype)
        a, b = (other, self) if reverse else (self, other)
        return self.graph.apply("binary", a, b, op=kind)

    def __add__(self, o: Any) -> Value:
        return self._binary("add", o)

    def __radd__(self, o: Any) -> Value:
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> Value:
        return self._binary("sub", o)

    def __rsub__(self, o: Any) -> Value:
        return self._binary("sub", o, True)

    def __mul__(self, o: Any) -> Value:
        return self._binary("mul", o)

    def __rmul__(self, o: Any) -> Value:
        return self._binary("mul", o, True)

    def __truediv__(self, o: Any) -> Value:
        return self._binary("div", o)

    def __rtruediv__(self, o: Any) -> Value:
        return self._binary("div", o, True)

    def __pow__(self, o: Any) -> Value:
        return self._binary("pow", o)

    def __rpow__(self, o: Any) -> Value:
        return self._binary("pow", o, True)

    def __matmul__(self, o: Any) -> Value:
        return self.graph.apply("matmul", self, self.graph.scalar(o, self.dtype))

    def __rmatmul__(self, o: Any) -> Value:
        return self.graph.apply("matmul", self.graph.scalar(o, self.dtype), self)

    def __neg__(self) -> Value:
        return self.graph.apply("activation", self, kind="neg")


Ref = Value | int


def _scalar_dtype(value: Any, like: DType | None) -> DType:
    """JAX-style weak typing: a Python scalar takes its partner's dtype when kinds agree."""
    if isinstance(value, (bool, np.bool_)):
        return DType.BOOL
    if isinstance(value, (int, np.integer)):
        return like if like is not None and not like.is_bool else DType.I32
    if isinstance(value, (float, np.floating)):
        return like if like is not None and (like.is_float or like.is_complex) else DType.F32
    if isinstance(value, complex):
        return DType.C64
    raise RlxError(f"cannot use {type(value).__name__} {value!r} as a graph operand")


class _GraphType(type):
    """``rlx.Graph.matmul`` (on the class: ``help(rlx.Graph.matmul)``) and ``dir(rlx.Graph)`` know the builders too."""

    if not TYPE_CHECKING:
        def __getattr__(cls, method: str) -> Any:
            if method.startswith("_") or builder_method(method) is None:
                raise AttributeError(f"type object 'Graph' has no attribute or op builder {method!r}")
            builder = _make_builder(method)
            setattr(cls, method, builder)
            return builder

    def __dir__(cls) -> list[str]:
        from rlx.ir.opdef import builder_methods

        return sorted(set(super().__dir__()) | {m for m in builder_methods() if not m.startswith("_")})


class Graph(GraphBuilders, metaclass=_GraphType):
    """An append-only tensor DAG. Builder methods come from the op registry.

    >>> g = Graph("mlp"); x = g.input("x", (2, 3)); y = g.gelu(x); g.set_outputs([y])
    """

    def __init__(self, name: str = "graph", stage: GraphStage | str = GraphStage.MIR,
                 ranges: Mapping[str, Any] | None = None):
        self.name = name
        self.stage = GraphStage(stage) if not isinstance(stage, GraphStage) else stage
        self._nodes: list[Node] = []
        self._outputs: list[int] = []
        self._leaves: dict[str, int] = {}
        self._ranges: dict[str, Range] = {}
        for sym, bounds in (ranges or {}).items():
            self.set_range(sym, *bounds)

    # ----------------------------------------------------------------- symbols
    @property
    def symbol_ranges(self) -> Mapping[str, Range]:
        """Symbol -> (lo, hi) narrowed from the default (every symbol is a size >= 1); the
        graph's shape rules decide comparisons with them and runs check fed sizes against them."""
        return MappingProxyType(self._ranges)

    def set_range(self, name: str, lo: int = 1, hi: int | None = None) -> None:
        """Declare symbol ``name`` to take sizes in ``[lo, hi]`` (``hi`` None: unbounded), before
        the nodes whose shape rules rely on it (passes copy the ranges into the graphs they build)."""
        self._ranges[name] = check_range(name, lo, hi)

    # ----------------------------------------------------------------- access
    @property
    def nodes(self) -> list[Node]:
        """The nodes in topological (insertion) order. Do not mutate."""
        return self._nodes

    def node(self, ref: Ref) -> Node:
        node_id = self._id(ref)
        if not 0 <= node_id < len(self._nodes):
            raise RlxError(f"graph {self.name!r} has no node %{node_id}")
        return self._nodes[node_id]

    def value(self, ref: Ref) -> Value:
        return Value(self, self.node(ref).id)

    @property
    def outputs(self) -> list[Value]:
        return [Value(self, i) for i in self._outputs]

    @property
    def output_ids(self) -> tuple[int, ...]:
        return tuple(self._outputs)

    def results(self, ref: Ref) -> tuple[Value, ...]:
        """Every result of the node ``ref`` (its producer, if ``ref`` is a ``result`` node), result 0 first."""
        node = self.node(ref)
        first = producer_id(node)
        return tuple(Value(self, first + r) for r in range(self._nodes[first].num_results))

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes)

    def inputs(self) -> dict[str, Value]:
        """Runtime inputs by name, in node order."""
        return self._leaves_of("input")

    def params(self) -> dict[str, Value]:
        """Weights by name, in node order."""
        return self._leaves_of("param")

    def _leaves_of(self, op: str) -> dict[str, Value]:
        return {n: Value(self, i) for n, i in self._leaves.items() if self._nodes[i].op == op}

    def stamp_origin(self, start: int, origin: Origin) -> None:
        """Record ``origin`` on the nodes appended since node ``start`` that have none yet (an
        importer calls it after converting each source node; node ids and types are unchanged)."""
        for i in range(start, len(self._nodes)):
            node = self._nodes[i]
            prov = node.prov
            if prov is None:
                prov = Provenance(origins=(origin,))
            elif not prov.origins:
                prov = dataclasses.replace(prov, origins=(origin,))
            else:
                continue
            self._nodes[i] = dataclasses.replace(node, prov=prov)

    def users(self) -> list[list[int]]:
        """For each node, the ids of the nodes that read it (each consumer once)."""
        users: list[list[int]] = [[] for _ in self._nodes]
        for node in self._nodes:
            for src in dict.fromkeys(node.inputs):
                users[src].append(node.id)
        return users

    # ---------------------------------------------------------------- equality
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return (
            self.name == other.name
            and self.stage == other.stage
            and self._outputs == other._outputs
            and self._nodes == other._nodes
            and self._ranges == other._ranges
        )

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        from rlx.ir.text import print_graph

        return print_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name!r} {self.stage}: {len(self._nodes)} nodes, {len(self._outputs)} outputs>"

    # ---------------------------------------------------------------- building
    def input(self, name: str, shape: Iterable[Any], dtype: Any = "f32") -> Value:
        """Declare a named runtime input."""
        return self.append("input", (), {"name": name, "shape": shape, "dtype": dtype}, name=name)

    def param(self, name: str, shape: Iterable[Any], dtype: Any = "f32") -> Value:
        """Declare a named weight."""
        return self.append("param", (), {"name": name, "shape": shape, "dtype": dtype}, name=name)

    def constant(self, value: Any, name: str | None = None, dtype: Any = None) -> Value:
        """Embed a tensor (copied; stored immutable)."""
        arr = np.asarray(value) if dtype is None else np.asarray(value).astype(DType.of(dtype).numpy)
        DType.of(arr.dtype)  # reject dtypes rlx cannot represent
        return self.append("constant", (), {"value": FrozenArray(arr)}, name=name)

    def rename(self, ref: Ref, name: str | None) -> None:
        """Set a node's display name (frontends keep their source's value names); leaves keep theirs."""
        nid = self._id(ref)
        node = self.node(nid)
        if node.op in ("input", "param"):
            raise RlxError(f"graph {self.name!r}: node %{nid} is an {node.op}; its name is its binding name {node.name!r}")
        self._nodes[nid] = dataclasses.replace(node, name=name)

    def set_outputs(self, outputs: Iterable[Ref]) -> None:
        ids = [self._id(o) for o in outputs]
        for i in ids:
            self.node(i)
        self._outputs = ids

    def apply(self, op_name: str, /, *args: Any, name: str | None = None, **attrs: Any) -> Any:
        """Build op ``op``: operands positionally, then attributes positionally or by keyword. The
        result is a Value, or a tuple of them for a multi-result op (typed per op in _builders.pyi)."""
        return self._build(get_op(op_name), {}, args, attrs, name)

    def append(
        self,
        op: str,
        inputs: Sequence[Ref],
        attrs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        prov: Provenance | None = None,
        type: TensorType | tuple[TensorType, ...] | None = None,
        check: bool = True,
    ) -> Value:
        """Low-level append used by builders, passes and loaders; returns result 0's Value.

        With ``check`` the attributes are validated and the type inferred (and compared
        with ``type`` if one is given; a tuple for a multi-result op). Without it the node
        is stored as given, for loaders that verify the whole graph afterwards. A
        multi-result node's ``result`` nodes follow it at once (:meth:`results`);
        appending ``result(%k) {index=r}`` again returns the existing value ``k + r``.
        """
        ids = tuple(i if i.__class__ is int else self._id(i) for i in inputs)
        if not check or op == RESULT:
            if type is None and op != RESULT:
                raise RlxError("append(check=False) needs an explicit type")
            first, extra = (type[0], tuple(type[1:])) if isinstance(type, tuple) else (type, ())
            node = Node(len(self._nodes), op, MappingProxyType(dict(attrs or {})), ids, first, name, prov, extra)  # type: ignore[arg-type]
            return self._push(node)
        made = self._append_checked(get_op(op), ids, attrs or {}, name, prov, type)
        return made[0] if made.__class__ is tuple else made  # type: ignore[index,return-value]

    def _append_checked(
        self, opdef: OpDef, ids: tuple[int, ...], attrs: Mapping[str, Any], name: str | None, prov: Provenance | None,
        declared: TensorType | tuple[TensorType, ...] | None = None,
    ) -> Value | tuple[Value, ...]:
        """Validate attributes and operand ids, infer the type, append (the checked path of ``append``).

        An op whose rule gives a tuple of types returns a tuple of Values (one per result)."""
        where = opdef.name if name is None else f"{opdef.name} {name!r}"
        checked = opdef.check_attrs(attrs, where)
        nodes = self._nodes
        count = len(nodes)
        for i in ids:
            if not 0 <= i < count:
                raise RlxError(f"{where}: operand %{i} does not exist in graph {self.name!r}")
        in_types = [nodes[i].type for i in ids]
        inferred = self._in_ranges(lambda: infer_type(opdef, in_types, checked, where))
        if inferred.__class__ is tuple:
            if declared is not None and tuple(declared) != inferred:  # type: ignore[arg-type]
                raise ShapeError(f"{where}: declared types {declared} but the op rule gives {inferred}")
            node = Node(count, opdef.name, MappingProxyType(checked), ids, inferred[0], name, prov, inferred[1:])
            return self.results(self._push(node))
        if declared.__class__ is tuple and len(declared) == 1:  # type: ignore[arg-type]
            declared = declared[0]  # type: ignore[index]  # node.types of a one-result node
        if declared is not None and declared != inferred:
            raise ShapeError(f"{where}: declared type {declared} but the op rule gives {inferred}")
        return self._push(Node(count, opdef.name, MappingProxyType(checked), ids, inferred, name, prov))

    def _in_ranges(self, rule: Callable[[], Any]) -> Any:
        """Run a shape rule deciding with this graph's symbol ranges (static graphs skip the context)."""
        if not self._ranges:
            return rule()
        with ranges_in_effect(self._ranges):
            return rule()

    def _push(self, node: Node) -> Value:
        op = node.op
        if op == RESULT:
            return self._result_of(node)
        if op in ("input", "param"):
            leaf: str = node.attrs["name"]
            if leaf in self._leaves:
                raise RlxError(f"graph {self.name!r} already has an input or param named {leaf!r}")
            self._leaves[leaf] = node.id
        nodes = self._nodes
        nodes.append(node)
        if node.extra_types:
            at = node.id
            for r, t in enumerate(node.extra_types, 1):
                nodes.append(Node(at + r, RESULT, MappingProxyType({"index": r}), (at,), t, None, node.prov))
        return Value(self, node.id)

    def _result_of(self, node: Node) -> Value:
        """A re-appended ``result`` node: the existing value ``producer + index`` (taking its name)."""
        index = node.attrs.get("index")
        if len(node.inputs) != 1 or index.__class__ is not int or len(node.attrs) != 1:
            raise RlxError(f"graph {self.name!r}: a result node takes one operand (a multi-result node) and one int attribute 'index'")
        src = node.inputs[0]
        if not 0 <= src < len(self._nodes) or not 1 <= index <= len(self._nodes[src].extra_types):
            raise RlxError(f"graph {self.name!r}: result {index} of node %{src} does not exist "
                           "(result nodes refer to a multi-result node, indices from 1)")
        nid = src + index
        slot = self._nodes[nid]
        if node.type is not None and node.type != slot.type:
            raise ShapeError(f"graph {self.name!r}: result {index} of node %{src} is {slot.type}, not {node.type}")
        if node.name is not None and node.name != slot.name:
            self._nodes[nid] = Node(nid, RESULT, slot.attrs, slot.inputs, slot.type, node.name, slot.prov)
        return Value(self, nid)

    def _build(self, opdef: OpDef, preset: Mapping[str, Any], args: Sequence[Any], kwargs: dict[str, Any],
               name: str | None) -> Value | tuple[Value, ...]:
        given = {**preset, **kwargs}
        if opdef.aliases:
            given = {opdef.aliases.get(k, k): v for k, v in given.items()}
        where = opdef.name if name is None else f"{opdef.name} {name!r}"
        if opdef.is_variadic:
            if not args or isinstance(args[0], (Value, int, np.ndarray)):
                raise AttributeSchemaError(f"{where}: operands are passed as one list, e.g. g.{opdef.name}([a, b], ...)")
            operands, extra = list(args[0]), list(args[1:])
        else:
            arity = opdef.arity
            n = arity(opdef.check_attrs(given, where)) if callable(arity) else int(arity)
            operands, extra = list(args[:n]), list(args[n:])
            if len(operands) < n:
                raise ShapeError(f"{where}: expects {n} operands ({', '.join(opdef.operands)}), got {len(operands)}")
        if extra:
            free = [k for k in opdef.attrs if k not in given]
            if len(extra) > len(free):
                raise AttributeSchemaError(f"{where}: too many positional arguments ({len(args)})")
            given.update(zip(free, extra))
        if all(o.__class__ is Value and o.graph is self for o in operands):
            ids = tuple(o.id for o in operands)
        else:
            like = next((o.dtype for o in operands if isinstance(o, Value) and o.graph is self), None)
            ids = tuple(self._operand(o, like, where) for o in operands)
        if opdef.canonicalize is not None:
            in_types = [self._nodes[i].type for i in ids]
            checked = opdef.check_attrs(given, where)
            given = self._in_ranges(lambda: _guarded(where, in_types, lambda: opdef.canonicalize(in_types, checked)))  # type: ignore[misc]
        return self._append_checked(opdef, ids, given, name, None)

    def _operand(self, ref: Any, like: DType | None, where: str) -> int:
        """Builder operands: Values and int node ids; float scalars and arrays become constants."""
        if isinstance(ref, Value) or (isinstance(ref, (int, np.integer)) and not isinstance(ref, (bool, np.bool_))):
            node_id = self._id(ref)
            if not 0 <= node_id < len(self._nodes):
                raise RlxError(f"{where}: operand %{node_id} does not exist in graph {self.name!r}")
            return node_id
        if isinstance(ref, np.ndarray):
            return self.constant(ref).id
        return self.scalar(ref, like).id

    def scalar(self, value: Any, like: DType | None = None) -> Value:
        """A rank-0 constant; its dtype follows ``like`` where kinds agree (JAX weak typing)."""
        if isinstance(value, Value):
            return value
        if isinstance(value, np.ndarray):
            return self.constant(value)
        return self.constant(np.array(value, dtype=_scalar_dtype(value, like).numpy))

    def _id(self, ref: Any) -> int:
        if isinstance(ref, Value):
            if ref.graph is not self:
                raise RlxError(f"{ref!r} belongs to graph {ref.graph.name!r}, not {self.name!r}")
            return ref.id
        if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
            return int(ref)
        raise RlxError(f"expected a Value or a node id, got {type(ref).__name__} {ref!r}")

    if not TYPE_CHECKING:  # type checkers see the builders in rlx.ir._builders, so a misspelt op is an error there
        def __getattr__(self, method: str) -> Any:
            if method.startswith("_"):
                raise AttributeError(method)
            found = builder_method(method)
            if found is None:
                raise AttributeError(f"'Graph' has no attribute or op builder {method!r}")
            builder = _make_builder(method)
            setattr(Graph, method, builder)
            return builder.__get__(self, Graph)

    def __dir__(self) -> list[str]:
        """The attributes and every op builder (tab completion lists the ops)."""
        from rlx.ir.opdef import builder_methods

        return sorted(set(super().__dir__()) | {m for m in builder_methods() if not m.startswith("_")})


def _make_builder(method: str) -> Any:
    def build(self: Graph, *args: Any, name: str | None = None, **attrs: Any) -> Any:
        found = builder_method(method)
        if found is None:
            raise AttributeError(f"op builder {method!r} is no longer registered")
        opdef, preset = found
        return self._build(opdef, preset, args, attrs, name)

    from rlx.ir.builder_stubs import builder_doc, builder_signature

    build.__name__ = method
    build.__doc__ = builder_doc(method)
    build.__signature__ = builder_signature(method)  # type: ignore[attr-defined]  # help(g.matmul), IDE tooltips
    return build


def infer_type(opdef: OpDef, in_types: list[TensorType], attrs: Mapping[str, Any], where: str) -> TensorType | tuple[TensorType, ...]:
    """Run an op's type rule, turning any failure into a ShapeError naming op and operands.

    A multi-result op's rule gives a tuple of types (a 1-tuple: one result, built as a tuple)."""
    expected = opdef.expected_arity(attrs)
    if expected is None:
        if len(in_types) < opdef.min_arity:
            raise ShapeError(f"{where}: expects at least {opdef.min_arity} operands, got {len(in_types)}")
    elif len(in_types) != expected:
        raise ShapeError(f"{where}: expects {expected} operands ({', '.join(opdef.operands)}), got {len(in_types)}")
    return _guarded(where, in_types, lambda: opdef.infer(in_types, attrs))


def _guarded(where: str, in_types: list[TensorType], rule: Callable[[], Any]) -> Any:
    """Run a type rule. A ShapeError (the rule rejecting its operands) gets the op and operands
    added; other RlxErrors pass unchanged; any other exception is a bug in the rule and surfaces
    as an :class:`InternalError` with the original chained (traceback kept)."""
    try:
        return rule()
    except ShapeError as exc:
        listed = ", ".join(str(t) for t in in_types)
        raise ShapeError(f"{where}: {exc} (operands: {listed or 'none'})") from None
    except RlxError:
        raise
    except Exception as exc:
        listed = ", ".join(str(t) for t in in_types)
        raise InternalError(f"{where}: the type rule raised {type(exc).__name__}: {exc} "
                            f"(operands: {listed or 'none'}); this is a bug in the op's rule") from exc
