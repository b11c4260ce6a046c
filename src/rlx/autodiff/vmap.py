"""``vmap``: batch a graph over a new axis of some of its inputs (docs/pipeline.md#autodiff, generalised).

``in_axes`` maps input / param names to the position of the batch axis in the batched
graph's input (any axis, negative allowed; ``None`` = not batched). Internally the batch
axis is moved to the front and each op's ``batch`` rule keeps it there; nodes that no
batched value reaches are copied unchanged, and unbatched operands are broadcast only
where an op needs it. Every output gets the batch axis (at ``out_axes``, default 0),
including outputs that do not depend on a batched input (upstream leaves those unbatched).
The graph is prepared first (fused ops unfused, dot_general lowered), as for autodiff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlx.autodiff.prepare import label, prepare, shape_str
from rlx.autodiff.rules import BatchContext
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, RlxError
from rlx.ir.graph import RESULT, Graph, Node, Value
from rlx.ir.opdef import get_op
from rlx.ir.shape import Dim, check_dim, normalize_axis
from rlx.ir.verify import verify

DEFAULT_BATCH_SYMBOL = "vmap_batch"


def _fresh_symbol(g: Graph, base: str) -> str:
    used = {d for n in g.nodes for d in n.shape if isinstance(d, str)}
    name, k = base, 1
    while name in used:
        name, k = f"{base}_{k}", k + 1
    return name


def vmap(
    g: Any,
    in_axes: Mapping[str, int | None],
    *,
    batch_size: int | str | None = None,
    out_axes: int | Sequence[int] = 0,
    name: str | None = None,
) -> Graph:
    """Batched graph: each input named in ``in_axes`` gets a batch axis of ``batch_size``.

    ``batch_size``: an int, or a symbolic dim name (default: a fresh symbol ``vmap_batch``,
    bound when the batched graph is run). ``out_axes``: where each output carries the batch
    axis (one int for all outputs, or one per output).
    """
    if not isinstance(in_axes, Mapping):
        raise AutodiffError(f"vmap: in_axes must map input names to axes, got {type(in_axes).__name__}")
    fwd = prepare(g, "vmap").graph
    leaves = {**fwd.inputs(), **fwd.params()}
    for key in in_axes:
        if key not in leaves:
            raise AutodiffError(f"vmap: graph {fwd.name!r} has no input or param named {key!r} (it has {sorted(leaves)})")
    axes = {k: a for k, a in in_axes.items() if a is not None}
    if not axes:
        raise AutodiffError("vmap: in_axes batches nothing")
    try:
        bsize: Dim = check_dim(batch_size if batch_size is not None else _fresh_symbol(fwd, DEFAULT_BATCH_SYMBOL))
    except RlxError as exc:
        raise AutodiffError(f"vmap: bad batch_size: {exc}") from None
    n_out = len(fwd.output_ids)
    oaxes = [out_axes] * n_out if isinstance(out_axes, int) else list(out_axes)
    if len(oaxes) != n_out:
        raise AutodiffError(f"vmap: out_axes has {len(oaxes)} entries for {n_out} outputs")

    out = Graph(name or f"{fwd.name}_vmap", ranges=fwd.symbol_ranges)
    new: dict[int, int] = {}
    batched: dict[int, bool] = {}
    first_batched: list[Value] = []

    def template() -> Value:
        t = first_batched[0]
        c = t if t.dtype.is_bool else out.cast(t, to=DType.BOOL)
        return out.reduce(c, op="max", axes=list(range(1, len(t.shape))), keep_dim=False)

    ctx = BatchContext(out, bsize, template)
    for node in fwd.nodes:
        if node.op in ("input", "param") and node.attrs["name"] in axes:
            v = _batched_leaf(out, node, axes[node.attrs["name"]], bsize)
            first_batched.append(v)
            new[node.id], batched[node.id] = v.id, True
            continue
        if node.op == RESULT and node.id in new:  # written with its multi-result producer
            continue
        if not any(batched.get(i, False) for i in node.inputs):
            new[node.id], batched[node.id] = _copy(out, node, new), False
            continue
        for r, v in enumerate(_apply_rule(ctx, fwd, node, new, batched, bsize)):
            new[node.id + r], batched[node.id + r] = v.id, True
    outs = []
    for oid, oaxis in zip(fwd.output_ids, oaxes):
        v = out.value(new[oid])
        if not batched[oid]:
            v = ctx.materialize(v)
        rank = len(v.shape)
        try:
            a = normalize_axis(oaxis, rank, "out_axes entry")
        except RlxError as exc:
            raise AutodiffError(f"vmap: {exc}") from None
        if a:
            perm = [*range(1, a + 1), 0, *range(a + 1, rank)]
            v = out.transpose(v, perm=perm)
        outs.append(v)
    out.set_outputs(outs)
    verify(out)
    return out


def _batched_leaf(out: Graph, node: Node, axis: int, bsize: Dim) -> Value:
    rank = len(node.shape) + 1
    try:
        a = normalize_axis(axis, rank, f"in_axes[{node.attrs['name']!r}]")
    except RlxError as exc:
        raise AutodiffError(f"vmap: {exc}") from None
    shape = list(node.shape)
    shape.insert(a, bsize)
    attrs = {**dict(node.attrs), "shape": shape}
    v = out.append(node.op, (), attrs, name=node.name, prov=node.prov)
    if a:
        v = out.transpose(v, perm=[a, *range(a), *range(a + 1, rank)])
    return v


def _copy(out: Graph, node: Node, new: dict[int, int]) -> int:
    ins = tuple(new[i] for i in node.inputs)
    return out._push(Node(len(out.nodes), node.op, node.attrs, ins, node.type, node.name, node.prov, node.extra_types)).id


def _apply_rule(ctx: BatchContext, fwd: Graph, node: Node, new: dict[int, int], batched: dict[int, bool],
                bsize: Dim) -> tuple[Value, ...]:
    """The batched values of every result of ``node`` (a multi-result op's rule returns a tuple)."""
    opdef = get_op(node.op)
    if opdef.batch is None:
        raise AutodiffError(f"vmap: op {node.op!r} (family {opdef.family}) has no batching rule (node {label(fwd, node.id)})")
    operands = [ctx.graph.value(new[i]) for i in node.inputs]
    flags = [batched[i] for i in node.inputs]
    try:
        v = opdef.batch(ctx, node, operands, flags)
    except AutodiffError:
        raise
    except RlxError as exc:
        raise AutodiffError(f"vmap: batching rule of {node.op!r} failed at node {label(fwd, node.id)}: {exc}") from exc
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(vals) != node.num_results:
        raise AutodiffError(f"vmap: batching rule of {node.op!r} (node {label(fwd, node.id)}) gave {len(vals)} results, "
                            f"expected {node.num_results}")
    for v, t in zip(vals, node.types):
        want = (bsize, *t.shape)
        if tuple(v.shape) != want or v.dtype != t.dtype:
            raise AutodiffError(
                f"vmap: batching rule of {node.op!r} (node {label(fwd, node.id)}) gave {shape_str(v.shape)} {v.dtype}, "
                f"expected {shape_str(want)} {t.dtype}"
            )
    return vals
