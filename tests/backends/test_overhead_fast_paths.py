"""The per-run fast paths (a plain feed skips the full check): same results as the full path, the
full path's errors where the fast one does not apply, and on every backend outputs that are the caller's
own arrays (a later run never writes into an earlier result)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.errors import FeedError


def _graph() -> rlx.Graph:
    g = rlx.Graph("small")
    x = g.input("x", (4, 16))
    h = g.layer_norm(x * g.param("s", (16,)), g.param("g", (16,)), g.param("b", (16,)))
    g.set_outputs([g.relu(h), x * 2.0])
    return g


def _params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(16).astype(np.float32) for k in ("s", "g", "b")}


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((4, 16)).astype(np.float32)


def _compile(backend: str, params):
    if backend == "torch":
        pytest.importorskip("torch")
    elif backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    elif backend == "openvino":
        pytest.importorskip("openvino")
    elif backend == "numpy jit":
        pytest.importorskip("numba")
        return rlx.compile(_graph(), backend="numpy", params=params, kernels="jit")
    return rlx.compile(_graph(), backend=backend, params=params)


BACKENDS = ["numpy", "numpy jit", "torch", "onnxruntime", "openvino"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_are_the_callers_own_arrays(backend):
    p = _params()
    exe = _compile(backend, p)
    x1, x2 = _x(1), _x(2)
    first = exe.run({"x": x1})
    kept = [a.copy() for a in first]
    second = exe.run({"x": x2})
    for a, b, k in zip(first, second, kept):
        assert not np.shares_memory(a, b)
        np.testing.assert_array_equal(a, k)  # the second run wrote nowhere into the first's results
    assert not np.shares_memory(first[1], x1)
    for a in first:
        a[...] = 7.0  # the caller may write its results
    want = rlx.run(_graph(), {"x": x1}, p)
    for got, w in zip(exe.run({"x": x1}), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_numpy_fast_path_equals_the_full_path_bit_for_bit():
    p = _params()
    exe = rlx.compile(_graph(), backend="numpy", params=p)
    x = _x(3)
    fast = exe.run({"x": x})
    full = exe.run({"x": x.tolist()})  # a list is no plain feed: the full check converts it
    for a, b, w in zip(fast, full, rlx.run(_graph(), {"x": x}, p)):
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(b, w)


def test_numpy_fast_path_needs_every_param_bound():
    exe = rlx.compile(_graph(), backend="numpy", params={"s": _params()["s"]})  # g and b never bound
    with pytest.raises(FeedError, match="'g'"):
        exe.run({"x": _x(4)})


@pytest.mark.parametrize("bad,what", [(np.zeros((4, 16), np.float64), "dtype float64"), (np.zeros((4, 15), np.float32), "15")])
def test_numpy_fast_path_leaves_bad_feeds_to_the_full_check(bad, what):
    exe = rlx.compile(_graph(), backend="numpy", params=_params())
    with pytest.raises(FeedError, match=what):
        exe.run({"x": bad})


def test_numpy_fast_path_run_params_still_bind():
    p, q = _params(0), _params(1)
    exe = rlx.compile(_graph(), backend="numpy", params=p)
    x = _x(5)
    np.testing.assert_array_equal(exe.run({"x": x}, q)[0], rlx.run(_graph(), {"x": x}, q)[0])
    np.testing.assert_array_equal(exe.run({"x": x})[0], rlx.run(_graph(), {"x": x}, q)[0])  # they stayed bound
