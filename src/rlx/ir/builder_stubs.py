"""Type stubs and signatures of the ``Graph`` builder methods, generated from the op registry.

The builders are made on first use by ``Graph.__getattr__`` (one per op and preset method), which
type checkers cannot see; ``src/rlx/ir/_builders.pyi`` declares them (``Graph`` derives from its
``GraphBuilders`` for type checkers only, and hides ``__getattr__`` from them, so a misspelt op is
an error). Each stub returns ``Value``, or a tuple of them for an op with several results, and
types every attribute (a ``Literal`` of its choices where it has some). At run time the same
information gives each builder its ``__signature__`` and ``__doc__`` (:func:`builder_signature`,
:func:`builder_doc`: ``help(g.matmul)``), and ``dir(g)`` lists the builders.
``python scripts/gen_builder_stubs.py`` regenerates the stub file; a test checks it is current.
"""

from __future__ import annotations

import inspect
import itertools
import keyword
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rlx.ir.attrs import REQUIRED, AttrSpec
from rlx.ir.opdef import VARIADIC, OpDef, builder_method, builder_methods, get_op

_TYPES = {"int": "int", "float": "float", "bool": "bool", "str": "str", "dtype": "DTypeLike", "ints": "Sequence[int]",
          "floats": "Sequence[float]", "dims": "Sequence[Dim]", "size": "Dim", "sizes": "Sequence[Dim]",
          "tensor": "np.ndarray", "graph": "Graph", "data": "Any"}
_HEADER = '''"""Generated from the op registry by scripts/gen_builder_stubs.py (rlx.ir.builder_stubs); do not edit."""

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.graph import Graph, Value

Operand = Value | int | float | np.ndarray
Dim = Any
DTypeLike = DType | str

class GraphBuilders:
'''


def _ident(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) else name


#: ops with several results (docs/multi_result.md): the builder returns a tuple of Values, always
#: (attribute None), or when the attribute has the value given (``several``: True), or when it has
#: any other value (``several``: False; scan with one carry is an ordinary one-result node)
MULTI_RESULT: dict[str, tuple[str | None, Any, str, bool]] = {
    "split": (None, None, "tuple[Value, ...]", True),
    "scan": ("num_carries", 1, "tuple[Value, ...]", False),
    "max_pool2d_with_indices": (None, None, "tuple[Value, Value]", True),
    "top_k": ("output", "both", "tuple[Value, Value]", True),
    "while_": ("output", None, "tuple[Value, ...]", True),
    "fused_residual_layer_norm": ("with_sum", True, "tuple[Value, Value]", True),
    "fused_residual_rms_norm": ("with_sum", True, "tuple[Value, Value]", True),
    **{op: (None, None, "tuple[Value, Value]", True) for op in ("slogdet", "qr", "geqrf", "lu_factor", "ldl_factor")},  # linalg_decomp
    **{op: ("output", "both", "tuple[Value, Value]", True) for op in ("eigh", "eig")},
    "svd": ("output", "both", "tuple[Value, Value, Value]", True),
    "lu_unpack": (None, None, "tuple[Value, Value, Value]", True),
    "cached_attention": (None, None, "tuple[Value, Value, Value]", True),
}


def _attr_type(spec: AttrSpec) -> str:
    if spec.choices and spec.kind in ("str", "int", "bool"):
        t = f"Literal[{', '.join(repr(c) for c in spec.choices)}]"
    else:
        t = _TYPES.get(spec.kind, "Any")
    return f"{t} | None" if spec.optional else t


def _returns(op: OpDef, preset: Mapping[str, Any]) -> tuple[str, str | None, Any]:
    """The builder's return type, and the attribute / value that decides it when one does."""
    multi = MULTI_RESULT.get(op.name)
    if multi is None:
        return "Value", None, None
    attr, value, tuple_type, several = multi
    if attr is None:
        return tuple_type, None, None
    if attr in preset:
        return (tuple_type if (preset[attr] == value) == several else "Value"), None, None
    return tuple_type, attr, value


def _domain(spec: AttrSpec) -> tuple[Any, ...]:
    """The values tried for an attribute when finding how many operands a builder takes."""
    if spec.kind == "bool":
        return (False, True)
    if spec.choices:
        return (*spec.choices, *((None,) if spec.optional else ()))
    if spec.required:
        return (1,) if spec.kind == "int" else (None,)
    return (spec.default,)


