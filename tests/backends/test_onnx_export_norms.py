"""group_norm leaves the exporter as InstanceNormalization over [N, G, rest] plus the affine (float32; other
dtypes keep the formula): onnxruntime and OpenVINO on the export give torch's group_norm."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402


def _graph(shape, groups, dtype):
    g = rlx.Graph("gn")
    x = g.input("x", shape, dtype)
    c = shape[1]
    g.set_outputs([g.group_norm(x, g.param("w", (c,), dtype), g.param("b", (c,), dtype), num_groups=groups, eps=1e-5)])
    return g


@pytest.mark.parametrize(("shape", "groups", "dtype"), [((2, 6, 5, 4), 3, "f32"), ((2, 4, 7), 1, "f32"),
                                                        ((1, 8, 3, 3), 8, "f32"), ((2, 6, 5, 4), 2, "f64")])
def test_group_norm_matches_torch(shape, groups, dtype):
    np_dtype = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np_dtype)
    w, b = (rng.standard_normal(shape[1]).astype(np_dtype) for _ in range(2))
    g = _graph(shape, groups, rlx.DType.F32 if dtype == "f32" else rlx.DType.F64)
    proto = rlx.onnx.export(g, {"w": w, "b": b})
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops["InstanceNormalization"] == (1 if dtype == "f32" else 0), ops
    want = torch.nn.functional.group_norm(torch.from_numpy(x), groups, torch.from_numpy(w), torch.from_numpy(b), 1e-5).numpy()
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    tol = 1e-5 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=tol, atol=tol)
    if dtype == "f32":
        pytest.importorskip("openvino")
        got = rlx.compile(g, backend="openvino", params={"w": w, "b": b}, threads=1).run({"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
