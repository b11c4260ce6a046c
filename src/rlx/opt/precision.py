"""Automatic mixed precision (docs/pipeline.md#mixed-precision): run each op in the precision its class asks for.

Every op declares its class in its registry entry (``OpDef.precision``): compute (matmuls,
convolutions), reduction (norms, softmax, reduce, cumulative sums, sampling, SSM scans, cross
entropy), elementwise, data movement, boundary (graph leaves), or ``f32`` — the default, for
an op not known to be float16-safe (dense solves, FFTs, attention, scans, custom ops): no
policy lowers it. A policy gives each of the first four classes a dtype. The pass rebuilds the
graph so that an op of a class set to f16 / bf16 reads its float32 operands through casts (one
cast per value and dtype) and computes in that dtype.

Where upstream overwrote every node's dtype, this pass re-derives each node's type from its
op's rule, so it fixes upstream's three bugs (docs/pipeline.md#mixed-precision): only float32 values change (token ids,
masks, f64 / f16 / bf16 values the user chose stay as they are); compare still yields bool;
an explicit ``cast`` keeps its target. An op whose rule rejects the lower precision (control
flow bodies typed f32, ops that need f32) keeps its original precision. Leaves stay as they are
(weights in f32, cast on use), and every graph output is cast back to its original dtype, so
callers see the same types before and after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import get_op, has_op
from rlx.ir.shape import TensorType
from rlx.ops.facts import CONVERTS
from rlx.opt.fusion import infers
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder

CLASSES = ("compute", "reduction", "elementwise", "data_movement", "boundary")

_F16, _BF16 = DType.F16, DType.BF16
POLICIES: dict[str, Mapping[str, DType]] = {
    "always_f32": {},
    "always_f16": {c: _F16 for c in CLASSES[:4]},
    "auto_mixed_conservative": {"compute": _F16, "elementwise": _F16, "data_movement": _F16},
    "auto_mixed": {c: _F16 for c in CLASSES[:4]},
    "auto_mixed_bf16": {c: _BF16 for c in CLASSES[:4]},
}


def op_class(op: str) -> str:
    """The precision class an op declares (``OpDef.precision``). ``"f32"`` — the default of any op
    that does not opt in, custom ops included — is in no policy, so such an op keeps its dtype."""
    return get_op(op).precision if has_op(op) else "f32"


def resolve_policy(policy: str | Mapping[str, Any]) -> dict[str, DType]:
    """Op or class name -> dtype. A mapping may name classes and single ops (ops win); unnamed ones stay f32."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise RlxError(f"unknown precision policy {policy!r}; known: {sorted(POLICIES)} (or a mapping)")
        return dict(POLICIES[policy])
    out: dict[str, DType] = {}
    for key, dtype in policy.items():
        if key == "boundary":
            raise RlxError("precision policy: graph leaves (the boundary class) always keep their dtype")
        resolved = DType.of(dtype)
        if not resolved.is_float:
            raise RlxError(f"precision policy: {key!r} -> {resolved} is not a float dtype")
        out[key] = resolved
    return out


def _converts(op: str) -> bool:
    return has_op(op) and CONVERTS in get_op(op).flags


def _target(node: Node, nodes: list[Node], policy: Mapping[str, DType]) -> DType | None:
    """The dtype ``node`` should compute in, or None to keep it: only ops touching float32 change."""
    dtype = policy.get(node.op, policy.get(op_class(node.op)))
    if dtype is None or _converts(node.op):
        return None
    touches_f32 = node.dtype == DType.F32 or any(nodes[i].dtype == DType.F32 for i in node.inputs)
    return dtype if touches_f32 else None


def auto_mixed_precision(g: Graph, policy: str | Mapping[str, Any] = "auto_mixed") -> PassResult:
    """Rebuild ``g`` under ``policy`` (a name in :data:`POLICIES` or a class / op -> dtype mapping)."""
    targets = resolve_policy(policy)
    if not targets:
        return PassResult(g, None, {"retyped": 0})
    rb = Rebuilder(g, "auto_mixed_precision")
    src, dst = g.nodes, rb.dst.nodes
    casts: dict[tuple[int, DType], int] = {}

    def as_dtype(new_id: int, dtype: DType, like: Node) -> int:
        if dst[new_id].dtype == dtype:
            return new_id
        key = (new_id, dtype)
        if key not in casts:
            casts[key] = rb.emit("cast", [new_id], {"to": dtype.value}, like=[like])
        return casts[key]

    retyped = 0
    for node in g.nodes:
        if not node.inputs:
            rb.copy(node)
            continue
        target = _target(node, src, targets)
        if target is not None:
            want = [target if src[i].dtype == DType.F32 else src[i].dtype for i in node.inputs]
            types = [TensorType(src[i].shape, d) for i, d in zip(node.inputs, want)]
            if infers(node.op, types, dict(node.attrs)) is not None:
                ins = [as_dtype(rb.mapped(i), d, node) for i, d in zip(node.inputs, want)]
                rb.map[node.id] = rb.dst.append(node.op, ins, dict(node.attrs), name=node.name, prov=node.prov).id
                retyped += 1
                continue
        if _converts(node.op):  # an explicit cast keeps its target whatever its operand became
            rb.map[node.id] = rb.dst.append(node.op, [rb.mapped(node.inputs[0])], dict(node.attrs), name=node.name, prov=node.prov).id
            continue
        ins = [as_dtype(rb.mapped(i), src[i].dtype, node) for i in node.inputs]  # operands back to their own types
        rb.map[node.id] = rb.dst.append(node.op, ins, dict(node.attrs), name=node.name, prov=node.prov).id
    for out in g.output_ids:
        rb.map[out] = as_dtype(rb.mapped(out), src[out].dtype, src[out])
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"retyped": retyped})


AMP = Pass("auto_mixed_precision", auto_mixed_precision, frozenset({"cast"}))

__all__ = ["AMP", "CLASSES", "POLICIES", "auto_mixed_precision", "op_class", "resolve_policy"]
