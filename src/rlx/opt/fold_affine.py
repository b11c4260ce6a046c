"""``fold_conv_affine``: an inference BatchNorm (or any per-channel scale and shift of weight-only
tensors) after a ``conv2d`` folded into the convolution's weight and one bias add.

Exporters (torch.export, ONNX) leave an eval-mode BatchNorm as ``((conv(x, W) [+ b] - mean) * s + beta``
with ``s = gamma · rsqrt(var + eps)``: four passes over the activation. When every operand of that
chain is weight-only (params and constants) and per-channel (``[C, 1, 1]`` or ``[1, C, 1, 1]``),
and each intermediate has one use, the chain ``y = conv(x, W) · S + T`` becomes
``conv(x, W · S[:, None, None, None]) + T[:, None, None]``: one pass. ``S`` and ``T`` (and the scaled
weight) are weight-only subgraphs, which the numpy executor computes once per params binding
(``fold_weights``) and other backends fold as constants. Chains without a multiplication are left
alone (they already are a bias add). The numbers change by rounding only (the products are
reassociated); tests compare against the unoptimized graph.

The same holds for a ``matmul`` by a weight-only 2-D weight ``W [K, C]`` followed (through reshapes that
keep the last dim, as a BatchNorm1d over flattened tokens is exported) by affine steps on its last axis
(operands ``[C]`` or ``[1, ..., C]``): ``matmul(x, W · S[None, :])``, the reshapes, ``+ T``.
"""

from __future__ import annotations

from typing import NamedTuple

from rlx.ir.graph import Graph, Node
from rlx.ops.patterns import CONV_AFFINE, MATMUL_AFFINE
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import use_counts

_AFFINE = ("add", "sub", "mul")


def _weight_only(g: Graph) -> set[int]:
    known: set[int] = set()
    for node in g.nodes:
        if node.op in ("param", "constant") or (node.op != "input" and node.inputs and all(i in known for i in node.inputs)):
            known.add(node.id)
    return known


def _per_channel(node: Node, channels: int, last_axis: bool) -> bool:
    """A [C, 1, 1] / [1, C, 1, 1] operand (channels of NCHW), or [C] / [1, ..., C] (the last axis)."""
    shape = tuple(node.shape)
    if not node.shape.is_static:
        return False
    if last_axis:
        return len(shape) >= 1 and shape[-1] == channels and all(d == 1 for d in shape[:-1])
    return shape in ((channels, 1, 1), (1, channels, 1, 1))


def _scales_weight(node: Node) -> bool:
    """A chain's head is a conv2d or matmul (its weight takes the scale) or, in the depthwise form, any activation."""
    return node.op in (CONV_AFFINE.anchor, MATMUL_AFFINE.anchor)


def is_channel_scale(node: Node, x: Node) -> bool:
    """Whether ``node`` has the depthwise form's shape: a float conv2d of ``x`` [N, C, H, W] with C groups, a
    1x1 kernel, stride 1 and no padding (a per-channel scale by its [C, 1, 1, 1] weight); readers that need
    the weight's values check them."""
    shape, a = x.shape, node.attrs
    return (node.op == CONV_AFFINE.anchor and node.dtype.is_float and len(shape) == 4 and isinstance(shape[1], int)
            and list(a["kernel_size"]) == [1, 1] and list(a["stride"]) == [1, 1] and not any(a["padding"])
            and list(a["dilation"]) == [1, 1] and a["groups"] == shape[1] and node.shape[1] == shape[1])


def _is_matmul(node: Node) -> bool:
    return node.op == MATMUL_AFFINE.anchor


class _Chain(NamedTuple):
    """A foldable chain: its head (a conv or matmul, or in the depthwise form any activation), the steps' ops and
    weight-only operands, and the steps' node ids (the last one's value is the chain's result)."""

    head: int
    steps: list[tuple[str, int]]
    nodes: list[int]


def _walk(g: Graph, head: Node, first: int, uses: list[int], consumers: dict[int, list[int]], weights: set[int],
          outputs: set[int]) -> _Chain:
    """The longest chain of per-channel affine steps from ``head`` through its reader ``first`` (for a matmul
    head, also through reshapes that keep the last dim: the ``("reshape", -1)`` steps)."""
    last_axis = _is_matmul(head)
    channels, steps, nodes, cur, nxt_id = head.shape[-1 if last_axis else 1], [], [], head.id, first
    while True:
        nxt, here = g.node(nxt_id), g.node(cur)
        if last_axis and nxt.op == MATMUL_AFFINE.view and len(nxt.shape) and nxt.shape[-1] == channels \
                and nxt.dtype == here.dtype:
            steps.append((MATMUL_AFFINE.view, -1))
        elif nxt.op != CONV_AFFINE.step or nxt.attrs["op"] not in _AFFINE or nxt.type != here.type:
            break
        else:
            a, b = nxt.inputs
            other = b if a == cur else a
            if other == cur or (nxt.attrs["op"] == "sub" and a != cur):
                break
            if other not in weights or not _per_channel(g.node(other), channels, last_axis):
                break
            steps.append((nxt.attrs["op"], other))
        nodes.append(nxt.id)
        cur = nxt.id
        if uses[cur] != 1 or cur in outputs:
            break
        nxt_id = consumers[cur][0]
    while steps and steps[-1][0] == MATMUL_AFFINE.view:  # a chain ends at an affine step
        steps.pop()
        nodes.pop()
    return _Chain(head.id, steps, nodes)


