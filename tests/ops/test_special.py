"""The ``special`` op (rlx.ops.special): NumPy kernels against torch on edge grids (n < 0, |x| = 1, float
degrees, NaN, inf, the igamma corner cases, int64 extremes), every backend against the reference, and the
refusals (no derivative, bounded polynomial work, scipy missing)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rlx
from rlx.ops.special import KINDS, POLYNOMIALS

torch = pytest.importorskip("torch")

EDGES = np.array([-np.inf, -50, -10, -3.5, -1, -0.999, -0.5, -1e-30, -0.0, 0.0, 1e-30, 1e-5, 0.5, 0.999, 1, 1.5, 3,
                  10, 27, 50, 100, 700, np.inf, np.nan])
DEGREES = [-2.0, -1, -0.5, 0, 1, 2, 2.7, 3, 4, 5, 6, 7, 8, 9, 10, 13, 30, 100, np.nan, np.inf]
POLY_X = np.array([-2.0, -1.0, -0.5, 0.0, 1e-3, 0.25, 0.5, 0.75, 0.999, 1.0, 1.5, 3.0, np.inf, -np.inf])
UNARY = [k for k, row in KINDS.items() if row.arity == 1 and not k.startswith("frexp")]


def torch_fn(kind: str):
    fn = torch
    for part in KINDS[kind].torch_fn.split("."):
        fn = getattr(fn, part)
    return fn


def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 0.0) -> np.ndarray:
    return np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True) | (got == want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", UNARY)
def test_unary_kernel_matches_torch_on_edges(kind, dtype):
    x = EDGES.astype(dtype)
    want = torch_fn(kind)(torch.from_numpy(x)).numpy()
    got = KINDS[kind].numpy(x).astype(dtype)
    # torch's Bessel J / Y and Airy ports agree with Cephes to ~1e-9 (f64); f32 torch computes in f32
    rtol = 1e-8 if dtype == np.float64 else 2e-4
    ok = close(got, want, rtol) | ((dtype == np.float32) & (np.abs(want) < 1e-30) & (np.abs(got) < 1e-30))
    assert ok.all(), list(zip(x[~ok], got[~ok], want[~ok]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", sorted(POLYNOMIALS))
def test_polynomial_kernel_matches_torch(kind, dtype):
    """Special values (|x| = 1, shifted x in {0, 1}), n < 0, float and NaN / inf degrees, the trig form for large n.
    (NaN x is left out: torch's CPU polynomial kernels return unrelated finite values there; ours give NaN.)"""
    x = POLY_X.astype(dtype)
    for n in DEGREES:
        want = torch_fn(kind)(torch.from_numpy(x), torch.tensor(n, dtype=torch.from_numpy(x).dtype)).numpy()
        got = KINDS[kind].numpy(x, np.array(n, dtype))
        tol = 1e-9 if dtype == np.float64 else 1e-4  # atol: zeros of p_n reached by cancellation
        ok = close(got, want, tol, atol=tol)
        assert ok.all(), (n, x[~ok], got[~ok], want[~ok])


@pytest.mark.parametrize("kind", ["zeta", "igamma", "igammac", "nextafter"])
def test_binary_kernel_matches_torch_on_edges(kind):
    a = np.array([-np.inf, -2.5, -1, -0.0, 0.0, 1e-3, 0.5, 1, 1.5, 2, 3.7, 10, 100, np.inf, np.nan])
    x, y = (v.ravel() for v in np.meshgrid(a, a))
    want = torch_fn(kind)(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    got = KINDS[kind].numpy(x, y)
    ok = close(got, want, 1e-9)
    assert ok.all(), list(zip(x[~ok], y[~ok], got[~ok], want[~ok]))


@pytest.mark.parametrize("kind", ["gcd", "lcm"])
def test_gcd_lcm_match_torch_including_int64_extremes(kind):
    i = np.array([-12, -7, -1, 0, 1, 5, 12, 2 ** 62, -(2 ** 62)], np.int64)
    a, b = (v.ravel() for v in np.meshgrid(i, i))
    want = torch_fn(kind)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(KINDS[kind].numpy(a, b), want)
    if kind == "gcd":  # torch wraps abs(INT64_MIN); its lcm traps there (SIGFPE), so only gcd is compared
        m = np.array([-(2 ** 63)] * 3, np.int64)
        other = np.array([-7, 0, 5], np.int64)
        np.testing.assert_array_equal(KINDS["gcd"].numpy(m, other), torch.gcd(torch.from_numpy(m), torch.from_numpy(other)).numpy())


def test_frexp_matches_torch():
    x = EDGES.astype(np.float32)
    m, e = torch.frexp(torch.from_numpy(x))
    np.testing.assert_array_equal(KINDS["frexp_mantissa"].numpy(x), m.numpy())
    np.testing.assert_array_equal(KINDS["frexp_exponent"].numpy(x), e.numpy())


def _graph(kind: str, feeds: list[np.ndarray]) -> rlx.Graph:  # one kind on inputs a0, a1
    g = rlx.Graph("special")
    ins = [g.input(f"a{i}", f.shape, rlx.DType.of(f.dtype)) for i, f in enumerate(feeds)]
    g.set_outputs([g.special(*ins, kind=kind)])
    return g


def _feeds(kind: str, dtype) -> list[np.ndarray]:
    row = KINDS[kind]
    if "int" in row.domain:
        return [np.array([-12, -7, 0, 5, 12, 9], np.int64), np.array([8, 21, 0, 0, -18, 6], np.int64)]
    x = EDGES.astype(dtype)
    if row.arity == 1:
        return [x]
    if kind in POLYNOMIALS:
        return [np.where(np.isnan(x), 0.25, x), np.resize(np.array(DEGREES, dtype), x.shape)]
    return [np.abs(x[::-1]) + dtype(0), x]


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch"])
def test_every_kind_on_every_backend_matches_the_reference(backend):
    """One graph per dtype holding every kind (one compile each): the backend equals rlx.run."""
    if backend != "numpy":
        pytest.importorskip(backend)
    for dtype in (np.float64, np.float32):
        g, feed, kinds = rlx.Graph("special_all"), {}, list(KINDS)
        outs = []
        for j, kind in enumerate(kinds):
            feeds = _feeds(kind, dtype)
            ins = [g.input(f"k{j}_{i}", f.shape, rlx.DType.of(f.dtype)) for i, f in enumerate(feeds)]
            feed.update({f"k{j}_{i}": f for i, f in enumerate(feeds)})
            outs.append(g.special(*ins, kind=kind))
        g.set_outputs(outs)
        want = rlx.run(g, feed)
        got = rlx.compile(g, backend=backend).run(inputs=feed)
        tol = 1e-9 if dtype == np.float64 else 2e-5
        bad = [kind for kind, a, b in zip(kinds, got, want)
               if a.dtype != b.dtype or not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                                                        equal_nan=True)]
        assert not bad, (dtype, bad)


def test_int_operands_are_refused_and_float_kinds_need_floats():
    g = rlx.Graph("bad")
    with pytest.raises(rlx.ShapeError, match="special 'bessel_j0'"):
        g.special(g.input("x", (2,), "i64"), kind="bessel_j0")
    with pytest.raises(rlx.ShapeError, match="special 'gcd'"):
        g.special(g.input("a", (2,), "f32"), g.input("b", (2,), "f32"), kind="gcd")


@pytest.mark.parametrize("kind", ["airy_ai", "igamma", "chebyshev_polynomial_t", "nextafter"])
def test_kinds_without_a_derivative_refuse_clearly(kind):
    g = rlx.Graph("grad")
    x = g.input("x", (3,), "f64")
    y = g.special(x, kind=kind) if KINDS[kind].arity == 1 else g.special(x, x, kind=kind)
    g.set_outputs([g.sum(y)])
    with pytest.raises(rlx.AutodiffError, match=kind):
        rlx.run(rlx.grad(g, ["x"]), {"x": np.array([0.5, 1.0, 2.0]), "d_output": np.array(1.0)})


def test_polynomial_degree_is_bounded_work():
    g = _graph("legendre_polynomial_p", [np.zeros(2), np.zeros(2)])
    with pytest.raises(rlx.RlxError, match="bounded-work"):
        rlx.run(g, {"a0": np.array([0.5, 0.2]), "a1": np.array([3.0, 1e12])})


@pytest.fixture
def without_scipy(monkeypatch):
    """``import scipy...`` fails, as on an install without the special extra."""
    import builtins

    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError("no scipy here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)


def test_missing_scipy_names_the_extra(without_scipy):
    g = _graph("bessel_j0", [np.zeros(2)])
    with pytest.raises(rlx.RlxError, match=r"rlx\[special\]"):
        rlx.run(g, {"a0": np.array([0.5, 0.2])})


def test_erf_and_gelu_without_scipy_use_the_c_library(without_scipy):
    from rlx.ops.kinds import numpy_erf

    x = np.array([-4.0, -1.5, -0.25, 0.0, 0.3, 1.0, 2.5, np.inf, np.nan], np.float32)
    want = np.array([math.erf(float(v)) for v in x], np.float64)
    np.testing.assert_allclose(numpy_erf(x), want, rtol=1e-6, atol=1e-7)
    slot = x.copy()
    assert numpy_erf(slot, out=slot) is slot
    np.testing.assert_allclose(slot, want, rtol=1e-6, atol=1e-7)
    g = rlx.Graph("gelu")
    g.set_outputs([g.gelu(g.input("x", x.shape, "f32"))])
    gelu = x.astype(np.float64) * 0.5 * (1.0 + np.array([math.erf(float(v) / math.sqrt(2.0)) for v in x]))
    for got in (rlx.run(g, {"x": x})[0], rlx.compile(g, backend="numpy").run({"x": x})[0]):
        np.testing.assert_allclose(got, gelu, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_logcumsumexp_on_backends_matches_torch(backend):
    pytest.importorskip(backend)
    x = np.array([[-1000.0, 0.0, -np.inf, 3.0, np.inf, 1.0], [np.nan, 1, 2, 3, 4, 5], [-np.inf] * 6], np.float32)
    g = rlx.Graph("lse")
    v = g.input("x", x.shape, "f32")
    g.set_outputs([g.logcumsumexp(v, axis=1), g.logcumsumexp(v, axis=0, reverse=True)])
    t = torch.from_numpy(x)
    want = [torch.logcumsumexp(t, 1).numpy(), torch.logcumsumexp(t.flip(0), 0).flip(0).numpy()]
    for outs in (rlx.run(g, {"x": x}), rlx.compile(g, backend=backend).run(inputs={"x": x})):
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got, w, rtol=1e-6, equal_nan=True)
