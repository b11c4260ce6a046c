"""grouped_matmul (per-token expert matmul) exported to ONNX as GatherND + batched MatMul: every op case
(int / float ids, unused experts, a lead batch dim) passes the full checker and runs in onnxruntime equal to
the case's own NumPy oracle; a MoE layer built from it also on a symbolic token count."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402

CASES = [c for c in collect().cases if c.op == "grouped_matmul"]


def _ort(g, params, inputs):
    proto = rlx.onnx.export(g, params)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    assert "GatherND" in {n.op_type for n in proto.graph.node}
    return sess.run(None, inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_grouped_matmul_cases_run_in_onnxruntime(case):
    g, _ = case.graph()
    inputs, params = case.split_feed()
    for got, want in zip(_ort(g, params, inputs), case.expected()):
        np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-5), atol=max(case.atol, 1e-6))


def test_top1_moe_layer_on_a_symbolic_token_count():
    """Router argmax picks an expert per token; the expert matmul is grouped_matmul; tokens are ``t``."""
    rng = np.random.default_rng(0)
    e, k, n = 4, 6, 5
    g = rlx.Graph("moe")
    x = g.input("x", ("t", k))
    router, w = g.param("router", (k, e)), g.param("w", (e, k, n))
    ids = g.arg_reduce(g.matmul(x, router), op="argmax", axis=1, keep_dim=False)
    g.set_outputs([g.grouped_matmul(x, w, ids)])
    params = {"router": rng.standard_normal((k, e)).astype(np.float32), "w": rng.standard_normal((e, k, n)).astype(np.float32)}
    for t in (3, 9):
        xs = rng.standard_normal((t, k)).astype(np.float32)
        pick = np.argmax(xs @ params["router"], axis=1)
        want = np.einsum("tk,tkn->tn", xs, params["w"][pick])
        (got,) = _ort(g, params, {"x": xs})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
