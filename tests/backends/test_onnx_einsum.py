"""ONNX Einsum with a repeated index in one operand (diagonals, traces) vs numpy.einsum; Det vs numpy.linalg.det
and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from rlx.frontends.onnx import OnnxError, import_model  # noqa: E402

CASES = [
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),  # implicit output: the trace
    ("...ii->...i", [(2, 3, 5, 5)]),
    ("bii->b", [(3, 4, 4)]),
    ("iji->ji", [(3, 2, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("ijij->ji", [(2, 3, 2, 3)]),
    ("ij,jj->i", [(2, 4), (4, 4)]),
    ("ii,ij->j", [(3, 3), (3, 5)]),
]


def _run(eq, arrays):
    names = [f"x{i}" for i in range(len(arrays))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
                                            for n, a in zip(names, arrays)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    g, params = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    return rlx.run(g, dict(zip(names, arrays)), params)[0]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_repeated_index_matches_numpy(eq, shapes):
    rng = np.random.default_rng(len(eq))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = _run(eq, arrays)
    want = np.einsum(eq, *[a.astype(np.float64) for a in arrays])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_einsum_repeated_index_of_different_sizes_is_refused():
    with pytest.raises(OnnxError, match="repeated index 'i'"):
        _run("ii->i", [np.zeros((2, 3), np.float32)])


@pytest.mark.parametrize("case", ["random", "needs_pivot", "singular", "batched", "one"])
def test_det_matches_numpy(case):
    rng = np.random.default_rng(3)
    a = {"random": rng.standard_normal((5, 5)), "batched": rng.standard_normal((2, 3, 4, 4)), "one": rng.standard_normal((3, 1, 1)),
         "needs_pivot": np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 3.0], [4.0, 1.0, 0.0]]),
         "singular": np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 7.0]])}[case].astype(np.float32)
    node = helper.make_node("Det", ["x"], ["y"])
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": a}, params)
    want = np.linalg.det(a.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (ort_out,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": a})
    np.testing.assert_allclose(got, ort_out, rtol=1e-4, atol=1e-4)
