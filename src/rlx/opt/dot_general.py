"""``dot_general`` lowered to transposes, reshapes and a batched ``matmul``.

A pass of ``opt`` (autodiff's preparation and :func:`rlx.opt.lower.lower_dot_general` both run it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx.ir.graph import Graph, Node
from rlx.ops.patterns import DOT_GENERAL_LOWERING
from rlx.opt.manager import PassResult
from rlx.opt.rebuild import Rebuilder


def _dims_attr(dims: Sequence[Any]) -> list[int] | None:
    if sum(isinstance(d, str) for d in dims) > 1:
        return None
    return [-1 if isinstance(d, str) else d for d in dims]


def _product(dims: Sequence[Any]) -> Any:
    """Static product, the single dim itself, or None when not expressible."""
    if len(dims) == 1:
        return dims[0]
    if all(isinstance(d, int) for d in dims):
        p = 1
        for d in dims:
            p *= d
        return p
    return None


def _lower_dot_general(rb: Rebuilder, node: Node) -> int | None:
    """dot_general → transpose to [batch, free, contract] / [batch, contract, free] → reshape → matmul → reshape."""
    src = rb.src.nodes
    lhs_t, rhs_t = src[node.inputs[0]].type, src[node.inputs[1]].type
    lr, rr = len(lhs_t.shape), len(rhs_t.shape)
    lb = [a % lr for a in node.attrs["lhs_batch"]]
    lc = [a % lr for a in node.attrs["lhs_contracting"]]
    rb_ = [a % rr for a in node.attrs["rhs_batch"]]
    rc = [a % rr for a in node.attrs["rhs_contracting"]]
    lf = [i for i in range(lr) if i not in lb and i not in lc]
    rf = [j for j in range(rr) if j not in rb_ and j not in rc]
    bdims = [lhs_t.shape[i] for i in lb]
    m_dims, k_dims, n_dims = [lhs_t.shape[i] for i in lf], [lhs_t.shape[i] for i in lc], [rhs_t.shape[j] for j in rf]
    m, k, n = _product(m_dims) if m_dims else 1, _product(k_dims) if k_dims else 1, _product(n_dims) if n_dims else 1
    if m is None or k is None or n is None:
        return None
    lhs_shape, rhs_shape = [*bdims, m, k], [*bdims, k, n]
    lhs_attr, rhs_attr, out_attr = _dims_attr(lhs_shape), _dims_attr(rhs_shape), _dims_attr(list(node.shape))
    if lhs_attr is None or rhs_attr is None or out_attr is None:
        return None
    g = rb.dst
    start = len(g.nodes)
    a, b = rb.value(rb.mapped(node.inputs[0])), rb.value(rb.mapped(node.inputs[1]))
    lperm, rperm = [*lb, *lf, *lc], [*rb_, *rc, *rf]
    if lperm != list(range(lr)):
        a = g.transpose(a, perm=lperm)
    if rperm != list(range(rr)):
        b = g.transpose(b, perm=rperm)
    if tuple(a.shape) != tuple(lhs_shape):
        a = g.reshape(a, new_shape=lhs_attr)
    if tuple(b.shape) != tuple(rhs_shape):
        b = g.reshape(b, new_shape=rhs_attr)
    out = g.matmul(a, b)
    if tuple(out.shape) != tuple(node.shape):
        out = g.reshape(out, new_shape=out_attr)
    if out.dtype != node.dtype:
        out = g.cast(out, to=node.dtype)
    rb.stamp(start, [node], name=node.name, last=out.id)
    return out.id


def lower_dot_general_pass(g: Graph) -> PassResult:
    """Step 2 of the autodiff preparation: every dot_general expressible with static (or single-symbol) groups becomes matmul."""
    if not any(n.op == DOT_GENERAL_LOWERING.op for n in g.nodes):
        return PassResult(g, None, {"lowered": 0})
    rb = Rebuilder(g, "lower_dot_general")
    count = 0
    for node in g.nodes:
        new = _lower_dot_general(rb, node) if node.op == DOT_GENERAL_LOWERING.op else None
        if new is None:
            rb.copy(node)
        else:
            rb.alias(node.id, new)
            count += 1
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"lowered": count})
