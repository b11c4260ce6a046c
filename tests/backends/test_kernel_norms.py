"""The numpy executor's compiled layer_norm and rms_norm (``rlx.compile(g, backend="numpy", kernels="jit")``):
against torch's ``F.layer_norm`` / ``F.rms_norm`` and a float64 NumPy formula, NaN / inf rows, the cases it leaves to the
op's own kernel (bit for bit ``rlx.run``), fresh output arrays, the option's errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import DType
from rlx.ir.shape import TensorType

numba = pytest.importorskip("numba")


def _graph(shape, dtype="f32", axis=-1, eps=1e-5, gdtype=None, op="layer_norm"):
    g = rlx.Graph("ln")
    x = g.input("x", shape, dtype)
    n = shape[axis]
    g.set_outputs([getattr(g, op)(x, g.param("g", (n,), gdtype or dtype), g.param("b", (n,), gdtype or dtype), axis=axis, eps=eps)])
    return g


def _data(shape, dtype, n, seed=0, loc=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    x = (loc + scale * rng.standard_normal(shape)).astype(dtype)
    return x, {"g": rng.standard_normal(n).astype(dtype), "b": rng.standard_normal(n).astype(dtype)}


def _f64(x, gamma, beta, eps, axis=-1, rms=False):
    x = x.astype(np.float64)
    mu = 0.0 if rms else x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x - mu) / np.sqrt(var + eps) * gamma.astype(np.float64).reshape(shape) + beta.astype(np.float64).reshape(shape)


@pytest.mark.parametrize("shape", [(8, 128, 768), (3, 5), (2, 7, 129), (1000,)])
def test_f32_matches_torch(shape):
    torch = pytest.importorskip("torch")
    x, p = _data(shape, np.float32, shape[-1])
    exe = rlx.compile(_graph(shape), backend="numpy", params=p, kernels="jit")
    got = exe.run({"x": x})[0]
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), (shape[-1],), torch.from_numpy(p["g"]),
                                          torch.from_numpy(p["b"]), eps=1e-5).numpy()
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("shape", [(8, 128, 768), (3, 5)])
def test_rms_norm_f32_matches_torch(shape):
    torch = pytest.importorskip("torch")
    x, p = _data(shape, np.float32, shape[-1], seed=7)
    exe = rlx.compile(_graph(shape, op="rms_norm", eps=1e-6), backend="numpy", params=p, kernels="jit")
    want = torch.nn.functional.rms_norm(torch.from_numpy(x), (shape[-1],), torch.from_numpy(p["g"]), eps=1e-6) + torch.from_numpy(p["b"])
    np.testing.assert_allclose(exe.run({"x": x})[0], want.numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("loc,scale", [(0.0, 1.0), (100.0, 0.5), (0.0, 1e-3)])
def test_f64_matches_the_formula(op, loc, scale):
    x, p = _data((16, 300), np.float64, 300, seed=1, loc=loc, scale=scale)
    exe = rlx.compile(_graph((16, 300), "f64", eps=1e-6, op=op), backend="numpy", params=p, kernels="jit")
    want = _f64(x, p["g"], p["b"], 1e-6, rms=op == "rms_norm")
    np.testing.assert_allclose(exe.run({"x": x})[0], want, rtol=1e-12, atol=1e-12)


def test_offset_rows_are_as_accurate_as_the_formula():
    """|mu| >> std: the float32 mean carries the error of the float32 sum in both; the kernel centres before
    scaling (as the op's formula does), so it loses no more than the reference kernel does."""
    x, p = _data((64, 768), np.float32, 768, seed=2, loc=1000.0, scale=0.05)
    g = _graph((64, 768))
    exact = _f64(x, p["g"], p["b"], 1e-5)
    err = np.abs(rlx.compile(g, backend="numpy", params=p, kernels="jit").run({"x": x})[0] - exact).max()
    ref_err = np.abs(rlx.run(g, {"x": x}, p)[0] - exact).max()
    assert err <= 2 * ref_err + 1e-5, (err, ref_err)


def test_nan_and_inf_rows_propagate_like_the_formula():
    x, p = _data((4, 64), np.float32, 64, seed=3)
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    exe = rlx.compile(_graph((4, 64)), backend="numpy", params=p, kernels="jit")
    got = exe.run({"x": x})[0]
    want = rlx.run(_graph((4, 64)), {"x": x}, p)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[[0, 3]], want[[0, 3]], rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("case", ["other_axis", "f16", "mixed_dtypes"])
def test_cases_without_a_compiled_kernel_are_the_reference_bit_for_bit(case, op):
    shape, dtype, axis, gdtype = (6, 10, 12), "f32", -1, None
    if case == "other_axis":
        axis = 1
    elif case == "f16":
        dtype = "f16"
    else:
        gdtype = "f64"
    g = _graph(shape, dtype, axis=axis, gdtype=gdtype, op=op)
    x, p = _data(shape, DType.of(dtype).numpy, shape[axis], seed=4)
    p = {k: v.astype(DType.of(gdtype or dtype).numpy) for k, v in p.items()}
    got = rlx.compile(g, backend="numpy", params=p, kernels="jit").run({"x": x})[0]
    np.testing.assert_array_equal(got, rlx.run(g, {"x": x}, p)[0])


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_non_contiguous_operands_take_the_formula(op):
    from rlx.runtime.jit_kernels import into_of

    g = _graph((5, 8), op=op)
    node = g.node(g.output_ids[0])
    kernel = into_of(node, [g.node(i).type for i in node.inputs])
    assert kernel is not None
    x, p = _data((8, 5), np.float32, 8, seed=5)
    xt = x.T  # [5, 8], not C-contiguous
    out = np.empty((5, 8), np.float32)
    kernel([xt, p["g"], p["b"]], node.attrs, TensorType((5, 8), DType.F32), out)
    np.testing.assert_allclose(out, _f64(xt, p["g"], p["b"], 1e-5, rms=op == "rms_norm"), rtol=1e-5, atol=2e-5)


def test_outputs_are_the_callers_own_arrays():
    x, p = _data((4, 32), np.float32, 32, seed=6)
    exe = rlx.compile(_graph((4, 32)), backend="numpy", params=p, kernels="jit")
    first = exe.run({"x": x})[0]
    kept = first.copy()
    second = exe.run({"x": x * 2})[0]
    assert not np.shares_memory(first, second) and not np.shares_memory(first, x)
    np.testing.assert_array_equal(first, kept)  # the next run did not write into the first result
    first[...] = 0
    np.testing.assert_array_equal(exe.run({"x": x})[0], kept)


def test_symbolic_rows():
    g = rlx.Graph("ln_sym")
    x = g.input("x", ("B", 16))
    g.set_outputs([g.layer_norm(x, g.param("g", (16,)), g.param("b", (16,)))])
    exe = rlx.compile(g, backend="numpy", kernels="jit")
    for rows in (1, 7):
        xv, p = _data((rows, 16), np.float32, 16, seed=rows)
        np.testing.assert_allclose(exe.run({"x": xv}, p)[0], _f64(xv, p["g"], p["b"], 1e-5), rtol=1e-5, atol=2e-5)


def test_bad_kernels_option_and_missing_numba(monkeypatch):
    g = _graph((2, 4))
    with pytest.raises(rlx.RlxError, match="kernels must be one of"):
        rlx.compile(g, backend="numpy", kernels="fast")
    from rlx.runtime import jit_kernels

    monkeypatch.setattr(jit_kernels, "_COMPILED", {})
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now raises ImportError
    assert not jit_kernels.available()
    with pytest.raises(rlx.RlxError, match="needs numba"):
        rlx.compile(g, backend="numpy", kernels="jit")
    rlx.compile(g, backend="numpy")  # the reference mode never needs it


def test_concurrent_runs_each_get_their_own_rows():
    """The kernel releases the GIL; concurrent runs (one arena frame each) never mix their rows."""
    from concurrent.futures import ThreadPoolExecutor

    x0, p = _data((64, 256), np.float32, 256, seed=8)
    exe = rlx.compile(_graph((64, 256)), backend="numpy", params=p, kernels="jit")
    feeds = [x0 * (k + 1) + k for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: [exe.run({"x": x})[0] for _ in range(5)], feeds))
    for x, runs in zip(feeds, got):
        want = _f64(x, p["g"], p["b"], 1e-5)
        for r in runs:
            np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-4)


