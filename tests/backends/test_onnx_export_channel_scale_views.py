"""The per-channel scale's Mul form reaches through views, elementwise ops and reductions back to a matmul
(WavLM's gated relative-position bias: a 1x1 depthwise conv on a narrow of a sigmoid of a linear layer);
a conv's result stays a Conv through the same ops (onnxruntime's blocked layout). Values: NumPy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402

RNG = np.random.default_rng(3)
W_MM = RNG.standard_normal((6, 6)).astype(np.float32)
W_CONV = RNG.standard_normal((3, 3, 1, 1)).astype(np.float32)
SCALE = RNG.standard_normal((3, 1, 1, 1)).astype(np.float32)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


PRODUCERS = {  # name: (graph builder, NumPy oracle, Mul expected)
    "narrow_sigmoid_matmul": (lambda g, x: g.narrow(g.sigmoid(g.matmul(x, g.constant(W_MM))), axis=3, start=1, length=2),
                              lambda x: _sigmoid(x @ W_MM)[..., 1:3], True),
    "reshape_sum_matmul": (lambda g, x: g.reshape(g.sum(g.matmul(x, g.constant(W_MM)), axes=[3]), new_shape=[2, 3, 4, 1]),
                           lambda x: (x @ W_MM).sum(axis=3).reshape(2, 3, 4, 1), True),
    "relu_conv": (lambda g, x: g.relu(g.conv2d(x, g.constant(W_CONV), kernel_size=[1, 1], stride=[1, 1], padding=[0, 0],
                                               dilation=[1, 1])),
                  lambda x: np.maximum(np.einsum("oc,nchw->nohw", W_CONV[:, :, 0, 0], x), 0), False),
}


@pytest.mark.parametrize("name", sorted(PRODUCERS))
def test_scale_through_views(name):
    build, oracle, mul = PRODUCERS[name]
    g = rlx.Graph("scaled")
    x = g.input("x", (2, 3, 4, 6))
    g.set_outputs([g.conv2d(build(g, x), g.constant(SCALE), kernel_size=[1, 1], stride=[1, 1], padding=[0, 0],
                            dilation=[1, 1], groups=3)])
    proto = rlx.onnx.export(g, {})
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops["Mul"] >= 1 if mul else ops["Conv"] == 2, ops
    assert ops["Conv"] == (0 if mul else 2), ops
    xv = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": xv})[0]
    np.testing.assert_allclose(got, oracle(xv) * SCALE.reshape(1, 3, 1, 1), rtol=1e-5, atol=1e-5)
