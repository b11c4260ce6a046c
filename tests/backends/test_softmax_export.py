"""softmax on rows holding NaN / ±inf: rlx's rule is torch's (all NaN); the export writes ONNX's ``Softmax``,
which onnxruntime computes the same way. OpenVINO's CPU plugin keeps rows holding NaN / +inf finite (with
``Softmax`` or the exp / sum formula alike: docs/backends.md), so it is checked on the other rows."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
INF, NAN = np.inf, np.nan
ROWS = np.array([[INF, 1, 2], [-INF, 1, 2], [-INF, -INF, -INF], [NAN, 1, 2], [INF, INF, 1], [1, 2, 3],
                 [INF, NAN, 1], [-INF, INF, 0]], np.float32)


def _graph() -> rlx.Graph:
    g = rlx.Graph("softmax_rows")
    x = g.input("x", ROWS.shape)
    g.set_outputs([g.softmax(x, axis=1)])
    return g


def _torch() -> np.ndarray:
    return torch.softmax(torch.from_numpy(ROWS), dim=1).numpy()


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax", "onnxruntime"])
def test_softmax_edge_rows_match_torch(backend: str) -> None:
    pytest.importorskip(backend if backend != "numpy" else "numpy")
    got = rlx.compile(_graph(), backend=backend).run({"x": ROWS})[0]
    np.testing.assert_allclose(np.asarray(got), _torch(), rtol=1e-6, atol=1e-7, equal_nan=True)


def test_softmax_on_openvino_matches_torch_where_no_nan_or_inf_enters() -> None:
    pytest.importorskip("openvino")
    got = rlx.compile(_graph(), backend="openvino").run({"x": ROWS})[0]
    clean = ~(np.isnan(ROWS) | (ROWS == INF)).any(axis=1)  # -inf masks and the all -inf row included
    assert clean.sum() == 3
    np.testing.assert_allclose(got[clean], _torch()[clean], rtol=1e-6, atol=1e-7, equal_nan=True)


def test_export_writes_onnx_softmax() -> None:
    pytest.importorskip("onnx")
    from rlx.backends.onnx import export

    ops = [n.op_type for n in export(_graph()).graph.node]
    assert "Softmax" in ops and "Exp" not in ops
