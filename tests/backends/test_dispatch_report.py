"""exe.dispatch_report(): each node's kind is what the backend's own lowering tables say."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx
from rlx.runtime.dispatch import KINDS, dispatch_report

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("onnxruntime")


def _graph():
    g = rlx.Graph("mixed")
    x = g.input("x", (4, 8))
    h = g.gelu(g.matmul(x, g.param("w", (8, 8))))
    h = g.layer_norm(h, g.param("gamma", (8,)), g.param("beta", (8,)))
    h = g.fused_matmul_bias_act(h, g.param("w2", (8, 6)), g.param("b2", (6,)), activation="relu")
    g.set_outputs([g.reshape(h, (24,))])
    return g


def _expected_jax(op: str) -> str:
    from rlx.backends.jax.lowering import DECOMPOSED, LEAVES, LOWERINGS
    from rlx.backends.jax.lowering_ext import HOST

    if op in HOST:
        return "host"
    if op in LOWERINGS:
        return "native"
    if op in DECOMPOSED:
        return "decomposed"
    assert op in LEAVES
    return "leaf"


def _expected_torch(op: str) -> str:
    from rlx.backends.torch_backend.lowering import DECOMPOSED, LEAVES, LOWERINGS

    if op in LEAVES or op == "constant":
        return "leaf"
    return "native" if op in LOWERINGS else "decomposed" if op in DECOMPOSED else "host"


def _expected_ort(op: str) -> str:
    from rlx.backends.onnx.exporter import EXPORTERS

    if op in ("input", "param", "constant"):
        return "leaf"
    return "native" if op in EXPORTERS else "decomposed"


@pytest.mark.parametrize("backend,expected", [("jax", _expected_jax), ("torch", _expected_torch), ("onnxruntime", _expected_ort)])
def test_rows_follow_the_backend_tables(backend, expected):
    g = _graph()
    params = {k: np.ones(v.shape, np.float32) for k, v in g.params().items()}
    exe = rlx.compile(g, backend=backend, params=params)
    report = exe.dispatch_report()
    assert report.backend == backend and [r.node for r in report.rows] == [n.id for n in g.nodes]
    for row in report.rows:
        assert row.kind == expected(row.op), row
    assert report.to_dict() == dispatch_report(g, backend).to_dict()
    assert report.ok


def test_numpy_rows_show_views_and_kernels():
    g = _graph()
    exe = rlx.compile(g, backend="numpy")
    report = exe.dispatch_report()
    views = set(exe.lir.plan.view_aliases)
    assert views, "the reshape should be planned as a view"
    for row in report.rows:
        op = rlx.get_op(row.op)
        if row.node in views:
            assert row.kind == "view"
        elif row.op in ("input", "param", "constant"):
            assert row.kind == "leaf"
        else:
            assert row.kind == "native"
            assert ("writes into" in row.reason) == (op.kernel_into is not None)


def test_refused_ops_are_reported_with_a_reason_and_the_report_serialises():
    g = rlx.Graph("bwd")
    x, dy = g.input("x", (3, 4)), g.input("dy", (3, 4))
    g.set_outputs([g.relu_backward(x, dy)])
    report = dispatch_report(g, "onnxruntime")
    refused = [r for r in report.rows if r.kind == "refused"]
    assert [r.op for r in refused] == ["relu_backward"] and refused[0].reason
    assert not report.ok and report.counts["refused"] == 1
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["ok"] is False and set(doc["counts"]) <= set(KINDS)
    assert "refused" in str(report) and "relu_backward" in str(report)


def test_unknown_backend_is_an_error():
    with pytest.raises(rlx.RlxError, match="no dispatch information"):
        dispatch_report(_graph(), "nonexistent")
