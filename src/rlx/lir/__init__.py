"""LIR: liveness, views, in-place reuse, arena placement, the plan checker, specialization, pictures."""

from rlx.lir.plan import BufferPlan, IoManifest, LirModule, PlanError, Slot, ViewAlias, check, derive_phases, plan
from rlx.lir.specialize import specialize
from rlx.lir.views import VIEW_RULES, register_view, resolve_views

try:  # the "lir" document codec, once rlx.ir.serialize is available
    from rlx.lir import codec as _codec  # noqa: F401
except ImportError:  # pragma: no cover
    pass

__all__ = [
    "VIEW_RULES", "BufferPlan", "IoManifest", "LirModule", "PlanError", "Slot", "ViewAlias", "check",
    "derive_phases", "plan", "register_view", "resolve_views", "specialize",
]
