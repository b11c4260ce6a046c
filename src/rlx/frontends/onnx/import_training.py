"""ONNX training-domain converters (``ai.onnx.preview.training``): ``Gradient`` and the optimizers.

``Gradient(xs, y)`` differentiates the part of the graph computing ``y`` with respect to the
values named by ``xs`` (``zs`` are held fixed). rlx builds that part as a graph of its own,
with ``xs`` and ``zs`` cut into inputs, takes its reverse-mode graph with :func:`rlx.grad`
(seed: ones of ``y``'s shape, so a non-scalar ``y`` gives the gradient of its sum) and
inlines it back: the model's gradients are computed by rlx's own autodiff rules.

``Adagrad``, ``Momentum`` (standard and Nesterov) and ``Adam`` are one update step each, written
out elementwise as the ONNX spec defines them (the step count T is a tensor: bias correction and
the first-step coefficient are ``where``s on T > 0).
"""

from __future__ import annotations

from rlx.frontends.onnx.import_context import Importer, SeqValue, converter
from rlx.ir.graph import RESULT, Graph, Value
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported

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


# ---------------------------------------------------------------- optimizers: one update step
def _groups(node, ins, k: int, what: str) -> tuple[Value, Value, list[list[Value]]]:
    """``R, T`` and ``k`` lists of n tensors (X..., G..., V...) of an optimizer node."""
    if len(ins) < 2 + k or (len(ins) - 2) % k or any(v is None for v in ins):
        raise OnnxFormatError(f"{what} takes R, T and {k} tensors per optimised tensor, got {len(ins)} inputs")
    n = (len(ins) - 2) // k
    return ins[0], ins[1], [list(ins[2 + i * n: 2 + (i + 1) * n]) for i in range(k)]


def _coefficients(cx: Importer, r: Value, t: Value, like: Value) -> tuple[Value, Value, Value]:
    """R and T in ``like``'s dtype (scalars), and whether T > 0 (the step is not the first)."""
    g = cx.g
    rf = r if r.dtype == like.dtype else g.cast(r, to=like.dtype)
    tf = t if t.dtype == like.dtype else g.cast(t, to=like.dtype)
    return rf, tf, g.gt(t, cx.scalar(0, t))


def _regularized(cx: Importer, x: Value, grad: Value, norm: float) -> Value:
    return grad if norm == 0 else cx.scalar(norm, x) * x + grad


@converter(f"{DOMAIN}.Adagrad")
def _adagrad(cx: Importer, node, ins, a):
    """X_new = X - R / (1 + T * decay) * G' / (sqrt(H_new) + eps), H_new = H + G'^2, G' = norm * X + G."""
    r, t, (xs, gs, hs) = _groups(node, ins, 3, "Adagrad")
    outs_x, outs_h = [], []
    for x, grad, h in zip(xs, gs, hs):
        rf, tf, _ = _coefficients(cx, r, t, x)
        lr = rf / (cx.scalar(1.0, x) + tf * cx.scalar(a.get("decay_factor", 0.0), x))
        gr = _regularized(cx, x, grad, a.get("norm_coefficient", 0.0))
        h_new = h + gr * gr
        outs_x.append(x - lr * gr / (cx.g.sqrt(h_new) + cx.scalar(a.get("epsilon", 1e-6), x)))
        outs_h.append(h_new)
    return [*outs_x, *outs_h]


@converter(f"{DOMAIN}.Momentum")
def _momentum(cx: Importer, node, ins, a):
    """V_new = alpha * V + beta' * G' (beta' = 1 at T = 0); X_new = X - R * V_new, or, in mode
    nesterov, X - R * (G' + alpha * V_new)."""
    r, t, (xs, gs, vs) = _groups(node, ins, 3, "Momentum")
    mode = a.get("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise OnnxFormatError(f"Momentum mode must be 'standard' or 'nesterov', got {mode!r}")
    alpha, beta = a.get("alpha", 0.0), a.get("beta", 0.0)
    outs_x, outs_v = [], []
    for x, grad, v in zip(xs, gs, vs):
        rf, _, later = _coefficients(cx, r, t, x)
        gr = _regularized(cx, x, grad, a.get("norm_coefficient", 0.0))
        beta_t = cx.g.where(later, cx.scalar(beta, x), cx.scalar(1.0, x))
        v_new = cx.scalar(alpha, x) * v + beta_t * gr
        step = v_new if mode == "standard" else gr + cx.scalar(alpha, x) * v_new
        outs_x.append(x - rf * step)
        outs_v.append(v_new)
    return [*outs_x, *outs_v]


@converter(f"{DOMAIN}.Adam")
def _adam(cx: Importer, node, ins, a):
    """V_new = alpha * V + (1 - alpha) * G', H_new = beta * H + (1 - beta) * G'^2; the rate is
    R * sqrt(1 - beta^T) / (1 - alpha^T) for T > 0 (bias correction), else R;
    X_new = (1 - norm_post) * (X - rate * V_new / (sqrt(H_new) + eps))."""
    r, t, (xs, gs, vs, hs) = _groups(node, ins, 4, "Adam")
    alpha, beta, eps = a.get("alpha", 0.9), a.get("beta", 0.999), a.get("epsilon", 1e-6)
    post = a.get("norm_coefficient_post", 0.0)
    outs_x, outs_v, outs_h = [], [], []
    for x, grad, v, h in zip(xs, gs, vs, hs):
        rf, tf, later = _coefficients(cx, r, t, x)
        gr = _regularized(cx, x, grad, a.get("norm_coefficient", 0.0))
        one = cx.scalar(1.0, x)
        v_new = cx.scalar(alpha, x) * v + cx.scalar(1.0 - alpha, x) * gr
        h_new = cx.scalar(beta, x) * h + cx.scalar(1.0 - beta, x) * (gr * gr)
        corrected = rf * cx.g.sqrt(one - cx.scalar(beta, x) ** tf) / (one - cx.scalar(alpha, x) ** tf)
        rate = cx.g.where(later, corrected, rf)
        x_new = x - rate * (v_new / (cx.g.sqrt(h_new) + cx.scalar(eps, x)))
        outs_x.append(x_new if post == 0 else cx.scalar(1.0 - post, x) * x_new)
        outs_v.append(v_new)
        outs_h.append(h_new)
    return [*outs_x, *outs_v, *outs_h]
