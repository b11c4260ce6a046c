"""Rewrites of the exported ONNX node list into the single operators onnxruntime has kernels (and
fusions) for, where rlx's MIR spells the same math with primitives (hard activations, clamps as
``Clip``), and the sweep of the nodes a rewrite left unread.

rlx has no hard-sigmoid op: importers write ONNX ``HardSigmoid`` / ``HardSwish`` as
``max(min(x * a + b, 1), 0)`` (times ``x``). Exported as four or five elementwise nodes, the
chain keeps onnxruntime from fusing the activation into the convolution before it (its NCHWc
``Conv`` takes ``HardSigmoid`` / ``HardSwish`` as an activation) and forces layout reorders
around it. :func:`fuse_hard_activations` writes the chain back as one node: the same formula
(ONNX's definition of HardSigmoid is that expression), so values agree to rounding.

Only float32 chains whose inner values have no other reader (no other node, no subgraph, no
graph output) are rewritten; the dropped nodes are exactly the chain's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

_HARD_SWISH = (np.float32(1.0 / 6.0), np.float32(0.5))


def _read_names(nodes: Iterable[Any]) -> Iterable[str]:
    """Every value name the nodes read, nested subgraphs included (they may read outer names)."""
    for nd in nodes:
        yield from nd.input
        for attr in nd.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _read_names(sub.node)
                yield from (o.name for o in sub.output)


def drop_unread(nodes: list[Any], inits: list[Any], outputs: Iterable[str]) -> tuple[list[Any], list[Any]]:
    """``(nodes, inits)`` without the nodes none of whose outputs anything reads (a later node, a nested
    subgraph, the graph's outputs), transitively, and without the initializers nothing reads. The
    exporter leaves such nodes where a rewrite reads past them (a cube exported as ``Pow`` reads past
    its square, a HardSwish past its chain); onnxruntime would run them."""
    needed = set(outputs)
    kept = []
    for nd in reversed(nodes):
        if any(o in needed for o in nd.output):
            kept.append(nd)
            needed.update(_read_names([nd]))
    kept.reverse()
    return kept, [t for t in inits if t.name in needed]


def fuse_hard_activations(nodes: list[Any], inits: list[Any], outputs: Iterable[str]) -> list[Any]:
    """``nodes`` with HardSigmoid / HardSwish chains replaced by one node each (see the module doc);
    the chains' inner nodes stay in the list, unread, for :func:`drop_unread`."""
    import onnx
    from onnx import numpy_helper

    scalars: dict[str, float] = {}
    for t in inits:
        if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 0:
            scalars[t.name] = float(numpy_helper.to_array(t))
    producer = {o: nd for nd in nodes for o in nd.output}
    outputs = list(outputs)
    uses = Counter(_read_names(nodes))
    uses.update(outputs)
    dead: set[int] = set()

    def only(name: str, op: str) -> Any:
        """The node of type ``op`` producing ``name``, read once, not yet consumed by a rewrite."""
        nd = producer.get(name)
        if nd is None or nd.op_type != op or uses[name] != 1 or id(nd) in dead:
            return None
        return nd

    def split(nd: Any) -> tuple[str, float] | None:
        """(operand, scalar) of a binary node with one float32 scalar initializer operand."""
        a, b = nd.input
        if b in scalars:
            return a, scalars[b]
        if a in scalars:
            return b, scalars[a]
        return None

    def clip(nd: Any, lo: float, hi: float | None) -> tuple[Any, str, float] | None:
        """Max(Min(v, hi), lo) or Min(Max(v, lo), hi) (``hi`` None: any positive bound): the inner
        node, v and hi."""
        if nd is None or nd.op_type not in ("Max", "Min") or len(nd.input) != 2:
            return None
        outer = split(nd)
        inner_op = "Min" if nd.op_type == "Max" else "Max"
        inner_nd = only(outer[0], inner_op) if outer is not None else None
        inner = split(inner_nd) if inner_nd is not None else None
        if inner is None:
            return None
        low, high = (outer[1], inner[1]) if nd.op_type == "Max" else (inner[1], outer[1])
        if low != lo or not (high == hi if hi is not None else high > 0):
            return None
        return inner_nd, inner[0], high

    def shifted(name: str, op: str) -> tuple[Any, str, float] | None:
        """``op``(v, scalar) producing ``name`` (read once): the node, v, the scalar."""
        nd = only(name, op)
        hit = split(nd) if nd is not None else None
        return None if hit is None else (nd, *hit)

    def hard_sigmoid(nd: Any) -> tuple[list[Any], str, float, float] | None:
        """clip(x*a + b, 0, 1) (the ONNX form) at its outer node: the chain, x, alpha, beta."""
        c = clip(nd, 0.0, 1.0)
        add = shifted(c[1], "Add") if c is not None else None
        mul = shifted(add[1], "Mul") if add is not None else None
        if mul is None:
            return None
        return [mul[0], add[0], c[0]], mul[1], mul[2], add[2]

    def relu6_over(name: str, h: float) -> tuple[list[Any], str, float, float] | None:
        """clip(x + s, 0, h) producing ``name`` (read once), to be divided by h: the chain, x, 1/h, s/h."""
        outer = producer.get(name)
        c = clip(outer, 0.0, h) if outer is not None and uses[name] == 1 and id(outer) not in dead else None
        add = shifted(c[1], "Add") if c is not None else None
        if add is None:
            return None
        return [add[0], c[0], outer], add[1], 1.0 / h, add[2] / h

    def swish_gate(hit: tuple[Any, str, float, float] | None, x: str) -> bool:
        """``hit`` (chain or node, its x, alpha, beta) is x's own hard-swish gate."""
        return hit is not None and hit[1] == x and (np.float32(hit[2]), np.float32(hit[3])) == _HARD_SWISH

    out: list[Any] = []
    made: dict[str, tuple[Any, str, float, float]] = {}  # HardSigmoid output -> (its node, x, alpha, beta)

    def emit_hard_sigmoid(nd: Any, hit: tuple[list[Any], str, float, float]) -> None:
        chain, x, alpha, beta = hit
        dead.update(id(c) for c in chain)
        hs = onnx.helper.make_node("HardSigmoid", [x], list(nd.output), name=nd.name, alpha=alpha, beta=beta)
        made[nd.output[0]] = (hs, x, alpha, beta)
        out.append(hs)

    for nd in nodes:
        if nd.op_type in ("Max", "Min") and len(nd.input) == 2:
            hit = hard_sigmoid(nd)
            if hit is not None:
                emit_hard_sigmoid(nd, hit)
                continue
        if nd.op_type == "Div" and len(nd.input) == 2 and nd.input[1] in scalars and scalars[nd.input[1]] > 0:
            num, h = nd.input[0], scalars[nd.input[1]]  # the torch form: clip(x + 3, 0, 6) / 6 (times x)
            hit = relu6_over(num, h)
            if hit is not None:
                emit_hard_sigmoid(nd, hit)
                continue
            prod = only(num, "Mul")
            if prod is not None:
                a, b = prod.input
                gated = next(((g, x) for g, x in ((a, b), (b, a)) if swish_gate(relu6_over(g, h), x)), None)
                if gated is not None:
                    dead.update(id(c) for c in relu6_over(gated[0], h)[0] + [prod])  # type: ignore[index]
                    out.append(onnx.helper.make_node("HardSwish", [gated[1]], list(nd.output), name=nd.name))
                    continue
        if nd.op_type == "Mul" and len(nd.input) == 2:
            a, b = nd.input
            swish = next(((gate, x) for gate, x in ((a, b), (b, a)) if gate in made and uses[gate] == 1
                          and swish_gate(made[gate], x)), None)
            if swish is not None:
                dead.add(id(made[swish[0]][0]))
                out.append(onnx.helper.make_node("HardSwish", [swish[1]], list(nd.output), name=nd.name))
                continue
        out.append(nd)
    return out  # the replaced chains' nodes are left unread: drop_unread sweeps them and their scalars


def clamps_as_clip(nodes: list[Any], inits: list[Any], outputs: Iterable[str]) -> list[Any]:
    """``Min(Max(x, lo), hi)`` (or ``Max(Min(x, hi), lo)`` with ``lo <= hi``) with scalar initializer bounds,
    the inner node read only by the outer one, as one ``Clip(x, lo, hi)`` (same values: ONNX defines Clip as
    min(max(x, lo), hi)). ReLU6 / clamp as Max + Min is two passes that onnxruntime neither fuses into the Conv
    before it nor keeps in its NCHWc layout (torchvision MobileNetV2, 1 thread: 270 vs 109 us per call). The
    inner nodes stay in the list, unread, for :func:`drop_unread`."""
    from onnx import helper, numpy_helper

    scalars = {t.name: numpy_helper.to_array(t) for t in inits if len(t.dims) == 0}
    producer = {o: nd for nd in nodes for o in nd.output}
    uses = Counter(_read_names(nodes))
    uses.update(outputs)
    pairs = {"Min": "Max", "Max": "Min"}
    taken: set[int] = set()
    out = []
    for nd in nodes:
        inner = producer.get(nd.input[0]) if nd.op_type in pairs and len(nd.input) == 2 else None
        if (inner is None or nd.input[1] not in scalars or inner.op_type != pairs[nd.op_type] or len(inner.input) != 2
                or inner.input[1] not in scalars or uses[inner.output[0]] != 1 or id(inner) in taken):
            out.append(nd)
            continue
        lo, hi = (inner.input[1], nd.input[1]) if inner.op_type == "Max" else (nd.input[1], inner.input[1])
        if inner.op_type == "Min" and not scalars[lo] <= scalars[hi]:  # Max(Min(x, hi), lo) is Clip only then
            out.append(nd)
            continue
        taken.add(id(inner))
        out.append(helper.make_node("Clip", [inner.input[0], lo, hi], list(nd.output), name=nd.name))
    return out
