"""Type stubs of the ``Graph`` builder methods, generated from the op registry.

The builders are made on first use by ``Graph.__getattr__`` (one per op and preset method), which
IDEs and type checkers cannot see; ``src/rlx/ir/_builders.pyi`` declares them (``Graph`` derives
from its ``GraphBuilders`` for type checkers only). ``python scripts/gen_builder_stubs.py``
regenerates it; a test checks it is current.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Any

from rlx.ir.attrs import AttrSpec
from rlx.ir.opdef import VARIADIC, OpDef, builder_methods, get_op

_TYPES = {"int": "int", "float": "float", "bool": "bool", "str": "str", "dtype": "DTypeLike", "ints": "Sequence[int]",
          "floats": "Sequence[float]", "dims": "Sequence[Dim]", "size": "Dim", "sizes": "Sequence[Dim]",
          "tensor": "np.ndarray", "graph": "Graph", "data": "Any"}
_HEADER = '''"""Generated from the op registry by scripts/gen_builder_stubs.py (rlx.ir.builder_stubs); do not edit."""

from collections.abc import Sequence
from typing import Any

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


def _attr_type(spec: AttrSpec) -> str:
    t = _TYPES.get(spec.kind, "Any")
    return f"{t} | None" if spec.optional else t


def _operands(op: OpDef) -> list[str]:
    if op.arity == VARIADIC:
        return [f"{_ident(op.operands[0] if op.operands else 'operands')}: Sequence[Operand]"]
    names = [_ident(n) for n in op.operands]
    if callable(op.arity):  # the count depends on the attributes: operands past the default count are optional
        try:
            least = op.arity({k: s.default for k, s in op.attrs.items() if not s.required})
        except Exception:  # a required attribute decides: only the first operand is sure
            least = 1
        return [f"{n}: Operand" if i < least else f"{n}: Operand = ..." for i, n in enumerate(names)]
    count = int(op.arity)  # type: ignore[arg-type]
    names = (names + [f"a{i}" for i in range(len(names), count)])[:count]
    return [f"{n}: Operand" for n in names]


def _method(method: str, op: OpDef, preset: Mapping[str, Any]) -> list[str]:
    params = ["self", *_operands(op)]
    attrs = [f"{_ident(k)}: {_attr_type(s)} = ..." for k, s in op.attrs.items() if k not in preset]
    if len(params) > 1:
        params.append("/")  # operands are positional only (keywords are attributes)
    params += [*attrs, "name: str | None = None"]
    doc = op.doc.strip().split(". ")[0].rstrip(".").replace('"""', "'''").replace("\\", "\\\\")
    if preset:
        doc = f"{op.name}({', '.join(f'{k}={v!r}' for k, v in preset.items())}): {doc}"
    return [f"    def {method}({', '.join(params)}) -> Any:", f'        """{doc}."""', ""]


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
