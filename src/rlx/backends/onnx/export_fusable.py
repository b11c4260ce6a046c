"""Rewrites of the exported ONNX node list into the single operators onnxruntime has kernels (and
fusions) for, where rlx's MIR spells the same math with primitives.

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


def fuse_hard_activations(nodes: list[Any], inits: list[Any], outputs: Iterable[str]) -> tuple[list[Any], list[Any]]:
    """``(nodes, inits)`` with HardSigmoid / HardSwish chains replaced by one node each (see the module
    doc) and the initializers only the dropped nodes read (their scalars) left out."""
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

    def hard_sigmoid(nd: Any) -> tuple[list[Any], str, float, float] | None:
        """Max(Min(x*a + b, 1), 0) or Min(Max(x*a + b, 0), 1): the chain, x, alpha, beta."""
        outer = split(nd)
        if outer is None or outer[1] != (0.0 if nd.op_type == "Max" else 1.0):
            return None
        inner_op, bound = ("Min", 1.0) if nd.op_type == "Max" else ("Max", 0.0)
        clip = only(outer[0], inner_op)
        inner = split(clip) if clip is not None else None
        if inner is None or inner[1] != bound:
            return None
        add = only(inner[0], "Add")
        shift = split(add) if add is not None else None
        if shift is None:
            return None
        mul = only(shift[0], "Mul")
        scale = split(mul) if mul is not None else None
        if scale is None:
            return None
        return [mul, add, clip], scale[0], scale[1], shift[1]

    out: list[Any] = []
    made: dict[str, tuple[Any, str, float, float]] = {}  # HardSigmoid output -> (its node, x, alpha, beta)
    for nd in nodes:
        if nd.op_type in ("Max", "Min") and len(nd.input) == 2:
            hit = hard_sigmoid(nd)
            if hit is not None:
                chain, x, alpha, beta = hit
                dead.update(id(c) for c in chain)
                hs = onnx.helper.make_node("HardSigmoid", [x], list(nd.output), name=nd.name, alpha=alpha, beta=beta)
                made[nd.output[0]] = (hs, x, alpha, beta)
                out.append(hs)
                continue
        if nd.op_type == "Mul" and len(nd.input) == 2:
            a, b = nd.input
            swish = next(((gate, x) for gate, x in ((a, b), (b, a)) if gate in made and made[gate][1] == x
                          and uses[gate] == 1 and (np.float32(made[gate][2]), np.float32(made[gate][3])) == _HARD_SWISH), None)
            if swish is not None:
                dead.add(id(made[swish[0]][0]))
                out.append(onnx.helper.make_node("HardSwish", [swish[1]], list(nd.output), name=nd.name))
                continue
        out.append(nd)
    if not dead:
        return nodes, inits
    kept = [nd for nd in out if id(nd) not in dead]
    gone = set(uses) - set(_read_names(kept)) - set(outputs)
    return kept, [t for t in inits if t.name not in gone]
