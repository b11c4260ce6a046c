"""Cases for the ``special`` op (rlx.ops.special): every kind against torch's own function in float64."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64
from rlx.ops.special import KINDS, POLYNOMIALS

T = torch_f64
X = randn(3, 4, seed=21)
POS = np.abs(randn(3, 4, seed=22)) + 0.3
UNIT = np.tanh(randn(3, 4, seed=23)) * 0.9
PROB = 0.05 + 0.9 / (1 + np.exp(-randn(3, 4, seed=24)))
DEGREE = np.array([0.0, 1.0, 2.0, 5.0])  # broadcast along the last axis; float degrees as torch takes them

#: each kind's feed inside its domain (x, and the second operand of binary kinds)
DATA: dict[str, tuple[np.ndarray, ...]] = {
    **dict.fromkeys(("bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
                     "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"), (POS,)),
    "erfinv": (UNIT,), "ndtri": (PROB,), "zeta": (POS + 1.2, POS), "igamma": (POS, POS * 2),
    "igammac": (POS, POS * 2), "nextafter": (X, randn(3, 4, seed=25)),
    "gcd": (np.array([[12, -18, 0, 7]], np.int64), np.array([[8], [6], [0]], np.int64)),
    "lcm": (np.array([[12, -18, 0, 7]], np.int64), np.array([[8], [6], [0]], np.int64)),
    **{name: (UNIT, DEGREE) for name in POLYNOMIALS},
    **{name: (PROB, DEGREE) for name in POLYNOMIALS if name.startswith("shifted")},
    "hermite_polynomial_h": (X, DEGREE), "hermite_polynomial_he": (X, DEGREE), "laguerre_polynomial_l": (X, DEGREE),
}


def _torch(name: str):
    fn = torch
    for part in KINDS[name].torch_fn.split("."):
        fn = getattr(fn, part)
    if name.startswith("frexp"):
        return lambda x, i=int(name == "frexp_exponent"): torch.frexp(T(x))[i]
    return lambda x, y=None: fn(T(x)) if y is None else fn(T(x), T(y))


def _differentiable(name: str) -> tuple[str, ...]:
    """The feeds to gradient-check: none for kinds without a closed-form derivative."""
    if KINDS[name].partials is None or name == "frexp_exponent":
        return ()
    if name in POLYNOMIALS:
        return ("x",)
    return ("y",) if name in ("zeta", "igamma", "igammac") else ("x",)


CASES = [
    OpCase("special", name,
           (lambda g, x, k=name: g.special(x, kind=k)) if row.arity == 1 else (lambda g, x, y, k=name: g.special(x, y, kind=k)),
           dict(zip(("x", "y"), DATA.get(name, (X,)))), _torch(name), rtol=1e-9, atol=1e-12,
           differentiable=_differentiable(name))
    for name, row in KINDS.items()
]
CASES += [
    OpCase("special", "polynomial_edges", lambda g, x, n: g.special(x, n, kind="chebyshev_polynomial_u"),
           {"x": np.array([-1.0, 1.0, -1.0, 0.5, 0.5, 0.3]), "n": np.array([3.0, 3.0, -2.0, 2.9, 12.0, 0.0])},
           lambda x, n: np.array([-4.0, 4.0, 0.0, 0.0, np.sin(13 * np.arccos(0.5)) / np.sin(np.arccos(0.5)), 1.0]),
           atol=1e-12, differentiable=()),
    OpCase("special", "igamma_edges", lambda g, a, x: g.special(a, x, kind="igamma"),
           {"a": np.array([0.0, 0.0, 2.0, np.inf, 1.0, -1.0]), "x": np.array([1.0, 0.0, 0.0, 3.0, np.inf, 1.0])},
           lambda a, x: np.array([1.0, np.nan, 0.0, 0.0, 1.0, np.nan]), differentiable=()),
]

LSE = np.array([[-1000.0, 0.0, -np.inf, 3.0, 1.0], [0.5, -2.0, 1.0, 40.0, -3.0]])
CASES += [
    OpCase("logcumsumexp", "axis1", lambda g, x: g.logcumsumexp(x, axis=1), {"x": X},
           lambda x: torch.logcumsumexp(T(x), 1), rtol=1e-12),
    OpCase("logcumsumexp", "reverse_axis0", lambda g, x: g.logcumsumexp(x, axis=0, reverse=True), {"x": X},
           lambda x: torch.logcumsumexp(T(x).flip(0), 0).flip(0), rtol=1e-12),
    OpCase("logcumsumexp", "far_apart_and_minus_inf", lambda g, x: g.logcumsumexp(x, axis=-1), {"x": LSE},
           lambda x: torch.logcumsumexp(T(x), 1), rtol=1e-12, differentiable=()),
]

SHAPE_ERRORS = [
    ShapeErrorCase("special", "bessel_on_int", lambda g: g.special(g.input("x", (2,), "i32"), kind="bessel_j0")),
    ShapeErrorCase("special", "gcd_on_float", lambda g: g.special(g.input("a", (2,)), g.input("b", (2,)), kind="gcd")),
    ShapeErrorCase("logcumsumexp", "on_int", lambda g: g.logcumsumexp(g.input("x", (2,), "i32"))),
    ShapeErrorCase("logcumsumexp", "scalar", lambda g: g.logcumsumexp(g.input("x", (), "f32"))),
    ShapeErrorCase("special", "no_broadcast", lambda g: g.special(g.input("a", (2,)), g.input("b", (3,)), kind="zeta")),
]
