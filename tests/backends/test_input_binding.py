"""The engine backends' input binding (what the LLM decode loop relies on): OpenVINO copies small static inputs into
its request's tensors; both engines wrap larger ones without a copy (onnxruntime with ``bind_inputs=True``: every
input, through an IO binding) and do not wrap them again while the same array object comes back, so an array
updated in place between calls (a KV cache) is read afresh, and copies of non-contiguous arrays never go stale."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

import rlx


def _graph():
    g = rlx.Graph("bound_inputs")
    big = g.input("big", (128, 256))  # 128 KB: wrapped
    small = g.input("small", (1, 256))  # 1 KB: copied
    g.set_outputs([g.sum(big * small, axes=[0])])
    return g


@pytest.mark.parametrize("backend, options", [("onnxruntime", {}), ("onnxruntime", {"bind_inputs": True}),
                                              ("openvino", {})])
def test_in_place_updates_and_views_are_read_afresh(backend, options):
    pytest.importorskip(backend)
    if backend == "openvino":
        from rlx.backends.openvino_backend import COPY_BYTES

        assert 128 * 256 * 4 > COPY_BYTES >= 256 * 4  # one input of each kind
    rng = np.random.default_rng(0)
    exe = rlx.compile(_graph(), backend=backend, threads=1, **options)
    big = rng.standard_normal((128, 256)).astype(np.float32)
    small = rng.standard_normal((1, 256)).astype(np.float32)

    def check(b, s):
        np.testing.assert_allclose(exe.run({"big": b, "small": s})[0], (b * s).sum(0), rtol=1e-4, atol=1e-4)

    check(big, small)
    for step in range(3):  # the same objects, written in place between calls (as the decode loop writes its cache)
        big[step] = rng.standard_normal(256)
        small[0, step] = 10.0 + step
        check(big, small)
    wide = rng.standard_normal((128, 512)).astype(np.float32)
    view = wide[:, ::2]  # not contiguous: copied each call, so a changed view is seen
    check(view, small)
    wide[5] = 3.0
    check(view, small)
    check(big.copy(), small[:, :].copy())  # new objects
    check(big, small)  # and back to the first one


def test_onnxruntime_binding_per_thread():
    """Each calling thread gets its own IO binding: concurrent callers with their own arrays see their own results."""
    pytest.importorskip("onnxruntime")
    from concurrent.futures import ThreadPoolExecutor

    exe = rlx.compile(_graph(), backend="onnxruntime", threads=1, bind_inputs=True)
    rng = np.random.default_rng(1)
    feeds = [(rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((1, 256)).astype(np.float32))
             for _ in range(4)]

    def work(k):
        b, s = feeds[k]
        return all(np.allclose(exe.run({"big": b, "small": s})[0], (b * s).sum(0), rtol=1e-4, atol=1e-4) for _ in range(20))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))


def test_onnxruntime_inplace_outputs_are_checked():
    """``inplace_outputs`` (an output written into an input's own array) needs the IO binding, an existing output
    index and input name, and equal types: each mistake is an RlxError naming it."""
    pytest.importorskip("onnxruntime")
    g = rlx.Graph("inplace_checks")
    a, b = g.input("a", (4, 8)), g.input("b", (1, 8))
    g.set_outputs([a + b, g.sum(a, axes=[0])])
    for options, message in [({"inplace_outputs": {0: "a"}}, "needs bind_inputs=True"),
                             ({"bind_inputs": True, "inplace_outputs": {2: "a"}}, "output index"),
                             ({"bind_inputs": True, "inplace_outputs": {0: "c"}}, "input name"),
                             ({"bind_inputs": True, "inplace_outputs": {1: "a"}}, "does not match input 'a'")]:
        with pytest.raises(rlx.RlxError, match=message):
            rlx.compile(g, backend="onnxruntime", **options)
