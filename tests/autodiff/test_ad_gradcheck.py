"""Finite-difference checks (float64) of every VJP and JVP rule, over the registry's op cases.

Every op case of every family (tests/ops/cases_*.py) plus a few extras is differentiated
through ``rlx.grad_with_loss`` / ``rlx.jvp`` and compared with central differences of
``rlx.run``. An op added later without checked rules fails here (unless its family is in
``adcheck.EXPECTED_MISSING``, the one list phase 2 empties).
"""

from __future__ import annotations

import numpy as np
import pytest
from adcheck import (
    ALL,
    CASES,
    EXPECTED_MISSING,
    LOWERED_OPS,
    NO_GRAD,
    checkable,
    diff_names,
    expected_missing,
    fd_directional,
    fd_gradient,
    loss_graph,
    missing_rules,
    refusing,
    run_split,
)

import rlx

FULL_FD_LIMIT = 48  # elements per feed up to which the full gradient is differenced; random directions above


def _skip_or_xfail(case, hook: str) -> rlx.Graph:
    why = checkable(case)
    if why is not None:
        pytest.skip(why)
    g, _, _ = loss_graph(case)
    missing = missing_rules(g, hook)
    if missing and expected_missing(missing):
        pytest.xfail(f"phase 2: no {hook} rule yet for {sorted(missing)}")
    return g


