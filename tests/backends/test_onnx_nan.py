"""ONNX Max / Min propagate NaN as onnxruntime does (rlx's binary max / min; fmax / fmin ignore NaN).

(onnxruntime's ReduceMax / ReduceMin skip a NaN unless it comes first, so they are not pinned here.)"""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

X = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, -1.0]], np.float32)
Y = np.array([[np.nan, 2.0, 0.0], [5.0, np.nan, -2.0]], np.float32)


def model(node, n_inputs):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "xy"[:n_inputs]]
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("node,n", [(helper.make_node("Max", ["x", "y"], ["z"]), 2), (helper.make_node("Min", ["x", "y"], ["z"]), 2),
                                    (helper.make_node("Max", ["x"], ["z"]), 1)])
def test_nan_propagates_like_onnxruntime(node, n):
    m = model(node, n)
    feed = dict(zip("xy"[:n], (X, Y)))
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    g, params = import_model(m)
    (got,) = rlx.run(g, feed, params)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).sum() == np.isnan(X if n == 1 else X + Y).sum()
