"""pow's multiplied powers (rlx.ops.powers): for exponents 2 and 3 in f32 / f64, the products
``x * x`` and ``(x * x) * x`` equal torch's ``pow(Tensor, Scalar)`` and onnxruntime's ``Pow`` with
a one-element exponent bit for bit; other exponents and dtypes are left to ``pow``."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import DType
from rlx.ir.graph import Graph
from rlx.ops.powers import MULTIPLIED_DTYPES, MULTIPLIED_EXPONENTS, multiplied_power

CASES = [(d, e) for d in MULTIPLIED_DTYPES for e in MULTIPLIED_EXPONENTS]


def _operand(dtype: DType) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.standard_normal(4096) * rng.choice([1e-3, 1.0, 37.0], 4096)).astype(dtype.numpy)


def _ours(dtype: DType, exponent: float) -> np.ndarray:
    g = Graph()
    y = multiplied_power(g, g.input("x", (4096,), dtype), exponent)
    assert y is not None
    g.set_outputs([y])
    return rlx.run(g, {"x": _operand(dtype)})[0]


@pytest.mark.parametrize("dtype, exponent", CASES, ids=str)
def test_products_equal_torch_pow_bitwise(dtype, exponent):
    torch = pytest.importorskip("torch")
    theirs = torch.pow(torch.from_numpy(_operand(dtype)), exponent).numpy()
    np.testing.assert_array_equal(_ours(dtype, exponent), theirs)


@pytest.mark.parametrize("dtype, exponent", CASES, ids=str)
def test_products_equal_onnxruntime_pow_bitwise(dtype, exponent):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype.numpy))
    node = helper.make_node("Pow", ["x", "e"], ["y"])
    exponent_init = numpy_helper.from_array(np.array([exponent], dtype=dtype.numpy), "e")
    graph = helper.make_graph([node], "pow", [helper.make_tensor_value_info("x", elem, [4096])],
                              [helper.make_tensor_value_info("y", elem, [4096])], [exponent_init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"x": _operand(dtype)})[0]
    np.testing.assert_array_equal(_ours(dtype, exponent), theirs)


@pytest.mark.parametrize("dtype, exponent", [(DType.F32, 0.5), (DType.F32, 4.0), (DType.F16, 2.0), (DType.I32, 3.0)],
                         ids=str)
def test_other_exponents_and_dtypes_are_left_to_pow(dtype, exponent):
    g = Graph()
    assert multiplied_power(g, g.input("x", (3,), dtype), exponent) is None
    assert [n.op for n in g.nodes if n.op == "mul"] == []
