"""The text form of a graph: ``str(g)`` prints it, :func:`parse` reads it back exactly.

    graph @"mlp" mir {
      %0 = input {dtype="f32", name="x", shape=[2, 4]} : [2, 4] f32 name="x"
      %2 = activation(%0) {kind="gelu"} : [2, 4] f32
      return %2
    }

Attribute values are JSON (NaN / Infinity allowed), except tensors, written
``tensor(f32, [2, 2], "<base64 of little-endian bytes>")``, and subgraphs, written as a
nested ``graph`` block. A trailing ``name=`` and ``prov=`` give the node's name and
provenance. A graph that narrows symbols lists them first, one per line:
``symbol batch in [1, 64]`` (``inf``: no upper bound).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.ir.attrs import FrozenArray, normalize_attr
from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError, ParseError, RlxError
from rlx.ir.graph import RESULT, Graph, GraphStage, Node, Provenance
from rlx.ir.opdef import get_op, has_op
from rlx.ir.serialize import DEFAULT_LIMITS
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import parse_dim_at, range_text

_INDENT = "  "
#: Graphs nested in attributes, as deep as ``rlx.load`` accepts by default (printing and parsing
#: walk them recursively: deeper nesting is a typed error, not a RecursionError).
MAX_DEPTH = DEFAULT_LIMITS.max_depth


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def format_tensor(arr: np.ndarray) -> str:
    dtype = DType.of(arr.dtype)
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    dims = ", ".join(str(d) for d in arr.shape)
    return f'tensor({dtype}, [{dims}], "{base64.b64encode(data).decode()}")'


def format_value(value: Any, depth: int) -> str:
    if isinstance(value, FrozenArray):
        return format_tensor(value.array)
    if isinstance(value, Graph):
        if depth > MAX_DEPTH:
            raise FormatError(f"cannot print graph {value.name!r}: graphs nested deeper than LoadLimits.max_depth={MAX_DEPTH}")
        return _print(value, depth)
    if isinstance(value, DType):
        return _json(value.value)
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v, depth) for v in value) + "]"
    return _json(value)


def format_type(t: TensorType) -> str:
    return f"{t.shape!r} {t.dtype}"


def print_node(node: Node, depth: int = 0, results: Sequence[Node] = ()) -> str:
    """One line; a multi-result node lists every result (``results``: its result nodes, for their names)."""
    ids = ", ".join(f"%{node.id + r}" for r in range(node.num_results))
    parts = [f"{ids} = {node.op}"]
    if node.inputs:
        parts[0] += "(" + ", ".join(f"%{i}" for i in node.inputs) + ")"
    if node.attrs:
        body = ", ".join(f"{k}={format_value(v, depth + 1)}" for k, v in node.attrs.items())
        parts.append("{" + body + "}")
    parts.append(": " + ", ".join(format_type(t) for t in node.types))
    if node.name is not None:
        parts.append(f"name={_json(node.name)}")
    if any(r.name is not None for r in results):
        parts.append(f"result_names={_json([r.name for r in results])}")
    if node.prov is not None:
        prov = {"hir": node.prov.hir, "label": node.prov.label, "passes": list(node.prov.passes)}
        parts.append(f"prov={_json(prov)}")
    return " ".join(parts)


def _print(g: Graph, depth: int) -> str:
    pad = _INDENT * depth
    lines = [f"graph @{_json(g.name)} {g.stage.value} {{"]
    lines += [f"{pad}{_INDENT}symbol {name} in {range_text(r)}" for name, r in sorted(g.symbol_ranges.items())]
    nodes = g.nodes
    lines += [pad + _INDENT + print_node(n, depth, nodes[n.id + 1:n.id + n.num_results] if n.extra_types else ())
              for n in nodes if n.op != RESULT]
    lines.append(pad + _INDENT + "return" + ("" if not g.output_ids else " " + ", ".join(f"%{i}" for i in g.output_ids)))
    lines.append(pad + "}")
    return "\n".join(lines)


def print_graph(g: Graph) -> str:
    return _print(g, 0)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"-?[0-9]{1,30}")  # bounded: int() of thousands of digits is a ValueError
_LONE_INT = re.compile(r"-?[0-9]+(?=\s*[,\]])")
_WS = re.compile(r"(?:\s|#[^\n]*)*")
_DECODER = json.JSONDecoder()


class _Cursor:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.depth = 0  # graphs being parsed around the cursor

    def error(self, msg: str) -> ParseError:
        line = self.text.count("\n", 0, self.pos) + 1
        start = self.text.rfind("\n", 0, self.pos) + 1
        end = self.text.find("\n", self.pos)
        snippet = self.text[start : end if end >= 0 else len(self.text)]
        col = self.pos - start + 1
        return ParseError(f"line {line}, column {col}: {msg}\n    {snippet[:200]}")

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def peek(self, token: str) -> bool:
        self.ws()
        return self.text.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            found = self.text[self.pos : self.pos + 20] or "end of text"
            raise self.error(f"expected {token!r}, found {found!r}")

    def regex(self, pattern: re.Pattern[str], what: str) -> str:
        self.ws()
        m = pattern.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def json(self) -> Any:
        self.ws()
        try:
            value, end = _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.error(f"bad value: {exc.msg}") from None
        except ValueError as exc:  # int() of a number past sys.get_int_max_str_digits()
            raise self.error(f"bad value: {str(exc)[:120]}") from None
        except RecursionError:
            raise self.error("value nested too deeply") from None
        self.pos = end
        return value

    def node_ref(self) -> int:
        self.expect("%")
        return int(self.regex(_INT, "a node id"))


def _parse_tensor(cur: _Cursor) -> FrozenArray:
    cur.expect("tensor(")
    dtype_name = cur.regex(_IDENT, "a dtype")
    try:
        dtype = DType.of(dtype_name)
    except RlxError:
        raise cur.error(f"unknown dtype {dtype_name!r}") from None
    cur.expect(",")
    dims = _parse_dims(cur)
    cur.expect(",")
    encoded = cur.json()
    cur.expect(")")
    if not isinstance(encoded, str) or not all(isinstance(d, int) and d >= 0 for d in dims):
        raise cur.error("a tensor needs static non-negative dims and a base64 string")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise cur.error("tensor data is not valid base64") from None
    count = math.prod(dims)
    if len(raw) != count * dtype.itemsize:
        raise cur.error(f"tensor data has {len(raw)} bytes, {dtype} {list(dims)} needs {count * dtype.itemsize}")
    arr = np.frombuffer(raw, dtype=dtype.numpy.newbyteorder("<")).astype(dtype.numpy).reshape(dims)
    return FrozenArray(arr)


def _parse_dims(cur: _Cursor) -> list[Any]:
    cur.expect("[")
    dims: list[Any] = []
    while not cur.accept("]"):
        if dims:
            cur.expect(",")
        cur.ws()
        if _LONE_INT.match(cur.text, cur.pos):
            dims.append(int(cur.regex(_INT, "a dim")))
        else:
            try:
                dim, cur.pos = parse_dim_at(cur.text, cur.pos)
            except RlxError as exc:
                raise cur.error(f"expected a dim (int or symbolic expression): {exc}") from None
            dims.append(dim)
    return dims


def _parse_value(cur: _Cursor, op: str, key: str) -> Any:
    if cur.peek("tensor("):
        return _parse_tensor(cur)
    if cur.peek("graph"):
        if cur.depth >= MAX_DEPTH:
            raise cur.error(f"graphs nested deeper than LoadLimits.max_depth={MAX_DEPTH}")
        cur.depth += 1
        try:
            return _parse_graph(cur)
        finally:
            cur.depth -= 1
    raw = cur.json()
    spec = get_op(op).attrs.get(key)
    if spec is None:
        raise cur.error(f"op {op!r} has no attribute {key!r}")
    try:
        return normalize_attr(spec, raw, f"{op}.{key}")
    except RlxError as exc:
        raise cur.error(str(exc)) from None


def _parse_type(cur: _Cursor) -> TensorType:
    dims = _parse_dims(cur)
    name = cur.regex(_IDENT, "a dtype")
    try:
        return TensorType(Shape(dims), DType.of(name))
    except RlxError as exc:
        raise cur.error(str(exc)) from None


def _parse_node(cur: _Cursor, g: Graph) -> None:
    node_id = cur.node_ref()
    if node_id != len(g):
        raise cur.error(f"node %{node_id} is out of order (expected %{len(g)})")
    count = 1
    while cur.accept(","):
        if cur.node_ref() != node_id + count:
            raise cur.error(f"result {count} of node %{node_id} must be %{node_id + count}")
        count += 1
    cur.expect("=")
    op = cur.regex(_IDENT, "an op name")
    if not has_op(op):
        raise cur.error(f"unknown op {op!r}")
    inputs: list[int] = []
    if cur.accept("("):
        while not cur.accept(")"):
            if inputs:
                cur.expect(",")
            inputs.append(cur.node_ref())
    attrs: dict[str, Any] = {}
    if cur.accept("{"):
        while not cur.accept("}"):
            if attrs:
                cur.expect(",")
            key = cur.regex(_IDENT, "an attribute name")
            cur.expect("=")
            if key in attrs:
                raise cur.error(f"attribute {key!r} given twice")
            attrs[key] = _parse_value(cur, op, key)
    cur.expect(":")
    types = [_parse_type(cur)]
    while cur.accept(","):
        types.append(_parse_type(cur))
    if len(types) != count:
        raise cur.error(f"{count} result(s) listed but {len(types)} type(s) given")
    name: str | None = None
    prov: Provenance | None = None
    result_names: Any = [None] * (count - 1)
    while cur.peek("name=") or cur.peek("prov=") or cur.peek("result_names="):
        if cur.accept("name="):
            name = cur.json()
            if not isinstance(name, str):
                raise cur.error("name must be a string")
        elif cur.accept("result_names="):
            result_names = cur.json()
            if not isinstance(result_names, list) or len(result_names) != count - 1 or \
                    not all(n is None or isinstance(n, str) for n in result_names):
                raise cur.error(f"result_names must list {count - 1} string(s) or null(s)")
        else:
            cur.expect("prov=")
            prov = _parse_prov(cur)
    try:
        v = g.append(op, inputs, attrs, name=name, prov=prov, type=tuple(types) if count > 1 else types[0], check=False)
        for r, rname in enumerate(result_names, 1):
            if rname is not None:
                g.append(RESULT, [v], {"index": r}, name=rname)
    except RlxError as exc:
        raise cur.error(str(exc)) from None


def _parse_prov(cur: _Cursor) -> Provenance:
    raw = cur.json()
    if not isinstance(raw, dict) or set(raw) - {"hir", "label", "passes"}:
        raise cur.error("prov must be an object with hir, label, passes")
    hir, label, passes = raw.get("hir"), raw.get("label"), raw.get("passes", [])
    if not (hir is None or isinstance(hir, int)) or not (label is None or isinstance(label, str)):
        raise cur.error("prov.hir must be an int or null, prov.label a string or null")
    if not isinstance(passes, list) or not all(isinstance(p, str) for p in passes):
        raise cur.error("prov.passes must be a list of strings")
    return Provenance(hir, label, tuple(passes))


def _parse_range(cur: _Cursor, g: Graph) -> None:
    """``symbol NAME in [LO, HI]`` (HI an int or ``inf``), after ``symbol``."""
    name = cur.regex(_IDENT, "a symbol name")
    cur.expect("in")
    cur.expect("[")
    lo = cur.regex(_INT, "the lower bound (an int)")
    cur.expect(",")
    hi = None if cur.accept("inf") else cur.regex(_INT, "the upper bound (an int or inf)")
    cur.expect("]")
    if len(lo) > 20 or (hi is not None and len(hi) > 20):
        raise cur.error("range bound too long")
    try:
        g.set_range(name, int(lo), None if hi is None else int(hi))
    except RlxError as exc:
        raise cur.error(str(exc)) from None


def _parse_graph(cur: _Cursor) -> Graph:
    cur.expect("graph")
    cur.expect("@")
    name = cur.json()
    if not isinstance(name, str):
        raise cur.error("graph name must be a string")
    stage = cur.regex(_IDENT, "a stage (hir, mir, lir)")
    try:
        g = Graph(name, GraphStage(stage))
    except ValueError:
        raise cur.error(f"unknown stage {stage!r}") from None
    cur.expect("{")
    while cur.accept("symbol"):
        _parse_range(cur, g)
    while not cur.peek("return"):
        _parse_node(cur, g)
    cur.expect("return")
    outputs: list[int] = []
    while not cur.accept("}"):
        if outputs:
            cur.expect(",")
        outputs.append(cur.node_ref())
    try:
        g.set_outputs(outputs)
    except RlxError as exc:
        raise cur.error(str(exc)) from None
    return g


def parse(text: str, *, verify: bool = True) -> Graph:
    """Read the text form back into a Graph (verified unless ``verify=False``)."""
    if not isinstance(text, str):
        raise ParseError(f"parse expects str, got {type(text).__name__}")
    cur = _Cursor(text)
    try:
        g = _parse_graph(cur)
    except (ValueError, OverflowError) as exc:  # a number conversion the grammar did not bound: still a ParseError
        if isinstance(exc, RlxError):
            raise
        raise cur.error(f"bad number: {str(exc)[:120]}") from None
    cur.ws()
    if cur.pos != len(text):
        raise cur.error("unexpected text after the graph")
    if verify:
        from rlx.ir.verify import verify as run_verify

        run_verify(g)
    return g
