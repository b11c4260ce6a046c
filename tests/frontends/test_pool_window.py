"""Pooling windows longer than the axis they pool (``ceil_mode`` allows it: transformers' EfficientNet
average-pools a 7x7 map with a 1280x1280 window): the values of torch / onnxruntime, and no intermediate
extended to the window's length (lowered as written, one such pool held 1280x1280 planes per channel)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn, _x, check  # noqa: E402


def _largest(g: rlx.Graph) -> int:
    return max(math.prod(t.shape) for node in g.nodes for t in node.types)


def _bounded(g: rlx.Graph, x_size: int) -> None:
    assert _largest(g) <= 4 * x_size, f"an intermediate of {_largest(g)} elements for an input of {x_size}"


@pytest.mark.parametrize("fn", [
    lambda x: F.avg_pool2d(x, 1280, ceil_mode=True),  # transformers' EfficientNet pooler
    lambda x: F.avg_pool2d(x, 1280, ceil_mode=True, count_include_pad=False),
    lambda x: F.avg_pool2d(x, (12, 40), (12, 40), ceil_mode=True, divisor_override=3),
    lambda x: F.max_pool2d(x, 1000, ceil_mode=True),
    lambda x: F.max_pool2d(x, (12, 1000), ceil_mode=True, return_indices=True),
])
def test_torch_pool_window_longer_than_the_axis(fn):
    x = _x(1, 8, 7, 9)
    check(Fn(fn), x, rtol=1e-5, atol=1e-6)
    g, _ = rlx.torch.import_module(Fn(fn), (x,))
    _bounded(g, x.numel())


@pytest.mark.parametrize(("op", "attrs"), [
    ("AveragePool", {"kernel_shape": [1280, 1280], "strides": [1280, 1280], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [1280, 1280], "strides": [1280, 1280], "ceil_mode": 1, "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [12, 6], "strides": [12, 4], "pads": [1, 0, 1, 1], "ceil_mode": 1, "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [1000, 1000], "strides": [1000, 1000], "ceil_mode": 1}),
    ("LpPool", {"kernel_shape": [500, 500], "strides": [500, 500], "ceil_mode": 1}),
])
def test_onnx_pool_window_longer_than_the_axis(op, attrs):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from rlx.frontends.onnx import import_model

    x = np.random.default_rng(0).standard_normal((1, 8, 7, 9)).astype(np.float32)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    _bounded(g, x.size)


def test_a_file_asking_for_a_2_to_the_40_window_imports_and_runs_bounded():
    """Hostile-size window in a file (a 2**40-wide ceil_mode AveragePool over 7x7): imported and run in a child
    process under 3 GiB and 60 s of CPU, it gives the plane means (NumPy; before windows were cut, a typed refusal
    of the divisor's 2**80 elements)."""
    pytest.importorskip("onnx")
    from security.isolate import run_cases

    (out,) = run_cases(os.path.join(os.path.dirname(__file__), "pool_window_cases.py"), "huge_window_mean_error",
                       [[1 << 40]], memory=3 << 30, cpu=60)
    assert out.exited and out.error is None and out.value < 1e-6, (out.how, out.raised, out.message, out.value)
