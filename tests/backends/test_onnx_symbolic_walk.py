"""Every backend runs the graphs the reference runs, symbolic dims included (issue #34 item 4).

The op-case registry (tests/ops/cases_*.py) is walked with the leading size of the inputs made a
symbol ``n`` (every input whose leading size is that size gets it); each case that builds that way
is run by ``rlx.run`` (checked against the case's own oracle) and by each backend's compiled
executable, checked against ``rlx.run``. Only failures that are due to the symbolic dim count: a
backend that refuses or miscomputes the case's static graph too is not this test's business
(those are covered by the backends' own suites). The default suite runs a sample; ``-m slow`` the
whole walk. Known gaps are listed with the reason in KNOWN.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect
from rlx.ir.symbolic import symbol

ALL = collect()
BACKENDS = ("numpy", "torch", "onnxruntime", "jax")

_CUMPROD = "a cumulative product along a symbolic axis needs ONNX CumProd (opset 26)"
#: (case id, backend) -> why the symbolic case does not run there (kept exact: a listed case that passes fails)
KNOWN: dict[tuple[str, str], str] = {
    ("cumulative-prod_exclusive_reverse", "onnxruntime"): _CUMPROD,
}


def _symbolic_graph(case) -> rlx.Graph | None:
    """The case built with its inputs' leading size as the symbol ``n``; None when it has none or refuses."""
    inputs = {k: v for k, v in case.feed.items() if k not in case.params}
    lead = next((v.shape[0] for v in inputs.values() if v.ndim and v.shape[0] >= 2), None)
    if lead is None:
        return None
    g = rlx.Graph("sym_" + case.id.replace("-", "_"))
    handles = {}
    for key, arr in case.feed.items():
        if key in case.params:
            handles[key] = g.param(key, arr.shape, rlx.DType.of(arr.dtype))
        else:
            shape = tuple(symbol("n") if i == 0 and d == lead else d for i, d in enumerate(arr.shape))
            handles[key] = g.input(key, shape, rlx.DType.of(arr.dtype))
    try:
        out = case.build(g, **handles)
    except (rlx.RlxError, TypeError, ValueError):  # a rule refusing the symbolic dim (tests/ops/test_symbolic_walk.py)
        return None
    g.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    return g


def _close(got, want, case) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        return bool(np.allclose(got, want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5), equal_nan=True))
    return bool(np.array_equal(got, want))


def _runs(g, backend, inputs, params, want, case) -> bool:
    out = rlx.compile(g, backend=backend).run(inputs, params)
    return len(out) == len(want) and all(_close(o, w, case) for o, w in zip(out, want))


def _walk_case(case, backends) -> list[str]:
    """Problems of ``case`` on symbolic sizes (empty when it runs everywhere it runs statically)."""
    g = _symbolic_graph(case)
    if g is None:
        return []
    inputs, params = case.split_feed()
    ref = rlx.run(g, inputs, params)
    expected = case.expected()
    assert all(_close(r, e, case) for r, e in zip(ref, expected)), f"{case.id}: rlx.run on symbolic sizes vs the oracle"
    problems = []
    for backend in backends:
        try:
            if not _runs(case.graph()[0], backend, inputs, params, ref, case):
                continue  # the static graph is already wrong there: not a symbolic-dim problem
        except Exception:
            continue  # the static graph is refused there
        try:
            ok = _runs(g, backend, inputs, params, ref, case)
            why = None if ok else "wrong numbers"
        except Exception as exc:
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
        known = (case.id, backend) in KNOWN
        if why is not None and not known:
            problems.append(f"{case.id} on {backend}: {why}")
        elif why is None and known:
            problems.append(f"{case.id} on {backend} runs now: drop it from KNOWN")
    return problems


SAMPLE = ALL.cases[::40]


@pytest.mark.parametrize("case", SAMPLE, ids=[c.id for c in SAMPLE])
def test_symbolic_leading_dim_sample(case):
    assert not _walk_case(case, ("numpy", "onnxruntime"))


_BODIES = ("if_-then_taken", "if_-else_taken", "if_-int_pred", "while_-bounded", "while_-unbounded_counter",
           "custom_fn-body_only")  # bodies typed with the outer symbols: planned once the symbols are bound


@pytest.mark.parametrize("case", [c for c in ALL.cases if any(c.id == k[0] for k in KNOWN) or c.id in _BODIES] +
                         [c for c in ALL.cases if c.op in ("attention", "rope", "max_pool2d_with_indices",
                                                             "advanced_index_put")][:6],
                         ids=lambda c: c.id)
def test_symbolic_onnxruntime_export_of_shape_ops(case):
    """The exporter's runtime sizes (attention masks, rope tables, pooling indices, index_put) and the KNOWN list."""
    assert not _walk_case(case, ("numpy", "onnxruntime"))


@pytest.mark.slow
def test_symbolic_leading_dim_walk_every_backend():
    problems = [p for case in ALL.cases for p in _walk_case(case, BACKENDS)]
    assert not problems, "\n".join(problems)
