"""Forward mode: ``jvp`` (docs/pipeline.md#autodiff, with the wrong upstream rules fixed).

The result mirrors the prepared forward (same node ids), adds one input ``t_<name>`` per
``wrt`` leaf (same shape and dtype) and pushes tangents forward with symbolic zeros:
a node with no non-zero operand tangent emits nothing. Outputs are
``[primal outputs..., tangent outputs...]``; a tangent that is structurally zero is a
zero tensor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlx.autodiff.prepare import label, shape_str
from rlx.autodiff.reverse import NO_RULE, _copy_forward, active_set, apply_rule, resolve_wrt
from rlx.autodiff.rules import JvpContext, broadcast_like, cast, is_diff_dtype, zeros_like
from rlx.ir.errors import AutodiffError, RlxError
from rlx.ir.graph import RESULT, Graph, Node, Value
from rlx.ir.shape import broadcast_shapes
from rlx.ir.verify import verify
from rlx.opt.cleanup import dce

TANGENT_PREFIX = "t_"


def build_jvp(fwd: Graph, wrt: list[int], names: list[str], *, name: str | None = None) -> Graph:
    out = _copy_forward(fwd, name or f"{fwd.name}_jvp")
    leaves = {**fwd.inputs(), **fwd.params()}
    ctx = JvpContext(out, {i: i for i in range(len(fwd.nodes))})
    tangents: dict[int, Value] = {}
    if len(set(wrt)) != len(wrt):
        raise AutodiffError(f"jvp: wrt lists a leaf twice ({names})")
    active_set(fwd, wrt, "jvp")  # refuses ops without complex rules on complex values downstream of a tangent
    for node_id, leaf in zip(wrt, names):
        tname = f"{TANGENT_PREFIX}{leaf}"
        if tname in leaves:
            raise AutodiffError(f"jvp: the forward already has a leaf named {tname!r}")
        node = fwd.nodes[node_id]
        tangents[node_id] = out.input(tname, node.shape, node.dtype)
    for node in fwd.nodes:
        if node.id in tangents or not node.inputs or node.op == RESULT or not any(is_diff_dtype(t.dtype) for t in node.types):
            continue
        ts = [tangents.get(i) if is_diff_dtype(fwd.nodes[i].dtype) else None for i in node.inputs]
        if all(t is None for t in ts):
            continue
        t = apply_rule("jvp", ctx, fwd, node, ts)
        if t is NO_RULE or t is None:
            continue
        multi = isinstance(t, (tuple, list))
        for r, (tr, rtype) in enumerate(zip(t if multi else (t,), node.types)):
            if tr is not None and is_diff_dtype(rtype.dtype):
                tangents[node.id + r] = _fit(out, fwd, node, r, tr)
    primal_outs = [out.value(i) for i in fwd.output_ids]
    tangent_outs = [tangents[i] if i in tangents else zeros_like(out, out.value(i)) for i in fwd.output_ids]
    out.set_outputs(primal_outs + tangent_outs)
    result = dce(out).graph
    verify(result)
    return result


def _fit(out: Graph, fwd: Graph, node: Node, r: int, t: Value) -> Value:
    """Result ``r``'s tangent broadcast and cast to that result's type (an error if it cannot broadcast)."""
    want = node.types[r]
    if tuple(t.shape) != tuple(want.shape):
        try:
            ok = tuple(broadcast_shapes(t.shape, want.shape)) == tuple(want.shape)
        except RlxError:
            ok = False
        if not ok:
            raise AutodiffError(
                f"jvp rule of {node.op!r} (node {label(fwd, node.id)}) gave a tangent of shape {shape_str(t.shape)}, "
                f"expected {shape_str(want.shape)}" + (f" (result {r})" if r else "")
            )
        t = broadcast_like(out, t, out.value(node.id + r))
    return cast(out, t, want.dtype)


def jvp(g: Any, wrt: Iterable[Any] | Any, *, name: str | None = None) -> Graph:
    """Forward-mode graph: tangent inputs ``t_<name>`` for each ``wrt`` input / param;
    outputs ``[primal outputs..., tangent outputs...]``."""
    fwd, ids, names = resolve_wrt(g, wrt, "jvp")
    for i, n in zip(ids, names):
        if n is None:
            raise AutodiffError(f"jvp: wrt {label(fwd, i)} is not an input or param (tangent inputs are named after leaves)")
    return build_jvp(fwd, ids, [n for n in names if n is not None], name=name)
