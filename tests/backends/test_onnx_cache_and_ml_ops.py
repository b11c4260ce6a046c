"""ONNX TensorScatter (KV-cache write, linear / circular), MaxUnpool and the ai.onnx.ml Binarizer /
ArrayFeatureExtractor vs onnxruntime (or NumPy written here where onnxruntime lacks the op)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from rlx.frontends.onnx import import_model, import_runnable  # noqa: E402

RNG = np.random.default_rng(0)


def _both(node, feeds, opsets):
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(k, elem[v.dtype], list(v.shape)) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    g, params = import_model(model)
    (got,) = rlx.run(g, feeds, params)
    try:
        (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:  # onnxruntime refuses it (negative ArrayFeatureExtractor indices)
        want = None
    return got, want


def _tensor_scatter_numpy(cache, update, w, axis, mode):
    out = cache.copy()
    length = cache.shape[axis]
    for idx in np.ndindex(cache.shape[:axis]):
        for j in range(update.shape[axis]):
            p = w[idx[0]] + j
            out[(*idx, p % length if mode == "circular" else p)] = update[(*idx, j)]
    return out


@pytest.mark.parametrize("mode,axis,shape,s", [("linear", 2, (2, 3, 6, 4), 2), ("circular", 2, (2, 3, 6, 4), 4),
                                               ("linear", 1, (3, 5, 2), 3), ("circular", -1, (2, 2, 5), 3)])
def test_tensor_scatter(mode, axis, shape, s):
    cache = RNG.standard_normal(shape).astype(np.float32)
    ushape = list(shape)
    ushape[axis] = s
    update = RNG.standard_normal(ushape).astype(np.float32)
    length = shape[axis]
    w = (np.array([length - 1, 1, 0])[: shape[0]] if mode == "circular" else np.array([length - s, 0, 1])[: shape[0]]).astype(np.int64)
    node = helper.make_node("TensorScatter", ["cache", "update", "w"], ["y"], mode=mode, axis=axis)
    got, want = _both(node, {"cache": cache, "update": update, "w": w}, {"": 24})
    np.testing.assert_array_equal(got, _tensor_scatter_numpy(cache, update, w, axis % len(shape), mode))
    if want is not None:
        np.testing.assert_array_equal(got, want)


def test_tensor_scatter_without_write_indices_writes_at_zero():
    cache, update = np.zeros((2, 4, 3), np.float32), np.ones((2, 2, 3), np.float32)
    node = helper.make_node("TensorScatter", ["cache", "update"], ["y"], axis=1)
    got, _ = _both(node, {"cache": cache, "update": update}, {"": 24})
    np.testing.assert_array_equal(got, np.concatenate([update, cache[:, 2:]], axis=1))


def test_binarizer():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.25)
    got, want = _both(node, {"x": x}, {"": 18, "ai.onnx.ml": 3})
    np.testing.assert_array_equal(got, (x > 0.25).astype(np.float32))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,idx", [((3, 5), [[4, 0, 2]]), ((5,), [1, 3]), ((2, 3, 4), [-1, 0])])
def test_array_feature_extractor(shape, idx):
    x = RNG.standard_normal(shape).astype(np.float32)
    i = np.array(idx, np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    got, want = _both(node, {"x": x, "i": i}, {"": 18, "ai.onnx.ml": 3})
    expect = x[..., i.ravel()]
    np.testing.assert_array_equal(got, expect.reshape(1, -1) if x.ndim == 1 else expect)
    if want is not None and i.min() >= 0:  # onnxruntime refuses negative indices
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,kernel,strides,pads,out", [((2, 3, 6, 8), [2, 2], [2, 2], [0, 0, 0, 0], None),
                                                           ((1, 2, 7, 7), [3, 3], [2, 2], [1, 1, 1, 1], [1, 2, 8, 9]),
                                                           ((2, 2, 9), [3], [3], [0, 0], [2, 2, 11]),
                                                           ((1, 2, 4, 4, 6), [2, 2, 2], [2, 2, 2], [0] * 6, None)])
def test_max_unpool_inverts_onnxruntime_max_pool(shape, kernel, strides, pads, out):
    """Indices from onnxruntime's MaxPool (flat over the whole tensor) scattered back (the pools tile the input exactly)."""
    x = RNG.standard_normal(shape).astype(np.float32)
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=kernel, strides=strides, pads=pads)
    outs = [helper.make_tensor_value_info("p", TensorProto.FLOAT, None), helper.make_tensor_value_info("i", TensorProto.INT64, None)]
    graph = helper.make_graph([pool], "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], outs)
    sess = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    p, i = sess.run(None, {"x": x})
    feeds = {"p": p, "i": i}
    names = ["p", "i"]
    if out is not None:
        feeds["o"] = np.array(out, np.int64)
        names.append("o")
    node = helper.make_node("MaxUnpool", names, ["y"], kernel_shape=kernel, strides=strides, pads=pads)
    elem = {"p": TensorProto.FLOAT, "i": TensorProto.INT64, "o": TensorProto.INT64}
    graph = helper.make_graph([node], "u", [helper.make_tensor_value_info(k, elem[k], list(v.shape)) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    (got,) = import_runnable(model).run(feeds)
    # NumPy: the maxima back at their flat positions in the pooled input's shape, then zero-padded to output_shape
    unpooled = np.zeros(x.size, np.float32)
    unpooled[i.reshape(-1)] = p.reshape(-1)
    want = np.pad(unpooled.reshape(shape), [(0, o - s) for o, s in zip(out or shape, shape)])
    np.testing.assert_array_equal(got, want)
    if out is None:  # onnxruntime reads the indices in output_shape's layout instead (the node suite expects the above)
        (ort_out,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        np.testing.assert_array_equal(got, ort_out)