def test_auto_offers_the_compiled_norms_and_returns_them_when_they_win(monkeypatch):
    """``backend="auto"`` times ``numpy jit`` for a graph with a norm (not for one without); the winner it returns is
    the numpy executor with ``kernels="jit"``, equal to torch's layer_norm."""
    torch = pytest.importorskip("torch")
    from rlx.backends import auto

    g = _graph((4, 32, 64))
    g.name = "ln_auto_jit"
    assert "numpy jit" in auto.candidates(g, 1)
    plain = rlx.Graph("no_norm")
    plain.set_outputs([plain.relu(plain.input("x", (4, 8)))])
    assert "numpy jit" not in auto.candidates(plain, 1)

    def jit_fastest(exes, feed, clock=None):
        return {name: (1e-6 if name == "numpy jit" else 1e-3) for name in exes}, {}

    monkeypatch.setattr(auto, "time_candidates", jit_fastest)
    x, params = _data((4, 32, 64), np.float32, 64, seed=5)
    exe = rlx.compile(g, backend="auto", params=params, device="cpu", threads=1, inputs={"x": x})
    assert auto.explain(g, threads=1, inputs={"x": x}).backend == "numpy jit"
    assert exe.backend == "numpy" and exe.kernels == "jit"
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), (64,), torch.from_numpy(params["g"]),
                                          torch.from_numpy(params["b"]), eps=1e-5).numpy()
    np.testing.assert_allclose(exe.run({"x": x})[0], want, rtol=1e-5, atol=1e-5)
    again = rlx.compile(_graph((4, 32, 64)), backend="auto", params=params, device="cpu", threads=1, inputs={"x": x})
    assert again.backend == "numpy" and again.kernels == "jit"  # the cached choice compiles the same way
