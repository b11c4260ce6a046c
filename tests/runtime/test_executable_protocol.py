"""Every backend's executable implements rlx.runtime.executable.Executable and runs the one feed check."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.runtime.executable import Executable, ExecutableBase

BACKENDS = ["numpy", "jax", "torch", "onnxruntime"]


def _graph():
    g = rlx.Graph("affine")
    x = g.input("x", (2, 3))
    w = g.param("w", (3,))
    g.set_outputs([x * w + 1.0])
    return g


def _compile(backend):
    pytest.importorskip({"numpy": "numpy", "jax": "jax", "torch": "torch", "onnxruntime": "onnxruntime"}[backend])
    return rlx.compile(_graph(), backend=backend, params={"w": np.array([1.0, 2.0, 3.0], np.float32)})


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_protocol(backend):
    exe = _compile(backend)
    assert isinstance(exe, Executable) and isinstance(exe, ExecutableBase)
    assert exe.backend == backend and exe.feed.input_names == ["x"] and exe.feed.param_names == ["w"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x * np.array([1.0, 2.0, 3.0], np.float32) + 1.0
    np.testing.assert_allclose(exe(x=x)[0], want)
    np.testing.assert_allclose(exe.run({"x": x})[0], want)
    exe.set_params({"w": np.ones(3, np.float32)})
    np.testing.assert_allclose(exe.run({"x": x})[0], x + 1.0)
    assert exe.dispatch_report().ok


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("feed, match", [
    ({}, r"missing input 'x'"),
    ({"x": np.zeros((2, 3), np.float32), "y": np.zeros(1)}, r"unknown input 'y'"),
    ({"x": np.zeros((2, 3), np.float64)}, r"input 'x': dtype float64 given, f32 declared"),
    ({"x": np.zeros((3, 3), np.float32)}, r"input 'x'"),
])
def test_one_feed_check(backend, feed, match):
    exe = _compile(backend)
    with pytest.raises(rlx.FeedError, match=match):
        exe.run(feed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_param_check(backend):
    exe = _compile(backend)
    with pytest.raises(rlx.FeedError, match=r"unknown param\(s\) \['v'\]"):
        exe.set_params({"v": np.ones(3, np.float32)})
