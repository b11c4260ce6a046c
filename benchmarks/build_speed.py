"""Build + verify + print speed of transformer-like MIR graphs, next to jax.make_jaxpr and onnx-ir.

Run: python benchmarks/build_speed.py [--sizes 2000,20000,100000] [--repeat 3] [--quick]

The same pre-norm transformer stack (layer_norm, q/k/v projections, attention from matmul +
softmax, gelu MLP, residuals) is built three ways, in alternation, medians of --repeat rounds:

* rlx: ``rlx.Graph`` builder calls (shape inference per node), then ``rlx.verify``;
* jax: ``jax.make_jaxpr`` of the same model written in ``jax.numpy`` (tracing does jax's shape
  and dtype checks, so it is compared with rlx build + verify), counted per jaxpr equation;
* onnx-ir: the same graph built node by node with ``onnx_ir`` (no shape inference, no checks),
  compared with rlx build alone. Skipped when onnx-ir is not installed.

Ratios are time per node, rlx / peer (< 1: rlx is faster). CPU-time medians; wall medians shown.
Target (issue 2): build + verify >= 50k nodes/s; time per node at 100k within 1.5x of 2k.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_common_args, measure, parse_sizes, print_footer, print_growth, print_header, print_table, ratio, verdict

import rlx

B, S, H, D = 2, 16, 4, 8
E = H * D
SHAPES = {"ln1_g": (E,), "ln1_b": (E,), "wq": (E, E), "wk": (E, E), "wv": (E, E), "wo": (E, E),
          "ln2_g": (E,), "ln2_b": (E,), "w1": (E, 4 * E), "b1": (4 * E,), "w2": (4 * E, E)}


def build_rlx(layers: int) -> rlx.Graph:
    g = rlx.Graph("transformer")
    x = g.input("x", (B, S, E))
    for i in range(layers):
        p = {n: g.param(f"l{i}.{n}", shape) for n, shape in SHAPES.items()}
        h = g.layer_norm(x, p["ln1_g"], p["ln1_b"])

        def heads(t):
            return g.transpose(g.reshape(t, [B, S, H, D]), perm=[0, 2, 1, 3])

        q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
        scores = g.matmul(q, g.transpose(k, perm=[0, 1, 3, 2])) * (D**-0.5)
        att = g.matmul(g.softmax(scores, axis=-1), v)
        att = g.reshape(g.transpose(att, perm=[0, 2, 1, 3]), [B, S, E])
        x = x + att @ p["wo"]
        f = g.gelu(g.layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"]) @ p["w2"]
        x = x + f
    g.set_outputs([x])
    return g


def jax_trace(layers: int):
    """A function that traces the model with jax.make_jaxpr and returns the jaxpr; a fresh model
    function each call, so jax's trace cache (keyed on the function) cannot answer instead."""
    import jax
    import jax.numpy as jnp

    def layer_norm(t, gamma, beta):
        mu = t.mean(-1, keepdims=True)
        var = ((t - mu) ** 2).mean(-1, keepdims=True)
        return (t - mu) / jnp.sqrt(var + 1e-5) * gamma + beta

    def model(x, params):  # re-created by make() below
        for p in params:
            h = layer_norm(x, p["ln1_g"], p["ln1_b"])

            def heads(t):
                return t.reshape(B, S, H, D).transpose(0, 2, 1, 3)

            q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
            att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * D**-0.5, axis=-1) @ v
            x = x + att.transpose(0, 2, 1, 3).reshape(B, S, E) @ p["wo"]
            x = x + jax.nn.gelu(layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"], approximate=False) @ p["w2"]
        return x

    params = [{k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in SHAPES.items()} for _ in range(layers)]
    x = jax.ShapeDtypeStruct((B, S, E), jnp.float32)
    code = model.__code__

    def make():
        fresh = type(model)(code, model.__globals__, "model", None, model.__closure__)
        return jax.make_jaxpr(fresh)(x, params)

    return make


def build_onnx_ir(layers: int):
    """The same stack as an onnx_ir.Model, built node by node (ONNX opset 20 ops)."""
    import numpy as np
    import onnx_ir as ir

    f32 = ir.TensorType(ir.DataType.FLOAT)
    nodes: list = []

    def op(op_type: str, *inputs, **attrs):
        node = ir.node(op_type, list(inputs), attributes=attrs)
        nodes.append(node)
        return node.outputs[0]

    def const(name: str, array):
        v = ir.Value(name=name, const_value=ir.tensor(array, name=name))
        return v

    x = ir.Value(name="x", shape=ir.Shape([B, S, E]), type=f32)
    graph_inputs = [x]
    split_shape, merge_shape = const("split_shape", np.array([B, S, H, D], np.int64)), const("merge_shape", np.array([B, S, E], np.int64))
    scale = const("scale", np.array(D**-0.5, np.float32))
    for i in range(layers):
        p = {}
        for n, s in SHAPES.items():
            p[n] = ir.Value(name=f"l{i}.{n}", shape=ir.Shape(list(s)), type=f32)
            graph_inputs.append(p[n])
        h = op("LayerNormalization", x, p["ln1_g"], p["ln1_b"], axis=-1)

        def heads(t):
            return op("Transpose", op("Reshape", t, split_shape), perm=[0, 2, 1, 3])

        q, k, v = (heads(op("MatMul", h, p[w])) for w in ("wq", "wk", "wv"))
        scores = op("Mul", op("MatMul", q, op("Transpose", k, perm=[0, 1, 3, 2])), scale)
        att = op("MatMul", op("Softmax", scores, axis=-1), v)
        att = op("Reshape", op("Transpose", att, perm=[0, 2, 1, 3]), merge_shape)
        x = op("Add", x, op("MatMul", att, p["wo"]))
        ln2 = op("LayerNormalization", x, p["ln2_g"], p["ln2_b"], axis=-1)
        x = op("Add", x, op("MatMul", op("Gelu", op("Add", op("MatMul", ln2, p["w1"]), p["b1"])), p["w2"]))
    graph = ir.Graph(graph_inputs, [x], nodes=nodes, initializers=[split_shape, merge_shape, scale],
                     opset_imports={"": 20}, name="transformer")
    return ir.Model(graph, ir_version=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "2000,20000,100000", 3)
    args = ap.parse_args()
    sizes, repeat = parse_sizes(args.sizes), args.repeat
    if args.quick:
        sizes, repeat = [2000, 20000], 2
    try:
        import jax  # noqa: F401
        have_jax = True
    except ImportError:
        have_jax = False
    try:
        import onnx_ir  # noqa: F401
        have_ir = True
    except ImportError:
        have_ir = False
    print_header("build + verify speed (build_speed.py)",
                 f"peers: {'jax.make_jaxpr' if have_jax else 'no jax'}, {'onnx-ir' if have_ir else 'no onnx-ir'}; "
                 f"medians of {repeat} interleaved rounds, process CPU time")
    nodes_per_layer = len(build_rlx(1)) - 1
    rows, per_node = [], {}
    for target in sizes:
        layers = max(1, target // nodes_per_layer)
        g = build_rlx(layers)
        n = len(g)
        fns = {"build": lambda layers=layers: build_rlx(layers), "verify": lambda g=g: rlx.verify(g), "print": lambda g=g: str(g)}
        eqns = ir_nodes = 0
        if have_jax:
            trace = jax_trace(layers)
            eqns = len(trace().jaxpr.eqns)  # also warms jax's caches
            fns["jax"] = trace
        if have_ir:
            ir_nodes = len(build_onnx_ir(layers).graph)
            fns["onnx-ir"] = lambda layers=layers: build_onnx_ir(layers)
        t = measure(fns, repeat)
        tb, tv = t["build"].median_cpu, t["verify"].median_cpu
        per_node[target] = (tb + tv) / n
        jax_pn = t["jax"].median_cpu / eqns if have_jax else float("nan")
        ir_pn = t["onnx-ir"].median_cpu / ir_nodes if have_ir else float("nan")
        rows.append([n, n / tb, n / tv, n / t["print"].median_cpu, n / (tb + tv), n / (t["build"].median_wall + t["verify"].median_wall),
                     eqns or "n/a", 1 / jax_pn, ratio((tb + tv) / n, jax_pn), ir_nodes or "n/a", 1 / ir_pn, ratio(tb / n, ir_pn)])
    print_table(["rlx nodes", "build/s", "verify/s", "print/s", "build+verify/s", "(wall)", "jax eqns", "make_jaxpr eqns/s",
                 "rlx b+v / jax (per node)", "onnx-ir nodes", "onnx-ir build nodes/s", "rlx build / onnx-ir (per node)"], rows)
    rate = min(r[4] for r in rows)
    print(f"\nbuild + verify: slowest {rate:,.0f} nodes/s (target >= 50,000: {verdict(rate >= 50_000)})")
    print_growth(per_node)
    print_footer()


if __name__ == "__main__":
    main()