def _chains(g: Graph, depthwise: bool = False) -> dict[int, _Chain]:
    """last chain node id -> its foldable chain (containing a mul), after each conv with a weight-only
    kernel; with ``depthwise``, also after any other rank-4 float activation (not weight-only), from each
    of its readers: the activation itself stays (an eval BatchNorm on a block's input, beside the convs
    that read it, as in RepGhost's fusion branch)."""
    weights, uses = _weight_only(g), use_counts(g)
    consumers: dict[int, list[int]] = {}
    for node in g.nodes:
        for i in set(node.inputs):
            consumers.setdefault(i, []).append(node.id)
    outputs = set(g.output_ids)
    found: dict[int, _Chain] = {}
    taken: set[int] = set()
    for head in g.nodes:
        if head.dtype.is_low_precision_float or not head.dtype.is_float:
            continue
        if _is_matmul(head):
            w = g.node(head.inputs[1])
            if len(w.shape) != 2 or not w.shape.is_static or w.dtype != head.dtype:
                continue
        elif len(head.shape) != 4:
            continue
        if _scales_weight(head):
            if head.inputs[1] not in weights or uses[head.id] != 1 or head.id in outputs:
                continue
            starts = consumers[head.id][:1]
        elif not depthwise or head.id in weights or not isinstance(head.shape[1], int):  # the batch may be symbolic
            continue
        else:
            starts = consumers.get(head.id, [])
        for first in starts:
            chain = _walk(g, head, first, uses, consumers, weights, outputs)
            if any(op == "mul" for op, _ in chain.steps) and not taken.intersection(chain.nodes):
                found[chain.nodes[-1]] = chain
                taken.update(chain.nodes)
    return found


def fold_conv_affine(g: Graph, depthwise: bool = False) -> PassResult:
    """The pass; ``depthwise=True`` (the engine backends' export) also turns a chain after any other
    activation (an eval BatchNorm after a Concat or ReLU, as in DenseNet) into one 1x1 depthwise
    ``conv2d`` plus a bias add, which onnxruntime runs as one Conv (activation fused, NCHWc layout kept)
    instead of three elementwise passes."""
    chains = _chains(g, depthwise)
    if not chains:
        return PassResult(g, None, {"folded": 0})
    skip = {nid for chain in chains.values() for nid in chain.nodes[:-1]}
    skip |= {chain.head for chain in chains.values() if _scales_weight(g.node(chain.head))}  # a conv is re-emitted scaled
    out = Graph(g.name, g.stage, g.symbol_ranges)
    env: dict[int, int] = {}
    for node in g.nodes:
        if node.id in skip:
            continue
        if node.id in chains:
            chain = chains[node.id]
            env[node.id] = _emit_folded(out, g, g.node(chain.head), chain, env)
            continue
        env[node.id] = out.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name, prov=node.prov).id
    out.set_outputs([env[o] for o in g.output_ids])
    return PassResult(out, dict(env), {"folded": len(chains)})


def _emit_folded(out: Graph, g: Graph, head: Node, chain: _Chain, env: dict[int, int]) -> int:
    """conv(x, W · S) + T (or matmul(x, W · S), its reshapes, + T) in ``out``; S and T accumulated over
    the chain as [C] vectors."""
    matmul = _is_matmul(head)
    channels = head.shape[-1 if matmul else 1]
    scale: int | None = None
    shift: int | None = None
    for op, k in chain.steps:
        if op == MATMUL_AFFINE.view:
            continue
        kk = out.append("reshape", [env[k]], {"new_shape": [channels]}).id
        if op == "mul":
            scale = kk if scale is None else out.append("binary", [scale, kk], {"op": "mul"}).id
            shift = None if shift is None else out.append("binary", [shift, kk], {"op": "mul"}).id
        elif shift is None:
            shift = kk if op == "add" else out.append("activation", [kk], {"kind": "neg"}).id
        else:
            shift = out.append("binary", [shift, kk], {"op": op}).id
    assert scale is not None  # _chains keeps only chains with a multiply
    if matmul:  # W [K, C] scaled per column; the chain's reshapes re-applied to the product
        x, w = (env[i] for i in head.inputs)
        s2 = out.append("reshape", [scale], {"new_shape": [1, channels]}).id
        y = out.append("matmul", [x, out.append("binary", [w, s2], {"op": "mul"}).id], dict(head.attrs), name=head.name,
                       prov=head.prov).id
        for (op, _), nid in zip(chain.steps, chain.nodes):
            if op == MATMUL_AFFINE.view:
                y = out.append(op, [y], dict(g.node(nid).attrs), name=g.node(nid).name, prov=g.node(nid).prov).id
        return y if shift is None else out.append("binary", [y, shift], {"op": "add"}).id
    s4 = out.append("reshape", [scale], {"new_shape": [channels, 1, 1, 1]}).id
    if not _scales_weight(head):  # the depthwise form: y = conv(x, S[C, 1, 1, 1], groups=C) + T
        y = out.append("conv2d", [env[head.id], s4], {"kernel_size": [1, 1], "stride": [1, 1], "padding": [0, 0],
                                                      "dilation": [1, 1], "groups": int(channels)}).id
    else:
        x, w = (env[i] for i in head.inputs)
        w2 = out.append("binary", [w, s4], {"op": "mul"}).id
        y = out.append("conv2d", [x, w2, *(env[i] for i in head.inputs[2:])], dict(head.attrs), name=head.name, prov=head.prov).id
    if shift is None:
        return y
    t3 = out.append("reshape", [shift], {"new_shape": [channels, 1, 1]}).id
    return out.append("binary", [y, t3], {"op": "add"}).id


FOLD_CONV_AFFINE = Pass("fold_conv_affine", fold_conv_affine,
                        produces=frozenset({"conv2d", "matmul", "binary", "reshape", "activation"}))
