"""Import upstream rlx-ir 0.2.1's unversioned serde JSON (docs/pipeline.md#upstream-json) as rlx objects.

    g = rlx.from_upstream_json(text)        # a Graph or MirModule {"inner": …} -> verified MIR Graph
    m = rlx.from_upstream_json(hir_text)    # a HirModule -> GraphModule at stage HIR (its fusion policy)
    lir = rlx.from_upstream_json(lir_text)  # an LirModule -> rlx.LirModule, re-planned by rlx.plan

Upstream writes its structs with serde's defaults: externally tagged enums (``"MatMul"``,
``{"Binary": "Add"}``, ``{"Input": {"name": "x"}}``), shapes as ``{"dims": [{"Static": 2},
{"Dynamic": 1}], "dtype": "F32"}``, byte payloads as arrays of ints, NaN / infinity as
``null``, nested graphs inline. The document kind is recognised by its keys.

Every upstream op variant is one :class:`UpstreamOp` entry of :data:`MIR_OPS` (HirOp
variants: :data:`HIR_OPS`): the rlx op it becomes, the upstream field names with their
serde types, and at most a small attribute translator where names or encodings differ.
Variants that rlx does not import are listed with the reason in :data:`REFUSED_MIR` /
:data:`REFUSED_HIR`; registered rlx ops with no upstream 0.2.1 counterpart in
:data:`RLX_ONLY`. Tests walk these tables against the op registry.

Upstream node shapes are *declared*; rlx infers every type. A node is appended with its
op rule, then reconciled with the declared type: a declared dtype that differs (upstream
keeps the lhs dtype where rlx promotes; index outputs are floats upstream) is honoured with
an explicit ``cast``; a declared ``[1]`` for a one-element ``[]`` result (or the reverse) with
a ``reshape``; any other difference is a :class:`rlx.VerifyError` naming the node. Float
index operands (gather indices, labels, expert ids, scatter rows) get a ``cast`` to i64
(truncation toward zero, as upstream; a negative index wraps in rlx where upstream
saturates it to 0). Dynamic dims ``{"Dynamic": k}`` become symbols: ``batch``, ``seq``,
``rows``, ``past_seq`` for upstream's well-known 0..3, ``d<k>`` otherwise.

Safety as :func:`rlx.from_json`: no eval, pickle or import; every field is checked and a
bad one raises :class:`rlx.FormatError` naming its path (``nodes[3].op.Binary: unknown
variant "Foo"``); node ids must equal their position and operands must be earlier nodes;
:class:`rlx.LoadLimits` bound the document before anything is allocated; the result is
verified. Only FormatError and VerifyError escape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from rlx.frontends.upstream.tables import (
    _DTYPES,
    _INT_MAX,
    _U32_MAX,
    ACTIVATIONS,
    ATTENTION_WRT,
    BINARY_OPS,
    BLOCK_SCHEMES,
    COMPARE_OPS,
    FFT_NORMS,
    FUSION_POLICIES,
    HIR_OPS,
    MASK_KINDS,
    MIR_OPS,
    QUANT_SCHEMES,
    REDUCE_OPS,
    REFUSED_HIR,
    REFUSED_MIR,
    RLX_ONLY,
    SCALE_MODES,
    STE_KINDS,
    WELL_KNOWN_SYMBOLS,
    UpstreamOp,
    _Ctx,
    symbol_name,
)
from rlx.ir.attrs import FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import AttributeSchemaError, FormatError, RlxError, VerifyError
from rlx.ir.graph import Graph, GraphStage, Provenance
from rlx.ir.opdef import get_op
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits, _guard, _parse_json, _short, _tname, _verify
from rlx.ir.shape import Shape, TensorType

__all__ = [
    "HIR_OPS", "MIR_OPS", "REFUSED_HIR", "REFUSED_MIR", "RLX_ONLY", "WELL_KNOWN_SYMBOLS", "UpstreamOp",
    "from_upstream_json", "symbol_name",
]



# ------------------------------------------------------------------------------------ reading


_UNIT: Any = object()  # payload of a unit variant


class _Importer:
    """Reads one upstream document; counts nodes, nesting and bytes against the limits."""

    def __init__(self, limits: LoadLimits):
        self.limits = limits
        self.depth = 0
        self.node_count = 0
        self.bytes_read = 0
        unit = self._unit_enum
        self.kinds: dict[str, Callable[[Any, str], Any]] = {
            "u8": lambda v, p: self._int(v, p, 0, 255), "u32": lambda v, p: self._int(v, p, 0, _U32_MAX),
            "usize": lambda v, p: self._int(v, p, 0, _INT_MAX), "u64": lambda v, p: self._int(v, p, 0, 2**64 - 1),
            "i32": lambda v, p: self._int(v, p, -(2**31), 2**31 - 1), "i64": lambda v, p: self._int(v, p, -(2**63), _INT_MAX),
            "f32": self._f32, "bool": self._bool, "str": self._str, "bytes": self._bytes,
            "usizes": self._ints("usize"), "i64s": self._ints("i64"), "i32s": self._ints("i32"), "f32s": self._ints("f32"),
            "modulus": self._modulus, "dtype": self._dtype,
            "activation": unit(ACTIVATIONS, "Activation"), "binary": unit(BINARY_OPS, "BinaryOp"),
            "compare": unit(COMPARE_OPS, "CmpOp"), "reduce": unit(REDUCE_OPS, "ReduceOp"), "ste": unit(STE_KINDS, "SteKind"),
            "wrt": unit(ATTENTION_WRT, "AttentionBwdWrt"), "rope_style": unit({"NeoX": False, "GptJ": True}, "RopeStyle"),
            "prologue": unit({"None": None, "ResizeNearest2x": "ResizeNearest2x"}, "RegionPrologue"),
            "fft_norm": unit({n: n for n in FFT_NORMS}, "FftNorm"),
            "mask": self._mask_kind, "scale_mode": self._scale_mode, "scheme": self._scheme,
            "graph": lambda v, p: self.graph(v, p, GraphStage.MIR), "chain": self._chain,
        }

    # ------------------------------------------------------------ primitives
    @staticmethod
    def err(path: str, message: str) -> FormatError:
        return FormatError(f"{path or '<document>'}: {message}")

    def obj(self, v: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if type(v) is not dict:
            raise self.err(path, f"expected an object, got {_tname(v)}")
        for key in required:
            if key not in v:
                raise self.err(_join(path, key), "missing field")
        extra = sorted(str(k) for k in v if k not in required and k not in optional)
        if extra:
            raise self.err(_join(path, extra[0][:80]), "unknown field")
        return v

    def _sized(self, v: Any, path: str, kind: type) -> Any:
        """A list (at most max_items entries) or a str (at most max_string characters)."""
        what, unit, limit = ("list", "entries", "max_items") if kind is list else ("string", "characters", "max_string")
        if type(v) is not kind:
            raise self.err(path, f"expected a {what}, got {_tname(v)}")
        if len(v) > getattr(self.limits, limit):
            raise self.err(path, f"{len(v)} {unit} exceed {limit}={getattr(self.limits, limit)}")
        return v

    def list(self, v: Any, path: str) -> list:
        return self._sized(v, path, list)

    def _int(self, v: Any, path: str, lo: int, hi: int) -> int:
        if type(v) is not int:
            raise self.err(path, f"expected an integer, got {_tname(v)}")
        if not lo <= v <= hi:
            raise self.err(path, f"{_short(v)} is outside [{lo}, {hi}]")
        return v

    def _f32(self, v: Any, path: str) -> float:
        if v is None:
            raise self.err(path, "null: upstream writes NaN and infinities as null and cannot read them back (the value is lost)")
        if (type(v) is int and abs(v) < 2**128) or type(v) is float:
            return float(v)
        raise self.err(path, f"expected a number, got {_tname(v)}")

    def _bool(self, v: Any, path: str) -> bool:
        if type(v) is not bool:
            raise self.err(path, f"expected a bool, got {_tname(v)}")
        return v

    def _str(self, v: Any, path: str) -> str:
        return self._sized(v, path, str)

    def _ints(self, kind: str) -> Callable[[Any, str], tuple]:
        return lambda v, p: tuple(self.kinds[kind](x, f"{p}[{j}]") for j, x in enumerate(self.list(v, p)))

    def _modulus(self, v: Any, path: str) -> tuple[int, ...]:
        out = self._ints("u32")(v, path)
        if len(out) != 16:
            raise self.err(path, f"expected 16 entries ([u32; 16]), got {len(out)}")
        return out

    def _bytes(self, v: Any, path: str) -> bytes:
        lim = self.limits
        if type(v) is not list:
            raise self.err(path, f"expected a list of byte values, got {_tname(v)}")
        if len(v) > lim.max_inline_bytes or self.bytes_read + len(v) > lim.max_total_bytes:
            raise self.err(path, f"{len(v)} bytes exceed max_inline_bytes={lim.max_inline_bytes} / max_total_bytes")
        self.bytes_read += len(v)
        if not v:
            return b""
        try:
            arr = np.asarray(v) if all(type(x) is int for x in v) else None
        except OverflowError:
            arr = None
        if arr is None or arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > 255:
            j = next((j for j, x in enumerate(v) if type(x) is not int or not 0 <= x <= 255), 0)
            raise self.err(f"{path}[{j}]", f"expected a byte (an integer 0..255), got {_short(v[j])}")
        return arr.astype(np.uint8).tobytes()

    def _dtype(self, v: Any, path: str) -> DType:
        if type(v) is not str or v not in _DTYPES:
            raise self.err(path, f"unknown DType {_short(v)} (expected one of {', '.join(_DTYPES)})")
        return _DTYPES[v]

    # ------------------------------------------------------------ enums
    def variant(self, v: Any, path: str) -> tuple[str, Any]:
        """(name, payload) of an externally tagged enum value; the payload of a unit variant is _UNIT."""
        if type(v) is str:
            return v, _UNIT
        if type(v) is dict and len(v) == 1:
            ((name, payload),) = v.items()
            return name, payload
        raise self.err(path, f"expected an enum variant (a string or an object with one key), got {_tname(v)}")

    def _unknown(self, path: str, name: str, what: str, known: Collection[str]) -> FormatError:
        expected = f"one of {', '.join(known)}" if len(known) <= 20 else f"an upstream rlx-ir 0.2.1 {what} variant"
        return self.err(path, f"unknown variant {json.dumps(name[:80])} of {what} (expected {expected})")

    def _unit_enum(self, table: Mapping[str, Any], what: str) -> Callable[[Any, str], Any]:
        def read(v: Any, path: str) -> Any:
            name, payload = self.variant(v, path)
            if payload is not _UNIT or name not in table:
                raise self._unknown(path, name, what, table)
            return table[name]

        return read

    def _mask_kind(self, v: Any, path: str) -> tuple[str, int | None]:
        name, payload = self.variant(v, path)
        if name == "SlidingWindow" and payload is not _UNIT:
            return "sliding_window", self.kinds["usize"](payload, f"{path}.SlidingWindow")
        if payload is not _UNIT or name not in MASK_KINDS:
            raise self._unknown(path, name, "MaskKind", (*MASK_KINDS, "SlidingWindow"))
        return MASK_KINDS[name], None

    def _scale_mode(self, v: Any, path: str) -> tuple[str, float | None]:
        name, payload = self.variant(v, path)
        if name == "EMA" and payload is not _UNIT:
            self.obj(payload, f"{path}.EMA", ("decay",))
            return "ema", self._f32(payload["decay"], f"{path}.EMA.decay")
        if payload is not _UNIT or name not in SCALE_MODES:
            raise self._unknown(path, name, "ScaleMode", (*SCALE_MODES, "EMA"))
        return SCALE_MODES[name], None

    def _scheme(self, v: Any, path: str) -> tuple[str, int | None]:
        name, payload = self.variant(v, path)
        if name in BLOCK_SCHEMES and payload is not _UNIT:
            self.obj(payload, f"{path}.{name}", ("block_size",))
            return BLOCK_SCHEMES[name], self._int(payload["block_size"], f"{path}.{name}.block_size", 1, _U32_MAX)
        if payload is not _UNIT or name not in QUANT_SCHEMES:
            raise self._unknown(path, name, "QuantScheme supported by rlx", (*BLOCK_SCHEMES, *QUANT_SCHEMES))
        return QUANT_SCHEMES[name], None

    def _chain(self, v: Any, path: str) -> tuple:
        """ElementwiseRegion steps -> rlx's ``['binary', 'add', ['in', 0], ['step', 1]]`` form."""
        out = []
        for j, step in enumerate(self.list(v, path)):
            where = f"{path}[{j}]"
            name, payload = self.variant(step, where)
            arity = {"Activation": 2, "Cast": 2, "Binary": 3, "Compare": 3, "Where": 3}.get(name)
            if arity is None or payload is _UNIT:
                raise self._unknown(where, name, "ChainStep", ("Activation", "Cast", "Binary", "Compare", "Where"))
            where = f"{where}.{name}"
            args = self.list(payload, where)
            if len(args) != arity:
                raise self.err(where, f"expected {arity} values, got {len(args)}")
            refs = tuple(self._chain_ref(a, f"{where}[{k}]") for k, a in enumerate(args) if k > 0 or name == "Where")
            if name == "Where":
                out.append(("where", *refs))
                continue
            sub = {"Activation": self.kinds["activation"], "Cast": self._dtype, "Binary": self.kinds["binary"],
                   "Compare": self.kinds["compare"]}[name](args[0], f"{where}[0]")
            out.append((name.lower(), sub.value if isinstance(sub, DType) else sub, *refs))
        return tuple(out)

    def _chain_ref(self, v: Any, path: str) -> tuple[str, int]:
        name, payload = self.variant(v, path)
        if name not in ("Input", "Step") or payload is _UNIT:
            raise self._unknown(path, name, "ChainOperand", ("Input", "Step"))
        return ("in" if name == "Input" else "step", self._int(payload, f"{path}.{name}", 0, _U32_MAX))

    def value(self, kind: str, v: Any, path: str) -> Any:
        if kind.startswith("opt_"):
            return None if v is None else self.kinds[kind[4:]](v, path)
        return self.kinds[kind](v, path)

    def fields(self, spec: UpstreamOp, payload: Any, path: str) -> dict[str, Any]:
        """The variant's fields, decoded (a later-release field that is absent is left out)."""
        if spec.fields is None:
            if payload is not _UNIT:
                raise self.err(path, f"{spec.variant} is a unit variant: write it as the string {json.dumps(spec.variant)}")
            return {}
        if payload is _UNIT:
            raise self.err(path, f"{spec.variant} needs a value")
        if spec.fields[0][0] == "_":
            return {"_": self.value(spec.fields[0][1], payload, path)}
        required = tuple(n for n, _, later in spec.fields if not later)
        self.obj(payload, path, required, tuple(n for n, _, later in spec.fields if later))
        return {n: self.value(kind, payload[n], f"{path}.{n}") for n, kind, _ in spec.fields if n in payload}

    # ------------------------------------------------------------ shapes and graphs
    def shape(self, v: Any, path: str) -> TensorType:
        lim = self.limits
        self.obj(v, path, ("dims", "dtype"))
        raw = self.list(v["dims"], f"{path}.dims")
        if len(raw) > lim.max_rank:
            raise self.err(f"{path}.dims", f"rank {len(raw)} exceeds max_rank={lim.max_rank}")
        dims: list[int | str] = []
        for j, d in enumerate(raw):
            where = f"{path}.dims[{j}]"
            name, payload = self.variant(d, where)
            if name == "Static" and payload is not _UNIT:
                dims.append(self._int(payload, f"{where}.Static", 0, lim.max_dim))
            elif name == "Dynamic" and payload is not _UNIT:
                dims.append(symbol_name(self._int(payload, f"{where}.Dynamic", 0, _U32_MAX)))
            else:
                raise self._unknown(where, name, "Dim", ("Static", "Dynamic"))
        dtype = self._dtype(v["dtype"], f"{path}.dtype")
        if all(type(d) is int for d in dims):
            nbytes = math.prod(dims) * dtype.itemsize
            if nbytes > lim.max_tensor_bytes:
                raise self.err(f"{path}.dims", f"declares a tensor of {nbytes} bytes, over max_tensor_bytes={lim.max_tensor_bytes}")
        return TensorType(Shape(dims), dtype)

    def origin(self, v: Any, path: str) -> Provenance | None:
        if v is None:
            return None
        self.obj(v, path, (), ("hir", "label", "pass"))
        hir = v.get("hir")
        hir = None if hir is None else self._int(hir, f"{path}.hir", 0, _U32_MAX)
        label, pass_ = (None if v.get(k) is None else self._str(v[k], f"{path}.{k}") for k in ("label", "pass"))
        if hir is None and label is None and pass_ is None:
            return None
        return Provenance(hir, label, (pass_,) if pass_ else ())

    def graph(self, doc: Any, path: str, stage: GraphStage, extra: tuple[str, ...] = ()) -> Graph:
        """An upstream Graph (or HirModule body at stage HIR), not yet verified."""
        lim = self.limits
        self.obj(doc, path, ("name", "nodes", "outputs", *extra))
        if self.depth >= lim.max_depth:
            raise self.err(path, f"graphs nested deeper than max_depth={lim.max_depth}")
        name = self._str(doc["name"], _join(path, "name"))
        nodes = self.list(doc["nodes"], _join(path, "nodes"))
        self.node_count += len(nodes)
        if self.node_count > lim.max_nodes:
            raise self.err(_join(path, "nodes"), f"{self.node_count} nodes exceed max_nodes={lim.max_nodes}")
        g = Graph(name, stage)
        ids: list[int] = []  # upstream id -> rlx node id
        self.depth += 1
        try:
            for i, nd in enumerate(nodes):
                ids.append(self.node(g, nd, i, f"{_join(path, 'nodes')}[{i}]", ids, stage is GraphStage.HIR))
        finally:
            self.depth -= 1
        outputs = self.list(doc["outputs"], _join(path, "outputs"))
        for j, out in enumerate(outputs):
            if type(out) is not int or not 0 <= out < len(nodes):
                raise self.err(f"{_join(path, 'outputs')}[{j}]", f"expected the id of a node (0..{len(nodes) - 1}), got {_short(out)}")
        g.set_outputs([ids[o] for o in outputs])
        return g

    def node(self, g: Graph, nd: Any, i: int, path: str, ids: list[int], hir: bool) -> int:
        self.obj(nd, path, ("id", "op", "inputs", "shape"), ("name",) if hir else ("name", "origin"))
        if nd["id"] != i or type(nd["id"]) is not int:
            raise self.err(f"{path}.id", f"expected {i} (node ids are positions), got {_short(nd['id'])}")
        inputs = self.list(nd["inputs"], f"{path}.inputs")
        for j, src in enumerate(inputs):
            if type(src) is not int or not 0 <= src < i:
                raise self.err(f"{path}.inputs[{j}]", f"expected the id of an earlier node (0..{i - 1}), got {_short(src)}")
        declared = self.shape(nd["shape"], f"{path}.shape")
        name = None if nd.get("name") is None else self._str(nd["name"], f"{path}.name")
        prov = self.origin(nd.get("origin"), f"{path}.origin")
        op_path, table, refused = f"{path}.op", (HIR_OPS if hir else MIR_OPS), (REFUSED_HIR if hir else REFUSED_MIR)
        variant, payload = self.variant(nd["op"], op_path)
        if hir and variant == "Mir" and payload is not _UNIT:
            op_path, table, refused = f"{op_path}.Mir", MIR_OPS, REFUSED_MIR
            variant, payload = self.variant(payload, op_path)
        spec = table.get(variant)
        if spec is None:
            if variant in refused:
                raise self.err(op_path, f"upstream op {variant} is not imported: {refused[variant]}")
            raise self._unknown(op_path, variant, "HirOp" if table is HIR_OPS else "Op", table)
        vpath = f"{op_path}.{variant}"
        fields = self.fields(spec, payload, vpath)
        return _Builder(g, path, vpath, name, prov).build(spec, fields, [ids[s] for s in inputs], declared)

    # ------------------------------------------------------------ documents
    def document(self, doc: dict) -> Any:
        keys = set(doc)
        if "format" in keys and "version" in keys:
            raise self.err("format", "a versioned rlx-ir document: read it with rlx.from_json")
        if keys == {"inner"}:
            return _verified(self.graph(doc["inner"], "inner", GraphStage.MIR))
        if keys == {"mir", "buffers"}:
            return self.lir(doc)
        if "fusion_policy" in keys:
            return self.hir(doc)
        if "nodes" in keys:
            return _verified(self.graph(doc, "", GraphStage.MIR))
        raise self.err("", "not an upstream rlx-ir document: expected a Graph {name, nodes, outputs}, a MirModule "
                           "{inner}, a HirModule {name, nodes, outputs, fusion_policy} or an LirModule {mir, buffers}")

    def hir(self, doc: dict) -> Any:
        from rlx.hir.module import GraphModule

        policy = self._unit_enum(FUSION_POLICIES, "FusionPolicy")(doc.get("fusion_policy"), "fusion_policy")
        g = _verified(self.graph(doc, "", GraphStage.HIR, extra=("fusion_policy",)))
        return GraphModule(g, policy)

    def lir(self, doc: dict) -> Any:
        """The MIR graph, re-planned by rlx: upstream's buffer assignments are checked for shape only, never used."""
        from rlx.lir.plan import plan

        mir = self.obj(doc["mir"], "mir", ("inner",))
        g = _verified(self.graph(mir["inner"], "mir.inner", GraphStage.MIR))
        kinds = {"arena_size": int, "assignments": dict, "schedule": list, "view_aliases": dict, "phases": dict,
                 "io": dict, "alignment": int, "dynamic_symbols": list}
        buffers = self.obj(doc["buffers"], "buffers", tuple(kinds))
        for key, kind in kinds.items():
            if type(buffers[key]) is not kind:
                raise self.err(f"buffers.{key}", f"expected {_tname(kind())}, got {_tname(buffers[key])}")
        alignment = self._int(buffers["alignment"], "buffers.alignment", 1, 1 << 20)
        if alignment & (alignment - 1):
            raise self.err("buffers.alignment", f"{alignment} is not a power of two")
        try:
            return plan(g, alignment)
        except RlxError as exc:
            raise VerifyError(f"rlx's planner cannot plan graph {g.name!r}: {exc}") from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _verified(g: Graph) -> Graph:
    _verify(g)
    return g


