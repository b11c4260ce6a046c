"""Lowering HIR → MIR (docs/pipeline.md#hir-lowering).

HIR nodes are lowered in order; each maps to one MIR "root" value. A HIR block op calls
its ``lower`` hook, which appends MIR ops; a MIR op in the HIR graph (the ``mir`` escape
hatch, and ``rms_norm`` / ``layer_norm`` / ``rope`` / ``attention``) is copied verbatim.

Provenance: every MIR node made for HIR node ``hN`` gets ``Provenance(hir=N, label=…)``
— the block's label, ``"mir"`` for an unlabelled escape-hatch op, none for inputs, params
and constants — and, when the lowering left it unnamed, ``name = label``. The MIR graph is
verified before it is returned; the HIR graph is checked first (arity per block, then
:func:`rlx.verify`).
"""

from __future__ import annotations

from typing import Any

from rlx.hir.errors import LowerError
from rlx.hir.policy import FusionPolicy
from rlx.ir.dump import active_dump
from rlx.ir.errors import RlxError, VerifyError
from rlx.ir.graph import Graph, GraphStage, Node, Provenance
from rlx.ir.opdef import get_op, has_op
from rlx.ir.verify import verify
from rlx.ops.hir_blocks import LEAF_OPS

MIR_LABEL = "mir"


def block_label(node: Node) -> str | None:
    """The label lowering gives the MIR nodes of HIR ``node``."""
    if node.op in LEAF_OPS:
        return None
    return node.name if node.name is not None else MIR_LABEL


def _check_arity(node: Node) -> None:
    if not has_op(node.op):
        raise LowerError(node.op, node.name, f"unknown op (HIR node h{node.id})")
    opdef = get_op(node.op)
    try:
        expected = opdef.expected_arity(opdef.check_attrs(node.attrs, node.op))
    except RlxError as exc:
        raise LowerError(node.op, node.name, f"bad attributes on h{node.id}: {exc}") from None
    got = len(node.inputs)
    if expected is not None and got != expected:
        listed = ", ".join(opdef.operands[:expected]) if len(opdef.operands) >= expected else ", ".join(opdef.operands)
        raise LowerError(node.op, node.name, f"wrong input count on h{node.id}: expected {expected} ({listed}), got {got}")
    if expected is None and got < opdef.min_arity:
        raise LowerError(node.op, node.name, f"wrong input count on h{node.id}: expected at least {opdef.min_arity}, got {got}")
    for src in node.inputs:
        if not 0 <= src < node.id:
            raise LowerError(node.op, node.name, f"missing operand h{src} of h{node.id}")


def lower_to_mir(hir: Graph, policy: Any = None) -> Graph:
    """Lower a HIR graph to a new, verified MIR graph under ``policy`` (default ``DIRECT``)."""
    policy = FusionPolicy.coerce(policy)
    if hir.stage is not GraphStage.HIR:
        raise RlxError(f"lower_to_mir expects a HIR graph, {hir.name!r} is at stage {hir.stage.value.upper()}")
    for node in hir.nodes:
        _check_arity(node)
    verify(hir)

    work = Graph(hir.name, GraphStage.MIR, hir.symbol_ranges)
    origin: list[tuple[int, str | None]] = []
    root: dict[int, int] = {}
    for node in hir.nodes:
        opdef = get_op(node.op)
        label = block_label(node)
        start = len(work)
        operands = [work.value(root[i]) for i in node.inputs]
        try:
            if opdef.level == "hir":
                if opdef.lower is None:
                    raise RlxError("the op has no lower hook")
                out = opdef.lower(work, operands, node.attrs, policy)
            else:
                out = work.append(node.op, operands, node.attrs, name=node.name if node.op in LEAF_OPS else None)
        except LowerError:
            raise
        except RlxError as exc:
            raise LowerError(node.op, label, f"lowering h{node.id} under {policy.title} failed: {exc}") from None
        if out.type != node.type:
            raise LowerError(node.op, label, f"h{node.id} has type {node.type} but its {policy.title} lowering gives {out.type}")
        root[node.id] = out.id
        origin.extend([(node.id, label)] * (len(work) - start))

    mir = Graph(hir.name, GraphStage.MIR, hir.symbol_ranges)
    for wnode, (hir_id, label) in zip(work.nodes, origin):
        name = wnode.name if wnode.name is not None else label
        mir.append(wnode.op, wnode.inputs, wnode.attrs, name=name, prov=Provenance(hir_id, label), type=wnode.types, check=False)
    mir.set_outputs([root[o] for o in hir.output_ids])
    try:
        verify(mir)
    except VerifyError as exc:  # a lowering hook emitted an inconsistent graph: a bug, name it
        raise VerifyError(f"lowering {hir.name!r} under {policy.title} produced an invalid MIR graph:\n{exc}", exc.errors) from None
    dump = active_dump(hir.name)
    if dump is not None:
        dump.stage("hir", str(hir))
        dump.stage(f"mir-{policy.title.lower()}", str(mir))
    return mir
