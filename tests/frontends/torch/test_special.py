"""torch.special and friends through torch.export: rlx.run and compiled numpy against torch eager, with int and
bool inputs promoted as torch promotes them, scalar operands, and frexp's two results."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from frontends.torch.helpers import Fn, _x, check  # noqa: E402

S = torch.special
EDGES = torch.tensor([0.0, -0.0, 1e-8, -0.5, -1.0, 0.5, 1.0, 2.5, 9.0, 80.0, float("inf"), float("-inf"), float("nan")])


def test_unary_special_functions_on_edges():
    fns = (S.bessel_j0, S.bessel_j1, S.bessel_y0, S.bessel_y1, S.modified_bessel_i0, S.modified_bessel_i1,
           S.modified_bessel_k0, S.modified_bessel_k1, S.scaled_modified_bessel_k0, S.scaled_modified_bessel_k1,
           S.spherical_bessel_j0, torch.i0, S.i0e, S.i1, S.i1e, S.airy_ai, S.erfcx, S.ndtri, torch.erfinv)
    check(Fn(lambda t: tuple(f(t) for f in fns)), EDGES, rtol=2e-5, atol=1e-6)


def test_int_and_bool_inputs_are_promoted():
    i = torch.arange(-3, 5)
    b = torch.tensor([True, False, True])
    check(Fn(lambda i, b: (S.bessel_j0(i), S.i1e(i), torch.erfinv(b), S.chebyshev_polynomial_t(i, torch.tensor(3)),
                           S.hermite_polynomial_h(b, b))), i, b, rtol=2e-5, atol=1e-6)


def test_polynomials_with_tensor_and_scalar_degrees():
    x = torch.tensor([-1.0, -0.5, 0.0, 0.3, 0.5, 1.0, 1.5])
    n = torch.tensor([3.0, 2.7, -1.0, 12.0, 0.0, 5.0, 4.0])
    names = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
             "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
             "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
             "legendre_polynomial_p")
    check(Fn(lambda x, n: (*(getattr(S, k)(x, n) for k in names), S.legendre_polynomial_p(x, 3))), x, n,
          rtol=2e-5, atol=1e-5)


def test_binary_special_functions():
    a = _x(12, scale=2.0).abs() + 0.1
    x = _x(12, scale=2.0, seed=1)
    check(Fn(lambda a, x: (S.zeta(a + 1, x.abs() + 0.5), S.zeta(a + 1, 2.0), torch.igamma(a, x.abs()),
                           torch.igammac(a, x.abs()), torch.nextafter(x, a), S.log_ndtr(x))), a, x, rtol=2e-5, atol=1e-6)


def test_gcd_lcm_and_frexp():
    a = torch.tensor([12, -18, 0, 7, 0, -5])
    b = torch.tensor([8, 6, 0, 0, 9, -15])
    check(Fn(lambda a, b, x: (torch.gcd(a, b), torch.lcm(a, b), *torch.frexp(x))), a, b, EDGES)


def test_logcumsumexp_far_apart_values_and_infinities():
    x = torch.tensor([[-1000.0, 0.0, float("-inf"), 3.0, float("inf"), 1.0], [0.5, -80.0, 2.0, 30.0, -3.0, float("nan")]])
    check(Fn(lambda x: (torch.logcumsumexp(x, 1), torch.logcumsumexp(x, 0), torch.logcumsumexp(x[0, 0], 0))), x, rtol=1e-6)


def test_every_registered_overload_exists_in_torch():
    from rlx.frontends.torch.convert_special import OVERLOADS

    missing = [name for name in OVERLOADS
               if name.split(".")[2] not in getattr(torch.ops.aten, name.split(".")[1]).overloads()]
    assert not missing
