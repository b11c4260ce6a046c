"""The import contract of docs/architecture.md ("Layering"), checked on the source's AST.

Every ``import`` / ``from ... import`` in ``src/rlx`` counts, function-level ones included:
a module may import only from its own layer package or from a lower layer, and the optional
libraries (onnx, jax, torch, rich, matplotlib, transformers, timm) are imported lazily
(inside a function) and only by backends and the presentation modules.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"

#: rank of each top-level part of ``rlx``; an import must go to a strictly lower rank or stay
#: inside its own part. ``opt`` and ``hir`` share a rank and so may not import each other.
LAYERS: dict[str, int] = {
    "ir": 0, "_version": 0,
    "ops": 1,
    "opt": 2, "hir": 2,
    "lir": 3,
    "autodiff": 4,
    "runtime": 5,
    "frontends": 6,
    "backends": 7, "train": 7, "variants": 7,
    "onnx": 8, "torch": 8, "viz": 8, "llm": 8,
    "__init__": 9,  # the public surface (rlx/__init__.py) sits above everything it re-exports
    "demo": 10, "cli": 10, "__main__": 10,
}
OPTIONAL = frozenset({"onnx", "onnxruntime", "jax", "jaxlib", "torch", "rich", "matplotlib", "transformers", "timm"})
#: parts that may import an optional library, lazily (backends also at module level: the
#: backend package itself is only imported on demand).
OPTIONAL_LAZY_OK = frozenset({"backends", "frontends", "cli", "demo", "viz", "onnx", "torch"})
OPTIONAL_LAZY_MODULES = frozenset({"rlx.lir.picture"})  # the buffer-plan picture (matplotlib, on request)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: pathlib.Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level?) for every import statement in the file."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {id(n) for n in tree.body}
    # imports under a module-level `if` / `try` (TYPE_CHECKING, optional fallbacks) are module level too
    for stmt in tree.body:
        if isinstance(stmt, (ast.If, ast.Try)):
            top.update(id(n) for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.append((name, node.lineno, id(node) in top))
    return found


def _violations() -> list[str]:
    bad = []
    for path in sorted((SRC / "rlx").rglob("*.py")):
        module = _module_name(path)
        part = _part(module)
        if part not in LAYERS:
            bad.append(f"{module}: part {part!r} has no layer in LAYERS")
            continue
        for name, line, top in imports(path):
            root = name.split(".")[0]
            where = f"{path.relative_to(SRC)}:{line}"
            if root == "rlx":
                target = _part(name) if name != "rlx" else "__init__"
                if target != part and LAYERS.get(target, 99) >= LAYERS[part]:
                    bad.append(f"{where}: {part} imports {name} ({target} is not below {part})")
            elif root in OPTIONAL:
                lazy_ok = part in OPTIONAL_LAZY_OK or module in OPTIONAL_LAZY_MODULES
                if not lazy_ok or (top and part not in ("backends", "frontends")):
                    bad.append(f"{where}: {module} imports the optional library {name}"
                               + (" at module level" if top else ""))
    return bad


def test_imports_follow_the_layering():
    bad = _violations()
    assert not bad, "layering violations:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("source, expect", [
    ("def f():\n    from rlx.autodiff import grad\n", "ops imports rlx.autodiff"),
    ("from ..runtime import reference\n", "ops imports rlx.runtime"),
    ("import jax\n", "optional library jax at module level"),
])
def test_the_contract_sees_upward_and_lazy_imports(tmp_path, monkeypatch, source, expect):
    """A planted violation (function-level, relative, optional library) is reported."""
    fake = tmp_path / "src"
    (fake / "rlx" / "ops").mkdir(parents=True)
    (fake / "rlx" / "__init__.py").write_text("")
    (fake / "rlx" / "ops" / "__init__.py").write_text("")
    (fake / "rlx" / "ops" / "planted.py").write_text(source)
    monkeypatch.setitem(globals(), "SRC", fake)
    assert any(expect in v for v in _violations())
