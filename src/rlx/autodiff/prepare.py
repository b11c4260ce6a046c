"""``prepare_graph_for_ad``: rewrite MIR into the primitive MIR that autodiff and vmap read.

Steps (docs/pipeline.md#autodiff, in this order), each a pass returning an old → new id map that
is composed so that references (``wrt``, ``in_axes``, outputs) never drift (docs/pipeline.md#upstream-bugs-fixed):

1. unfuse fused ops and elementwise regions through each fused op's ``decompose`` hook
   (``rlx.opt.unfuse.unfuse_fused_for_autodiff``);
2. lower ``dot_general`` to transposes, reshapes and a batched ``matmul``;
3. legalize reductions: a ``reduce`` over several axes becomes a chain of single-axis
   reduces (highest axis first, same ``keep_dim``), emitted in place, so the insertion
   order stays topological (upstream appends them at the end and breaks it);
4. fuse ``gaussian_splat_prepare → gaussian_splat_rasterize`` pairs into
   ``gaussian_splat_render`` (upstream's ``fuse_decomposed_gaussian_splat``).

Control-flow ops (if / while / scan) keep their subgraphs: their own rules differentiate them.
Also here: turning what the caller passed into MIR (``as_mir``) and resolving ``wrt``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.ir.errors import AutodiffError, RlxError
from rlx.ir.graph import Graph, GraphStage, Node, Value
from rlx.ir.opdef import get_op, has_op
from rlx.ir.shape import Shape
from rlx.ops.facts import SPLIT_AXES
from rlx.ops.patterns import DOT_GENERAL_LOWERING, SPLAT_RENDER
from rlx.opt.dot_general import lower_dot_general_pass
from rlx.opt.manager import PassResult, run_passes
from rlx.opt.rebuild import Rebuilder
from rlx.opt.unfuse import unfuse_fused_for_autodiff

#: ops that prepare_graph_for_ad removes (so they need no autodiff / batching rules of their own)
LOWERED_OPS = frozenset({DOT_GENERAL_LOWERING.op})


@dataclass
class Prepared:
    """A prepared graph and the old → new id map from the caller's graph."""

    graph: Graph
    id_map: dict[int, int]


# ------------------------------------------------------------------------------ input kinds
#: the fusion policy HIR modules lower with before differentiation, by name (``lower_to_mir`` coerces it:
#: FusionPolicy.for_autodiff()); autodiff sits below nothing HIR-specific, so it does not import rlx.hir
AUTODIFF_POLICY = "fusable"


def as_mir(obj: Any, what: str = "autodiff") -> Graph:
    """The MIR graph to differentiate: a MIR Graph as is; HIR modules (anything with
    ``lower_to_mir(policy)``) lowered with ``FusionPolicy.for_autodiff()``; LIR refused."""
    if isinstance(obj, Graph) and obj.stage is GraphStage.MIR:
        return obj
    stage = getattr(obj, "stage", None)
    if stage is GraphStage.LIR or str(stage) == "lir" or (hasattr(obj, "plan") and hasattr(obj, "graph")):
        raise AutodiffError(f"{what}: an LIR module cannot be differentiated (wrong stage); differentiate the MIR, then plan")
    if hasattr(obj, "lower_to_mir"):
        mir = obj.lower_to_mir(policy=AUTODIFF_POLICY)
        if not isinstance(mir, Graph):
            raise AutodiffError(f"{what}: lower_to_mir returned {type(mir).__name__}, not a Graph")
        return mir
    if isinstance(obj, Graph):
        raise AutodiffError(f"{what}: a {obj.stage.value.upper()} graph cannot be differentiated; lower it to MIR first")
    raise AutodiffError(f"{what}: expected a MIR Graph or an HIR module, got {type(obj).__name__}")


def resolve_refs(g: Graph, refs: Iterable[Any], what: str) -> list[int]:
    """Node ids of ``refs`` in ``g``: leaf names (inputs / params), Values of ``g``, or ids."""
    if isinstance(refs, (str, Value, int)):
        refs = [refs]
    leaves = {**g.inputs(), **g.params()}
    out: list[int] = []
    for ref in refs:
        if isinstance(ref, str):
            if ref not in leaves:
                raise AutodiffError(f"{what}: graph {g.name!r} has no input or param named {ref!r} (it has {sorted(leaves)})")
            out.append(leaves[ref].id)
        elif isinstance(ref, Value):
            if ref.graph is not g:
                if ref.name is not None and ref.node.op in ("input", "param") and ref.name in leaves:
                    out.append(leaves[ref.name].id)  # a leaf of the caller's HIR / pre-lowering graph
                    continue
                raise AutodiffError(f"{what}: {ref!r} does not belong to graph {g.name!r}; pass it by name")
            out.append(ref.id)
        elif isinstance(ref, int) and not isinstance(ref, bool):
            if not 0 <= ref < len(g.nodes):
                raise AutodiffError(f"{what}: graph {g.name!r} has no node %{ref}")
            out.append(int(ref))
        else:
            raise AutodiffError(f"{what}: expected a name, a Value or a node id, got {type(ref).__name__} {ref!r}")
    return out


