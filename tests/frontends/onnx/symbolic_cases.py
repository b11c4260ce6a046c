"""Cases run by tests/frontends/onnx/test_symbolic_import.py in limited child processes (security.isolate)."""

from __future__ import annotations


def conv_chain_range(n: int) -> float:
    """An ONNX file of ``n`` convs (stride 2 every other one) over a symbolic length, imported: the lower bound
    of the length's range."""
    from onnx import TensorProto, helper

    from rlx.frontends.onnx import import_model

    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Conv", [prev, "w"], [f"c{i}"], strides=[1 + i % 2], pads=[1, 0]))
        prev = f"c{i}"
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, "t"])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 3], [0.3] * 3)])
    g, _ = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return float(g.symbol_ranges.get("t", (1, None))[0])
