"""ONNX training-domain converters (``ai.onnx.preview.training``): ``Gradient``.

``Gradient(xs, y)`` differentiates the part of the graph computing ``y`` with respect to the
values named by ``xs`` (``zs`` are held fixed). rlx builds that part as a graph of its own,
with ``xs`` and ``zs`` cut into inputs, takes its reverse-mode graph with :func:`rlx.grad`
(seed: ones of ``y``'s shape, so a non-scalar ``y`` gives the gradient of its sum) and
inlines it back: the model's gradients are computed by rlx's own autodiff rules.
"""

from __future__ import annotations

from rlx.backends.onnx.common import OnnxFormatError, OnnxUnsupported
from rlx.backends.onnx.import_context import Importer, SeqValue, converter
from rlx.ir.graph import RESULT, Graph, Value

DOMAIN = "ai.onnx.preview.training"


def _cone(g: Graph, target: int, cut: set[int]) -> set[int]:
    """Node ids ``target`` depends on, not looking through ``cut`` (multi-result producers included)."""
    seen: set[int] = set()
    todo = [target]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        if i in cut:
            continue
        node = g.nodes[i]
        todo.extend(node.inputs)
        if node.op != RESULT and node.extra_types:
            todo.extend(i + r for r in range(1, node.num_results))
    return seen


@converter(f"{DOMAIN}.Gradient")
def _gradient(cx: Importer, node, ins, a):
    from rlx.autodiff import grad
    from rlx.autodiff.rules import broadcast_like, const, zeros_like
    from rlx.opt.graph_edit import inline_into

    xs, zs = list(a.get("xs", [])), list(a.get("zs", []))
    if "y" not in a or not xs:
        raise OnnxFormatError("Gradient needs the attributes 'xs' and 'y'")
    if len(node.input) != len(xs) + len(zs) or len(node.output) != len(xs):
        raise OnnxFormatError(f"Gradient takes one input per name of xs + zs ({len(xs) + len(zs)}) and one output per xs "
                              f"({len(xs)}), has {len(node.input)} / {len(node.output)}")
    y = cx.value(a["y"])
    fixed = [cx.value(n) for n in [*xs, *zs]]
    if isinstance(y, SeqValue) or any(isinstance(v, SeqValue) for v in fixed):
        raise OnnxUnsupported("Gradient of or with respect to a sequence")
    if not y.dtype.is_float:
        raise OnnxFormatError(f"Gradient: y {a['y']!r} is {y.dtype}, a float tensor is expected")
    g = cx.g
    cut = {v.id for v in fixed}
    cone = _cone(g, y.id, cut)
    sub = Graph(f"{g.name}_gradient", ranges=g.symbol_ranges)
    env: dict[int, Value] = {}
    bind: dict[str, Value] = {}

    def leaf(v: Value, name: str) -> Value:
        bind[name] = v
        return sub.input(name, v.shape, v.dtype)

    names: list[str] = []  # the sub-graph input of each of xs + zs (a name given twice is one input)
    for k, v in enumerate(fixed):
        if v.id not in env:
            env[v.id] = leaf(v, f"__x{k}")
        names.append(env[v.id].node.attrs["name"])
    for i in sorted(cone):
        if i in env:
            continue
        n = g.nodes[i]
        if n.op in ("input", "param"):
            env[i] = leaf(g.value(i), f"__leaf{i}")
        else:
            env[i] = sub.append(n.op, [env[j] for j in n.inputs], dict(n.attrs))
    sub.set_outputs([env[y.id]])
    wrt = sorted({names[k] for k, v in enumerate(fixed[: len(xs)]) if v.id in cone and v.dtype.is_float})
    seed = "__seed"
    grads: dict[str, Value] = {}
    if wrt:
        bwd = grad(sub, wrt, seed=seed)
        ones = broadcast_like(g, const(g, 1.0, y.dtype), y)
        outs = inline_into(g, bwd, {**{n: bind[n] for n in bwd.inputs() if n != seed}, seed: ones})
        grads = dict(zip(wrt, outs))
    return [grads[names[k]] if names[k] in grads else zeros_like(g, v) for k, v in enumerate(fixed[: len(xs)])]
