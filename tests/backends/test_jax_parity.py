"""Parity of the JAX backend with ``rlx.run`` over every op case of the registry (tests/opcases.py).

float64 policy: the op cases mostly feed float64 (for their oracles). The parity target of
the JAX backend is float32, so every case is rebuilt from a float32 feed (integer and bool
operands kept) and must match ``rlx.run`` on the same graph within 1e-5. A graph that
holds f64 / i64 tensors runs under a scoped ``jax.enable_x64`` (see
rlx.backends.jax.executable), so the f64 path is checked too, on a sample of the cases
as written.

Cost: one XLA compilation per case would take minutes on two cores, so cases are merged
into one graph per batch (leaves renamed, see jax_cases.merge) and each batch is compiled
once through ``rlx.compile(backend="jax")``; a failure names every mismatching case.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import rlx  # noqa: E402
from backends.jax_cases import assert_close, compile_fn, f32_variant, merge  # noqa: E402
from opcases import collect  # noqa: E402
from rlx.backends.jax import DECOMPOSED, LEAVES, LOWERINGS, REFUSED, coverage  # noqa: E402

CASES = collect().cases
BATCH = 40


def _batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _run_batch(cases, variant) -> None:
    built = [(c, *variant(c)) for c in cases]
    merged, renames, spans = merge([b[1] for b in built], name="parity")
    inputs, params = {}, {}
    for (_, _, ins, ps), names in zip(built, renames):
        inputs.update({names[k]: v for k, v in ins.items()})
        params.update({names[k]: v for k, v in ps.items()})
    got = compile_fn()(merged, backend="jax").run(inputs=inputs, params=params)
    failures = []
    for (case, g, ins, ps), span in zip(built, spans):
        want = rlx.run(g, ins, ps)
        try:
            assert_close(got[span], want)
        except AssertionError as exc:
            failures.append(f"{case.id}: {str(exc).strip()[:600]}")
    assert not failures, f"{len(failures)} case(s) differ from rlx.run:\n" + "\n".join(failures)


@pytest.mark.parametrize("batch", _batches(CASES, BATCH), ids=lambda b: f"{b[0].id}..{b[-1].id}")
def test_parity_float32(batch):
    _run_batch(batch, f32_variant)


def _as_written(case):
    g, _ = case.graph()
    inputs, params = case.split_feed()
    return g, inputs, params


def test_parity_float64_sample():
    """Every 12th case as written (mostly float64): run under scoped x64, dtypes kept."""
    sample = [c for c in CASES[::12] if any(v.dtype in (np.float64, np.int64) for v in c.feed.values())]
    assert sample
    _run_batch(sample, _as_written)


def test_every_op_lowered_or_refused():
    """Registry walk: each op has a JAX lowering, a decomposition lowering, a leaf binding or a documented refusal."""
    table = coverage()
    missing = sorted(op.name for op in rlx.all_ops() if op.name not in table)
    assert not missing, f"ops with neither a JAX lowering nor a documented refusal: {missing}"
    for name, reason in REFUSED.items():
        assert rlx.get_op(name) and len(reason) > 20, f"refusal of {name!r} needs a reason"
    assert not set(LOWERINGS) & set(REFUSED)
    for name in DECOMPOSED:
        assert rlx.get_op(name).decompose is not None, f"{name} is lowered by decomposition but has none"


def test_every_lowering_has_a_parity_case():
    handled = (set(LOWERINGS) | set(DECOMPOSED) | set(LEAVES)) & {op.name for op in rlx.all_ops()}
    untested = sorted(handled - {c.op for c in CASES} - {"constant"})
    assert not untested, f"lowered ops without an op case (add one in tests/ops/cases_*.py): {untested}"


def test_refused_op_raises_naming_it():
    from rlx.backends.jax.executable import lower_node

    g = rlx.Graph("hir", stage="hir")
    name = next(iter(REFUSED))
    node = rlx.Node(0, name, {}, (), rlx.TensorType((1,), "f32"))
    with pytest.raises(rlx.RlxError, match=name):
        lower_node(node, [], node.type)
    assert g.stage is rlx.GraphStage.HIR
