"""ONNX TfIdfVectorizer (integer tokens) against onnxruntime: modes, gram lengths, skips, weights."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402

POOL = [3, 7, 1, 3, 7, 2, 7, 3, 4, 4, 1, 7, 3]  # unigrams 3 7 1; bigrams (3 7) (2 7) (3 4) (4 1); trigram (7 3 x)
COUNTS = [0, 3]


def tfidf_model(elem, shape, **attrs) -> bytes:
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", elem, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("lo,hi,skip", [(1, 1, 0), (1, 2, 3), (2, 2, 1), (2, 3, 2), (3, 3, 0)])
@pytest.mark.parametrize("batched", [False, True])
def test_tfidf_matches_onnxruntime(mode, lo, hi, skip, batched):
    pool, counts = POOL[:11], COUNTS  # unigrams and bigrams
    cols = [6, 0, 2, 1, 5, 3, 4]
    if hi == 3:
        pool, counts, cols = [*pool, 7, 3, 4], [0, 3, 11], [*cols, 7]
    weights = np.linspace(0.5, 2.0, len(cols)).astype(np.float32).tolist()
    shape = [3, 9] if batched else [17]
    elem = TensorProto.INT64 if batched else TensorProto.INT32
    m = tfidf_model(elem, shape, mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip,
                    pool_int64s=pool, ngram_counts=counts, ngram_indexes=cols, weights=weights)
    rng = np.random.default_rng(lo * 10 + hi + skip)
    x = rng.integers(1, 8, shape).astype(np.int64 if batched else np.int32)
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    graph, params = rlx.onnx.import_model(m)
    got = rlx.compile(graph).run({"x": x}, params)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_tfidf_string_pool_is_refused_by_name():
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                            max_skip_count=0, pool_strings=["a"], ngram_counts=[0], ngram_indexes=[0])
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    with pytest.raises(rlx.RlxError, match="pool_strings"):
        rlx.onnx.import_model(m)
