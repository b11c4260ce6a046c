"""Large initializers reach onnxruntime as arrays (``export(external=...)`` + ``add_external_initializers``), not as
bytes in the model: the results are those of the numpy executor, the model holds no copy, and decoded GGUF weights
read by two graphs are one array."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.backends.onnx.exporter import EXTERNAL_MIN_BYTES

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _graph(k: int, n: int) -> rlx.Graph:
    g = rlx.Graph("big")
    x = g.input("x", (2, k), "f32")
    g.set_outputs([g.matmul(x, g.param("w", (k, n), "f32")) + g.param("b", (n,), "f32")])
    return g


def test_large_weight_is_handed_over_not_serialized():
    from rlx.backends.ort_backend import export_for_session

    k, n = 512, 1024  # w: 2 MiB, b: 4 KiB
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((k, n)).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32)}
    external: dict[str, np.ndarray] = {}
    proto = export_for_session(_graph(k, n), params, engine="onnxruntime", external=external)
    assert list(external) == ["w"] and external["w"].nbytes >= EXTERNAL_MIN_BYTES
    np.testing.assert_array_equal(external["w"], params["w"])
    inits = {t.name: t for t in proto.graph.initializer}
    assert inits["w"].data_location == 1 and not inits["w"].raw_data  # EXTERNAL, no bytes
    assert inits["b"].raw_data  # small ones stay in the model
    assert len(proto.SerializeToString()) < 64 << 10

    x = rng.standard_normal((2, k)).astype(np.float32)
    import rlx.backends  # registers onnxruntime

    (out,) = rlx.compile(_graph(k, n), backend="onnxruntime", params=params).run(inputs={"x": x})
    np.testing.assert_allclose(out, x.astype(np.float64) @ params["w"] + params["b"], rtol=1e-4, atol=1e-4)


def test_files_keep_their_weights():
    """``rlx.onnx.export`` (no ``external``) writes every initializer's bytes: the file stands alone."""
    from rlx.backends.onnx import export

    k, n = 512, 1024
    params = {"w": np.ones((k, n), np.float32), "b": np.zeros(n, np.float32)}
    proto = export(_graph(k, n), params)
    assert all(t.data_location == 0 for t in proto.graph.initializer)
    assert {t.name: len(t.raw_data) for t in proto.graph.initializer}["w"] == k * n * 4


def test_decoded_gguf_weight_is_shared_by_two_graphs():
    """The LLM's prefill and decode graphs read one packed Q8_0 weight: both sessions get the same decoded array."""
    pytest.importorskip("gguf")
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    from rlx.backends.ort_backend import export_for_session

    n, k = 1024, 512
    rng = np.random.default_rng(1)
    raw = quantize(rng.standard_normal((n, k)).astype(np.float32), GGMLQuantizationType.Q8_0)
    externals = []
    for rows in (1, 4):
        g = rlx.Graph(f"dq{rows}")
        g.set_outputs([g.dequant_matmul(g.input("x", (rows, k), "f32"), g.param("w", raw.shape, "u8"), scheme="gguf_q8_0")])
        externals.append({})
        export_for_session(g, {"w": raw}, engine="onnxruntime", external=externals[-1])
    (a,), (b,) = (list(e.values()) for e in externals)
    assert a is b
    np.testing.assert_array_equal(a, dequantize(raw, GGMLQuantizationType.Q8_0).reshape(n, k).T)


def test_a_new_weight_never_gets_a_freed_ones_decoding():
    """A packed param freed while its decoded array lives on (held by a session) and another of the same size made
    next (often at the same address): the new one is decoded from its own bytes."""
    pytest.importorskip("gguf")
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    from rlx.backends.ort_backend import export_for_session

    n, k = 1024, 512
    g = rlx.Graph("dq")
    g.set_outputs([g.dequant_matmul(g.input("x", (1, k), "f32"), g.param("w", (n, k // 32 * 34), "u8"), scheme="gguf_q8_0")])
    held = []
    for seed in range(3):
        raw = quantize(np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32), GGMLQuantizationType.Q8_0)
        external: dict[str, np.ndarray] = {}
        export_for_session(g, {"w": raw}, engine="onnxruntime", external=external)
        (decoded,) = external.values()
        np.testing.assert_array_equal(decoded, dequantize(raw, GGMLQuantizationType.Q8_0).reshape(n, k).T)
        held.append(decoded)  # as a cached session would
        del raw