class _Builder:
    """Appends the rlx node(s) of one upstream node and reconciles the declared type."""

    def __init__(self, g: Graph, path: str, vpath: str, name: str | None, prov: Provenance | None):
        self.g, self.path, self.vpath, self.name, self.prov = g, path, vpath, name, prov

    def build(self, spec: UpstreamOp, f: dict[str, Any], ids: list[int], declared: TensorType) -> int:
        if spec.build == "leaf":
            leaf = f["name"]
            attrs = {"name": leaf, "shape": tuple(declared.shape), "dtype": declared.dtype}
            return self.append(spec.op, [], attrs, main=True, name=self.name if self.name is not None else leaf)
        if spec.build == "constant":
            return self.append("constant", [], {"value": FrozenArray(self.constant(f["data"], declared))}, main=True)
        if spec.order is not None:
            ids = [ids[k] for k in spec.order if k < len(ids)]
        for k in spec.index_operands:
            if k < len(ids) and not self.g.nodes[ids[k]].type.dtype.is_int:
                ids[k] = self.append("cast", [ids[k]], {"to": DType.I64})
        ctx = _Ctx([self.g.nodes[i].type for i in ids], declared, self.vpath)
        op, attrs = (self.custom(f, ctx), {}) if spec.build == "custom" else (spec.op, spec.rlx_attrs(f, ctx))
        assert op is not None
        return self.reconcile(self.append(op, ids, attrs, main=True), declared, spec.variant)

    def append(self, op: str, ids: list[int], attrs: dict[str, Any], *, main: bool = False, name: str | None = None) -> int:
        opdef = get_op(op)
        where = f"{self.vpath} (rlx op {op!r})"
        try:
            checked = opdef.check_attrs(attrs, op)
        except AttributeSchemaError as exc:
            raise FormatError(f"{where}: {exc}") from None
        expected, count = opdef.expected_arity(checked), len(ids)
        if count < opdef.min_arity if expected is None else count != expected:
            want = f"at least {opdef.min_arity}" if expected is None else str(expected)
            raise VerifyError(f"{self.path}: rlx op {op!r} takes {want} operand(s), the node has {count}")
        try:
            if opdef.canonicalize is not None:
                checked = opdef.canonicalize([self.g.nodes[i].type for i in ids], checked)
            node_name = (name if name is not None else self.name) if main else None
            return self.g.append(op, ids, checked, name=node_name, prov=self.prov).id
        except AttributeSchemaError as exc:
            raise FormatError(f"{where}: {exc}") from None
        except RlxError as exc:  # ShapeError from the op rule, a duplicate leaf name …
            if op in ("input", "param"):
                raise FormatError(f"{self.path}: {exc}") from None
            raise VerifyError(f"{self.path}: {exc}") from None

    def reconcile(self, vid: int, declared: TensorType, variant: str) -> int:
        got = self.g.nodes[vid].type
        if got.shape != declared.shape:
            if got.shape.numel == 1 and declared.shape.numel == 1:
                vid = self.append("reshape", [vid], {"new_shape": tuple(declared.shape)})
            else:
                raise VerifyError(f"{self.path}: upstream {variant} declares {declared}; rlx's rule for it gives {got}")
        if got.dtype != declared.dtype:
            vid = self.append("cast", [vid], {"to": declared.dtype})
        return vid

    def constant(self, data: bytes, declared: TensorType) -> np.ndarray:
        dims, dtype = declared.shape, declared.dtype
        if not dims.is_static:
            raise FormatError(f"{self.path}.shape: a Constant needs a static shape, got {declared}")
        n = math.prod(dims)  # type: ignore[arg-type]
        if len(data) == n * dtype.itemsize:
            if dtype is DType.BOOL:
                return (np.frombuffer(data, np.uint8) != 0).reshape(dims)
            arr = np.frombuffer(data, dtype=dtype.numpy.newbyteorder("<"), count=n)
        elif len(data) == 4 * n:  # upstream's CPU reader and its autodiff zeros: 4-byte f32 whatever the dtype
            arr = np.frombuffer(data, dtype="<f4", count=n)
        else:
            raise FormatError(f"{self.vpath}.data: {len(data)} bytes cannot hold {declared} ({n * dtype.itemsize} bytes)")
        return arr.astype(dtype.numpy).reshape(dims)

    def custom(self, f: dict[str, Any], c: _Ctx) -> str:
        from rlx.ops.custom import custom_ops

        name = f["name"]
        if name not in custom_ops():
            raise FormatError(f"{self.vpath}.name: {name[:80]!r} is not a custom op registered with rlx.custom_op "
                              "(files never import code)")
        if f["attrs"]:
            raise FormatError(f"{self.vpath}.attrs: {len(f['attrs'])} opaque attribute bytes only upstream's op registry "
                              "can read; rlx custom ops take typed attributes")
        if f["num_inputs"] != len(c.ins):
            raise c.fail(f"num_inputs is {f['num_inputs']} but the node has {len(c.ins)} inputs")
        return name


def from_upstream_json(text_or_bytes: str | bytes, *, limits: LoadLimits | None = None) -> Any:
    """Import a document written by upstream rlx-ir 0.2.1 (serde JSON, no version field).

    A ``Graph`` or a ``MirModule`` (``{"inner": graph}``) becomes a verified MIR
    :class:`rlx.Graph`; a ``HirModule`` a :class:`rlx.GraphModule` at stage HIR with its
    fusion policy; an ``LirModule`` an :class:`rlx.LirModule` whose graph is the document's
    MIR graph, planned again by :func:`rlx.plan` with the document's alignment (upstream's
    buffer assignments are not trusted). Raises :class:`rlx.FormatError` (with the field's
    path) or :class:`rlx.VerifyError`, nothing else.
    """
    lim = limits or DEFAULT_LIMITS
    return _guard(lambda: _Importer(lim).document(_parse_json(text_or_bytes, lim)))
