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
#: inside its own part. Parts that share a rank (``opt`` and ``hir``, ``frontends`` and ``backends``)
#: may not import each other.
LAYERS: dict[str, int] = {
    "ir": 0, "_version": 0,
    "ops": 1,
    "opt": 2, "hir": 2,
    "lir": 3,
    "autodiff": 4,
    "runtime": 5,
    "frontends": 6, "backends": 6,
    "train": 7, "variants": 7,
    "onnx": 8, "torch": 8, "viz": 8, "llm": 8,
    "__init__": 9,  # the public surface (rlx/__init__.py) sits above everything it re-exports
    "demo": 10, "cli": 10, "__main__": 10,
}
OPTIONAL = frozenset({"onnx", "onnxruntime", "openvino", "jax", "jaxlib", "torch", "rich", "matplotlib", "transformers", "timm",
                      "gguf", "safetensors", "tokenizers"})
#: parts that may import an optional library, lazily (backends also at module level: the
#: backend package itself is only imported on demand).
OPTIONAL_LAZY_OK = frozenset({"backends", "frontends", "llm", "cli", "demo", "viz", "onnx", "torch"})
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


# ------------------------------------------------------------------------ import cycles

def module_edges(src: pathlib.Path) -> dict[str, set[str]]:
    """module -> the rlx modules it imports at module level (``from pkg import sub`` names the submodule)."""
    paths = {_module_name(p): p for p in (src / "rlx").rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        stmts = list(tree.body)
        for stmt in tree.body:
            if isinstance(stmt, (ast.If, ast.Try)):
                stmts += [n for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))]
        out: set[str] = set()
        for node in stmts:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join([*package[: len(package) - (node.level - 1)], *([node.module] if node.module else [])]) \
                    if node.level else (node.module or "")
                for a in node.names:
                    target = f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                    if target in paths and target != module:
                        out.add(target)
        edges[module] = out
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _new_cycles(src: pathlib.Path) -> list[list[str]]:
    return import_cycles(module_edges(src))


def test_no_module_level_import_cycle():
    """A module-level import cycle makes import order matter (a half-initialised module is read)."""
    bad = _new_cycles(SRC)
    assert not bad, "module-level import cycles:\n  " + "\n  ".join(" <-> ".join(c) for c in bad)


def test_a_planted_cycle_is_found(tmp_path, monkeypatch):
    fake = tmp_path / "src"
    monkeypatch.setitem(globals(), "SRC", fake)
    (fake / "rlx" / "ops").mkdir(parents=True)
    (fake / "rlx" / "__init__.py").write_text("")
    (fake / "rlx" / "ops" / "__init__.py").write_text("")
    (fake / "rlx" / "ops" / "a.py").write_text("from rlx.ops import b\n")
    (fake / "rlx" / "ops" / "b.py").write_text("def f():\n    pass\n\n\nfrom .a import f as g  # noqa\n")
    (fake / "rlx" / "ops" / "c.py").write_text("def f():\n    from rlx.ops import a\n")  # function-level: no cycle
    assert _new_cycles(fake) == [["rlx.ops.a", "rlx.ops.b"]]


# ------------------------------------------------------------------------- module sizes
MAX_LINES = 800
#: a module over MAX_LINES needs a reason at its top: a line starting "Size:" in its docstring


def _large(src: pathlib.Path) -> dict[str, int]:
    sizes = {str(p.relative_to(src)): len(p.read_text(encoding="utf-8").splitlines()) for p in (src / "rlx").rglob("*.py")}
    return {k: n for k, n in sizes.items() if n > MAX_LINES}


def test_no_module_over_800_lines_without_a_reason():
    bad = []
    for rel, n in sorted(_large(SRC).items()):
        doc = ast.get_docstring(ast.parse((SRC / rel).read_text(encoding="utf-8"))) or ""
        if not any(line.startswith("Size:") for line in doc.splitlines()):
            bad.append(f"{rel}: {n} lines, no 'Size:' reason in its docstring")
    assert not bad, "\n  ".join(["modules over 800 lines:", *bad])
    assert len(_large(SRC)) <= 2, f"more than two modules over {MAX_LINES} lines: {sorted(_large(SRC))}"


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