def label(g: Graph, node_id: int) -> str:
    node = g.nodes[node_id]
    return f"{node.name!r}" if node.name else f"%{node_id} ({node.op})"


# ------------------------------------------------------------------------------ passes
def unfuse_pass(g: Graph) -> PassResult:
    """Step 1: decompose fused ops and elementwise regions (``rlx.opt.unfuse``, via each op's decompose hook)."""
    return unfuse_fused_for_autodiff(g)


def _split(node: Node) -> bool:
    axes = node.attrs.get("axes")
    return axes is not None and len(axes) > 1 and has_op(node.op) and SPLIT_AXES in get_op(node.op).flags


def legalize_reduce_pass(g: Graph) -> PassResult:
    """Step 3: a multi-axis reduction (an op flagged ``SPLIT_AXES``: reduce) → a chain of one-axis
    nodes of the same op, highest axis first (no reshape needed)."""
    if not any(_split(n) for n in g.nodes):
        return PassResult(g, None, {"split": 0})
    rb = Rebuilder(g, "legalize_multi_axis_reduce")
    count = 0
    for node in g.nodes:
        if not _split(node):
            rb.copy(node)
            continue
        dst = rb.dst
        start = len(dst.nodes)
        v = rb.value(rb.mapped(node.inputs[0]))
        for axis in sorted(node.attrs["axes"], reverse=True):  # highest first: lower axis numbers stay valid
            v = dst.apply(node.op, v, **{**node.attrs, "axes": [axis]})
        rb.stamp(start, [node], name=node.name, last=v.id)
        rb.alias(node.id, v.id)
        count += 1
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"split": count})


def _splat_pair(g: Graph, node: Node) -> Node | None:
    """The gaussian_splat_prepare feeding rasterize ``node`` with the same raster attributes and meta, if any."""
    if node.op != SPLAT_RENDER.second:
        return None
    prep = g.nodes[node.inputs[0]]
    if prep.op != SPLAT_RENDER.first or prep.inputs[6] != node.inputs[1]:
        return None
    return prep if all(prep.attrs[k] == v for k, v in node.attrs.items()) else None


def fuse_splat_pass(g: Graph) -> PassResult:
    """Step 4: a gaussian_splat_prepare → gaussian_splat_rasterize pair becomes one gaussian_splat_render
    (the packed buffer between them is not differentiable; render is). A prepare used elsewhere stays."""
    pairs = {n.id: prep for n in g.nodes if (prep := _splat_pair(g, n)) is not None}
    if not pairs:
        return PassResult(g, None, {"fused": 0})
    fused_preps = {p.id for p in pairs.values()}
    other_use = {i for n in g.nodes if n.id not in pairs for i in n.inputs} | set(g.output_ids)
    rb = Rebuilder(g, "fuse_decomposed_gaussian_splat")
    for node in g.nodes:
        prep = pairs.get(node.id)
        if prep is None:
            if node.id not in fused_preps or node.id in other_use:
                rb.copy(node)
            continue
        start = len(rb.dst.nodes)
        out = rb.dst.append(SPLAT_RENDER.fused, [rb.value(rb.mapped(i)) for i in prep.inputs], dict(prep.attrs))
        rb.stamp(start, [prep, node], name=node.name, last=out.id)
        rb.alias(node.id, out.id)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"fused": len(pairs)})


PREPARE_PASSES = (unfuse_pass, lower_dot_general_pass, legalize_reduce_pass, fuse_splat_pass)


def prepare(g: Any, what: str = "prepare_graph_for_ad") -> Prepared:
    """Run the prepare steps on ``g`` (MIR, or HIR lowered for autodiff); keep the id map."""
    mir = as_mir(g, what)
    try:
        result = run_passes(mir, list(PREPARE_PASSES), check=True)
    except AutodiffError:
        raise
    except RlxError as exc:
        raise AutodiffError(f"{what}: {exc}") from exc
    return Prepared(result.graph, dict(result.id_map))


def prepare_graph_for_ad(g: Any, *, with_map: bool = False) -> Graph | tuple[Graph, dict[int, int]]:
    """Primitive MIR for autodiff: fused ops unfused, dot_general lowered, reductions legalized,
    decomposed splat renders fused.

    Returns the prepared graph, or ``(graph, id_map)`` with ``with_map=True`` where
    ``id_map`` maps the caller's node ids to the prepared graph's (for values that survive).
    """
    p = prepare(g)
    return (p.graph, p.id_map) if with_map else p.graph


def shape_str(shape: Sequence[Any]) -> str:
    return repr(Shape(shape))
