"""FusionReport: what the optimizer fused, what it missed and why, node counts.

The miss scanners look at the *result* and only flag a real, still-present opportunity
(a bias add after a matmul, two matmuls of one lhs with compatible weights, an unfused
SwiGLU or residual norm) with the reason it was not taken. A matmul that feeds a fused
op or a down-projection is not a miss (upstream flags those, so its
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
from rlx.opt.rebuild import use_counts

FUSED_KINDS = (
    "fused_matmul_bias_act", "fused_swiglu", "fused_residual_layer_norm", "fused_residual_rms_norm",
    "fused_attention_block", "fused_transformer_layer", "elementwise_region",
)
WATCHED = ("attention", "rope", "narrow", "concat", "matmul", "activation", "binary")

_PASS_OF = {
    "matmul_bias_act": ("fuse_matmul_bias_act", "fused_matmul_bias_act"),
    "shared_input_matmul": ("fuse_shared_input_matmul", "matmul"),
    "swiglu": ("fuse_swiglu_dual_matmul", "fused_swiglu"),
    "residual_layer_norm": ("fuse_residual_layer_norm", "fused_residual_layer_norm"),
    "residual_rms_norm": ("fuse_residual_rms_norm", "fused_residual_rms_norm"),
}


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
        return {k: self.ops_after[k] for k in FUSED_KINDS if self.ops_after.get(k)}

    @property
    def created(self) -> dict[str, int]:
        """Fused ops created by the passes (result count minus input count, non-zero)."""
        out = {k: self.ops_after.get(k, 0) - self.ops_before.get(k, 0) for k in FUSED_KINDS}
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


def _why_not_single(i: int, uses: list[int], outputs: set[int], what: str) -> str | None:
    if i in outputs:
        return f"{what} is also a graph output"
    if uses[i] > 1:
        return f"{what} has {uses[i]} uses"
    return None


def scan(g: Graph, ran: Iterable[str] | None = None) -> list[MissedFusion]:
    """Missed-fusion scanners over a (fused) graph; see the module docstring."""
    from rlx.opt.fusion import _shared_members, infers, shared_matmul_groups

    ran_set = None if ran is None else frozenset(ran)
    nodes = g.nodes
    uses = use_counts(g)
    users = g.users()
    outputs = set(g.output_ids)
    missed: list[MissedFusion] = []

    def gated(pattern: str) -> str | None:
        pass_name, op = _PASS_OF[pattern]
        if ran_set is not None and pass_name not in ran_set:
            return f"pass {pass_name} did not run (the backend does not claim {op})"
        return None

    def add(pattern: str, node: Node, reason: str, hint: str = "") -> None:
        missed.append(MissedFusion(pattern, node.id, gated(pattern) or reason, _label(node), hint))

    for n in nodes:
        if n.op == "matmul":
            for c in users[n.id]:
                cn = nodes[c]
                if cn.op != "binary" or cn.attrs.get("op") != "add" or cn.inputs[0] == cn.inputs[1]:
                    continue
                bias = nodes[cn.inputs[1] if cn.inputs[0] == n.id else cn.inputs[0]]
                if len(bias.shape) != 1 or bias.shape[0] != cn.shape[-1]:
                    continue  # a residual or scalar add, not a bias over the output features
                x, w = (nodes[i].type for i in n.inputs)
                reason = _why_not_single(n.id, uses, outputs, "the matmul")
                if reason is None and not infers("fused_matmul_bias_act", [x, w, bias.type], {"activation": None}, cn.type):
                    reason = f"bias {bias.type} does not fit the fused op for output {cn.type}"
                add("matmul_bias_act", n, reason or "not fused", "give the matmul a single consumer")
        elif n.op == "binary" and n.attrs.get("op") == "mul" and n.inputs[0] != n.inputs[1]:
            a, b = (nodes[i] for i in n.inputs)
            for up, s in ((a, b), (b, a)):
                if s.op != "activation" or s.attrs.get("kind") != "silu":
                    continue
                gate = nodes[s.inputs[0]]
                if up.op == "matmul" and gate.op == "matmul":
                    if up.inputs[0] != gate.inputs[0]:
                        reason = "up and gate matmuls read different inputs"
                    else:
                        reason = next(
                            (r for i, what in ((up.id, "the up matmul"), (gate.id, "the gate matmul"), (s.id, "the silu"))
                             if (r := _why_not_single(i, uses, outputs, what))),
                            "up and gate weights differ in shape or dtype",
                        )
                    add("swiglu", n, reason)
                    break
                if up.op == "narrow" and gate.op == "narrow":
                    reason = next(
                        (r for i, what in ((up.id, "the up narrow"), (gate.id, "the gate narrow"), (s.id, "the silu"))
                         if (r := _why_not_single(i, uses, outputs, what))),
                        "the narrows are not the two halves of the last axis of one tensor",
                    )
                    add("swiglu", n, reason)
                    break
        elif n.op in ("layer_norm", "rms_norm"):
            src = nodes[n.inputs[0]]
            if src.op == "binary" and src.attrs.get("op") == "add":
                rank = len(n.shape)
                pattern = "residual_layer_norm" if n.op == "layer_norm" else "residual_rms_norm"
                reason = None
                if uses[src.id] > 1 and max(n.inputs[1:]) > src.id:
                    reason = "the residual add has other uses and gamma / beta are defined after it (declare them first)"
                if reason is None and n.attrs.get("axis", -1) % max(rank, 1) != rank - 1:
                    reason = "the norm is not over the last axis"
                add(pattern, n, reason or "the add's operands do not fit the fused op (broadcast or dtype)")
    for lhs, group in shared_matmul_groups(g).items():
        members = _shared_members(g, group)
        ks = {nodes[m.inputs[1]].shape[0] for m in group}
        if len(members) >= 2:
            add("shared_input_matmul", group[0], f"{len(members)} matmuls share lhs %{lhs} with compatible weights")
        elif len(ks) == 1 and len(group) >= 2:
            add("shared_input_matmul", group[0], "weights are defined after the first matmul of the group",
                "declare the weights before their first use")
    return missed
