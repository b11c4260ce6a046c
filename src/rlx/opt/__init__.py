"""The optimizer: pass manager, cleanup passes, pattern fusion, elementwise regions, unfuse,
legalization and the fusion report. ``optimize(g)`` runs the default pipeline.

Default order (docs/pipeline.md#pass-order, plus CSE / folding / simplification, which upstream
lacks): [automatic mixed precision, when ``precision=`` names a policy] → [unfuse ops the
backend does not claim] → cse → fold_constants → simplify → dce → the eight fusion patterns and decomposed attention
(each gated on the backend claiming the op it creates) → elementwise regions (marked, then
unfused unless the backend keeps them) → dce.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rlx.ops  # noqa: F401  (registers every op: the claim sets are read from them)
from rlx.ir.graph import Graph
from rlx.ir.opdef import all_ops
from rlx.opt.cleanup import CSE, DCE, FOLD, SIMPLIFY, cse, dce, fold_constants, simplify
from rlx.opt.fold_weights import fold_weights
from rlx.opt.fuse_attention import FUSE_ATTENTION, fuse_decomposed_attention
from rlx.opt.fusion import (
    FUSE_CONV_BIAS_ACT,
    FUSE_MATMUL_BIAS_ACT,
    FUSE_RESIDUAL_LN,
    FUSE_RESIDUAL_RMS,
    FUSE_RMS_NORM_RESHAPE,
    FUSE_SHARED_MATMUL,
    FUSE_SWIGLU,
    FUSE_SWIGLU_DUAL,
    PATTERN_PASSES,
    fuse_conv_bias_act,
    fuse_matmul_bias_act,
    fuse_residual_layer_norm,
    fuse_residual_rms_norm,
    fuse_rms_norm_reshape,
    fuse_shared_input_matmul,
    fuse_swiglu,
    fuse_swiglu_dual_matmul,
)
from rlx.opt.graph_edit import inline_into, promote_params_to_inputs
from rlx.opt.legalize import LEGALIZE_BROADCAST, legalize_broadcast, legalize_for_backend, unclaimed
from rlx.opt.lower import (
    LOWER_CONTROL_FLOW,
    LOWER_DOT_GENERAL,
    REWRITE_FOR_BACKEND,
    lower_control_flow,
    lower_dot_general,
    rewrite_for_backend,
)
from rlx.opt.manager import Pass, PassError, PassResult, PipelineResult, paused_gc, run_passes
from rlx.opt.precision import AMP, POLICIES, auto_mixed_precision, op_class
from rlx.opt.quantize import INSERT_Q_DQ, PROPAGATE_FAKE_QUANT, QuantSpec, insert_q_dq, propagate_fake_quant
from rlx.opt.regions import MARK_REGIONS, mark_elementwise_regions
from rlx.opt.report import FusionReport, MissedFusion
from rlx.opt.unfuse import (
    UNFUSE_ALL,
    UNFUSE_REGIONS,
    unfuse,
    unfuse_elementwise_regions,
    unfuse_fused_for_autodiff,
    unfuse_unclaimed,
)


@dataclass(frozen=True)
class Backend:
    """What a backend accepts. ``claims``: op kinds it runs natively (empty = everything);
    fusion passes creating an unclaimed op are skipped. ``keep_regions``: keep
    ``elementwise_region`` nodes (else they are unfused after marking, as upstream's CPU
    pipeline does). ``max_steps`` / ``max_inputs``: region limits (None = unbounded)."""

    name: str
    claims: frozenset[str] = frozenset()
    keep_regions: bool = False
    max_steps: int | None = None
    max_inputs: int | None = None
    legalize_broadcast: bool = False
    extra: dict = field(default_factory=dict)

    def claims_op(self, op: str) -> bool:
        return not self.claims or op in self.claims


def _native(backend: str) -> frozenset[str]:
    """The ops ``backend`` runs as one kernel: those whose ``OpDef.native_on`` names it."""
    return frozenset(o.name for o in all_ops() if backend in o.native_on)


BACKENDS: dict[str, Backend] = {
    "cpu": Backend("cpu", _native("cpu")),
    "numpy": Backend("numpy", _native("numpy")),
    "metal": Backend("metal", _native("metal"), keep_regions=True),
    "cuda": Backend("cuda", _native("cuda"), keep_regions=True, max_steps=32, max_inputs=16, legalize_broadcast=True),
    "rocm": Backend("rocm", _native("rocm"), keep_regions=True, max_steps=32, max_inputs=16, legalize_broadcast=True),
    "tpu": Backend("tpu", _native("tpu"), keep_regions=True, max_steps=32, max_inputs=16),
    "jax": Backend("jax", frozenset()),
}


def resolve_backend(backend: str | Backend | Iterable[str] | None) -> Backend:
    if backend is None:
        return BACKENDS["cpu"]
    if isinstance(backend, Backend):
        return backend
    if isinstance(backend, str):
        try:
            return BACKENDS[backend]
        except KeyError:
            raise PassError(f"unknown backend {backend!r}; known: {sorted(BACKENDS)} (or pass a claim set)") from None
    return Backend("custom", frozenset(backend))


def default_passes(backend: str | Backend | Iterable[str] | None = None, *, fold: bool = True, fusion: bool = True,
                   precision: str | Mapping[str, Any] | None = None) -> list[Pass]:
    """The default pass list for ``backend`` (see the module docstring); ``precision`` (a policy of
    :mod:`rlx.opt.precision`) puts automatic mixed precision first."""
    b = resolve_backend(backend)
    passes: list[Pass] = [AMP.with_options(policy=precision)] if precision is not None else []
    if b.claims:
        passes.append(Pass("unfuse_unclaimed", unfuse_unclaimed, options={"claims": b.claims}))
    passes.append(CSE)
    if fold:
        passes.append(FOLD)
    passes += [SIMPLIFY, DCE]
    if fusion:
        passes += [p for p in (*PATTERN_PASSES, FUSE_ATTENTION) if all(b.claims_op(op) for op in p.produces)]
        mark = MARK_REGIONS.with_options(max_steps=b.max_steps, max_inputs=b.max_inputs)
        passes.append(mark)
        if not (b.keep_regions and all(b.claims_op(op) for op in MARK_REGIONS.produces)):
            passes.append(UNFUSE_REGIONS)
    if b.legalize_broadcast:
        passes.append(LEGALIZE_BROADCAST)
    passes.append(DCE)
    return passes


def optimize(
    g: Graph,
    passes: Sequence[Pass] | None = None,
    backend: str | Backend | Iterable[str] | None = None,
    *,
    check: bool = True,
    fold: bool = True,
    precision: str | Mapping[str, Any] | None = None,
    return_result: bool = False,
) -> tuple[Graph, FusionReport] | tuple[Graph, FusionReport, PipelineResult]:
    """Run ``passes`` (default: :func:`default_passes` for ``backend`` and ``precision``) on ``g``.

    Returns the optimized graph and a :class:`FusionReport`; with ``return_result`` also
    the :class:`PipelineResult` (its ``id_map`` maps old node ids to new ones). The
    verifier runs after every pass unless ``check=False``. ``g`` is not modified.

    Bodies of control-flow ops (and other graph-valued attributes) are optimized with the
    same passes, recursively (see :mod:`rlx.opt.manager`); the report has one nested report
    per body in ``report.bodies`` (see :class:`FusionReport`).
    """
    with paused_gc():
        return _optimize(g, passes, resolve_backend(backend), check, fold, precision, return_result)


def _optimize(g, passes, b, check, fold, precision, return_result):  # type: ignore[no-untyped-def]
    if passes is not None and precision is not None:
        raise PassError("optimize: give precision= or an explicit pass list (add rlx.opt.AMP to it), not both")
    plist = list(passes) if passes is not None else default_passes(b, fold=fold, precision=precision)
    result = run_passes(g, plist, check=check)
    report = _report(result)
    if return_result:
        return result.graph, report, result
    return result.graph, report


def _report(result: PipelineResult) -> FusionReport:
    """The report of one pipeline run, with a nested report per optimized body."""
    applied: dict[str, dict[str, int]] = {}
    for entry in result.log:
        if any(entry.stats.values()):
            slot = applied.setdefault(entry.name, {})
            for k, v in entry.stats.items():
                slot[k] = slot.get(k, 0) + v
    assert result.source is not None
    report = FusionReport.analyze(result.source, result.graph, applied, ran=[e.name for e in result.log])
    report.bodies = {f"%{nid}.{attr}": _report(sub) for (nid, attr), sub in result.bodies.items()}
    return report


__all__ = [
    "AMP",
    "BACKENDS",
    "CSE",
    "DCE",
    "FOLD",
    "FUSE_ATTENTION",
    "FUSE_CONV_BIAS_ACT",
    "FUSE_MATMUL_BIAS_ACT",
    "FUSE_RESIDUAL_LN",
    "FUSE_RESIDUAL_RMS",
    "FUSE_RMS_NORM_RESHAPE",
    "FUSE_SHARED_MATMUL",
    "FUSE_SWIGLU",
    "FUSE_SWIGLU_DUAL",
    "INSERT_Q_DQ",
    "LEGALIZE_BROADCAST",
    "LOWER_CONTROL_FLOW",
    "LOWER_DOT_GENERAL",
    "MARK_REGIONS",
    "PATTERN_PASSES",
    "POLICIES",
    "PROPAGATE_FAKE_QUANT",
    "REWRITE_FOR_BACKEND",
    "SIMPLIFY",
    "UNFUSE_ALL",
    "UNFUSE_REGIONS",
    "Backend",
    "FusionReport",
    "MissedFusion",
    "Pass",
    "PassError",
    "PassResult",
    "PipelineResult",
    "QuantSpec",
    "auto_mixed_precision",
    "cse",
    "dce",
    "default_passes",
    "fold_constants",
    "fold_weights",
    "fuse_conv_bias_act",
    "fuse_decomposed_attention",
    "fuse_matmul_bias_act",
    "fuse_residual_layer_norm",
    "fuse_residual_rms_norm",
    "fuse_rms_norm_reshape",
    "fuse_shared_input_matmul",
    "fuse_swiglu",
    "fuse_swiglu_dual_matmul",
    "inline_into",
    "insert_q_dq",
    "legalize_broadcast",
    "legalize_for_backend",
    "lower_control_flow",
    "lower_dot_general",
    "mark_elementwise_regions",
    "op_class",
    "optimize",
    "promote_params_to_inputs",
    "propagate_fake_quant",
    "resolve_backend",
    "rewrite_for_backend",
    "run_passes",
    "simplify",
    "unclaimed",
    "unfuse",
    "unfuse_elementwise_regions",
    "unfuse_fused_for_autodiff",
    "unfuse_unclaimed",
]
