"""Where things live (docs/architecture.md, issue #33's done-when facts not in test_layering.py):
readers of other formats live in ``rlx.frontends``, never in ``rlx.backends``; and the backends bind the
composite rows of ``rlx.ops.rows`` instead of writing a softmax or a normalisation out again (a library's
fused kernel, ``torch.layer_norm`` / ``F.group_norm`` / ``torch.softmax``, is a call, not a formula).
Read from the parsed source; the formula detector is checked on ``ops/rows.py``, where the formulas live."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rlx"

# ------------------------------------------------------------------------- readers in frontends
#: what only a reader does: parse a model file / an exported program
_READER_CALLS = frozenset({"ParseFromString", "load_model", "load_model_from_string", "load_from_string"})
_READER_NAMES = ("import_", "torch_import", "pt2", "reader", "loader")
_READER_ENTRIES = frozenset({"import_model", "import_runnable", "import_program", "from_upstream_json"})


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
    return names


def _dotted_calls(tree: ast.AST) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}


def test_no_reader_module_under_backends():
    bad = []
    for path in sorted((SRC / "backends").rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if path.stem.startswith(_READER_NAMES) or any(n in path.stem for n in ("_import", "reader")):
            bad.append(f"{rel}: named like a reader")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parsing = _calls(tree) & _READER_CALLS | {c for c in _dotted_calls(tree) if c in ("onnx.load", "torch.export.load")}
        if parsing:
            bad.append(f"{rel}: parses model files ({', '.join(sorted(parsing))})")
        entry = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)} & _READER_ENTRIES
        if entry:
            bad.append(f"{rel}: defines a reader entry point ({', '.join(sorted(entry))})")
    assert not bad, "readers of other formats belong in rlx.frontends:\n  " + "\n  ".join(bad)


def test_the_readers_are_in_frontends():
    """The positive side: each reader the docs name is a frontends module (so the check above is not vacuous)."""
    for rel in ("frontends/onnx/importer.py", "frontends/torch/importer.py", "frontends/torch/pt2_archive.py",
                "frontends/upstream/reader.py"):
        assert (SRC / rel).is_file(), rel
    assert "ParseFromString" in _calls(ast.parse((SRC / "frontends/onnx/loading.py").read_text(encoding="utf-8")))


# ------------------------------------------------------------------ composite formulas in ops/rows
_MAX = frozenset({"max", "amax", "nanmax", "reduce_max"})
_MEAN = frozenset({"mean", "nanmean", "reduce_mean"})
_SQRT = frozenset({"sqrt", "rsqrt"})
_EXP = frozenset({"exp", "exp2"})


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


class _Formulas(ast.NodeVisitor):
    """Softmax (``exp(x - max)``, ``e / sum(e)`` of such an ``e``, ``x - logsumexp``) and normalisation
    (``x - mean(x)``, ``sqrt(var + eps)``) written out, per function; a name bound in the function to a
    value counts as that value (``m = x.max(...); exp(x - m)``)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, str]] = []
        self._where = "<module>"
        self._bound: dict[str, ast.AST] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        saved = self._where, self._bound
        self._where, self._bound = node.name, {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                self._bound[sub.targets[0].id] = sub.value
        self.generic_visit(node)
        self._where, self._bound = saved

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _called(self, node: ast.AST, depth: int = 0) -> set[str]:
        """The functions called in ``node``, following names bound in the function (a few levels)."""
        out = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                out.add(_name(sub))
            elif isinstance(sub, ast.Name) and depth < 3 and sub.id in self._bound and self._bound[sub.id] is not node:
                out |= self._called(self._bound[sub.id], depth + 1)
        return out

    def _mentions_eps(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and "eps" in sub.id.lower():
                return True
            if isinstance(sub, ast.Constant) and sub.value == "eps":
                return True
        return False

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node)
        arg = node.args[0] if node.args else None
        if name in _EXP and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub) and self._called(arg.right) & _MAX:
            self.found.append((self._where, node.lineno, "softmax: exp(x - max)"))
        if name in _SQRT and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and self._mentions_eps(arg):
            self.found.append((self._where, node.lineno, "normalisation: sqrt(var + eps)"))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Sub):
            right = self._called(node.right)
            if right & _MEAN:
                self.found.append((self._where, node.lineno, "normalisation: x - mean(x)"))
            if right & {"logsumexp", "log_sum_exp"}:
                self.found.append((self._where, node.lineno, "log-softmax: x - logsumexp(x)"))
        if isinstance(node.op, ast.Div) and _EXP & self._called(node.left) and "sum" in self._called(node.right) \
                and _MAX & self._called(node.left):
            self.found.append((self._where, node.lineno, "softmax: e / sum(e)"))
        self.generic_visit(node)


def formulas(source: str) -> list[tuple[str, int, str]]:
    """(function, line, what) of every softmax / normalisation formula written in ``source``."""
    v = _Formulas()
    v.visit(ast.parse(source))
    return v.found


def test_the_detector_finds_the_rows():
    """ops/rows.py is where the formulas are written: the detector must see each of them there."""
    where = {f for f, _, _ in formulas((SRC / "ops/rows.py").read_text(encoding="utf-8"))}
    assert {"softmax_of", "log_sum_exp", "log_softmax_of", "norm_stats", "standardize", "rms_norm_of"} <= where, where


@pytest.mark.parametrize("source, what", [
    ("def f(x):\n    m = jnp.max(x, -1, keepdims=True)\n    e = jnp.exp(x - m)\n    return e / e.sum(-1, keepdims=True)\n",
     "softmax"),
    ("def f(x):\n    return x - torch.logsumexp(x, -1, keepdim=True)\n", "log-softmax"),
    ("def f(x, eps):\n    var = x.var(-1, keepdim=True)\n    return x / torch.sqrt(var + eps)\n", "normalisation"),
    ("def f(x):\n    d = x - x.mean(-1, keepdims=True)\n    return d\n", "normalisation"),
])
def test_a_planted_formula_is_found(source, what):
    assert any(w.startswith(what) for _, _, w in formulas(source)), formulas(source)


@pytest.mark.parametrize("source", [
    "def f(x, g, b, eps):\n    return torch.layer_norm(x, (x.shape[-1],), g, b, eps)\n",  # a library fast path
    "def f(x):\n    return rows.softmax_of(JNP, x, -1)\n",  # the row, bound to the namespace
    "def f(s):\n    return jnp.exp(jnp.max(s, 1) - jnp.min(s, 1))\n",  # exp of a max: not a softmax
])
def test_calls_of_rows_and_libraries_are_not_formulas(source):
    assert formulas(source) == []


def test_backends_write_no_softmax_or_normalisation():
    found = []
    for path in sorted((SRC / "backends").rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        found += [f"{rel}:{line} {fn}: {what}" for fn, line, what in formulas(path.read_text(encoding="utf-8"))]
    assert not found, "bind rlx.ops.rows (or call a library kernel) instead:\n  " + "\n  ".join(found)