# ---------------------------------------------------------------------- op-name literals
# Rule: outside ``ops/`` (where each op is defined once), the registry (``ir/opdef.py``) and the
# backend tables (jax / torch lowerings, the ONNX exporter's emitters), code does not decide by
# spelling an op's name. An *op-name literal* is a ``str`` constant equal to a registered op's name
# that is used as a decision on an op name:
#   (a) an operand of a comparison (``==``, ``!=``, ``in``, ``not in``) one of whose operands is an
#       ``.op`` attribute or a variable named ``op`` -- directly or as an element of a tuple / list /
#       set literal or a ``frozenset(...)`` / ``set(...)`` / ``tuple(...)`` of one; or
#   (b) an element of such a collection assigned at module level that holds two or more op names
#       (a per-op list kept outside the registry).
# Not counted: docstrings and messages (never compared), building a node by name (``g.append("scan",
# ...)``), foreign names mapped to ops in a reader's table, attribute values that happen to spell an
# op (``mode="linear"``), and the graph's own structure: the source ops (``input`` / ``param`` /
# ``constant``) and ``result``, which the IR defines and every pass walks.
# Instead read the fact from the op's OpDef (``family``, ``flags``, ``precision``, a rewrite hook).
OP_LITERAL_HOMES = (
    "rlx/ops/", "rlx/ir/opdef.py",
    "rlx/backends/jax/table.py", "rlx/backends/jax/lowering",
    "rlx/backends/torch_backend/lowering",
    "rlx/backends/onnx/exporter.py", "rlx/backends/onnx/export_",
)
#: modules still naming ops, with how many literals and why; a ratchet: the count may only go down
#: (a module over its count fails: a new literal; under it fails too: lower the count here).
OP_LITERAL_ALLOWED: dict[str, tuple[int, str]] = {}


def _op_names() -> frozenset[str]:
    import rlx  # noqa: F401  (registers every op)
    from rlx.ir.opdef import all_ops

    return frozenset(o.name for o in all_ops() if o.family != "sources" and o.name != "result")


def _named_ops(node: ast.AST, names: frozenset[str]) -> list[ast.Constant]:
    """The op-name constants of ``node``: itself, or the elements of a collection literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for e in node.elts for c in _named_ops(e, names)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple") \
            and len(node.args) == 1:
        return _named_ops(node.args[0], names)
    return []


def _is_op(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "op") or (isinstance(node, ast.Name) and node.id == "op")


def op_literals(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of every op-name literal in ``source`` (the rule above)."""
    tree = ast.parse(source)
    found: dict[int, ast.Constant] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_op(s) for s in sides):
                found.update((id(c), c) for s in sides for c in _named_ops(s, names))
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        listed = _named_ops(value, names) if value is not None and not isinstance(value, ast.Constant) else []
        if len(listed) >= 2:
            found.update((id(c), c) for c in listed)
    return sorted((c.lineno, c.value) for c in found.values())


def _op_literal_counts(src: pathlib.Path, names: frozenset[str]) -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted((src / "rlx").rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith(OP_LITERAL_HOMES):
            continue
        hits = op_literals(path.read_text(encoding="utf-8"), names)
        if hits:
            out[rel] = hits
    return out


def test_no_op_name_literals_outside_ops_and_backend_tables():
    found = _op_literal_counts(SRC, _op_names())
    bad = []
    for rel, hits in found.items():
        allowed = OP_LITERAL_ALLOWED.get(rel, (0, ""))[0]
        if len(hits) > allowed:
            bad.append(f"{rel}: {len(hits)} op-name literals (allowed {allowed}): "
                       + ", ".join(f"{line}:{name}" for line, name in hits))
    stale = [f"{rel}: allowed {n}, found {len(found.get(rel, []))} (lower the count)"
             for rel, (n, _) in OP_LITERAL_ALLOWED.items() if len(found.get(rel, [])) < n]
    assert not bad, "op-name literals outside ops/ and the backend tables (read OpDef instead):\n  " + "\n  ".join(bad)
    assert not stale, "the op-literal allow-list is stale:\n  " + "\n  ".join(stale)


@pytest.mark.parametrize("source, expect", [
    ("def f(n):\n    return n.op == 'softmax'\n", [(2, "softmax")]),
    ("def f(n):\n    return n.op in ('matmul', 'conv2d')\n", [(2, "conv2d"), (2, "matmul")]),
    ("def f(op):\n    return op not in frozenset({'reduce'})\n", [(2, "reduce")]),
    ("KNOWN = frozenset({'softmax', 'layer_norm'})\n", [(1, "layer_norm"), (1, "softmax")]),
    ("def f(n, g):\n    '''softmax'''\n    g.append('softmax', [])\n    return n.mode == 'linear'\n", []),
    ("def f(n):\n    return n.op == 'param' or n.op == 'result'\n", []),
    ("def f(n):\n    raise ValueError(f'{n.op} is not softmax')\n", []),
    # a pattern row or an OpDef fact names the op in ops/: reading it is no literal
    ("def f(n):\n    return n.op == CHAIN.anchor or SPLIT in get_op(n.op).flags\n", []),
    ("def f(n):\n    return n.op in ('softmax', CHAIN.anchor)\n", [(2, "softmax")]),
])
def test_the_op_literal_rule(source, expect):
    assert op_literals(source, frozenset({"softmax", "matmul", "conv2d", "reduce", "layer_norm", "linear"})) == expect
