"""Shared helpers of the autodiff tests: which op cases are checkable, scalar losses,
finite differences in float64, and the ONE list of op families whose rules are not
written yet (phase 2 of the autodiff issue empties it)."""

from __future__ import annotations

import numpy as np

import rlx
from opcases import OpCase, collect
from rlx.autodiff.prepare import LOWERED_OPS  # noqa: F401  (re-exported for the tests)
from rlx.autodiff.rules import NO_GRAD

#: Families whose VJP / JVP / batching rules come in phase 2. An op of these families that
#: already has its rules is checked like any other; the others are expected failures.
#: A test fails when a family here has no op left without rules (remove it then).
EXPECTED_MISSING: frozenset[str] = frozenset()

#: Cases that finite differences cannot check, with the reason.
NOT_FD_CHECKABLE = {
    "activation-round_half_away": "straight-through estimator: the rule is the identity by design (checked separately)",
}

ALL = collect()


def _extra_cases() -> list[OpCase]:
    """Cases for rules the op-family case files do not reach in float64."""
    x = np.random.default_rng(7).standard_normal((3, 4))
    return [
        OpCase("cast", "ad_f64_to_f64", lambda g, x: g.cast(x, to="f64") * x, {"x": x}, lambda x: x * x),
        OpCase("cast", "ad_int_roundtrip_is_constant", lambda g, x: g.cast(g.cast(x, to="i32"), to="f64") + x, {"x": x},
               lambda x: np.trunc(x) + x),
        OpCase("where", "ad_both_branches", lambda g, a, b: g.where(g.gt(a, b), a * b, g.sin(b)),
               {"a": x, "b": np.random.default_rng(8).standard_normal((4,))},
               lambda a, b: np.where(a > b, a * b, np.sin(b))),
        *_complex_cases(),
    ]


def _complex_cases() -> list[OpCase]:
    """Real f64 feeds through the c64 ops. c64 rounds like f32, so the feeds are ~1e-5: the FD step
    (1e-6) is then a large relative change and the rounding far below the check's tolerance. The
    functions are at most quadratic (central differences exact) and scaled by 1e10 (so that the
    absolute tolerance does not hide an error)."""
    r = np.random.default_rng(9)
    x, y = 1e-5 * r.standard_normal((3, 4)), 1e-5 * r.standard_normal((3, 4))

    def real(g, v):
        return g.cast(v, to="f64") * 1e10

    def c(g, v):
        return g.cast(v, to="c64")

    return [
        OpCase("fft", "ad_spectral_energy", lambda g, x: real(g, g.complex_norm_sq(g.fft(c(g, x), axis=0))), {"x": x},
               lambda x: np.abs(np.fft.fft(x, axis=0)) ** 2 * 1e10, rtol=1e-5, atol=1e-5),
        OpCase("fft", "ad_inverse_ortho_real_part", lambda g, x: real(g, g.fft(c(g, x) * (1 - 2j), inverse=True, norm="ortho")),
               {"x": x}, lambda x: np.real(np.fft.ifft(x * (1 - 2j), norm="ortho")) * 1e10, rtol=1e-5, atol=0.1),
        OpCase("complex_norm_sq", "ad_of_a_complex_mix", lambda g, x, y: real(g, g.complex_norm_sq(c(g, x) * (1 + 2j) + c(g, y))),
               {"x": x, "y": y}, lambda x, y: np.abs(x * (1 + 2j) + y) ** 2 * 1e10, rtol=1e-5, atol=1e-4),
        OpCase("conjugate", "ad_real_part_of_a_product", lambda g, x: real(g, g.conjugate(c(g, x) * (0.5 - 1j)) * (1 + 3j)),
               {"x": x}, lambda x: np.real(np.conj(x * (0.5 - 1j)) * (1 + 3j)) * 1e10, rtol=1e-5, atol=0.1),
    ]


EXTRA = _extra_cases()
CASES = ALL.cases + EXTRA


def is_float64(arr: np.ndarray) -> bool:
    return arr.dtype == np.float64


