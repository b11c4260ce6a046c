"""``fuse_decomposed_attention``: softmax(Q Kᵀ · s [+ mask]) V, as torch.export and ONNX exporters
leave it, recognised as one ``attention`` node.

Exporters decompose scaled dot-product attention into a transpose of K, a batched matmul, a scale
(a multiply or divide by a scalar constant, on the scores or on Q and Kᵀ separately, as
torch's ONNX exporter writes it), an optional additive mask, a softmax over the last axis and a
second matmul. Backends then run four or five kernels and materialise the [B, H, Sq, Sk] scores
twice; the ``attention`` op runs as one fused kernel where a backend has one (torch's
``scaled_dot_product_attention``) and keeps the scores in one buffer on the numpy backend.

Matched: rank-4 ``[B, H, S, D]`` operands with static shapes, f32 / f64 (narrower floats would
change rounding), every intermediate used once and not an output. The scale becomes
``score_scale`` (products of the scalar factors; a divisor contributes its reciprocal, so the
numbers change by rounding only); a mask added to the scores becomes ``mask_kind="bias"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.graph import Graph, Node
from rlx.ir.shape import TensorType
from rlx.ops.patterns import DECOMPOSED_ATTENTION as _A
from rlx.opt.fusion import Match, _Ctx, apply_matches, infers
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder

_DTYPES = (DType.F32, DType.F64)
_SWAP_LAST = (0, 1, 3, 2)


@dataclass
class _Found:
    q: int
    k: int | None  # None: the matmul's right operand is Kᵀ without a transpose to undo (one is emitted)
    kt: int
    v: int
    mask: int | None
    scale: float
    parts: list[int]


def _scalar(node: Node) -> float | None:
    """The value of a one-element float constant, else None."""
    if node.op != "constant" or not node.dtype.is_float:
        return None
    arr = np.asarray(node.attrs["value"].array)
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def _scaled(cx: _Ctx, nid: int) -> tuple[int, float, list[int]]:
    """Peel single-use multiplies / divides by scalar constants off ``nid``: (core id, factor, peeled ids).
    A multiply with other uses stays (its result is the operand then)."""
    factor, peeled = 1.0, list[int]()
    while True:
        node = cx.nodes[nid]
        if node.op != _A.step or node.attrs["op"] not in ("mul", "div") or not cx.single_use(nid):
            return nid, factor, peeled
        a, b = node.inputs
        cb, ca = _scalar(cx.nodes[b]), _scalar(cx.nodes[a])
        if cb is not None and cb != 0.0 and cx.nodes[a].type == node.type:
            factor *= cb if node.attrs["op"] == "mul" else 1.0 / cb
            core = a
        elif ca is not None and node.attrs["op"] == "mul" and cx.nodes[b].type == node.type:
            factor *= ca
            core = b
        else:
            return nid, factor, peeled
        peeled.append(nid)
        nid = core


def _match(cx: _Ctx, out: Node) -> _Found | None:
    nodes = cx.nodes
    if out.op != _A.product or len(out.shape) != 4 or out.dtype not in _DTYPES or not out.shape.is_static:
        return None
    sm, v = nodes[out.inputs[0]], out.inputs[1]
    if sm.op != _A.normalize or sm.attrs["axis"] % 4 != 3 or not cx.single_use(sm.id):
        return None
    parts, mask = [sm.id], None
    s_id = sm.inputs[0]
    add = nodes[s_id]
    if add.op == _A.step and add.attrs["op"] == "add" and cx.single_use(s_id):
        a, b = add.inputs
        sides = [i for i in (a, b) if nodes[i].type == add.type and _leads_to_scores(cx, i)]
        if not sides:
            return None
        scores_side = sides[0]
        mask = b if scores_side == a else a
        parts.append(s_id)
        s_id = scores_side
    if not cx.single_use(s_id):
        return None
    core, scale, peeled = _scaled(cx, s_id)
    mm = nodes[core]
    if mm.op != _A.product or not cx.single_use(core):
        return None
    parts += [*peeled, core]
    q, q_factor, q_peeled = _scaled(cx, mm.inputs[0])
    kt, k_factor, k_peeled = _scaled(cx, mm.inputs[1])
    parts += q_peeled + k_peeled
    k = None
    t = nodes[kt]
    if t.op == _A.view and t.attrs["perm"] is not None and tuple(t.attrs["perm"]) == _SWAP_LAST and cx.single_use(kt):
        k = t.inputs[0]
        parts.append(kt)
    return _Found(q, k, kt, v, mask, scale * q_factor * k_factor, parts)


def _leads_to_scores(cx: _Ctx, nid: int) -> bool:
    core, _, _ = _scaled(cx, nid)
    return cx.nodes[core].op == _A.product


def find_decomposed_attention(g: Graph) -> list[Match]:
    cx = _Ctx(g)
    nodes = cx.nodes
    found: list[Match] = []
    for out in nodes:
        m = _match(cx, out)
        if m is None:
            continue
        q = nodes[m.q]
        k_type = nodes[m.k].type if m.k is not None else infers(_A.view, [nodes[m.kt].type], {"perm": list(_SWAP_LAST)})
        if not isinstance(k_type, TensorType) or len(q.shape) != 4:
            continue
        attrs = {"num_heads": int(q.shape[1]), "head_dim": int(q.shape[3]), "layout": "bhsd",
                 "mask_kind": "none" if m.mask is None else "bias", "score_scale": m.scale}
        ins = [q.type, k_type, nodes[m.v].type] + ([nodes[m.mask].type] if m.mask is not None else [])
        if not infers(_A.fused, ins, attrs, out.type) or not cx.free([*m.parts, out.id]):
            continue

        def build(rb: Rebuilder, m=m, out=out, attrs=attrs) -> dict[int, int]:
            like = [nodes[i] for i in m.parts] + [out]
            k = rb.map[m.k] if m.k is not None else rb.emit(_A.view, [rb.map[m.kt]], {"perm": list(_SWAP_LAST)}, like=like)
            operands = [rb.map[m.q], k, rb.map[m.v]] + ([rb.map[m.mask]] if m.mask is not None else [])
            return {out.id: rb.emit(_A.fused, operands, attrs, like=like, name=out.name, type=out.type)}

        found.append(Match(out.id, cx.claim([*m.parts, out.id]), build, "decomposed_attention"))
    return found


def fuse_decomposed_attention(g: Graph) -> PassResult:
    """softmax(Q Kᵀ · s [+ mask], axis=-1) V with single-use intermediates ⇒ attention (layout bhsd)."""
    return apply_matches(g, find_decomposed_attention(g), "fuse_decomposed_attention")


FUSE_ATTENTION = Pass("fuse_decomposed_attention", fuse_decomposed_attention, produces=frozenset({_A.fused}))
