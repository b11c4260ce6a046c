"""Models for the viewer tests, built with onnx.helper at run time: a deep transformer encoder
(a real architecture, random weights, node names in torch.onnx's ``/layers.N/module/Op`` style)
and a model with an If (runtime condition) and a Scan (running sum), both bodies named."""

from __future__ import annotations

import numpy as np


def transformer_onnx(layers: int = 24, d: int = 16, heads: int = 2, seq: int = 8, seed: int = 0):
    """Pre-norm encoder layers: LayerNorm, Q/K/V projections, per-head attention (Reshape /
    Transpose / MatMul / Softmax), output projection, residual, LayerNorm, GELU feed-forward."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def w(name, *shape):
        arr = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, shape, arr.ravel()))
        return name

    def c64(name, vals):
        inits.append(helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals))
        return name

    def op(kind, ins, scope, out=None, **attrs):
        name = f"/{scope}/{kind}_{len(nodes)}"
        out = out or name + "_out"
        nodes.append(helper.make_node(kind, ins, [out], name=name, **attrs))
        return out

    split = c64("heads_shape", [seq, heads, d // heads])
    merge = c64("merge_shape", [seq, d])
    x = "x"
    for i in range(layers):
        s = f"layers.{i}"
        h = op("LayerNormalization", [x, w(f"{s}.ln1.g", d), w(f"{s}.ln1.b", d)], f"{s}/norm1", axis=-1)
        qkv = []
        for p in ("q", "k", "v"):
            t = op("Add", [op("MatMul", [h, w(f"{s}.{p}.w", d, d)], f"{s}/self_attn/{p}_proj"), w(f"{s}.{p}.b", d)],
                   f"{s}/self_attn/{p}_proj")
            t = op("Reshape", [t, split], f"{s}/self_attn")
            qkv.append(op("Transpose", [t], f"{s}/self_attn", perm=[1, 0, 2]))
        q, k, v = qkv
        kt = op("Transpose", [k], f"{s}/self_attn", perm=[0, 2, 1])
        scores = op("Mul", [op("MatMul", [q, kt], f"{s}/self_attn"), w(f"{s}.scale", 1)], f"{s}/self_attn")
        attn = op("MatMul", [op("Softmax", [scores], f"{s}/self_attn", axis=-1), v], f"{s}/self_attn")
        attn = op("Reshape", [op("Transpose", [attn], f"{s}/self_attn", perm=[1, 0, 2]), merge], f"{s}/self_attn")
        attn = op("Add", [op("MatMul", [attn, w(f"{s}.o.w", d, d)], f"{s}/self_attn/out_proj"), w(f"{s}.o.b", d)],
                  f"{s}/self_attn/out_proj")
        x = op("Add", [x, attn], s)
        h = op("LayerNormalization", [x, w(f"{s}.ln2.g", d), w(f"{s}.ln2.b", d)], f"{s}/norm2", axis=-1)
        h = op("Add", [op("MatMul", [h, w(f"{s}.fc1.w", d, 2 * d)], f"{s}/linear1"), w(f"{s}.fc1.b", 2 * d)], f"{s}/linear1")
        h = op("Relu", [h], f"{s}/activation")
        h = op("Add", [op("MatMul", [h, w(f"{s}.fc2.w", 2 * d, d)], f"{s}/linear2"), w(f"{s}.fc2.b", d)], f"{s}/linear2")
        x = op("Add", [x, h], s, out="y" if i == layers - 1 else None)
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, d])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def control_flow_onnx():
    """y = If(c, relu(x) * 2, -x) and s = Scan(running sum over the rows of x)."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="then_relu"),
                                helper.make_node("Add", ["r", "r"], ["t"], name="then_double")], "then_branch", [],
                               [helper.make_tensor_value_info("t", f, [4, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else_branch", [],
                               [helper.make_tensor_value_info("e", f, [4, 3])])
    body = helper.make_graph([helper.make_node("Add", ["acc", "row"], ["acc_next"], name="scan_add"),
                              helper.make_node("Identity", ["acc_next"], ["out_row"], name="scan_emit")], "scan_body",
                             [helper.make_tensor_value_info("acc", f, [3]), helper.make_tensor_value_info("row", f, [3])],
                             [helper.make_tensor_value_info("acc_next", f, [3]), helper.make_tensor_value_info("out_row", f, [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch_on_c", then_branch=then_g, else_branch=else_g),
             helper.make_node("Scan", ["s0", "x"], ["total", "sums"], name="running_sum", body=body, num_scan_inputs=1)]
    graph = helper.make_graph(nodes, "control", [helper.make_tensor_value_info("x", f, [4, 3]),
                                                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                 helper.make_tensor_value_info("s0", f, [3])],
                              [helper.make_tensor_value_info("y", f, [4, 3]), helper.make_tensor_value_info("total", f, [3]),
                               helper.make_tensor_value_info("sums", f, [4, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
