"""Export rlx objects as upstream rlx-ir 0.2.1's serde JSON: the importer's tables, inverted.

    text = rlx.to_upstream_json(g)          # a MIR Graph -> MirModule {"inner": graph}
    text = rlx.to_upstream_json(module)     # a GraphModule (HIR) -> HirModule with its fusion policy
    text = rlx.to_upstream_json(lir)        # an LirModule -> LirModule {mir, buffers} from rlx's plan

Every node is written with the :class:`~rlx.frontends.upstream.reader.UpstreamOp` entry the
importer reads it with: the entry whose rlx op and fixed attributes match, its fields taken
back from the rlx attributes (renames undone, composite fields such as a mask kind with its
window rebuilt) and each field encoded in its serde type. Declared shapes are the rlx types;
symbols become ``Dynamic`` ids (upstream's well-known ``batch`` / ``seq`` / ``rows`` /
``past_seq`` are 0..3, ``d<k>`` is ``k``, any other name gets a fresh id and comes back
as ``d<k>``).

Nothing is written that the importer would read differently: the document is imported
again and compared node by node with the source, so an op with no upstream form (a
multi-result node, an rlx-only op, an attribute upstream cannot express such as
``top_k(largest=False)`` or a NaN attribute upstream writes as ``null``) raises
:class:`rlx.ExportError` naming the node and the op instead of a document that means
something else.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.frontends.upstream import reader as up
from rlx.frontends.upstream.tables import FFT_FROM_NUMPY, FFT_NORMS
from rlx.ir.attrs import FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import ExportError, RlxError
from rlx.ir.graph import Graph, GraphStage, Node
from rlx.ir.opdef import get_op
from rlx.ir.shape import TensorType

__all__ = ["to_upstream_json", "upstream_document"]


def _inverse(table: Mapping[str, Any]) -> dict[Any, str]:
    return {v: k for k, v in table.items()}


_DTYPES = _inverse(up._DTYPES)
_UNIT_ENUMS: dict[str, dict[Any, str]] = {
    "activation": _inverse(up.ACTIVATIONS), "binary": _inverse(up.BINARY_OPS), "compare": _inverse(up.COMPARE_OPS),
    "reduce": _inverse(up.REDUCE_OPS), "ste": _inverse(up.STE_KINDS), "wrt": _inverse(up.ATTENTION_WRT),
    "rope_style": {False: "NeoX", True: "GptJ"}, "fft_norm": {n: n for n in FFT_NORMS},
}
_MASKS = _inverse(up.MASK_KINDS)
_SCALE_MODES = _inverse(up.SCALE_MODES)
_SCHEMES, _BLOCK_SCHEMES = _inverse(up.QUANT_SCHEMES), _inverse(up.BLOCK_SCHEMES)
_SYMBOLS = _inverse(up.WELL_KNOWN_SYMBOLS)
_POLICIES = _inverse(up.FUSION_POLICIES)


def _candidates(table: Mapping[str, up.UpstreamOp]) -> dict[str, list[up.UpstreamOp]]:
    by_op: dict[str, list[up.UpstreamOp]] = {}
    for spec in table.values():
        if spec.build != "custom":
            by_op.setdefault(spec.op or "", []).append(spec)
    return by_op


_MIR_BY_OP, _HIR_BY_OP = _candidates(up.MIR_OPS), _candidates(up.HIR_OPS)


class _Fail(Exception):
    """Internal: a value with no upstream form; the caller names the node."""


# ------------------------------------------------------------------------------------ field values


class _Writer:
    """Writes one rlx object; numbers the symbols that are not upstream's well-known ones."""

    def __init__(self, symbols: set[str]):
        self.symbols: dict[str, int] = {}
        taken = set(_SYMBOLS.values())
        for s in sorted(symbols):
            k = _SYMBOLS.get(s)
            if k is None and s[:1] == "d" and s[1:].isdigit() and str(int(s[1:])) == s[1:] and int(s[1:]) >= 4:
                k = int(s[1:])
            if k is not None:
                self.symbols[s] = k
                taken.add(k)
        fresh = (k for k in range(4, 2**32) if k not in taken)
        for s in sorted(symbols - set(self.symbols)):
            self.symbols[s] = next(fresh)

    def value(self, kind: str, v: Any) -> Any:
        if kind.startswith("opt_"):
            return None if v is None else self.value(kind[4:], v)
        if kind in _UNIT_ENUMS:
            return _lookup(_UNIT_ENUMS[kind], v, kind)
        if kind in ("u8", "u32", "usize", "u64", "i32", "i64", "bool", "str"):
            return v
        if kind == "f32":
            return _finite(v)
        if kind in ("usizes", "i64s", "i32s", "modulus"):
            return list(v)
        if kind == "f32s":
            return [_finite(x) for x in v]
        if kind == "bytes":
            return list(bytes(v))
        if kind == "dtype":
            return _lookup(_DTYPES, v, "DType")
        if kind == "mask":
            mask, window = v
            return {"SlidingWindow": window} if mask == "sliding_window" else _lookup(_MASKS, mask, "MaskKind")
        if kind == "scale_mode":
            mode, decay = v
            return {"EMA": {"decay": _finite(decay)}} if mode == "ema" else _lookup(_SCALE_MODES, mode, "ScaleMode")
        if kind == "scheme":
            scheme, block = v
            if scheme in _BLOCK_SCHEMES:
                return {_BLOCK_SCHEMES[scheme]: {"block_size": block}}
            return _lookup(_SCHEMES, scheme, "QuantScheme")
        if kind == "graph":
            return self.graph(v, hir=False)
        if kind == "chain":
            return [self.step(s) for s in v]
        raise AssertionError(f"no writer for upstream field kind {kind!r}")  # the tables name only the kinds above

    def step(self, s: tuple) -> dict[str, Any]:
        refs = [{"Input" if r[0] == "in" else "Step": r[1]} for r in s[2:]]
        if s[0] == "where":
            return {"Where": [{"Input" if r[0] == "in" else "Step": r[1]} for r in s[1:]]}
        name = s[0].capitalize()
        sub = self.value({"activation": "activation", "cast": "dtype", "binary": "binary", "compare": "compare"}[s[0]],
                         DType(s[1]) if s[0] == "cast" else s[1])
        return {name: [sub, *refs]}

    def shape(self, t: TensorType) -> dict[str, Any]:
        dims = []
        for d in t.shape:
            if type(d) is int:
                dims.append({"Static": d})
            elif isinstance(d, str) and d in self.symbols:
                dims.append({"Dynamic": self.symbols[d]})
            else:
                raise _Fail(f"dim {d} is an expression; upstream dims are static sizes or single symbols")
        return {"dims": dims, "dtype": _lookup(_DTYPES, t.dtype, "DType")}

    # ------------------------------------------------------------ graphs
    def graph(self, g: Graph, *, hir: bool) -> dict[str, Any]:
        nodes = [self.node(g, n, hir) for n in g.nodes]
        return {"name": g.name, "nodes": nodes, "outputs": [int(o) for o in g.outputs]}

    def node(self, g: Graph, n: Node, hir: bool) -> dict[str, Any]:
        try:
            if n.num_results > 1 or n.op == "result":
                raise _Fail("a multi-result node: upstream nodes have one output")
            op = self.op(g, n, hir)
            out: dict[str, Any] = {"id": n.id, "op": op, "inputs": list(_upstream_order(g, n, hir)),
                                   "shape": self.shape(n.type), "name": n.name}
        except _Fail as exc:
            raise ExportError(f"graph {g.name!r} node %{n.id} ({n.op}): no upstream rlx-ir 0.2.1 form: {exc}") from None
        if not hir:
            p = n.prov
            out["origin"] = None if p is None else {"hir": p.hir, "label": p.label, "pass": p.passes[-1] if p.passes else None}
        return out

    def op(self, g: Graph, n: Node, hir: bool) -> Any:
        spec = _spec_for(g, n, hir)
        if hir and (spec is None or (not _faithful(g, n, spec) and _spec_for(g, n, False) is not None)):
            return {"Mir": self.op(g, n, hir=False)}  # e.g. an attention with a score_scale HirOp::Attention lacks
        if spec is None:
            if _is_custom(n.op):
                if n.attrs:
                    raise _Fail("a custom op with attributes: upstream's Custom carries opaque bytes only its registry reads")
                return {"Custom": {"name": n.op, "num_inputs": len(n.inputs), "attrs": []}}
            mapped = (_HIR_BY_OP if hir else _MIR_BY_OP).get(n.op, ())
            if mapped:
                fixed = "; ".join(f"{s.variant} fixes {dict(s.fixed)}" for s in mapped)
                raise _Fail(f"upstream's form needs fixed attributes ({fixed})")
            raise _Fail(up.RLX_ONLY.get(n.op, "no upstream op variant maps to it"))
        floats = [k for k in spec.index_operands if k < len(n.inputs) and not g.nodes[n.inputs[k]].dtype.is_int]
        if floats:
            raise _Fail(f"operand {floats[0]} holds float indices, which the importer reads through a cast to i64 "
                        "(cast them explicitly)")
        if spec.build == "leaf":
            return {spec.variant: {"name": n.attrs["name"]}}
        if spec.build == "constant":
            return {spec.variant: {"data": self.value("bytes", _le_bytes(n.attrs["value"]))}}
        if spec.fields is None:
            return spec.variant
        fields = _fields(spec, n)
        if spec.fields[0][0] == "_":
            return {spec.variant: self.value(spec.fields[0][1], fields["_"])}
        return {spec.variant: {name: self.value(kind, fields[name]) for name, kind, _ in spec.fields if name in fields}}