def _count(op: OpDef, attrs: Mapping[str, Any]) -> int | None:
    try:
        return int(op.arity(attrs))  # type: ignore[operator]
    except Exception:  # the arity needs an attribute value not tried here
        return None


#: most attribute combinations tried per builder (the largest registry op needs a few hundred)
_MAX_TRIES = 4096


def operand_counts(op: OpDef, preset: Mapping[str, Any] = MappingProxyType({})) -> tuple[int, int | None]:
    """The fewest and the most operands a builder takes, over its attributes' values (bools, choices;
    ``preset`` fixed). The most is None for an operand group sized by an int attribute (scan's
    ``num_xs``, elementwise_region's ``num_inputs``) and for list-taking (variadic) ops."""
    if op.arity == VARIADIC:
        return op.min_arity, None
    if not callable(op.arity):
        return int(op.arity), int(op.arity)  # type: ignore[arg-type]
    domains = {k: (preset[k],) if k in preset else _domain(s) for k, s in op.attrs.items()}
    base = {k: d[0] for k, d in domains.items()}
    for k, spec in op.attrs.items():  # a count attribute: the operand count follows its value
        if k not in preset and spec.kind == "int" and not spec.choices:
            v = base[k] if isinstance(base[k], int) else 1
            a, b = _count(op, {**base, k: v}), _count(op, {**base, k: v + 1})
            if a is not None and b is not None and a != b:
                return 0, None
    varied = [k for k, d in domains.items() if len(d) > 1]
    counts = set()
    for values in itertools.islice(itertools.product(*(domains[k] for k in varied)), _MAX_TRIES):
        n = _count(op, {**base, **dict(zip(varied, values))})
        if n is not None:
            counts.add(n)
    if not counts:  # no tried value decides it: only the first operand is sure
        return 1, max(len(op.operands), 1)
    return min(counts), max(counts)


def _operands(op: OpDef, preset: Mapping[str, Any]) -> list[str]:
    """The stub's operand parameters: a list for a variadic op, ``*operands`` for groups sized by
    attributes (scan), else one per operand, those past the fewest count optional."""
    group = _ident(op.operands[0]) if len(op.operands) == 1 else "operands"
    least, most = operand_counts(op, preset)
    if op.arity == VARIADIC:
        return [f"{group}: Sequence[Operand]"]
    if most is None:
        return [f"*{group}: Operand"]
    names = [_ident(n) for n in op.operands]
    names = (names + [f"a{i}" for i in range(len(names), most)])[:most]
    return [f"{n}: Operand" if i < least else f"{n}: Operand = ..." for i, n in enumerate(names)]


def _summary(op: OpDef, preset: Mapping[str, Any]) -> str:
    doc = op.doc.strip().split(". ")[0].rstrip(".").replace('"""', "'''").replace("\\", "\\\\")
    if preset:
        doc = f"{op.name}({', '.join(f'{k}={v!r}' for k, v in preset.items())}): {doc}"
    return doc


def _method(method: str, op: OpDef, preset: Mapping[str, Any]) -> list[str]:
    operands = _operands(op, preset)
    starred = bool(operands) and operands[-1].startswith("*")
    if starred:  # operands are positional only (keywords are attributes); attributes by keyword
        params = ["self", "/", *operands]
    else:
        params = ["self", *operands, *(["/"] if operands else [])]
    free = {k: s for k, s in op.attrs.items() if k not in preset}
    attrs = [f"{_ident(k)}: {_attr_type(s)} = ..." for k, s in free.items()]
    doc = f'        """{_summary(op, preset)}."""'
    returns, attr, value = _returns(op, preset)
    if attr is None:
        return [f"    def {method}({', '.join([*params, *attrs, 'name: str | None = None'])}) -> {returns}:", doc, ""]
    # the result count follows an attribute: one overload per case, the specific one first
    spec = free[attr]
    others = [f"{_ident(k)}: {_attr_type(s)} = ..." for k, s in free.items() if k != attr]
    if spec.kind == "bool":
        other = f"Literal[{not value!r}]"
    elif spec.choices:
        other = f"Literal[{', '.join(repr(c) for c in spec.choices if c != value)}]"
    else:
        other = _TYPES.get(spec.kind, "Any")
    if MULTI_RESULT[op.name][3]:  # the value means several results; a keyword that must be given
        first = (f"{_ident(attr)}: {_literal(value)}", returns)
        second = (f"{_ident(attr)}: {other}" + (" | None" if spec.optional and value is not None else "") + " = ...", "Value")
    else:  # the value (the default) means one result; anything else several
        first = (f"{_ident(attr)}: {_literal(value)} = ...", "Value")
        second = (f"{_ident(attr)}: {other}", returns)
    star = [] if starred else ["*"]
    return ["    @overload",
            f"    def {method}({', '.join([*params, *others, *star, first[0], 'name: str | None = None'])}) -> {first[1]}: ..."
            + ("" if MULTI_RESULT[op.name][3] else "  # type: ignore[overload-overlap]  # int excludes 1 here"),
            "    @overload",
            f"    def {method}({', '.join([*params, *others, *star, second[0], 'name: str | None = None'])}) -> {second[1]}:",
            doc, ""]


