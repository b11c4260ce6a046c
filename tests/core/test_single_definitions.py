"""Formula constants are written once: each literal below occurs in one module of src/rlx, the one
that names it (every other consumer imports the name). Read from the parsed source, so a copy
pasted anywhere in the package fails here."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rlx"

#: literal -> (what it is, the module that defines it)
CONSTANTS = {
    -1e9: ("the masked attention score (MASK_FILL)", "ops/rows.py"),
    0.044715: ("the tanh-gelu cubic coefficient (GELU_TANH_COEFF)", "ops/kinds.py"),
    math.sqrt(2.0 / math.pi): ("sqrt(2/pi) of the tanh gelu (SQRT_2_OVER_PI)", "ops/kinds.py"),
}
#: the default epsilon of the normalisations, as an attribute default (NORM_EPS)
EPS_HOME = "ops/common.py"


def _value(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return None if inner is None else -inner
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sqrt"
            and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp)):  # math.sqrt(2.0 / math.pi)
        expr = ast.unparse(node.args[0]).replace(" ", "")
        return math.sqrt(2.0 / math.pi) if expr in ("2.0/math.pi", "2/math.pi") else None
    return None


def _scan() -> tuple[dict[float, dict[str, list[int]]], list[str]]:
    """One walk over the package: where each watched literal occurs, and attribute defaults of 1e-5."""
    found: dict[float, dict[str, list[int]]] = {c: {} for c in CONSTANTS}
    eps_defaults = []
    for path in SRC.rglob("*.py"):
        name = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = _value(node)  # (the constant inside -1e9 is +1e9: counted once)
            if value in found:
                found[value].setdefault(name, []).append(node.lineno)
            if isinstance(node, ast.keyword) and node.arg == "default" and _value(node.value) == 1e-5:
                eps_defaults.append(f"{name}:{node.value.lineno}")
    return found, eps_defaults


FOUND, EPS_DEFAULTS = _scan()


@pytest.mark.parametrize("literal", list(CONSTANTS), ids=[v[0] for v in CONSTANTS.values()])
def test_formula_constant_is_defined_once(literal):
    what, home = CONSTANTS[literal]
    found = dict(FOUND[literal])
    assert list(found) == [home], f"{what} is written in {found}; define it in {home} and import it"
    assert len(found[home]) == 1, f"{what} is written {len(found[home])} times in {home}"


def test_normalisation_eps_default_is_one_name():
    assert not EPS_DEFAULTS, f"attribute defaults spell 1e-5 out (use NORM_EPS from {EPS_HOME}): {EPS_DEFAULTS}"
    assert "NORM_EPS = 1e-5" in (SRC / EPS_HOME).read_text(encoding="utf-8")