def _lookup(table: Mapping[Any, str], v: Any, what: str) -> str:
    try:
        return table[v]
    except (KeyError, TypeError):
        raise _Fail(f"{what} {v!r} has no upstream variant") from None


def _finite(v: Any) -> float:
    if not math.isfinite(v):
        raise _Fail(f"the value {v} (upstream writes NaN and infinities as null and cannot read them back)")
    return v


def _is_custom(op: str) -> bool:
    from rlx.ops.custom import custom_ops

    return op in custom_ops()


def _le_bytes(value: FrozenArray) -> bytes:
    arr = value.array
    if arr.dtype == np.bool_:
        return arr.astype(np.uint8).tobytes()
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def _spec_for(g: Graph, n: Node, hir: bool) -> up.UpstreamOp | None:
    """The entry of the HIR or MIR table that the importer turns into ``n``'s op and attributes, the most specific first."""
    specs = [s for s in (_HIR_BY_OP if hir else _MIR_BY_OP).get(n.op, ()) if _fixed_match(g, n, s.fixed)]
    return max(specs, key=lambda s: len(s.fixed), default=None)


def _fixed_match(g: Graph, n: Node, fixed: Mapping[str, Any]) -> bool:
    """Whether the entry's fixed attributes, canonicalized as the importer does (``axis=-1`` -> 1), are ``n``'s."""
    if not fixed:
        return True
    opdef = get_op(n.op)
    try:
        attrs = opdef.check_attrs({**n.attrs, **fixed}, n.op)
        if opdef.canonicalize is not None:
            attrs = opdef.canonicalize([g.nodes[i].type for i in n.inputs], attrs)
    except RlxError:
        return False
    return all(attrs.get(k) == n.attrs.get(k) for k in fixed)