def _literal(value: Any) -> str:
    return "None" if value is None else f"Literal[{value!r}]"


def builder_signature(method: str) -> inspect.Signature:
    """The run-time signature of a builder method: operands positional, attributes by keyword
    with their defaults (``help(g.matmul)``, IDE tooltips)."""
    found = builder_method(method)
    if found is None:
        raise AttributeError(method)
    op, preset = found
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_ONLY)]
    # attributes may follow the operands positionally, as the builder takes them (not after *operands)
    kind: inspect._ParameterKind = P.POSITIONAL_OR_KEYWORD
    for text in _operands(op, preset):
        name, _, rest = text.partition(": ")
        annotation = rest.removesuffix(" = ...").strip()
        if name.startswith("*"):
            params.append(P(name[1:], P.VAR_POSITIONAL, annotation=annotation))
            kind = P.KEYWORD_ONLY
        else:
            params.append(P(name, P.POSITIONAL_ONLY, annotation=annotation, default=None if rest.endswith("= ...") else P.empty))
    for k, spec in op.attrs.items():
        if k not in preset:
            required = spec.default is REQUIRED
            if required and kind is P.POSITIONAL_OR_KEYWORD and params[-1].default is not P.empty:
                kind = P.KEYWORD_ONLY  # a required one after a defaulted one: by keyword from here on
            params.append(P(_ident(k), kind, annotation=_attr_type(spec), default=P.empty if required else spec.default))
    params.append(P("name", P.KEYWORD_ONLY, annotation="str | None", default=None))
    returns, attr, _ = _returns(op, preset)
    return inspect.Signature(params, return_annotation=returns if attr is None else f"Value | {returns}")


def builder_doc(method: str) -> str:
    """The op's documentation for a builder method, with one line per attribute."""
    found = builder_method(method)
    if found is None:
        raise AttributeError(method)
    op, preset = found
    lines = [f"{method}: the {op.name!r} op" + (f" with {', '.join(f'{k}={v!r}' for k, v in preset.items())}" if preset else ""),
             "", op.doc.strip()]
    free = {k: s for k, s in op.attrs.items() if k not in preset}
    if free:
        lines += ["", "Attributes:"]
        for k, spec in free.items():
            default = "required" if spec.required else f"default {spec.default!r}"
            lines.append(f"    {k}: {_attr_type(spec)} ({default})" + (f": {spec.doc}" if spec.doc else ""))
    return "\n".join(lines)


def is_generated(member: Any) -> bool:
    """Is this ``Graph`` attribute a registry builder (made by ``Graph.__getattr__``), not a real method?"""
    return member is None or getattr(member, "__qualname__", "").startswith("_make_builder")


def render_builder_stubs(graph_members: Mapping[str, Any]) -> str:
    """The stub file: one method per builder name not defined on ``Graph`` itself (``graph_members``:
    ``Graph.__dict__``) of the ops rlx defines (user and test ops excluded)."""
    lines = [_HEADER]
    for method, (op_name, preset) in sorted(builder_methods().items()):
        op = get_op(op_name)
        builtin = getattr(op.infer, "__module__", "").startswith("rlx.") and op.family not in ("test", "custom")
        if not builtin or not is_generated(graph_members.get(method)) or method.startswith("_"):
            continue
        lines += _method(method, op, preset)
    return "\n".join(lines).rstrip() + "\n"