def diff_names(case: OpCase) -> tuple[str, ...]:
    """Feeds to differentiate: ``case.differentiable`` if set, else every finite float64 feed."""
    if case.differentiable is not None:
        return tuple(case.differentiable)
    return tuple(k for k, v in case.feed.items() if is_float64(v) and np.isfinite(v).all())


def checkable(case: OpCase) -> str | None:
    """None if the case can be gradient-checked in float64; else why not."""
    if case.id in NOT_FD_CHECKABLE:
        return NOT_FD_CHECKABLE[case.id]
    if rlx.get_op(case.op).level == "hir":
        return "HIR op"
    if not diff_names(case):
        return "no finite float64 feed"
    _, outs = case.graph()
    if not any(o.dtype == rlx.f64 for o in outs):
        return "no float64 output"
    if rlx.get_op(case.op).flags & {NO_GRAD}:
        return "op is no_grad"
    return None


def missing_rules(g: rlx.Graph, hook: str) -> set[str]:
    """Ops of the prepared ``g`` (with operands) lacking ``hook`` and not flagged no_grad."""
    prepared = rlx.prepare_graph_for_ad(g)
    out = set()
    for node in prepared.nodes:
        opdef = rlx.get_op(node.op)
        if node.inputs and getattr(opdef, hook) is None and not (hook != "batch" and NO_GRAD in opdef.flags):
            out.add(node.op)
    return out


def refusing(g: rlx.Graph, hook: str) -> list[str]:
    """Ops of the prepared ``g`` whose ``hook`` rule refuses by design (it raises AutodiffError and
    carries ``rule.refusal``, e.g. forward mode through the splat rasterizer)."""
    prepared = rlx.prepare_graph_for_ad(g)
    return sorted({n.op for n in prepared.nodes if getattr(getattr(rlx.get_op(n.op), hook), "refusal", None)})


def expected_missing(ops: set[str]) -> bool:
    """All of these rule-less ops belong to families phase 2 will do."""
    return bool(ops) and all(rlx.get_op(op).family in EXPECTED_MISSING for op in ops)


def loss_graph(case: OpCase, seed: int = 0) -> tuple[rlx.Graph, dict, dict]:
    """The case's graph with loss = Σ sum(out_k · R_k) over its float64 outputs."""
    g, outs = case.graph()
    rng = np.random.default_rng(seed)
    loss = None
    for o in outs:
        if o.dtype != rlx.f64:
            continue
        term = g.sum(o * g.constant(rng.standard_normal(tuple(o.shape))))
        loss = term if loss is None else loss + term
    g.set_outputs([loss])
    inputs, params = case.split_feed()
    return g, inputs, params


def run_split(g: rlx.Graph, feed: dict[str, np.ndarray], params_names: tuple[str, ...], extra: dict | None = None) -> list[np.ndarray]:
    inputs = {k: v for k, v in feed.items() if k not in params_names}
    params = {k: v for k, v in feed.items() if k in params_names}
    return rlx.run(g, {**inputs, **(extra or {})}, params)


def fd_directional(g: rlx.Graph, feed: dict, params_names: tuple[str, ...], direction: dict, eps: float = 1e-6) -> list[np.ndarray]:
    """Central difference of every output of ``g`` along ``direction``."""
    plus = {k: v + eps * direction[k] if k in direction else v for k, v in feed.items()}
    minus = {k: v - eps * direction[k] if k in direction else v for k, v in feed.items()}
    hi, lo = run_split(g, plus, params_names), run_split(g, minus, params_names)
    return [(a - b) / (2 * eps) for a, b in zip(hi, lo)]


def fd_gradient(g: rlx.Graph, feed: dict, params_names: tuple[str, ...], name: str, eps: float = 1e-6) -> np.ndarray:
    """Full central-difference gradient of the scalar output of ``g`` w.r.t. feed ``name``."""
    base = feed[name]
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        d = np.zeros_like(base)
        d[idx] = 1.0
        grad[idx] = fd_directional(g, feed, params_names, {name: d}, eps)[0]
    return grad