def _faithful(g: Graph, n: Node, spec: up.UpstreamOp) -> bool:
    """Whether the importer reads ``spec``'s fields of ``n`` back as ``n``'s attributes."""
    if spec.build is not None:
        return True
    opdef = get_op(n.op)
    try:
        ins = [g.nodes[i].type for i in n.inputs]
        attrs = opdef.check_attrs(spec.rlx_attrs(_fields(spec, n), up._Ctx(ins, n.type, spec.variant)), n.op)
        if opdef.canonicalize is not None:
            attrs = opdef.canonicalize(ins, attrs)
    except (RlxError, _Fail):
        return False
    return dict(attrs) == dict(n.attrs)


def _upstream_order(g: Graph, n: Node, hir: bool) -> tuple[int, ...]:
    spec = _spec_for(g, n, hir)
    if spec is None or spec.order is None:
        return n.inputs
    out = [0] * len(n.inputs)
    for rlx_pos, up_pos in enumerate(k for k in spec.order if k < len(n.inputs)):
        out[up_pos] = n.inputs[rlx_pos]
    return tuple(out)


#: Upstream fields that are not one rlx attribute: how each is rebuilt from the node.
_COMPOSITE: dict[str, Callable[[Node], Any]] = {
    "mask": lambda n: (n.attrs["mask_kind"], n.attrs.get("window")),
    "scale_mode": lambda n: (n.attrs["scale_mode"], n.attrs.get("decay") if n.attrs["scale_mode"] == "ema" else None),
    "scheme": lambda n: (n.attrs["scheme"], n.attrs.get("block_size") if n.attrs["scheme"] in _BLOCK_SCHEMES else None),
    "fft_norm": lambda n: _fft_norm(n),
}


