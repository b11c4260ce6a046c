"""Cleanup passes: dead-code elimination, common-subexpression elimination, constant
folding (evaluated with the reference kernels, in each node's own dtype) and algebraic
simplification. Each returns a :class:`PassResult` with an old → new id map.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir.attrs import FrozenArray
from rlx.ir.errors import InternalError, RlxError
from rlx.ir.flags import NO_GRAD, SELECTS
from rlx.ir.graph import Graph, Node
from rlx.ir.opdef import OpDef, get_op, has_op
from rlx.ops.common import bound_value
from rlx.ops.evaluate import eval_node
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder

#: flags marking ops that must never be merged or folded (nondeterministic / side effects)
IMPURE_FLAGS = frozenset({"random", "effect", "stateful", "impure"})
LEAVES = frozenset({"input", "param"})


def _pure(op: str) -> bool:
    return has_op(op) and not (get_op(op).flags & IMPURE_FLAGS)


# ----------------------------------------------------------------------------- DCE
def dce(g: Graph, keep_leaves: bool = True) -> PassResult:
    """Drop nodes that no graph output depends on.

    Inputs and params are kept by default so the feed contract of the graph does not
    change (upstream removes unused ones; pass ``keep_leaves=False`` for that).
    """
    nodes = g.nodes
    live = bytearray(len(nodes))
    stack = list(g.output_ids)
    if keep_leaves:
        stack.extend(n.id for n in nodes if n.op in LEAVES)
    while stack:
        i = stack.pop()
        if live[i]:
            continue
        live[i] = 1
        node = nodes[i]
        stack.extend(node.inputs)
        if node.extra_types:  # a multi-result node keeps its result nodes
            stack.extend(range(i + 1, i + node.num_results))
    removed = len(nodes) - sum(live)
    if not removed:
        return PassResult(g, None, {"removed": 0})
    rb = Rebuilder(g, "dce")
    for node in nodes:
        if live[node.id]:
            rb.copy(node, trusted=True)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"removed": removed})


# ----------------------------------------------------------------------------- CSE
def _attrs_key(attrs: Any) -> tuple | None:
    try:
        key = tuple(attrs.items())
        hash(key)
    except TypeError:  # a sub-graph attribute: never merged
        return None
    return key


def cse(g: Graph) -> PassResult:
    """Merge nodes with the same op, attributes, type and (mapped) operands.

    Operands of a node whose op ``commutes`` (``OpDef.commutes``: add, mul, max, min, eq, ne)
    are ordered first (the result dtype does not depend on operand order: promotion is
    commutative). Inputs and params are never merged; ops flagged impure are never merged.
    """
    rb = Rebuilder(g, "cse")
    table: dict[tuple, int] = {}
    merged = 0
    m = rb.map
    for node in g.nodes:
        op = node.op
        if op in LEAVES or not _pure(op):
            rb.copy(node, trusted=True)
            continue
        ins = tuple(m[i] for i in node.inputs)
        attrs_key = _attrs_key(node.attrs)
        if attrs_key is None:
            rb.copy(node, trusted=True)
            continue
        commutes = get_op(op).commutes
        if commutes is not None and commutes(node.attrs):
            ins = tuple(sorted(ins))
        key = (op, attrs_key, ins, node.type)
        hit = table.get(key)
        if hit is not None:
            rb.alias(node.id, hit)
            merged += 1
            continue
        table[key] = rb.copy(node, trusted=True)
    if not merged:
        return PassResult(g, None, {"merged": 0})
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"merged": merged})


# --------------------------------------------------------------------- const fold
DEFAULT_FOLD_LIMIT = 1 << 16


def fold_constants(g: Graph, max_elements: int = DEFAULT_FOLD_LIMIT) -> PassResult:
    """Replace nodes whose operands are all constants by a constant of the node's type.

    Values come from the reference kernels (:func:`rlx.ops.evaluate.eval_node`) in the
    node's own dtype. Results above ``max_elements`` elements are not folded (the graph
    would grow). The old constant operands are left for DCE. A kernel that rejects its
    constant operands with an :class:`rlx.RlxError` leaves the node unfolded (running the
    graph reports the error); any other exception is a kernel bug and raises
    :class:`rlx.ir.errors.InternalError`.
    """
    rb = Rebuilder(g, "fold_constants")
    consts: dict[int, np.ndarray] = {}
    folded = 0
    m = rb.map
    for node in g.nodes:
        if node.op == "constant":
            consts[rb.copy(node, trusted=True)] = node.attrs["value"].array
            continue
        if not node.inputs or node.op in LEAVES or node.extra_types:
            rb.copy(node, trusted=True)
            continue
        ins = [m[i] for i in node.inputs]
        numel = node.shape.numel
        if numel is None or numel > max_elements or not all(i in consts for i in ins) or not _pure(node.op):
            rb.copy(node, trusted=True)
            continue
        opdef = get_op(node.op)
        if opdef.kernel is None or opdef.level == "hir" or _attrs_key(node.attrs) is None:
            rb.copy(node, trusted=True)
            continue
        try:
            arr = eval_node(node, [consts[i] for i in ins], node.type)
        except RlxError:  # the kernel rejects these values (an index out of range …): the run reports it
            rb.copy(node, trusted=True)
            continue
        except Exception as exc:
            raise InternalError(f"fold_constants: the kernel of {node.op!r} (node %{node.id}) raised "
                                f"{type(exc).__name__}: {exc}; this is a bug in the op's kernel") from exc
        new_id = rb.emit("constant", [], {"value": FrozenArray(arr)}, like=[node], name=node.name, type=node.type)
        rb.alias(node.id, new_id)
        consts[new_id] = rb.dst.nodes[new_id].attrs["value"].array
        folded += 1
    if not folded:
        return PassResult(g, None, {"folded": 0})
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"folded": folded})


# ---------------------------------------------------------------------- simplify
def _identity_of(node: Node, opdef: OpDef, nodes: list[Node], mapped: Mapping[int, int],
                 values: Mapping[str, np.ndarray]) -> int | None:
    """The operand (old id) this node equals by its op's ``identity`` fact or, for an op that
    selects among operands (:data:`SELECTS`), because they are all one value; or None."""
    operands = [nodes[i] for i in node.inputs]
    if SELECTS in opdef.flags and len({mapped[i] for i in node.inputs[1:]}) == 1 and operands[1].type == node.type:
        return node.inputs[1]
    if opdef.identity is None:
        return None
    keep = opdef.identity(node.attrs, [n.type for n in operands], node.type, [bound_value(n, values) for n in operands])
    return None if keep is None else node.inputs[keep]


def simplify(g: Graph, values: Mapping[str, np.ndarray] | None = None, keep_gradients: bool = True) -> PassResult:
    """Algebraic identities, as each op states them (``OpDef.identity``, the binary kinds' identity
    elements in ``rlx.ops.kinds``): x+0, x-0, x*1, x/1, x**1 (types must be unchanged), identity
    cast / reshape / expand / transpose / narrow, single-operand concat, a select between one
    value; transpose of a transpose and reshape of a reshape collapse into one op (the inner one
    is left for DCE).
    ``values`` (param name -> array) are bound params' values, seen as constants are (an engine
    export's folded weights: a constant attention mask of zeros, a fully-masked-row guard that
    never fires). Ops that pass no gradient (:data:`NO_GRAD`) keep their value but not their
    derivative when collapsed, so they are left alone unless ``keep_gradients=False`` (a graph
    only evaluated: the torch reader's gradient stop, ``bitcast(bitcast(x))``, is ``x``)."""
    rb = Rebuilder(g, "simplify")
    nodes = g.nodes
    m = rb.map
    removed = collapsed = 0
    for node in nodes:
        if node.op in LEAVES or node.op == "constant" or not has_op(node.op):
            rb.copy(node, trusted=True)
            continue
        opdef = get_op(node.op)
        if keep_gradients and NO_GRAD in opdef.flags:
            rb.copy(node, trusted=True)
            continue
        src = _identity_of(node, opdef, nodes, m, values or {})
        if src is not None:
            rb.alias(node.id, m[src])
            removed += 1
            continue
        attrs = None
        if opdef.compose is not None and nodes[node.inputs[0]].op == node.op:
            inner = nodes[node.inputs[0]]
            base = nodes[inner.inputs[0]]
            attrs = opdef.compose(inner.attrs, node.attrs)
        if attrs is not None:
            if opdef.identity is not None and opdef.identity(attrs, [base.type], node.type, [None]) == 0:
                rb.alias(node.id, m[base.id])
                removed += 1
                continue
            try:
                new_id = rb.emit(node.op, [m[base.id]], attrs, like=[inner, node], name=node.name, type=node.type)
            except Exception:
                rb.copy(node)
                continue
            rb.alias(node.id, new_id)
            collapsed += 1
            continue
        rb.copy(node, trusted=True)
    if not (removed or collapsed):
        return PassResult(g, None, {"removed": 0, "collapsed": 0})
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"removed": removed, "collapsed": collapsed})


DCE = Pass("dce", dce)
CSE = Pass("cse", cse)
FOLD = Pass("fold_constants", fold_constants, frozenset({"constant"}))
SIMPLIFY = Pass("simplify", simplify)

__all__ = ["CSE", "DCE", "FOLD", "SIMPLIFY", "cse", "dce", "fold_constants", "simplify"]
