"""The numpy executor's ``threads=``: NumPy's BLAS limited while a run lasts, restored after it.

The oracle for the limit is threadpoolctl's own report of the BLAS library's thread count (read inside and after
the context); the run's numbers against ``rlx.run``.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import rlx
from rlx.backends import auto
from rlx.runtime import arena, blas_threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def _graph():
    g = rlx.Graph("blas_threads")
    x = g.input("x", (64, 96))
    g.set_outputs([g.gelu(x @ g.param("w", (96, 48)))])
    return g


def test_blas_limit_holds_inside_and_restores_after():
    np.ones((8, 8)) @ np.ones((8, 8))  # BLAS loaded
    before = _blas_threads()
    if not before:
        pytest.skip("NumPy's BLAS is not one threadpoolctl controls")
    with blas_threads.blas_limit(1):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_overlapping_runs_restore_the_count_whichever_ends_first():
    """Two runs of one executable from two threads: the first ends while the second still runs, then the second
    ends; BLAS is limited while either holds and back to its own count after both."""
    np.ones((8, 8)) @ np.ones((8, 8))
    before = _blas_threads()
    if not before:
        pytest.skip("NumPy's BLAS is not one threadpoolctl controls")
    first, second = blas_threads.blas_limit(1), blas_threads.blas_limit(1)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert _blas_threads() == [1] * len(before)
    second.__exit__(None, None, None)
    assert _blas_threads() == before


def test_run_holds_the_limit_and_computes_what_rlx_run_does(monkeypatch):
    entered = []

    @contextlib.contextmanager
    def recording(threads):
        entered.append(threads)
        with blas_threads.blas_limit(threads):
            yield

    monkeypatch.setattr(arena, "blas_limit", recording)
    g, rng = _graph(), np.random.default_rng(0)
    params, x = {"w": rng.standard_normal((96, 48)).astype(np.float32)}, rng.standard_normal((64, 96)).astype(np.float32)
    limited = rlx.compile(g, params=params, threads=1)
    (got,) = limited.run({"x": x})
    (want,) = rlx.run(g, {"x": x}, params)
    np.testing.assert_array_equal(got, want)
    assert entered == [1] and limited.threads == 1
    rlx.compile(g, params=params).run({"x": x})  # no threads=: BLAS's own count, no limit entered
    assert entered == [1]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_bad_threads_is_a_typed_error(bad):
    with pytest.raises(rlx.RlxError, match="threads must be a positive int"):
        rlx.compile(_graph(), threads=bad)


def test_without_threadpoolctl_threads_says_what_to_install(monkeypatch):
    monkeypatch.setattr(blas_threads, "available", lambda: False)
    with pytest.raises(rlx.RlxError, match="threadpoolctl"):
        rlx.compile(_graph(), threads=1)
    assert auto._backend("numpy", 1) == ("numpy", {})  # auto then compiles the numpy candidates as before


def test_auto_runs_its_numpy_candidates_with_blas_on_one_thread():
    assert auto._backend("numpy", 1) == ("numpy", {"threads": 1})
    assert auto._backend("numpy jit", 2) == ("numpy", {"kernels": "jit", "threads": 1})
    assert auto._backend("numpy", None) == ("numpy", {"threads": 1})
    assert auto._backend("onnxruntime", 1) == ("onnxruntime", {"threads": 1})
    assert auto._backend("torch", 1) == ("torch", {"device": "cpu"})
