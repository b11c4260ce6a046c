"""What the op cases (cases_linalg_decomp.py) do not cover: ONNX export (Det, clear refusals), the c128
dtype, run-time errors on matrices LAPACK cannot factor, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import rlx


def _graph(build, *shapes, dtype="f32"):
    g = rlx.Graph("t")
    ins = [g.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    out = build(g, *ins)
    g.set_outputs(list(out) if isinstance(out, tuple) else [out])
    return g


A = (np.random.default_rng(0).standard_normal((2, 3, 3)) + 3 * np.eye(3)).astype(np.float32)


def test_det_exports_as_onnx_det_and_runs_on_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    g = _graph(lambda g, a: g.det(a), (2, 3, 3))
    sess = ort.InferenceSession(rlx.onnx.export(g).SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"x0": A})
    np.testing.assert_allclose(got, np.linalg.det(A.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("op", ["matrix_inverse", "svd", "eig", "complex"])
def test_other_ops_are_refused_by_the_onnx_exporter_with_the_reason(op):
    pytest.importorskip("onnx")
    build = {"matrix_inverse": lambda g, a: g.matrix_inverse(a), "svd": lambda g, a: g.svd(a, output="values"),
             "eig": lambda g, a: g.eig(a, output="values"), "complex": lambda g, a: g.complex(a, a)}[op]
    with pytest.raises(rlx.RlxError, match=op):
        rlx.onnx.export(_graph(build, (2, 3, 3)))


def test_c128_sits_above_c64_and_round_trips_text_and_torch_dtypes():
    assert rlx.DType.promote("c64", "c128") is rlx.DType.C128
    assert rlx.DType.promote("f64", "c128") is rlx.DType.C128
    assert rlx.DType.promote("f64", "c64") is rlx.DType.C64  # unchanged: c128 only where asked for
    assert rlx.DType.of(np.complex128) is rlx.DType.C128 and rlx.DType.C128.is_complex
    g = _graph(lambda g, a, b: g.complex(a, b) * g.complex(b, a), (2,), (2,), dtype="f64")
    assert g.outputs[0].dtype is rlx.DType.C128
    assert rlx.parse(str(g)) == g
    x, y = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    (z,) = rlx.run(g, {"x0": x, "x1": y})
    assert z.dtype == np.complex128
    np.testing.assert_allclose(z, (x + 1j * y) * (y + 1j * x), rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_singular_matrix_raises_rlx_error_on_numpy_and_torch(backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    g = _graph(lambda g, a: g.matrix_inverse(a), (2, 3, 3))
    exe = rlx.compile(g, backend=backend)
    singular = np.zeros((2, 3, 3), np.float32)
    if backend == "jax":  # documented: no host round trip to raise; the result is inf / NaN
        assert not np.isfinite(exe.run({"x0": singular})[0]).all()
        return
    with pytest.raises(rlx.RlxError, match=r"(?i)singular"):
        exe.run({"x0": singular})


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_c128_results_keep_their_width_on_every_backend(backend):
    pytest.importorskip(backend)
    g = _graph(lambda g, x: (g.cast(x, "c128"), g.view_as_real(g.complex(x, x))), (3,))
    x = np.array([1.0, -2.0, 3.5], np.float32)
    got = rlx.compile(g, backend=backend).run({"x0": x})
    want = rlx.run(g, {"x0": x})
    assert [o.dtype for o in got] == [np.complex128, np.float32] == [o.dtype for o in want]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
