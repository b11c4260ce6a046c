"""Cases run by tests/frontends/test_pool_window.py in limited child processes (security.isolate)."""

from __future__ import annotations

import numpy as np


def huge_window_mean_error(k: int) -> float:
    """A ``k``-wide ceil_mode AveragePool over 7x7 in an ONNX file, imported and run: its largest difference
    from the plane means (NumPy)."""
    from onnx import TensorProto, helper

    import rlx
    from rlx.frontends.onnx import import_model

    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[k, k], strides=[k, k], ceil_mode=1)
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    x = np.random.default_rng(0).standard_normal((1, 2, 7, 7)).astype(np.float32)
    g, params = import_model(model.SerializeToString())
    (y,) = rlx.run(g, {"x": x}, params)
    return float(np.abs(y - x.mean(axis=(2, 3), keepdims=True)).max())