def _refused(g: rlx.Graph, hook: str, differentiate) -> bool:
    """True (after checking that it raises, naming the op) when a rule of ``g`` refuses by design."""
    refused = refusing(g, hook)
    if refused:
        with pytest.raises(rlx.AutodiffError, match=refused[0]):
            differentiate()
    return bool(refused)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vjp_matches_finite_differences(case):
    g = _skip_or_xfail(case, "vjp")
    names = diff_names(case)
    if _refused(g, "vjp", lambda: rlx.grad_with_loss(g, wrt=list(names))):
        return
    bwd = rlx.grad_with_loss(g, wrt=list(names))
    rlx.verify(bwd)
    assert [tuple(o.shape) for o in bwd.outputs[1:]] == [tuple(case.feed[n].shape) for n in names]
    assert bwd.inputs()["d_output"].shape == ()
    feed = dict(case.feed)
    loss, *grads = run_split(bwd, feed, case.params, {"d_output": np.array(1.0)})
    np.testing.assert_allclose(loss, run_split(g, feed, case.params)[0], rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(3)
    for name, got in zip(names, grads):
        if case.feed[name].size <= FULL_FD_LIMIT:
            np.testing.assert_allclose(got, fd_gradient(g, feed, case.params, name), rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            for _ in range(3):
                d = rng.standard_normal(case.feed[name].shape)
                fd = fd_directional(g, feed, case.params, {name: d})[0]
                np.testing.assert_allclose(np.sum(got * d), fd, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_jvp_matches_finite_differences(case):
    _skip_or_xfail(case, "jvp")
    names = diff_names(case)
    g, outs = case.graph()
    if _refused(g, "jvp", lambda: rlx.jvp(g, wrt=list(names))):
        return
    fwd = rlx.jvp(g, wrt=list(names))
    rlx.verify(fwd)
    assert set(fwd.inputs()) == set(g.inputs()) | {f"t_{n}" for n in names}
    rng = np.random.default_rng(5)
    direction = {n: rng.standard_normal(case.feed[n].shape) for n in names}
    inputs, params = case.split_feed()
    got = rlx.run(fwd, {**inputs, **{f"t_{n}": direction[n] for n in names}}, params)
    k = len(outs)
    primal, tangent = got[:k], got[k:]
    for p, want in zip(primal, rlx.run(g, inputs, params)):
        np.testing.assert_allclose(p, want, rtol=1e-12, atol=1e-14)
    fd = fd_directional(g, dict(case.feed), case.params, direction)
    for o, t, f in zip(outs, tangent, fd):
        assert t.shape == tuple(o.shape)
        if o.dtype == rlx.f64:
            ok = np.isfinite(f)  # e.g. the max of an empty axis is -inf: no finite difference there
            np.testing.assert_allclose(t[ok], f[ok], rtol=1e-5, atol=1e-6)


def test_tangent_inputs_of_params_are_inputs():
    # tangent leaves are always *inputs* named t_<name>, for params too
    g = rlx.Graph("p")
    w = g.param("w", (3,), "f64")
    g.set_outputs([g.sin(w)])
    fwd = rlx.jvp(g, ["w"])
    assert "t_w" in fwd.inputs() and "w" in fwd.params()


@pytest.mark.parametrize("case", [c for c in CASES if c.op == "activation" and c.id != "activation-round_half_away"], ids=lambda c: c.id)
def test_vjp_jvp_transpose_identity(case):
    """<J v, u> == <v, Jᵀ u>: the JVP and VJP rules agree with each other."""
    if checkable(case) is not None:
        pytest.skip(checkable(case))
    names = diff_names(case)
    g, outs = case.graph()
    rng = np.random.default_rng(11)
    v = {n: rng.standard_normal(case.feed[n].shape) for n in names}
    u = rng.standard_normal(tuple(outs[0].shape))
    jv = rlx.run(rlx.jvp(g, list(names)), {**case.feed, **{f"t_{n}": v[n] for n in names}})[1]
    h = rlx.Graph("vjp")
    leaves = {k: h.input(k, a.shape, "f64") for k, a in case.feed.items()}
    out = case.build(h, **leaves)
    h.set_outputs([h.sum(out * h.constant(u))])
    grads = rlx.run(rlx.grad(h, list(names)), {**case.feed, "d_output": np.array(1.0)})
    np.testing.assert_allclose(np.sum(jv * u), sum(np.sum(gr * v[n]) for gr, n in zip(grads, names)), rtol=1e-10)


def test_round_is_straight_through():
    g = rlx.Graph("r")
    x = g.input("x", (4,), "f64")
    g.set_outputs([g.sum(g.round(x) * x)])
    xs = np.array([0.4, 1.6, -2.5, 3.0])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": xs, "d_output": np.array(1.0)})
    np.testing.assert_allclose(dx, np.sign(xs) * np.floor(np.abs(xs) + 0.5) + xs)


# ------------------------------------------------------------------------------ coverage
def _needs_rules(op: rlx.OpDef) -> bool:
    return op.level == "mir" and op.name not in LOWERED_OPS and NO_GRAD not in op.flags


def test_every_differentiable_op_has_rules_or_is_expected_missing():
    lacking = []
    for op in rlx.all_ops():
        if op.family in ("test", "custom"):
            continue
        if op.level == "fused":
            assert op.decompose is not None, f"fused op {op.name} has no decompose hook, so autodiff cannot unfuse it"
            continue
        if _needs_rules(op) and op.family not in EXPECTED_MISSING:
            missing = [h for h in ("vjp", "jvp", "batch") if getattr(op, h) is None]
            if missing:
                lacking.append(f"{op.name} ({op.family}): {missing}")
        if NO_GRAD in op.flags and op.expected_arity({}) not in (0, None) and op.batch is None:
            lacking.append(f"{op.name} ({op.family}): no_grad op without a batch rule")
    assert not lacking, "ops without autodiff rules: " + "; ".join(lacking)


def test_expected_missing_list_is_current():
    stale = []
    for family in sorted(EXPECTED_MISSING):
        ops = [op for op in rlx.all_ops() if op.family == family and _needs_rules(op)]
        if ops and all(op.vjp and op.jvp and op.batch for op in ops):
            stale.append(family)
    assert not stale, f"families {stale} have all their rules now: remove them from adcheck.EXPECTED_MISSING"


def test_every_op_with_a_vjp_rule_has_a_gradient_checked_case():
    checked = {c.op for c in CASES if checkable(c) is None}
    unchecked = sorted(op.name for op in rlx.all_ops()
                       if op.vjp is not None and not getattr(op.vjp, "refusal", None) and op.name not in checked)
    assert not unchecked, f"ops with a VJP rule but no float64 op case to gradient-check: {unchecked}"


def test_case_registry_is_shared():
    assert ALL.cases, "tests/ops/cases_*.py should provide op cases"
