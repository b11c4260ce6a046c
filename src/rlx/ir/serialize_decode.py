"""Decoding rlx-ir documents: :class:`Decoder`, the validating reader every loader and codec uses (split
out of :mod:`rlx.ir.serialize`, which re-exports it). Every check raises :class:`~rlx.FormatError`
naming the path of the bad field; sizes are checked against the :class:`LoadLimits` before
anything is allocated for them.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import numpy as np

from rlx.ir.attrs import AttrSpec, FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError, RlxError, UnknownOpError, VerifyError
from rlx.ir.graph import RESULT, Graph, GraphStage, Node, Provenance
from rlx.ir.opdef import OpDef, get_op
from rlx.ir.serialize_format import _DTYPES, _INT_MAX, _INT_MIN, _NONFINITE_IN, _SHA, DEFAULT_LIMITS, LEVELS, LoadLimits
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import MAX_TEXT, decode_dim, decode_ranges
from rlx.ir.verify import verify as _verify_graph

_JSON_TYPE = {dict: "object", list: "list", str: "str", int: "int", float: "float", bool: "bool", type(None): "null"}


def _tname(v: Any) -> str:
    return _JSON_TYPE.get(type(v), type(v).__name__)


class _Bad(Exception):
    """Internal: a field error whose path the caller completes (keeps the hot loop cheap)."""

    def __init__(self, msg: str, suffix: str = ""):
        super().__init__(msg)
        self.msg = msg
        self.suffix = suffix


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_MISSING: Any = object()
_NODE_KEYS = frozenset({"id", "op", "inputs", "attrs", "shape", "dtype"})
_NODE_ALL = _NODE_KEYS | {"name", "prov", "results"}
_GRAPH_KEYS = ("name", "nodes", "outputs", "stage")
_TENSOR_KEYS = frozenset({"dtype", "shape"})


#: the builtins under names the Decoder's annotations can use (its methods str / int / float / list shadow them there)
_Str: TypeAlias = str
_Int: TypeAlias = int
_Float: TypeAlias = float
_List: TypeAlias = list


class Decoder:
    """Reads JSON values back into objects, validating every field against ``limits``."""

    def __init__(self, limits: LoadLimits | None = None, payload: Any = None):  # a serialize._Payload (the sidecar reader)
        self.limits = limits or DEFAULT_LIMITS
        self.payload = payload
        self.depth = 0
        self.node_count = 0
        self.bytes_read = 0
        self._types: dict[tuple[Any, ...], TensorType] = {}
        self._ops: dict[_Str, OpDef] = {}
        self._attr_memo: dict[tuple[Any, ...], Mapping[_Str, Any]] = {}
        self._kinds: dict[_Str, Callable[[Any, str], Any]] = {
            "int": self._d_int, "float": self._d_float, "bool": self._d_bool, "str": self._d_str,
            "dtype": self._d_dtype, "ints": self._d_ints, "floats": self._d_floats, "dims": self._d_dims,
            "size": self._d_size, "sizes": self._d_sizes,
            "tensor": self._d_tensor, "graph": self._d_graph, "data": self._d_data,
        }

    # ----------------------------------------------------------- helpers for codecs
    def error(self, path: _Str, message: _Str) -> FormatError:
        return FormatError(f"{path or '<document>'}: {message}")

    def keys(self, doc: Any, path: _Str, required: tuple[_Str, ...] | frozenset[_Str] = (), optional: tuple[_Str, ...] = ()) -> dict:
        """``doc`` must be an object with every ``required`` key and no key outside both lists."""
        if type(doc) is not dict:
            raise self.error(path, f"expected object, got {_tname(doc)}")
        missing = [k for k in required if k not in doc]
        if missing:
            raise self.error(_join(path, missing[0]), "missing field")
        allowed = set(required) | set(optional)
        extra = sorted(str(k) for k in doc if k not in allowed)
        if extra:
            raise self.error(_join(path, extra[0][:80]), "unknown field")
        return doc

    def get(self, doc: dict, key: _Str, types: type | tuple[type, ...], path: _Str, default: Any = _MISSING) -> Any:
        """``doc[key]`` checked against ``types`` (``int`` never accepts bool; ``None`` for null)."""
        where = _join(path, key)
        if type(doc) is not dict:
            raise self.error(path, f"expected object, got {_tname(doc)}")
        if key not in doc:
            if default is _MISSING:
                raise self.error(where, "missing field")
            return default
        value = doc[key]
        allowed = types if isinstance(types, tuple) else (types,)
        allowed = tuple(type(None) if t is None else t for t in allowed)
        if type(value) not in allowed and not (float in allowed and type(value) is int):
            names = " or ".join(_JSON_TYPE.get(t, t.__name__) for t in allowed)
            raise self.error(where, f"expected {names}, got {_tname(value)}")
        if type(value) is str and len(value) > self.limits.max_string:
            raise self.error(where, f"string of {len(value)} characters exceeds max_string={self.limits.max_string}")
        if type(value) in (list, dict) and len(value) > self.limits.max_items:
            raise self.error(where, f"{len(value)} entries exceed max_items={self.limits.max_items}")
        return value

    def int(self, doc: dict, key: _Str, path: _Str, *, lo: _Int | None = None, hi: _Int | None = None, default: Any = _MISSING) -> _Int:
        value = self.get(doc, key, int, path, default)
        if value is default and default is not _MISSING:
            return value
        lo = _INT_MIN if lo is None else lo
        hi = _INT_MAX if hi is None else hi
        if not lo <= value <= hi:
            raise self.error(_join(path, key), f"{value if abs(value) < 10**30 else 'huge int'} is outside [{lo}, {hi}]")
        return value

    def str(self, doc: dict, key: _Str, path: _Str, default: Any = _MISSING) -> _Str:
        return self.get(doc, key, str, path, default)

    def list(self, doc: dict, key: _Str, path: _Str, default: Any = _MISSING) -> _List:
        return self.get(doc, key, list, path, default)

    def float(self, value: Any, path: _Str) -> _Float:
        try:
            return self._d_float(value, path)
        except _Bad as bad:
            raise self.error(path + bad.suffix, bad.msg) from None

    def tensor(self, doc: Any, path: _Str) -> np.ndarray:
        """A tensor object (inline ``data`` or payload ``sha256``) as a read-only array."""
        try:
            return self._tensor(doc)
        except _Bad as bad:
            raise self.error(path + bad.suffix, bad.msg) from None

    # ----------------------------------------------------------- graphs
    def graph(self, doc: Any, path: _Str = "", verify: bool = True) -> Graph:
        """Decode a graph object; ``verify`` runs :func:`rlx.verify` (nested graphs included)."""
        lim = self.limits
        self.keys(doc, path, _GRAPH_KEYS, ("symbols",))
        if self.depth >= lim.max_depth:
            raise self.error(path, f"graphs nested deeper than max_depth={lim.max_depth}")
        name = self.str(doc, "name", path)
        stage = self.str(doc, "stage", path)
        if stage not in LEVELS:
            raise self.error(_join(path, "stage"), f"expected one of {list(LEVELS)}, got {stage[:40]!r}")
        nodes = self.get(doc, "nodes", list, path)
        self.node_count += len(nodes)
        if self.node_count > lim.max_nodes:
            raise self.error(_join(path, "nodes"), f"{self.node_count} nodes exceed max_nodes={lim.max_nodes}")
        try:
            ranges = decode_ranges(doc.get("symbols", {}), lim.max_items)
        except RlxError as exc:
            raise self.error(_join(path, "symbols"), str(exc)) from None
        g = Graph(name, GraphStage(stage), ranges)
        self.depth += 1
        try:
            for i, nd in enumerate(nodes):
                try:
                    node = self._node(nd, i, path)
                    if (len(g) != i and node.op != RESULT) or g._push(node).id != i:
                        raise _Bad(f"node {i} must be result {i - g.nodes[i].inputs[0]} of the multi-result node before it"
                                   if len(g) > i else f"node {i} is not result {node.attrs.get('index')} of node %{node.inputs[0]}")
                except _Bad as bad:
                    raise self.error(f"{_join(path, 'nodes')}[{i}]{bad.suffix}", bad.msg) from None
                except FormatError:
                    raise
                except RlxError as exc:  # e.g. a duplicate input / param name
                    raise self.error(f"{_join(path, 'nodes')}[{i}]", str(exc)) from None
        finally:
            self.depth -= 1
        outputs = self.list(doc, "outputs", path)
        for j, out in enumerate(outputs):
            if type(out) is not int or not 0 <= out < len(nodes):
                raise self.error(f"{_join(path, 'outputs')}[{j}]", f"expected the id of a node (0..{len(nodes) - 1}), got {_short(out)}")
        g.set_outputs(outputs)
        if verify:
            _verify(g)
        return g

    def _node(self, nd: Any, i: _Int, path: _Str) -> Node:
        if type(nd) is not dict:
            raise _Bad(f"expected object, got {_tname(nd)}")
        try:
            nid, op, ins, raw, shape, dtype = nd["id"], nd["op"], nd["inputs"], nd["attrs"], nd["shape"], nd["dtype"]
        except KeyError:
            raise _Bad("missing field", f".{sorted(_NODE_KEYS - nd.keys())[0]}") from None
        if len(nd) > 6:
            extra = sorted(str(k) for k in nd.keys() - _NODE_ALL)
            if extra:
                raise _Bad("unknown field", f".{extra[0][:80]}")
        if nid != i or type(nid) is not int:
            raise _Bad(f"expected id {i} (ids are positions), got {_short(nid)}", ".id")
        opdef = self._ops.get(op) if type(op) is str else None
        if opdef is None:
            opdef = self._opdef(op)
        if type(ins) is not list:
            raise _Bad(f"expected list, got {_tname(ins)}", ".inputs")
        for j, src in enumerate(ins):
            if type(src) is not int or not 0 <= src < i:
                raise _Bad(f"expected the id of an earlier node (0..{i - 1}), got {_short(src)}", f".inputs[{j}]")
        if type(raw) is not dict:
            raise _Bad(f"expected object, got {_tname(raw)}", ".attrs")
        try:  # identical attribute objects are common (every "gelu"): decode each distinct one once
            types = tuple(map(type, raw.values()))
            memo_key = (op, tuple(raw.items()), types) if float not in types else None  # 0.0 == -0.0
            attrs = self._attr_memo.get(memo_key) if memo_key is not None else None
        except TypeError:  # list values: not hashable, decode every time
            memo_key = attrs = None
        if attrs is None:
            attrs = MappingProxyType(self._attrs(op, opdef, raw, i, path))
            if memo_key is not None:
                self._attr_memo[memo_key] = attrs
        ttype = self._type(shape, dtype)
        name = prov = None
        if len(nd) > 6:
            name = nd.get("name")
            if name is not None and (type(name) is not str or len(name) > self.limits.max_string):
                raise _Bad(f"expected str (at most max_string={self.limits.max_string} characters), got {_tname(name)}", ".name")
            if "prov" in nd:
                prov = self._prov(nd["prov"])
            if "results" in nd:
                return Node(i, op, attrs, tuple(ins), ttype, name, prov, self._results(nd["results"]))
        return Node(i, op, attrs, tuple(ins), ttype, name, prov)

    def _results(self, raw: Any) -> tuple[TensorType, ...]:
        """The types of results 1.. of a multi-result node (format version 2)."""
        if type(raw) is not list or not raw or len(raw) > self.limits.max_items:
            raise _Bad(f"expected a non-empty list (at most max_items={self.limits.max_items}), got {_tname(raw)}", ".results")
        self.node_count += len(raw)
        if self.node_count > self.limits.max_nodes:
            raise _Bad(f"{self.node_count} nodes exceed max_nodes={self.limits.max_nodes}", ".results")
        out = []
        for j, t in enumerate(raw):
            if type(t) is not dict or set(t) != {"shape", "dtype"}:
                raise _Bad("expected an object with exactly shape and dtype", f".results[{j}]")
            try:
                out.append(self._type(t["shape"], t["dtype"]))
            except _Bad as bad:
                raise _Bad(bad.msg, f".results[{j}]{bad.suffix}") from None
        return tuple(out)

    def _attrs(self, op: _Str, opdef: OpDef, raw: dict, i: _Int, path: _Str) -> dict[_Str, Any]:
        specs = opdef.attrs
        attrs: dict[str, Any] = {}
        for key, value in raw.items():
            spec = specs.get(key)
            if spec is None:
                raise _Bad(f"op {op!r} has no attribute {key[:80]!r}", f".attrs.{key[:80]}")
            try:
                if value is None:
                    if not spec.optional:
                        raise _Bad(f"expected {spec.kind}, got null")
                    attrs[key] = None
                    continue
                out = self._kinds[spec.kind](value, f"{_join(path, 'nodes')}[{i}].attrs.{key}")
                if spec.choices is not None and out not in spec.choices:
                    raise _Bad(f"{_short(out)} is not one of {list(spec.choices)}")
                attrs[key] = out
            except _Bad as bad:
                raise _Bad(bad.msg, f".attrs.{key}{bad.suffix}") from None
        if len(attrs) != len(specs):
            self._defaults(attrs, specs, op)
        if len(attrs) > 1:
            attrs = dict(sorted(attrs.items()))
        return attrs

    def _opdef(self, op: Any) -> OpDef:
        if type(op) is not str:
            raise _Bad(f"expected str, got {_tname(op)}", ".op")
        try:
            opdef = get_op(op)
        except UnknownOpError:
            raise _Bad(f"unknown op {op[:80]!r} (not in the op registry)", ".op") from None
        self._ops[op] = opdef
        return opdef

    @staticmethod
    def _defaults(attrs: dict[_Str, Any], specs: Mapping[_Str, AttrSpec], op: _Str) -> None:
        """Fill attributes a file omits (e.g. added to the op after the file was written)."""
        from rlx.ir.attrs import normalize_attr

        for key, spec in specs.items():
            if key not in attrs:
                if spec.required:
                    raise _Bad(f"op {op!r} requires attribute {key!r}", f".attrs.{key}")
                attrs[key] = normalize_attr(spec, spec.default, f"{op}.{key}")

    def _type(self, shape: Any, dtype: Any) -> TensorType:
        try:
            key = (dtype, *shape) if type(shape) is list else None
            found = self._types.get(key) if key is not None else None
        except TypeError:  # unhashable dims: reported below
            found = None
        if found is not None:
            for d in shape:  # the key alone would let [true] or [1.0] hit the entry of [1]
                if type(d) is not int and type(d) is not str:
                    break
            else:
                return found
        lim = self.limits
        if type(dtype) is not str or dtype not in _DTYPES:
            raise _Bad(f"expected a dtype name ({', '.join(_DTYPES)}), got {_short(dtype)}", ".dtype")
        dims = self._dims(shape, ".shape")
        if len(dims) > lim.max_rank:
            raise _Bad(f"rank {len(dims)} exceeds max_rank={lim.max_rank}", ".shape")
        dt = _DTYPES[dtype]
        if all(type(d) is int for d in dims):
            nbytes = math.prod(dims) * dt.itemsize
            if nbytes > lim.max_tensor_bytes:
                raise _Bad(f"declares a tensor of {nbytes} bytes, over max_tensor_bytes={lim.max_tensor_bytes}", ".shape")
        ttype = TensorType(Shape(dims), dt)
        self._types[(dtype, *dims)] = ttype
        return ttype

    def _dims(self, v: Any, suffix: _Str = "") -> tuple[Any, ...]:
        lim = self.limits
        if type(v) is not list:
            raise _Bad(f"expected list, got {_tname(v)}", suffix)
        if len(v) > lim.max_items:
            raise _Bad(f"{len(v)} entries exceed max_items={lim.max_items}", suffix)
        copied = None
        for j, d in enumerate(v):
            if type(d) is int:
                if not 0 <= d <= lim.max_dim:
                    raise _Bad(f"dim {_short(d)} is outside [0, max_dim={lim.max_dim}]", f"{suffix}[{j}]")
            elif type(d) is str:
                if len(d) > MAX_TEXT:
                    raise _Bad(f"a dim expression of {len(d)} characters exceeds {MAX_TEXT}", f"{suffix}[{j}]")
                try:  # a symbol name (format version 1) or an expression (version 2)
                    d = decode_dim(d)
                except (RlxError, ZeroDivisionError) as exc:
                    raise _Bad(f"expected an int or a symbolic dim, got {_short(d)}: {exc}", f"{suffix}[{j}]") from None
                if copied is None:
                    copied = v = list(v)
                v[j] = d
            else:
                raise _Bad(f"expected int or symbol, got {_tname(d)}", f"{suffix}[{j}]")
        return tuple(v)

    def _prov(self, p: Any) -> Provenance:
        if type(p) is not dict or not p.keys() <= {"hir", "label", "passes"}:
            raise _Bad("expected an object with fields hir, label, passes", ".prov")
        hir, label, passes = p.get("hir"), p.get("label"), p.get("passes", [])
        if hir is not None and (type(hir) is not int or not 0 <= hir <= _INT_MAX):
            raise _Bad(f"expected int or null, got {_tname(hir)}", ".prov.hir")
        if label is not None and (type(label) is not str or len(label) > self.limits.max_string):
            raise _Bad(f"expected str or null, got {_tname(label)}", ".prov.label")
        if type(passes) is not list or len(passes) > self.limits.max_items:
            raise _Bad(f"expected list, got {_tname(passes)}", ".prov.passes")
        for j, item in enumerate(passes):
            if type(item) is not str or len(item) > self.limits.max_string:
                raise _Bad(f"expected str, got {_tname(item)}", f".prov.passes[{j}]")
        return Provenance(hir, label, tuple(passes))

    # ----------------------------------------------------------- attribute kinds
    def _d_int(self, v: Any, path: _Str) -> _Int:
        if type(v) is not int:
            raise _Bad(f"expected int, got {_tname(v)}")
        if not _INT_MIN <= v <= _INT_MAX:
            raise _Bad("int outside the 64-bit range")
        return v

    def _d_float(self, v: Any, path: _Str) -> _Float:
        t = type(v)
        if t is float:
            return v
        if t is int:
            if not _INT_MIN <= v <= _INT_MAX:
                raise _Bad("number outside the 64-bit range")
            return float(v)
        if t is str and v in _NONFINITE_IN:
            return _NONFINITE_IN[v]
        raise _Bad(f"expected float (or \"NaN\", \"Infinity\", \"-Infinity\"), got {_tname(v)}")

    def _d_bool(self, v: Any, path: _Str) -> bool:
        if type(v) is not bool:
            raise _Bad(f"expected bool, got {_tname(v)}")
        return v

    def _d_str(self, v: Any, path: _Str) -> _Str:
        if type(v) is not str:
            raise _Bad(f"expected str, got {_tname(v)}")
        if len(v) > self.limits.max_string:
            raise _Bad(f"string of {len(v)} characters exceeds max_string={self.limits.max_string}")
        return v

    def _d_dtype(self, v: Any, path: _Str) -> DType:
        if type(v) is not str or v not in _DTYPES:
            raise _Bad(f"expected a dtype name, got {_short(v)}")
        return _DTYPES[v]

    def _list(self, v: Any) -> _List:
        if type(v) is not list:
            raise _Bad(f"expected list, got {_tname(v)}")
        if len(v) > self.limits.max_items:
            raise _Bad(f"{len(v)} entries exceed max_items={self.limits.max_items}")
        return v

    def _d_ints(self, v: Any, path: _Str) -> tuple[_Int, ...]:
        for j, x in enumerate(self._list(v)):
            if type(x) is not int or not _INT_MIN <= x <= _INT_MAX:
                raise _Bad(f"expected int, got {_tname(x)}", f"[{j}]")
        return tuple(v)

    def _d_floats(self, v: Any, path: _Str) -> tuple[_Float, ...]:
        out = []
        for j, x in enumerate(self._list(v)):
            try:
                out.append(self._d_float(x, path))
            except _Bad as bad:
                raise _Bad(bad.msg, f"[{j}]") from None
        return tuple(out)

    def _d_dims(self, v: Any, path: _Str) -> tuple[Any, ...]:
        return self._dims(v)

    def _d_size(self, v: Any, path: _Str) -> Any:
        """An int of any sign (version 1) or a symbolic dim (version 2)."""
        if type(v) is str:
            return self._dims([v])[0]
        if type(v) is not int or not _INT_MIN <= v <= _INT_MAX:
            raise _Bad(f"expected int or symbolic dim, got {_tname(v)}", "")
        return v

    def _d_sizes(self, v: Any, path: _Str) -> tuple[Any, ...]:
        return tuple(self._d_size(x, f"{path}[{j}]") for j, x in enumerate(self._list(v)))

    def _d_tensor(self, v: Any, path: _Str) -> FrozenArray:
        return FrozenArray(self._tensor(v))

    def _d_graph(self, v: Any, path: _Str) -> Graph:
        return self.graph(v, path, verify=False)  # the enclosing graph's verify recurses

    def _d_data(self, v: Any, path: _Str, depth: _Int = 0) -> Any:
        if depth > self.limits.max_depth:
            raise _Bad(f"data nested deeper than max_depth={self.limits.max_depth}")
        t = type(v)
        if v is None or t is bool or t is int or t is float:
            return v
        if t is str:
            return self._d_str(v, path)
        if t is list:
            out = []
            for j, x in enumerate(self._list(v)):
                try:
                    out.append(self._d_data(x, path, depth + 1))
                except _Bad as bad:
                    raise _Bad(bad.msg, f"[{j}]{bad.suffix}") from None
            return tuple(out)
        if t is dict and v.keys() == {"float"}:
            return self._d_float(v["float"], path)
        raise _Bad(f"expected null, bool, int, float, str, list or {{\"float\": ...}}, got {_tname(v)}")

    def _tensor(self, doc: Any) -> np.ndarray:
        lim = self.limits
        if type(doc) is not dict:
            raise _Bad(f"expected a tensor object, got {_tname(doc)}")
        extra = doc.keys() - {"dtype", "shape", "data", "sha256"}
        if extra:
            raise _Bad("unknown field", f".{sorted(map(str, extra))[0][:80]}")
        if not _TENSOR_KEYS <= doc.keys() or ("data" in doc) == ("sha256" in doc):
            raise _Bad("a tensor needs dtype, shape and exactly one of data, sha256")
        dt = doc["dtype"]
        if type(dt) is not str or dt not in _DTYPES:
            raise _Bad(f"expected a dtype name, got {_short(dt)}", ".dtype")
        dtype = _DTYPES[dt]
        dims = self._dims(doc["shape"], ".shape")
        if len(dims) > lim.max_rank or not all(type(d) is int for d in dims):
            raise _Bad(f"a tensor needs at most {lim.max_rank} static dims", ".shape")
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes > lim.max_tensor_bytes:
            raise _Bad(f"declares {nbytes} bytes, over max_tensor_bytes={lim.max_tensor_bytes}", ".shape")
        if self.bytes_read + nbytes > lim.max_total_bytes:
            raise _Bad(f"tensor data would exceed max_total_bytes={lim.max_total_bytes}", ".shape")
        if "data" in doc:
            data = doc["data"]
            if type(data) is not str:
                raise _Bad(f"expected base64 str, got {_tname(data)}", ".data")
            if nbytes > lim.max_inline_bytes:
                raise _Bad(f"inline tensor of {nbytes} bytes exceeds max_inline_bytes={lim.max_inline_bytes}", ".data")
            if len(data) != 4 * ((nbytes + 2) // 3):
                raise _Bad(f"{len(data)} base64 characters cannot hold {nbytes} bytes ({dtype} {list(dims)})", ".data")
            try:
                raw = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise _Bad("not valid base64", ".data") from None
            if len(raw) != nbytes:
                raise _Bad(f"decodes to {len(raw)} bytes, {dtype} {list(dims)} needs {nbytes}", ".data")
            buf: Any = raw
        else:
            sha = doc["sha256"]
            if type(sha) is not str or not _SHA.fullmatch(sha):
                raise _Bad("expected 64 lowercase hex digits", ".sha256")
            if self.payload is None:
                raise _Bad("refers to a payload tensor but the document has no payload (use rlx.load on the saved file)", ".sha256")
            buf = self.payload.constant(sha, dtype, dims)
        self.bytes_read += nbytes
        arr = np.frombuffer(buf, dtype=dtype.numpy.newbyteorder("<"), count=math.prod(dims)).reshape(dims)
        if arr.dtype != dtype.numpy:
            arr = arr.astype(dtype.numpy)
        return arr


def _short(v: Any) -> str:
    if type(v) is int and abs(v) > 10**30:
        return "a huge int"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _verify(g: Graph) -> None:
    try:
        _verify_graph(g)
    except VerifyError:
        raise
    except Exception as exc:  # an op rule crashing on hostile input is still a verification failure
        raise VerifyError(f"graph {g.name!r}: verification failed: {type(exc).__name__}: {exc}"[:2000]) from exc
