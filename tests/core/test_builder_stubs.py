"""The Graph builder methods are visible to IDEs and type checkers: src/rlx/ir/_builders.pyi declares
one method per registry builder (checked against the registry), with the op's operands."""

from __future__ import annotations

import ast
from pathlib import Path

import rlx
from rlx.ir.builder_stubs import is_generated, render_builder_stubs
from rlx.ir.opdef import VARIADIC, builder_methods, get_op

STUB = Path(rlx.__file__).resolve().parent / "ir" / "_builders.pyi"


def _declared() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GraphBuilders")
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def _builtin(op) -> bool:
    return op.infer.__module__.startswith("rlx.") and op.family not in ("test", "custom")


def test_stub_is_current():
    assert STUB.read_text(encoding="utf-8") == render_builder_stubs(rlx.Graph.__dict__), "run: python scripts/gen_builder_stubs.py"


def test_every_builder_is_declared_with_its_operands():
    declared = _declared()
    for method, (op_name, preset) in builder_methods().items():
        op = get_op(op_name)
        if not _builtin(op) or not is_generated(rlx.Graph.__dict__.get(method)):
            continue
        fn = declared.get(method)
        assert fn is not None, f"builder {method!r} ({op_name}) is missing from {STUB.name}"
        operands = [a.arg for a in fn.args.posonlyargs][1:]
        if op.arity == VARIADIC:
            assert len(operands) == 1, method
        elif not callable(op.arity):
            assert len(operands) == op.arity, (method, operands)
        keywords = {a.arg for a in fn.args.args}
        assert keywords == {k for k in op.attrs if k not in preset} | {"name"}, method
    assert set(declared) <= set(builder_methods()), "stub declares builders the registry does not have"


def test_real_methods_are_not_shadowed_and_graph_derives_from_the_stub_class():
    declared = _declared()
    for name in ("input", "param", "constant", "scalar", "set_outputs"):
        assert name not in declared
    assert "GraphBuilders" in Path(rlx.ir.graph.__file__).read_text(encoding="utf-8")
