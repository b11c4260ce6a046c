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
"""

from __future__ import annotations

from rlx.ir.graph import Graph, Node
from rlx.ops.patterns import CONV_AFFINE
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import use_counts

_AFFINE = ("add", "sub", "mul")


def _weight_only(g: Graph) -> set[int]:
    known: set[int] = set()
    for node in g.nodes:
        if node.op in ("param", "constant") or (node.op != "input" and node.inputs and all(i in known for i in node.inputs)):
            known.add(node.id)
    return known


def _per_channel(node: Node, channels: int) -> bool:
    shape = tuple(node.shape)
    return shape in ((channels, 1, 1), (1, channels, 1, 1)) and node.shape.is_static


def _is_conv(node: Node) -> bool:
    """A chain's head is a conv2d (its weight takes the scale) or, in the depthwise form, any activation."""
    return node.op == CONV_AFFINE.anchor


def _chains(g: Graph, depthwise: bool = False) -> dict[int, list[tuple[str, int]]]:
    """conv id -> [(op, weight-only operand id), ...] of its foldable chain (containing a mul); with
    ``depthwise``, also the chains after any other rank-4 float activation (not weight-only)."""
    weights, uses = _weight_only(g), use_counts(g)
    consumers: dict[int, list[int]] = {}
    for node in g.nodes:
        for i in set(node.inputs):
            consumers.setdefault(i, []).append(node.id)
    outputs = set(g.output_ids)
    found: dict[int, list[tuple[str, int]]] = {}
    taken: set[int] = set()
    for conv in g.nodes:
        if conv.id in taken or conv.dtype.is_low_precision_float or not conv.dtype.is_float or len(conv.shape) != 4:
            continue
        if (conv.inputs[1] not in weights if _is_conv(conv) else not depthwise or conv.id in weights
                or not conv.shape.is_static):
            continue
        channels, chain, cur = conv.shape[1], [], conv.id
        while uses[cur] == 1 and cur not in outputs:
            nxt = g.node(consumers[cur][0])
            if nxt.op != CONV_AFFINE.step or nxt.attrs["op"] not in _AFFINE or nxt.type != conv.type:
                break
            a, b = nxt.inputs
            other = b if a == cur else a
            if other == cur or (nxt.attrs["op"] == "sub" and a != cur):
                break
            if other not in weights or not _per_channel(g.node(other), channels):
                break
            chain.append((nxt.attrs["op"], other))
            cur = nxt.id
        if any(op == "mul" for op, _ in chain):
            found[conv.id] = chain
            cur = conv.id
            for _ in chain:
                cur = consumers[cur][0]
                taken.add(cur)
    return found


def fold_conv_affine(g: Graph, depthwise: bool = False) -> PassResult:
    """The pass; ``depthwise=True`` (the engine backends' export) also turns a chain after any other
    activation (an eval BatchNorm after a Concat or ReLU, as in DenseNet) into one 1x1 depthwise
    ``conv2d`` plus a bias add, which onnxruntime runs as one Conv (activation fused, NCHWc layout kept)
    instead of three elementwise passes."""
    chains = _chains(g, depthwise)
    if not chains:
        return PassResult(g, None, {"folded": 0})
    skip: set[int] = set()
    end_of: dict[int, int] = {}  # last chain node -> its conv
    for conv_id, chain in chains.items():
        cur = conv_id
        for _ in chain:
            if cur != conv_id or _is_conv(g.node(conv_id)):  # another producer stays: the depthwise conv reads it
                skip.add(cur)
            cur = next(n.id for n in g.nodes if cur in n.inputs)
        end_of[cur] = conv_id
    out = Graph(g.name, g.stage, g.symbol_ranges)
    env: dict[int, int] = {}
    for node in g.nodes:
        if node.id in skip:
            continue
        if node.id in end_of:
            env[node.id] = _emit_folded(out, g, g.node(end_of[node.id]), chains[end_of[node.id]], env)
            continue
        env[node.id] = out.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name, prov=node.prov).id
    out.set_outputs([env[o] for o in g.output_ids])
    return PassResult(out, dict(env), {"folded": len(chains)})


def _emit_folded(out: Graph, g: Graph, conv: Node, chain: list[tuple[str, int]], env: dict[int, int]) -> int:
    """conv(x, W · S) + T in ``out``; S and T accumulated over the chain as [C] vectors."""
    channels = conv.shape[1]
    scale: int | None = None
    shift: int | None = None
    for op, k in chain:
        kk = out.append("reshape", [env[k]], {"new_shape": [channels]}).id
        if op == "mul":
            scale = kk if scale is None else out.append("binary", [scale, kk], {"op": "mul"}).id
            shift = None if shift is None else out.append("binary", [shift, kk], {"op": "mul"}).id
        elif shift is None:
            shift = kk if op == "add" else out.append("activation", [kk], {"kind": "neg"}).id
        else:
            shift = out.append("binary", [shift, kk], {"op": op}).id
    assert scale is not None  # _chains keeps only chains with a multiply
    s4 = out.append("reshape", [scale], {"new_shape": [channels, 1, 1, 1]}).id
    if not _is_conv(conv):  # the depthwise form: y = conv(x, S[C, 1, 1, 1], groups=C) + T
        y = out.append("conv2d", [env[conv.id], s4], {"kernel_size": [1, 1], "stride": [1, 1], "padding": [0, 0],
                                                      "dilation": [1, 1], "groups": int(channels)}).id
    else:
        x, w = (env[i] for i in conv.inputs)
        w2 = out.append("binary", [w, s4], {"op": "mul"}).id
        y = out.append("conv2d", [x, w2, *(env[i] for i in conv.inputs[2:])], dict(conv.attrs), name=conv.name, prov=conv.prov).id
    if shift is None:
        return y
    t3 = out.append("reshape", [shift], {"new_shape": [channels, 1, 1]}).id
    return out.append("binary", [y, t3], {"op": "add"}).id


FOLD_CONV_AFFINE = Pass("fold_conv_affine", fold_conv_affine, produces=frozenset({"conv2d", "binary", "reshape", "activation"}))
