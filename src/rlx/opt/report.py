"""FusionReport: what the optimizer fused, what it missed and why, node counts.

Missed fusions are the sites of the fusion patterns (:class:`rlx.opt.fusion.Pattern`, the
same objects the passes apply) still present in the *result*, each with the reason its
pattern gives (a bias add after a matmul with a second use, two matmuls of one lhs with
compatible weights whose pass did not run, an unfused SwiGLU or residual norm). A matmul
that feeds a fused op or a down-projection is no site (upstream flags those, so its
``assert_fusion_clean`` fails on ordinary SwiGLU graphs).

Bodies (graph-valued attributes of ``if_`` / ``while_`` / ``scan`` / ``custom_fn``) are
reported per body: ``bodies`` maps ``"%<node id in the result>.<attribute>"`` to the body's
own report (nested bodies inside it the same way). The plain fields describe the outer
graph only; ``total(op)``, ``total_nodes_before`` / ``total_nodes_after`` and
``applied_total`` add every body in, recursively (a body shared by several nodes counts
once per node that holds it); ``clean`` and ``all_missed`` cover the bodies too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import all_ops
from rlx.ops.facts import FUSED_KIND
from rlx.opt.fusion import PATTERNS


def fused_kinds() -> list[str]:
    """The registered ops flagged :data:`rlx.ops.facts.FUSED_KIND` (the fused kernels counted here), by name."""
    return [o.name for o in all_ops() if FUSED_KIND in o.flags]


@dataclass(frozen=True)
class MissedFusion:
    pattern: str
    node: int
    reason: str
    context: str
    hint: str = ""

    def __str__(self) -> str:
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"missed {self.pattern} at %{self.node} [{self.context}]: {self.reason}{hint}"


@dataclass
class FusionReport:
    nodes_before: int = 0
    nodes_after: int = 0
    matmul_before: int = 0
    matmul_after: int = 0
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    applied: dict[str, dict[str, int]] = field(default_factory=dict)
    missed: list[MissedFusion] = field(default_factory=list)
    bodies: dict[str, FusionReport] = field(default_factory=dict)

    # ------------------------------------------------------------------ views
    @property
    def fused(self) -> dict[str, int]:
        """Count of each fused op in the result (non-zero only)."""
        return {k: self.ops_after[k] for k in fused_kinds() if self.ops_after.get(k)}

    @property
    def created(self) -> dict[str, int]:
        """Fused ops created by the passes (result count minus input count, non-zero)."""
        out = {k: self.ops_after.get(k, 0) - self.ops_before.get(k, 0) for k in fused_kinds()}
        return {k: v for k, v in out.items() if v}

    @property
    def clean(self) -> bool:
        return not self.missed and all(b.clean for b in self.bodies.values())

    @property
    def all_missed(self) -> list[MissedFusion]:
        """Missed fusions of the outer graph, then of each body (node ids are the body's own)."""
        return [*self.missed, *(m for b in self.bodies.values() for m in b.all_missed)]

    def total(self, op: str) -> int:
        """Count of ``op`` in the result, bodies included (recursively)."""
        return self.count(op) + sum(b.total(op) for b in self.bodies.values())

    @property
    def total_nodes_before(self) -> int:
        return self.nodes_before + sum(b.total_nodes_before for b in self.bodies.values())

    @property
    def total_nodes_after(self) -> int:
        return self.nodes_after + sum(b.total_nodes_after for b in self.bodies.values())

    @property
    def applied_total(self) -> dict[str, dict[str, int]]:
        """``applied`` summed over the outer graph and every body (recursively)."""
        out: dict[str, dict[str, int]] = {k: dict(v) for k, v in self.applied.items()}
        for b in self.bodies.values():
            for name, stats in b.applied_total.items():
                slot = out.setdefault(name, {})
                for k, v in stats.items():
                    slot[k] = slot.get(k, 0) + v
        return out

    def count(self, op: str) -> int:
        return self.ops_after.get(op, 0)

    def missed_by(self, pattern: str) -> list[MissedFusion]:
        return [m for m in self.missed if m.pattern == pattern]

    def __str__(self) -> str:
        summary = (
            f"nodes={self.nodes_before}→{self.nodes_after} matmul={self.matmul_before}→{self.matmul_after} "
            f"fused_mm_act={self.count('fused_matmul_bias_act')} fused_swiglu={self.count('fused_swiglu')} "
            f"fused_residual_ln={self.count('fused_residual_layer_norm')} fused_residual_rms={self.count('fused_residual_rms_norm')} "
            f"elementwise_region={self.count('elementwise_region')} "
            f"missed_mm_act={len(self.missed_by('matmul_bias_act'))} missed_swiglu={len(self.missed_by('swiglu'))} "
            f"missed_shared_mm={len(self.missed_by('shared_input_matmul'))} "
            f"missed_residual_norm={len(self.missed_by('residual_layer_norm')) + len(self.missed_by('residual_rms_norm'))}"
        )
        lines = ["fusion report:", "  " + summary, *("  " + str(m) for m in self.missed)]
        for key, b in self.bodies.items():
            lines += [f"  body {key}:", *("  " + line for line in str(b).splitlines()[1:])]
        return "\n".join(lines)

    # ------------------------------------------------------------ construction
    @classmethod
    def analyze(
        cls,
        before: Graph,
        after: Graph,
        applied: Mapping[str, Mapping[str, int]] | None = None,
        ran: Iterable[str] | None = None,
    ) -> FusionReport:
        """Compare ``before`` and ``after``; scan ``after`` for missed fusions. ``ran`` names
        the passes that ran (to explain misses caused by a backend's claim set)."""
        ob, oa = Counter(n.op for n in before.nodes), Counter(n.op for n in after.nodes)
        return cls(
            nodes_before=len(before.nodes), nodes_after=len(after.nodes),
            matmul_before=ob.get("matmul", 0), matmul_after=oa.get("matmul", 0),
            ops_before=dict(ob), ops_after=dict(oa),
            applied={k: dict(v) for k, v in (applied or {}).items()},
            missed=scan(after, ran),
        )


def _label(node: Node) -> str:
    if node.prov is not None and node.prov.label:
        return node.prov.label
    if node.prov is not None and node.prov.hir is not None:
        return f"h{node.prov.hir}"
    return node.name or f"%{node.id}"


def scan(g: Graph, ran: Iterable[str] | None = None) -> list[MissedFusion]:
    """The sites of every reported fusion pattern still present in ``g`` (:data:`rlx.opt.fusion.PATTERNS`,
    the objects the passes run), each with the reason its pattern gives; see the module docstring."""
    ran_set = None if ran is None else frozenset(ran)
    missed: list[MissedFusion] = []
    for pattern in PATTERNS:
        if not pattern.reported:
            continue
        gated = None
        if ran_set is not None and pattern.pass_name not in ran_set:
            gated = f"pass {pattern.pass_name} did not run (the backend does not claim {', '.join(sorted(pattern.produces))})"
        for site in pattern.sites(g):
            reason = gated or site.reason or site.note or "not fused"
            missed.append(MissedFusion(pattern.name, site.node.id, reason, _label(site.node), site.hint))
    return missed
