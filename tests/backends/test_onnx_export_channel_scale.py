"""A 1x1 depthwise conv with constant weights on a matmul's result (the engine export's per-channel scale, e.g.
SwinV2's per-head logit scale) leaves the exporter as Mul; after a conv-layout producer it stays a Conv
(DenseNet's pre-activation BatchNorm, which onnxruntime runs in its blocked layout), except on a Concat's result
for onnxruntime on more than one thread, where it and its shift are one BatchNormalization. Values: NumPy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402


def _run(proto, feed):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)[0]


def _graph(after_matmul: bool):
    rng = np.random.default_rng(0)
    w_mm = rng.standard_normal((5, 5)).astype(np.float32)
    scale = rng.standard_normal((3, 1, 1, 1)).astype(np.float32)
    g = rlx.Graph("scaled")
    x = g.input("x", (2, 3, 4, 5))
    y = g.matmul(x, g.constant(w_mm)) if after_matmul else g.relu(x)
    g.set_outputs([g.conv2d(y, g.constant(scale), kernel_size=[1, 1], stride=[1, 1], padding=[0, 0], dilation=[1, 1],
                            groups=3)])
    return g, w_mm, scale


@pytest.mark.parametrize("after_matmul", [True, False])
def test_depthwise_scale_is_mul_after_a_matmul_only(after_matmul):
    g, w_mm, scale = _graph(after_matmul)
    proto = rlx.onnx.export(g, {})
    ops = Counter(n.op_type for n in proto.graph.node)
    assert (ops["Mul"], ops["Conv"]) == ((1, 0) if after_matmul else (0, 1)), ops
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    y = x @ w_mm if after_matmul else np.maximum(x, 0)
    np.testing.assert_allclose(_run(proto, {"x": x}), y * scale.reshape(1, 3, 1, 1), rtol=1e-5, atol=1e-5)


def test_engine_export_of_a_scaled_matmul_has_no_conv():
    # the engine export folds the per-channel mul / add into a depthwise conv first; on a matmul's result it is a Mul
    from rlx.backends.ort_backend import export_for_session

    rng = np.random.default_rng(2)
    w_mm = rng.standard_normal((5, 5)).astype(np.float32)
    s, b = (rng.standard_normal((1, 3, 1, 1)).astype(np.float32) for _ in range(2))
    g = rlx.Graph("scaled_matmul")
    x = g.input("x", (2, 3, 4, 5))
    g.set_outputs([g.matmul(x, g.constant(w_mm)) * g.constant(s) + g.constant(b)])
    proto = export_for_session(g, {})
    assert "Conv" not in Counter(n.op_type for n in proto.graph.node)
    xv = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(_run(proto, {"x": xv}), (xv @ w_mm) * s + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("producer", ["concat", "add"])
@pytest.mark.parametrize("engine, threads", [("onnxruntime", 2), ("onnxruntime", 1), (None, 2)])
def test_scale_and_shift_of_a_concat_is_batch_normalization_on_onnxruntime_threads(producer, engine, threads):
    """With more than one onnxruntime thread a Concat's per-channel scale and shift is one BatchNormalization
    (DenseNet: the faster form there); on one thread, another engine or another producer (FastViT's residual
    sums) it stays the depthwise Conv and its Add. Values: NumPy, NaN kept."""
    rng = np.random.default_rng(3)
    scale = rng.uniform(0.5, 1.5, (6, 1, 1, 1)).astype(np.float32)
    shift = rng.standard_normal((6, 1, 1)).astype(np.float32)
    g = rlx.Graph("scale_shift")
    a, b = g.input("a", (2, 3, 4, 5)), g.input("b", (2, 3, 4, 5))
    y = g.concat([a, b], axis=1) if producer == "concat" else g.concat([a + b, a], axis=1) + g.concat([b, a], axis=1)
    if producer == "add":  # a sum read by the scale: no concat result under it
        y = g.relu(y) + y
    conv = g.conv2d(y, g.constant(scale), kernel_size=[1, 1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=6)
    g.set_outputs([g.relu(conv + g.constant(shift))])
    proto = rlx.onnx.export(g, {}, engine=engine, threads=threads)
    ops = Counter(n.op_type for n in proto.graph.node)
    as_bn = producer == "concat" and engine == "onnxruntime" and threads > 1
    assert (ops["BatchNormalization"], ops["Conv"]) == ((1, 0) if as_bn else (0, 1)), ops
    av, bv = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(2))
    av[1, 2, 3, 4] = np.nan
    yv = np.concatenate([av, bv], 1) if producer == "concat" else np.concatenate([av + bv, av], 1) + np.concatenate([bv, av], 1)
    if producer == "add":
        yv = np.maximum(yv, 0) + yv
    want = np.maximum(yv * scale.reshape(1, 6, 1, 1) + shift, 0)  # np.maximum keeps NaN
    np.testing.assert_allclose(_run(proto, {"a": av, "b": bv}), want, rtol=1e-5, atol=1e-5)
