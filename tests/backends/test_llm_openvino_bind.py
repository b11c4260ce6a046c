"""OpenVINO's bound request (``exe.bind``): inputs read in place at each call, outputs equal ``exe.run``'s."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph

pytest.importorskip("openvino")


def _exe():
    import rlx.backends  # registers openvino

    g = Graph("bind")
    x, s = g.input("x", (2, 8), "f32"), g.input("s", (1, 8), "f32")
    w = g.param("w", (8, 3), "f32")
    g.set_outputs([g.matmul(x * s, w), x + 1.0])
    w_val = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
    return rlx.compile(g, backend="openvino", params={"w": w_val}), w_val


def test_bound_request_reads_inputs_in_place():
    exe, w = _exe()
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((2, 8)).astype(np.float32), "s": np.ones((1, 8), np.float32)}
    step = exe.bind(feed)
    for _ in range(3):  # the caller's arrays updated in place between calls
        feed["x"][...] = rng.standard_normal((2, 8))
        feed["s"][0] = rng.standard_normal(8)
        got = [np.array(o) for o in step()]
        want = exe.run(inputs={k: v.copy() for k, v in feed.items()})
        np.testing.assert_allclose(got[0], (feed["x"] * feed["s"]) @ w, rtol=1e-5, atol=1e-5)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_bind_refuses_what_it_cannot_share():
    exe, _ = _exe()
    x = np.zeros((8, 2), np.float32).T  # right shape and dtype, not C-contiguous: cannot be read in place
    with pytest.raises(RlxError, match="C-contiguous"):
        exe.bind({"x": x, "s": np.ones((1, 8), np.float32)})
    with pytest.raises(RlxError):
        exe.bind({"x": np.zeros((2, 8), np.float64), "s": np.ones((1, 8), np.float32)})
    with pytest.raises(RlxError):
        exe.bind({"x": np.zeros((2, 8), np.float32)})
