"""What the torch backend does once per params binding instead of on every run.

Importers leave weight preparation in the graph: ``torch.export`` writes an eval-mode BatchNorm as
``(conv(x, W) - mean) * s + beta`` and transposes linear weights, quantised models dequantise
their weights. :func:`inference_graph` folds BatchNorm chains into their convolutions and each
conv's bias add and activation into one ``F.conv2d`` call; :func:`split_weights` then finds the
weight-only nodes (reading only params and constants, static shapes), which the executable runs
in a *prelude* module when params are bound, on the device; the run module receives the
prelude's results in place of the params. Conv weights leave the prelude in the layout the conv
kernels prefer (channels-last, when that memory format is chosen), so no run converts them.
"""

from __future__ import annotations

import dataclasses

import rlx.ops  # noqa: F401  (registers every op: CONVS is read from them)
from rlx.ir.graph import RESULT, Graph
from rlx.ir.opdef import all_ops
from rlx.ops.facts import CONV_WEIGHT

#: ops whose operand 1 is a conv weight torch reads as a whole (OpDef flag CONV_WEIGHT)
CONVS = frozenset(o.name for o in all_ops() if CONV_WEIGHT in o.flags)


def inference_graph(graph: Graph) -> Graph:
    """``graph`` with inference BatchNorm chains folded into their convs and conv + bias + activation
    fused (through the pass manager: the verifier runs after each pass); the leaves (inputs, params)
    are unchanged."""
    from rlx.opt.fold_affine import fold_conv_affine
    from rlx.opt.fusion import fuse_conv_bias_act
    from rlx.opt.manager import run_passes

    return run_passes(graph, (fold_conv_affine, fuse_conv_bias_act)).graph


@dataclasses.dataclass(frozen=True)
class WeightSplit:
    """``computed``: weight-only nodes the prelude evaluates (neither params nor constants);
    ``boundary``: what the run module receives from the prelude, in order (every param in declaration
    order, then the computed values some other node or an output reads); ``conv_weights``: the
    boundary values read as a 4-D conv weight (given the conv layout by the prelude)."""

    computed: frozenset[int]
    boundary: tuple[int, ...]
    conv_weights: frozenset[int]

    @property
    def trivial(self) -> bool:
        """Whether the prelude would hand the params through unchanged (no module needed)."""
        return not self.computed and not self.conv_weights


def split_weights(g: Graph, param_ids: list[int], fold: bool, channels_last: bool) -> WeightSplit:
    """The prelude of ``g`` whose params have the node ids ``param_ids`` (declaration order). Nothing is
    computed unless ``fold``; conv weights are converted only when ``channels_last``; a graph whose
    params have symbolic shapes gets the trivial split (its modules are built per binding)."""
    if not all(g.node(i).shape.is_static for i in param_ids):
        return WeightSplit(frozenset(), tuple(param_ids), frozenset())
    known = set(param_ids) | {n.id for n in g.nodes if n.op == "constant"}
    computed: list[int] = []
    if fold:
        for node in g.nodes:
            if (node.id not in known and node.inputs and node.op not in (RESULT, "input") and not node.extra_types
                    and node.shape.is_static and all(i in known for i in node.inputs)):
                known.add(node.id)
                computed.append(node.id)
    inside = set(computed)
    read_outside = {i for n in g.nodes if n.id not in inside for i in n.inputs} | set(g.output_ids)
    boundary = (*param_ids, *(i for i in computed if i in read_outside))
    received = set(boundary)
    conv_weights = frozenset(
        n.inputs[1] for n in g.nodes
        if channels_last and n.op in CONVS and n.id not in inside and n.inputs[1] in received and len(g.node(n.inputs[1]).shape) == 4)
    return WeightSplit(frozenset(computed), boundary, conv_weights)
