"""ONNX activations composed of several MIR ops round once on f16 / bf16 (docs/semantics.md#conventions):
checked against the exact value (NumPy in float64) rounded once to the element type."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto, helper  # noqa: E402

from rlx.frontends.onnx import import_model  # noqa: E402


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


CASES = {  # op, attributes, float64 oracle
    "Elu": ({"alpha": 0.7}, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "Celu": ({"alpha": 2.0}, lambda x: np.maximum(0, x) + np.minimum(0, 2.0 * np.expm1(x / 2.0))),
    "Selu": ({}, lambda x: 1.05070102214813232421875 * np.where(x > 0, x, 1.67326319217681884765625 * np.expm1(x))),
    "Softplus": ({}, lambda x: np.log1p(np.exp(x))),
    "Softsign": ({}, lambda x: x / (1 + np.abs(x))),
    "Mish": ({}, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, lambda x: np.clip(0.3 * x + 0.4, 0, 1)),
    "HardSwish": ({}, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "Swish": ({"alpha": 1.5}, lambda x: x * _sigmoid(1.5 * x)),
}
TYPES = {"bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16, 2.0 ** -7), "f16": (TensorProto.FLOAT16, np.float16, 2.0 ** -10)}


def _run(op, attrs, x, elem, opset):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", elem, list(x.shape))],
                              [helper.make_tensor_value_info("y", elem, list(x.shape))])
    g, params = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    return rlx.run(g, {"x": x}, params)[0]


@pytest.mark.parametrize("dtype", sorted(TYPES))
@pytest.mark.parametrize("op", sorted(CASES))
def test_composite_activation_rounds_once(op, dtype):
    elem, np_dtype, eps = TYPES[dtype]
    attrs, oracle = CASES[op]
    x = np.random.default_rng(0).uniform(-4, 4, 512).astype(np_dtype)
    got = _run(op, attrs, x, elem, {"Swish": 24, "Celu": 28}.get(op, 18))  # Celu-28: any float type
    assert got.dtype == np_dtype
    want = oracle(x.astype(np.float64))
    rounded = want.astype(np_dtype)
    got64 = got.astype(np.float64)
    # at most one ulp off, and bit-equal to the once-rounded exact value nearly everywhere
    # (f32 evaluation can land on the other side of a rounding boundary only very rarely)
    assert np.all(np.abs(got64 - want) <= eps * np.maximum(np.abs(want), 2.0 ** -14) + 1e-30)
    assert (got == rounded).mean() >= 0.99


def test_celu_bfloat16_node_case_value():
    """The ONNX node case: Celu(alpha=2) at -0.5 is 2 * expm1(-0.25) = -0.44240 -> -0.443359375 in bf16
    (rounding exp(-0.25) first gives -0.4453125)."""
    x = np.array([-3.0, -0.5, 0.0, 0.5, 3.0], ml_dtypes.bfloat16)
    got = _run("Celu", {"alpha": 2.0}, x, TensorProto.BFLOAT16, 28)
    assert float(got[1]) == -0.443359375
