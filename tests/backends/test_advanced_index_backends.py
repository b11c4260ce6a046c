"""advanced_index / advanced_index_put on every backend: each op case exported to ONNX and run by
onnxruntime against rlx.run, compiled through optimize → plan → numpy, and out-of-range indices raising
the same RlxError on the reference, the compiled NumPy plan and JAX."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect

CASES = [c for c in collect().cases if c.op.startswith("advanced_index") and "duplicates_last" not in c.name]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_onnx_export_matches_reference(case):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import rlx.onnx

    g, _ = case.graph()
    proto = rlx.onnx.export(g)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(sess.run(None, case.feed), rlx.run(g, case.feed)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)


def _out_of_range(op: str) -> tuple[rlx.Graph, dict]:
    g = rlx.Graph("oor")
    x, i = g.input("x", (4, 3), "f32"), g.input("i", (2,), "i64")
    if op == "advanced_index":
        y = g.advanced_index([x, i], pattern="i")
    else:
        y = g.advanced_index_put([x, g.constant(np.ones(3, np.float32)), i], pattern="i", accumulate=True)
    g.set_outputs([y])
    return g, {"x": np.ones((4, 3), np.float32), "i": np.array([1, -5])}


def _compiled_numpy(g):
    mod = rlx.plan(rlx.optimize(g)[0])
    return rlx.compile(mod, backend="numpy")


@pytest.mark.parametrize("op", ["advanced_index", "advanced_index_put"])
def test_out_of_range_raises_the_same_error_everywhere(op):
    g, feed = _out_of_range(op)
    msg = f"{op}: index -5 is out of range for axis 0 of size 4"
    with pytest.raises(rlx.RlxError, match=msg):
        rlx.run(g, feed)
    with pytest.raises(rlx.RlxError, match=msg):
        _compiled_numpy(g).run(feed)
    pytest.importorskip("jax")
    with pytest.raises(rlx.RlxError, match=msg):
        rlx.compile(g, backend="jax").run(feed)
    np.testing.assert_array_equal(rlx.compile(g, backend="jax").run({**feed, "i": np.array([1, -4])})[0],
                                  rlx.run(g, {**feed, "i": np.array([1, -4])})[0])
