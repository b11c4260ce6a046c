"""Every op's shape rule on symbolic dims, walked over the op-case registry (tests/ops/cases_*.py).

Each numeric case is rebuilt with every size >= 2 of its feed replaced by a symbol (the same size,
the same symbol: ``(2, 3)`` and ``(3, 4)`` become ``(d2, d3)`` and ``(d3, d4)``), so the sizes keep
the relations the static case relies on. The symbolic build must verify, and its shapes, with the
symbols bound back to the case's sizes, must equal the static build's (whose numbers the registry
checks against oracles). A rule that crashes on a symbolic dim fails at once; a rule may refuse a
symbolic case with a ShapeError (a reshape to literal sizes cannot be proven to fit ``d2*d3``),
but every op must take at least one of its cases symbolically unless STATIC_ONLY says why not.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import rlx
from opcases import collect
from rlx.ir.errors import InternalError
from rlx.ir.symbolic import symbol

ALL = collect()

#: Ops whose rule needs static sizes by design, with the reason. Kept exact: an op listed here that
#: takes a case symbolically fails the coverage test (drop it from the list then).
_SPLAT = "splats are flat packed vectors whose static length decides the splat count (only batch_dims may be symbolic)"
STATIC_ONLY: dict[str, str] = {
    "constant": "no operands: its shape is its data's",
    "dequant_moe_weights": "the packed byte count decides the expert count, so w_packed is static",
    "gaussian_splat_prepare": _SPLAT,
    "gaussian_splat_rasterize": _SPLAT,
    "gaussian_splat_render_backward": _SPLAT,
    "gaussian_splat_render_jvp": _SPLAT,
}


def _sizes(case) -> list[int]:
    """The case's sizes >= 2, in order of first appearance (leading, batch-like axes first)."""
    return list(dict.fromkeys(d for arr in case.feed.values() for d in arr.shape if d >= 2))


def _symbolic_case(case, sizes: list[int]) -> tuple[rlx.Graph, dict[str, int]]:
    """``case`` built on operands whose ``sizes`` are symbols; and the binding that gives them back."""
    names = {n: symbol(f"d{n}") for n in sizes}
    g = rlx.Graph("symbolic_" + case.id.replace("-", "_"))
    handles = {}
    for key, arr in case.feed.items():
        declare = g.param if key in case.params else g.input
        handles[key] = declare(key, tuple(names.get(d, d) for d in arr.shape), rlx.DType.of(arr.dtype))
    out = case.build(g, **handles)
    g.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    return g, {f"d{n}": n for n in sizes}


def _try(case, sizes: list[int]) -> str | None:
    """None when ``case`` builds on symbolic ``sizes`` and binds back to its static shapes, else why not;
    raises on a crash or a wrong symbolic shape."""
    try:
        g, binding = _symbolic_case(case, sizes)
    except InternalError:
        raise
    except (rlx.RlxError, TypeError, ValueError) as exc:  # refused, or the case's build needs ints (numpy data of x.shape)
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    rlx.verify(g)
    got = [v.node.type for v in g.outputs]
    bound = [rlx.TensorType(t.shape.bind(binding), t.dtype) for t in got]
    want = [v.node.type for v in case.graph()[0].outputs]
    assert bound == want, f"{case.id} on {sorted(binding)}: symbolic {[str(t) for t in got]} binds to {bound}, static {want}"
    return None


def _walk() -> dict[str, dict[str, list[str]]]:
    """op -> {"ok": [case ids], "refused": [why]}. Every case is tried with all its sizes symbolic; an op
    none of whose cases builds that way is tried with one size symbolic at a time (sizes tied to an
    attribute, such as heads x head_dim or a kernel size, stay static then)."""
    seen: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"ok": [], "refused": []})
    for case in ALL.cases:
        why = _try(case, _sizes(case))
        seen[case.op]["refused" if why else "ok"].append(f"{case.id}: {why}" if why else case.id)
    for case in ALL.cases:
        if not seen[case.op]["ok"]:
            for size in _sizes(case):
                if _try(case, [size]) is None:
                    seen[case.op]["ok"].append(f"{case.id} (d{size} only)")
                    break
    return seen


@pytest.fixture(scope="module")
def walked():
    return _walk()


def test_symbolic_shapes_bind_back_to_the_static_ones(walked):
    ok = sum(len(v["ok"]) for v in walked.values())
    assert ok >= len(ALL.cases) // 2, f"only {ok} of {len(ALL.cases)} cases build symbolically"


def test_every_op_takes_symbolic_dims(walked):
    lacking = sorted(op for op, v in walked.items() if not v["ok"] and op not in STATIC_ONLY)
    assert not lacking, "ops whose rule takes none of their cases symbolically: " + "; ".join(
        f"{op} ({walked[op]['refused'][0]})" for op in lacking)
    stale = sorted(op for op in STATIC_ONLY if walked[op]["ok"])
    assert not stale, f"listed as static-only but built symbolically: {stale}"