def _fft_norm(n: Node) -> str:
    """Upstream's FftNorm for an rlx fft (which must transform the last axis, as upstream's does)."""
    rank = len(n.type.shape)
    if n.attrs["axis"] % rank != rank - 1:  # rank >= 1 (fft's rule)
        raise _Fail(f"upstream's Fft transforms the last axis; this fft transforms axis {n.attrs['axis']} (transpose first)")
    norm = FFT_FROM_NUMPY.get((n.attrs["norm"], bool(n.attrs["inverse"])))
    if norm is None:
        raise _Fail("norm='forward' on a forward fft (1/N on the forward transform) has no upstream FftNorm")
    return norm
#: Fields named differently in the rlx op, or kernel hints the importer checks and drops.
_FIELD_FROM = {
    "fwd_body": lambda n: n.attrs["body"], "num_inputs": lambda n: n.attrs.get("num_inputs", len(n.inputs)),
    "scalar_input_mask": lambda n: 0, "input_modulus": lambda n: (0,) * 16,
}
#: rlx's "not given" for the upstream geometry lists it reads as defaults when empty.
_EMPTY_AS_NONE = ("kernel_size", "stride")


def _fields(spec: up.UpstreamOp, n: Node) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, kind, later in spec.fields or ():
        base = kind.removeprefix("opt_")
        if base in _COMPOSITE:
            fields[name] = _COMPOSITE[base](n)
            continue
        if name in _FIELD_FROM:
            fields[name] = _FIELD_FROM[name](n)
            continue
        key = spec.rename.get(name, name)
        if key not in n.attrs:
            if later:
                continue
            raise _Fail(f"the upstream field {name!r} has no rlx attribute")
        v = n.attrs[key]
        if later and (v is None or v is False):  # a field of a later release at its default: 0.2.1 lacks it
            continue
        if v is None and name in _EMPTY_AS_NONE:
            v = ()
        elif v is None and not kind.startswith("opt_"):
            raise _Fail(f"{key}=None: upstream's {spec.variant}.{name} needs a value")
        fields[name] = v
    return fields


# ------------------------------------------------------------------------------------ documents


def _symbols(g: Graph) -> set[str]:
    found = set()
    for n in g.nodes:
        for t in n.types:
            found |= set(t.shape.symbols)
        for v in n.attrs.values():
            if isinstance(v, Graph):
                found |= _symbols(v)
    return found


_PHASES = {"prologue": "Prologue", "steady": "SteadyState", "epilogue": "Epilogue"}


def _lir_buffers(lir: Any, w: _Writer) -> dict[str, Any]:
    """Upstream's BufferPlan fields from rlx's plan (the importer plans again; these describe rlx's plan)."""
    p = lir.plan
    return {
        "arena_size": p.arena_size,
        "assignments": {str(i): {"offset": s.offset, "size": s.size} for i, s in sorted(p.assignments.items())},
        "schedule": list(p.schedule),
        "view_aliases": {str(i): [v.root, v.byte_offset] for i, v in sorted(p.view_aliases.items())},
        "phases": {"map": {str(i): _PHASES[ph] for i, ph in sorted(p.phases.items())}},
        "io": {"inputs": [list(x) for x in p.io.inputs], "params": [list(x) for x in p.io.params], "outputs": list(p.io.outputs)},
        "alignment": p.alignment,
        "dynamic_symbols": [w.symbols[s] for s in p.dynamic_symbols if s in w.symbols],
    }


def upstream_document(obj: Any) -> dict[str, Any]:
    """The upstream JSON value of ``obj`` (a MIR :class:`rlx.Graph`, a :class:`rlx.GraphModule`, an :class:`rlx.LirModule`),
    not checked by reading it back (:func:`to_upstream_json` is)."""
    return _document(obj)[0]


def _document(obj: Any) -> tuple[dict[str, Any], _Writer]:
    from rlx.hir.module import GraphModule
    from rlx.lir.plan import LirModule

    if isinstance(obj, LirModule):
        w = _Writer(_symbols(obj.graph))
        return {"mir": {"inner": w.graph(obj.graph, hir=False)}, "buffers": _lir_buffers(obj, w)}, w
    policy = None
    if isinstance(obj, GraphModule):
        obj, policy = obj.graph, obj.fusion_policy
    if not isinstance(obj, Graph):
        raise ExportError(f"to_upstream_json takes a Graph, a GraphModule or an LirModule, got {type(obj).__name__}")
    w = _Writer(_symbols(obj))
    if obj.stage is GraphStage.HIR or policy is not None:
        from rlx.hir.policy import FusionPolicy

        doc = w.graph(obj, hir=True)
        doc["fusion_policy"] = _POLICIES[(policy or FusionPolicy.DIRECT).value]
        return doc, w
    if obj.stage is not GraphStage.MIR:
        raise ExportError(f"graph {obj.name!r} is at stage {obj.stage.value}: upstream JSON holds HIR or MIR graphs")
    return {"inner": w.graph(obj, hir=False)}, w


def _check_round_trip(obj: Any, text: str, renamed: Mapping[str, str]) -> None:
    """Import ``text`` again: any node that comes back different has no faithful upstream form."""
    from rlx.hir.module import GraphModule
    from rlx.lir.plan import LirModule

    src = obj.graph if isinstance(obj, (GraphModule, LirModule)) else obj
    try:
        back = up.from_upstream_json(text)
    except RlxError as exc:
        g, n = _node_at(src, str(exc).split(":", 1)[0])
        raise ExportError(f"graph {g.name!r} node %{n.id} ({n.op}): upstream reads it as something else: {exc}") from None
    _compare(src, back.graph if isinstance(back, (GraphModule, LirModule)) else back, renamed)


def _node_at(g: Graph, path: str) -> tuple[Graph, Node]:
    """The graph and node an importer error path (``inner.nodes[2].op.Scan.body.nodes[4]``) points at."""
    node = g.nodes[-1]
    for index, field in re.findall(r"nodes\[(\d+)\](?:\.op\.\w+\.(\w+))?", path):
        node = g.nodes[int(index)]
        body = node.attrs.get("body" if field == "fwd_body" else field)
        if not isinstance(body, Graph):
            break
        g = body
    return g, node


def _compare(a: Graph, b: Graph, renamed: Mapping[str, str]) -> None:
    def norm(v: Any, top: bool = True) -> Any:  # symbols inside shapes and dim tuples, never a top-level name
        if isinstance(v, tuple):
            return tuple(norm(x, False) for x in v)
        return renamed.get(v, v) if not top and isinstance(v, str) else v

    if len(a.nodes) != len(b.nodes):
        raise ExportError(f"graph {a.name!r}: upstream reads it back with {len(b.nodes)} nodes, not {len(a.nodes)}")
    for x, y in zip(a.nodes, b.nodes, strict=True):
        if (x.op, x.inputs, norm(tuple(x.type.shape)), x.type.dtype, x.name) != (y.op, y.inputs, tuple(y.type.shape),
                                                                             y.type.dtype, y.name):
            raise ExportError(f"graph {a.name!r} node %{x.id} ({x.op}): upstream reads it back as {y.op} {y.type}")
        for k in sorted(set(x.attrs) | set(y.attrs)):
            u, v = x.attrs.get(k), y.attrs.get(k)
            if isinstance(u, Graph) and isinstance(v, Graph):
                _compare(u, v, renamed)
            elif norm(u) != v:
                raise ExportError(f"graph {a.name!r} node %{x.id} ({x.op}): no upstream rlx-ir 0.2.1 form for {k}={u!r}")


def to_upstream_json(obj: Any) -> str:
    """The upstream rlx-ir 0.2.1 serde JSON of ``obj``; :func:`rlx.from_upstream_json` reads it back equal.

    Raises :class:`rlx.ExportError` naming the first node (and op) with no upstream form.
    """
    doc, writer = _document(obj)
    text = json.dumps(doc, separators=(",", ":"))
    renamed = {s: up.symbol_name(k) for s, k in writer.symbols.items() if up.symbol_name(k) != s}
    _check_round_trip(obj, text, renamed)
    return text
