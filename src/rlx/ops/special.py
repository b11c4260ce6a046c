"""Special functions as torch defines them: one ``special`` op whose ``kind`` picks the function.

Bessel and modified Bessel functions, ``erfinv`` / ``erfcx`` / ``log_ndtr`` / ``ndtri``, Airy Ai,
Hurwitz ``zeta``, the regularized incomplete gamma functions, ``nextafter``, ``gcd`` / ``lcm``,
``frexp`` (two kinds: mantissa and exponent) and the orthogonal polynomials ``p_n(x)`` of
``torch.special``. Each kind is one :class:`SpecialKind` row here: its arity and dtype domain, the
NumPy reference kernel, the aten packets the torch.export reader maps to it, the torch function
the torch backend calls, and its partial derivatives where a closed form exists.

The transcendental kernels call ``scipy.special`` (the ``special`` extra: both scipy and torch port
Cephes, so the numbers agree); the polynomials follow torch's own algorithm (the integer degree
``n`` is truncated from a float tensor, ``n < 0`` gives 0, the special values at ``|x| = 1`` and
the trigonometric form for large ``n`` inside ``(-1, 1)``), so edge cases match torch exactly.
Bessel J / Y and Airy Ai agree with torch's ports to about 1e-9 relative in float64 (torch
computes float32 inputs in float32, these kernels in float64).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType, promote_all
from rlx.ir.errors import AutodiffError, RlxError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import TensorType
from rlx.ops.common import broadcast_promoted, broadcasting_batch, promote_args
from rlx.ops.elementwise import check_domain

FLOAT = frozenset({"float"})
INT = frozenset({"int"})
#: the most recurrence steps a polynomial kernel takes (bounded work on a hostile degree)
MAX_DEGREE = 1_000_000


class MissingDependencyError(RlxError, ImportError):
    """A kernel needs an optional package that is not installed."""


def _scipy_special() -> Any:
    try:
        import scipy.special as sc
    except ImportError as exc:
        raise MissingDependencyError("the special-function kernels need scipy: pip install 'rlx[special]'") from exc
    return sc


def _sc(name: str) -> Callable[..., np.ndarray]:
    """A kernel calling ``scipy.special.<name>`` (imported on first use)."""
    def kernel(*args: np.ndarray) -> np.ndarray:
        return getattr(_scipy_special(), name)(*args)
    kernel.__name__ = name
    return kernel


def _airy_ai(x: np.ndarray) -> np.ndarray:
    return _scipy_special().airy(x)[0]


def _spherical_j0(x: np.ndarray) -> np.ndarray:
    """sin(x) / x; 1 at 0, 0 at +-inf (torch's)."""
    with np.errstate(all="ignore"):
        safe = np.where(x == 0, 1, x)
        y = np.sin(safe) / safe
    return np.where(np.isinf(x), 0, np.where(x == 0, 1, y))


def _zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta; NaN at q = +inf for x > 1 (torch's; scipy gives the limit 0)."""
    return np.where(np.isposinf(q) & (x > 1), np.nan, _scipy_special().zeta(x, q))


def _lgamma(x: np.ndarray) -> np.ndarray:
    """log|Gamma(x)|; +inf at -inf (torch's and C's; scipy gives -inf)."""
    return np.where(np.isneginf(x), np.inf, _scipy_special().gammaln(x))


def _igamma(upper: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """P(a, x) (``upper``: Q = 1 - P) with torch's special cases, checked in its order: NaN for a < 0 or
    x < 0; a = 0: P = 1 for x > 0, else NaN; x = 0: P = 0; a = inf: NaN if x = inf, else P = 0;
    x = inf: P = 1 (these hold for a NaN a or x too, as torch tests them before computing)."""
    def kernel(a: np.ndarray, x: np.ndarray) -> np.ndarray:
        sc = _scipy_special()
        r = sc.gammaincc(a, x) if upper else sc.gammainc(a, x)
        lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)  # the value at x = 0 / at x = inf
        cases: list[tuple[np.ndarray, Any]] = [
            (np.isinf(x), hi),
            (np.isinf(a), np.where(np.isinf(x), np.nan, lo)),
            (x == 0, lo),
            (a == 0, np.where(x > 0, hi, np.nan)),
            ((x < 0) | (a < 0), np.nan),
        ]
        for mask, value in cases:  # later cases win: torch tests them in the reverse order
            r = np.where(mask, value, r)
        return r
    return kernel


def _gcd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's Euclid loop in C integer arithmetic (abs wraps at the minimum, % truncates)."""
    a, b = np.broadcast_arrays(np.abs(a), np.abs(b))
    a, b = a.copy(), b.copy()
    while True:
        live = a != 0
        if not live.any():
            return b
        c = a
        a = np.where(live, np.fmod(b, np.where(live, a, 1)), 0)
        b = np.where(live, c, b)


def _lcm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """abs(a / gcd * b), 0 where gcd = 0 (torch's; wraps on overflow instead of trapping)."""
    g = _gcd(a, b)
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, np.where(g == 0, 1, g))
        return np.where(g == 0, 0, np.abs(q * b)).astype(np.result_type(a, b))


def _frexp_mantissa(x: np.ndarray) -> np.ndarray:
    return np.frexp(x)[0]


def _frexp_exponent(x: np.ndarray) -> np.ndarray:
    return np.frexp(x)[1].astype(np.int32)


# ------------------------------------------------------------------------------ polynomials
def _degree(n: np.ndarray) -> np.ndarray:
    """torch's ``static_cast<int64_t>(n)``: truncation; NaN, inf and out-of-range give INT64_MIN (x86)."""
    if n.dtype.kind in "iu":
        return n.astype(np.int64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(n) & (np.abs(n) < 2.0 ** 63)
        return np.where(ok, np.trunc(np.where(ok, n, 0)), np.iinfo(np.int64).min).astype(np.int64)


@dataclass(frozen=True)
class _Poly:
    """One polynomial family: ``p_0 = 1``, ``p_1 = first(x)``, ``p_{m+1} = step(x, m, p_m, p_{m-1})``;
    ``closed(x, n)`` gives (mask, value) pairs that override the recurrence, later pairs winning."""

    first: Callable[[np.ndarray], np.ndarray]
    step: Callable[[np.ndarray, Any, np.ndarray, np.ndarray], np.ndarray]
    closed: Callable[[np.ndarray, np.ndarray], list[tuple[np.ndarray, Any]]]

    def __call__(self, x: np.ndarray, n: np.ndarray) -> np.ndarray:
        x, n = np.broadcast_arrays(x, _degree(np.asarray(n)))
        dt = x.dtype.type
        with np.errstate(all="ignore"):
            overrides = self.closed(x, n)
            fixed = np.zeros(x.shape, bool)
            for mask, _ in overrides:
                fixed |= mask
            need = ~fixed & (n >= 2)
            top = int(n[need].max()) if need.any() else 1
            if top > MAX_DEGREE:
                raise RlxError(f"special: polynomial degree {top} is over the bounded-work limit {MAX_DEGREE}")
            out = np.where(n == 1, self.first(x), dt(1)).astype(x.dtype)
            p, q = np.ones_like(x), self.first(x).astype(x.dtype)
            for m in range(1, top):
                r = self.step(x, dt(m), q, p).astype(x.dtype)
                p, q = q, r
                out = np.where(n == m + 1, r, out)
                if m % 64 == 0 and bool(np.all(np.isnan(q[need & (n > m + 1)]))):
                    out = np.where(need & (n > m + 1), np.nan, out)
                    break
            for mask, value in overrides:
                out = np.where(mask, value, out)
        return np.where(n < 0, dt(0), out).astype(x.dtype)


def _odd(n: np.ndarray) -> np.ndarray:
    return n % 2 != 0


def _sgn(n: np.ndarray, v: Any) -> Any:
    return np.where(_odd(n), -v, v)


def _cheb_closed(kind: str, shifted: bool) -> Callable[[np.ndarray, np.ndarray], list[tuple[np.ndarray, Any]]]:
    """torch's special values of T / U / V / W (|x| = 1, or x in {0, 1} shifted) and the trig form."""
    big = {"t": 6, "u": 8, "v": 8, "w": 8} if not shifted else {"t": 6, "u": 6, "v": 6, "w": 4}

    def closed(x: np.ndarray, n: np.ndarray) -> list[tuple[np.ndarray, Any]]:
        dt = x.dtype.type
        s = x + x - dt(1) if shifted else x
        nf = n.astype(x.dtype)
        hi, lo = (x == 1, x == 0) if shifted else (x == 1, x == -1)
        theta = np.arccos(np.clip(s, -1, 1))
        inside = (n > big[kind]) & (np.abs(s) < 1)
        if kind == "t":
            at_hi, at_lo, trig = dt(1), _sgn(n, dt(1)), np.cos(nf * theta)
        elif kind == "u":
            at_hi, at_lo = nf + 1, _sgn(n, nf + 1)
            st = np.sin(theta)
            trig = np.where(st != 0, np.sin((nf + 1) * theta) / np.where(st != 0, st, 1),
                            (nf + 1) * np.cos((nf + 1) * theta) / s)
        elif kind == "v":
            at_hi, at_lo = dt(1), _sgn(n, nf + nf + 1)
            trig = np.where(np.sin(theta / 2) != 1, np.cos((nf + dt(0.5)) * theta) / np.cos(theta / 2), _sgn(n, nf + nf + 1))
        else:
            at_hi, at_lo = nf + nf + 1, _sgn(n, dt(1))
            trig = np.where(np.cos(theta / 2) != 1, np.sin((nf + dt(0.5)) * theta) / np.sin(theta / 2),
                            np.where(s > 0, nf + nf + 1, _sgn(n, dt(1))))
        return [(inside, trig), (lo, at_lo), (hi, at_hi), (n == 0, dt(1))]
    return closed


def _cheb(kind: str, shifted: bool) -> _Poly:
    offset = {"t": 0, "u": 0, "v": -1, "w": 1}[kind]

    def arg(x: np.ndarray) -> np.ndarray:
        return x + x - x.dtype.type(1) if shifted else x

    def first(x: np.ndarray) -> np.ndarray:
        s = arg(x)
        return s if kind == "t" else s + s + x.dtype.type(offset)

    return _Poly(first, lambda x, m, q, p: (arg(x) + arg(x)) * q - p, _cheb_closed(kind, shifted))


def _no_closed(x: np.ndarray, n: np.ndarray) -> list[tuple[np.ndarray, Any]]:
    return [(n == 0, x.dtype.type(1))]


def _laguerre_closed(x: np.ndarray, n: np.ndarray) -> list[tuple[np.ndarray, Any]]:
    return [(x == 0, x.dtype.type(1)), (n == 0, x.dtype.type(1))]


def _legendre_closed(x: np.ndarray, n: np.ndarray) -> list[tuple[np.ndarray, Any]]:
    one = x.dtype.type(1)
    return [(np.abs(x) == 1, np.where(x > 0, one, _sgn(n, one))), (n == 0, one)]


POLYNOMIALS: dict[str, _Poly] = {
    **{f"chebyshev_polynomial_{k}": _cheb(k, False) for k in "tuvw"},
    **{f"shifted_chebyshev_polynomial_{k}": _cheb(k, True) for k in "tuvw"},
    "hermite_polynomial_h": _Poly(lambda x: x + x, lambda x, m, q, p: (x + x) * q - (m + m) * p, _no_closed),
    "hermite_polynomial_he": _Poly(lambda x: x, lambda x, m, q, p: x * q - m * p, _no_closed),
    "laguerre_polynomial_l": _Poly(lambda x: 1 - x, lambda x, m, q, p: ((m + m + (1 - x)) * q - m * p) / (m + 1),
                                   _laguerre_closed),
    "legendre_polynomial_p": _Poly(lambda x: x, lambda x, m, q, p: ((m + m + 1) * x * q - m * p) / (m + 1), _legendre_closed),
}


# ------------------------------------------------------------------------------ derivatives
Partials = Callable[[Any, list[Any], Any], list[Any]]
ZERO = "zero"  # a partial that is identically zero (an integer degree)


def _g(g: Any, kind: str, *xs: Any) -> Any:
    return g.special(*xs, kind=kind)


def _over_x(g: Any, x: Any, num: Any, at_zero: float) -> Any:
    """num / x, ``at_zero`` where x == 0 (the unselected branch stays finite)."""
    zero = g.eq(x, 0.0)
    return g.where(zero, g.scalar(at_zero, x.dtype), num / g.where(zero, g.scalar(1.0, x.dtype), x))


def _exp(g: Any, x: Any) -> Any:
    return g.activation(x, kind="exp")


PARTIALS: dict[str, Partials] = {
    "erfinv": lambda g, a, y: [_exp(g, y * y) * (math.sqrt(math.pi) / 2)],
    "ndtri": lambda g, a, y: [_exp(g, y * y * 0.5) * math.sqrt(2 * math.pi)],
    "log_ndtr": lambda g, a, y: [_exp(g, a[0] * a[0] * -0.5 - y) * (1 / math.sqrt(2 * math.pi))],
    "erfcx": lambda g, a, y: [a[0] * y * 2.0 - 2 / math.sqrt(math.pi)],
    "i0": lambda g, a, y: [_g(g, "i1", a[0])],
    "i1": lambda g, a, y: [_g(g, "i0", a[0]) - _over_x(g, a[0], y, 0.5)],
    "i0e": lambda g, a, y: [_g(g, "i1e", a[0]) - g.unary_math(a[0], kind="sign") * y],
    "i1e": lambda g, a, y: [_g(g, "i0e", a[0]) - g.unary_math(a[0], kind="sign") * y - _over_x(g, a[0], y, 0.5)],
    "bessel_j0": lambda g, a, y: [-_g(g, "bessel_j1", a[0])],
    "bessel_j1": lambda g, a, y: [_g(g, "bessel_j0", a[0]) - _over_x(g, a[0], y, 0.5)],
    "bessel_y0": lambda g, a, y: [-_g(g, "bessel_y1", a[0])],
    "bessel_y1": lambda g, a, y: [_g(g, "bessel_y0", a[0]) - y / a[0]],
    "modified_bessel_k0": lambda g, a, y: [-_g(g, "modified_bessel_k1", a[0])],
    "modified_bessel_k1": lambda g, a, y: [-_g(g, "modified_bessel_k0", a[0]) - y / a[0]],
    "scaled_modified_bessel_k0": lambda g, a, y: [y - _g(g, "scaled_modified_bessel_k1", a[0])],
    "scaled_modified_bessel_k1": lambda g, a, y: [y - _g(g, "scaled_modified_bessel_k0", a[0]) - y / a[0]],
    "igamma": lambda g, a, y: [None, _gamma_density(g, a[0], a[1])],
    "igammac": lambda g, a, y: [None, -_gamma_density(g, a[0], a[1])],
    "spherical_bessel_j0": lambda g, a, y: [_over_x(g, a[0], g.activation(a[0], kind="cos") - y, 0.0)],
    "zeta": lambda g, a, y: [None, -(a[0] * _g(g, "zeta", a[0] + 1.0, a[1]))],
    "hermite_polynomial_h": lambda g, a, y: [_lowered(g, "hermite_polynomial_h", a, y) * 2.0, ZERO],
    "hermite_polynomial_he": lambda g, a, y: [_lowered(g, "hermite_polynomial_he", a, y), ZERO],
    "frexp_mantissa": lambda g, a, y: [g.binary(g.scalar(2.0, a[0].dtype), -g.cast(_g(g, "frexp_exponent", a[0]),
                                                                                      to=a[0].dtype), op="pow")],
}


def _gamma_density(g: Any, a: Any, x: Any) -> Any:
    """dP(a, x)/dx = x^(a-1) e^(-x) / Gamma(a), as exp((a - 1) log x - x - lgamma(a)) (torch's formula)."""
    return _exp(g, (a - 1.0) * g.activation(x, kind="log") - x - _g(g, "lgamma", a))


def _lowered(g: Any, kind: str, a: list[Any], y: Any) -> Any:
    """n · p_{n-1}(x) for the Hermite families (H_n' = 2n H_{n-1}, He_n' = n He_{n-1}); n truncated as the kernel does."""
    x, n = (v if v.dtype == y.dtype else g.cast(v, to=y.dtype) for v in a)
    n = g.unary_math(n, kind="trunc")
    return g.where(g.gt(n, 0.0), _g(g, kind, x, n - 1.0) * n, g.scalar(0.0, y.dtype))


# ------------------------------------------------------------------------------ rows
@dataclass(frozen=True)
class SpecialKind:
    """One kind of the ``special`` op (see the module doc). ``torch_fn``: the function's dotted
    name under ``torch`` (the torch backend's lowering); ``aten``: the aten overload packets the
    torch.export reader maps to this kind; ``out_dtype``: a fixed result dtype (else the
    promoted operand dtype)."""

    name: str
    arity: int
    numpy: Callable[..., np.ndarray]
    torch_fn: str
    aten: tuple[str, ...] = ()
    domain: frozenset[str] = FLOAT
    out_dtype: DType | None = None
    doc: str = ""

    @property
    def partials(self) -> Partials | None:
        return PARTIALS.get(self.name)


def _aten(*names: str) -> tuple[str, ...]:
    return tuple(f"aten.{n}" for n in names)


def _unary(name: str, kernel: Callable[..., np.ndarray], torch_fn: str, *aten: str, doc: str = "") -> SpecialKind:
    return SpecialKind(name, 1, kernel, torch_fn, _aten(*aten) or _aten(f"special_{name}"), doc=doc)


KINDS: dict[str, SpecialKind] = {k.name: k for k in (
    _unary("bessel_j0", _sc("j0"), "special.bessel_j0"),
    _unary("bessel_j1", _sc("j1"), "special.bessel_j1"),
    _unary("bessel_y0", _sc("y0"), "special.bessel_y0", doc="-inf at 0, NaN below"),
    _unary("bessel_y1", _sc("y1"), "special.bessel_y1", doc="-inf at 0, NaN below"),
    _unary("i0", _sc("i0"), "i0", "i0", "special_i0", "special_modified_bessel_i0"),
    _unary("i1", _sc("i1"), "special.i1", "special_i1", "special_modified_bessel_i1"),
    _unary("i0e", _sc("i0e"), "special.i0e"),
    _unary("i1e", _sc("i1e"), "special.i1e"),
    _unary("modified_bessel_k0", _sc("k0"), "special.modified_bessel_k0", doc="inf at 0, NaN below"),
    _unary("modified_bessel_k1", _sc("k1"), "special.modified_bessel_k1", doc="inf at 0, NaN below"),
    _unary("scaled_modified_bessel_k0", _sc("k0e"), "special.scaled_modified_bessel_k0"),
    _unary("scaled_modified_bessel_k1", _sc("k1e"), "special.scaled_modified_bessel_k1"),
    _unary("spherical_bessel_j0", _spherical_j0, "special.spherical_bessel_j0", doc="sin(x)/x, 1 at 0, 0 at +-inf"),
    _unary("airy_ai", _airy_ai, "special.airy_ai"),
    _unary("erfcx", _sc("erfcx"), "special.erfcx", doc="exp(x^2) erfc(x)"),
    _unary("log_ndtr", _sc("log_ndtr"), "special.log_ndtr", doc="log of the standard normal CDF"),
    _unary("ndtri", _sc("ndtri"), "special.ndtri", doc="inverse standard normal CDF; +-inf at 1 / 0"),
    SpecialKind("lgamma", 1, _lgamma, "lgamma", (), doc="log|Gamma(x)| (igamma's derivative; torch's "
                "aten.lgamma is composed by the torch reader)"),
    _unary("erfinv", _sc("erfinv"), "erfinv", "erfinv", doc="+-inf at +-1, NaN outside [-1, 1]"),
    SpecialKind("frexp_mantissa", 1, _frexp_mantissa, "frexp", _aten("frexp"),
                doc="mantissa of frexp, |m| in [0.5, 1) (0, inf and NaN unchanged)"),
    SpecialKind("frexp_exponent", 1, _frexp_exponent, "frexp", (), out_dtype=DType.I32,
                doc="exponent of frexp as i32 (0 for 0, inf and NaN)"),
    SpecialKind("zeta", 2, _zeta, "special.zeta", _aten("special_zeta"), doc="Hurwitz zeta(x, q)"),
    SpecialKind("igamma", 2, _igamma(False), "igamma", _aten("igamma", "special_gammainc"),
                doc="regularized lower incomplete gamma P(a, x)"),
    SpecialKind("igammac", 2, _igamma(True), "igammac", _aten("igammac", "special_gammaincc"),
                doc="regularized upper incomplete gamma Q(a, x)"),
    SpecialKind("nextafter", 2, np.nextafter, "nextafter", _aten("nextafter"), doc="next float after x toward y"),
    SpecialKind("gcd", 2, _gcd, "gcd", _aten("gcd"), domain=INT, doc="non-negative; gcd(0, 0) = 0"),
    SpecialKind("lcm", 2, _lcm, "lcm", _aten("lcm"), domain=INT, doc="non-negative; 0 if either is 0"),
    *(SpecialKind(name, 2, poly, f"special.{name}", _aten(f"special_{name}"),
                  doc="p_n(x) by torch's recurrence; n truncated to an integer, 0 for n < 0")
      for name, poly in POLYNOMIALS.items()),
)}


# ------------------------------------------------------------------------------ the op
def _arity(attrs: Any) -> int:
    return KINDS[attrs["kind"]].arity


def _type(ins: list[TensorType], attrs: Any) -> TensorType:
    row = KINDS[attrs["kind"]]
    t = broadcast_promoted(ins)
    check_domain("special", row.name, row.domain, t.dtype)
    return TensorType(t.shape, row.out_dtype) if row.out_dtype is not None else t


def _kernel(args: list[np.ndarray], attrs: Any, out: TensorType) -> np.ndarray:
    row = KINDS[attrs["kind"]]
    operands = promote_args(args, promote_all([DType.of(a.dtype) for a in args]))
    with np.errstate(all="ignore"):
        r = np.asarray(row.numpy(*operands))
    return r.astype(np.float32 if out.dtype.is_low_precision_float else out.dtype.numpy, copy=False)


def _partials(node: Any, ctx: Any) -> list[Any]:
    row = KINDS[node.attrs["kind"]]
    if row.partials is None:
        raise AutodiffError(f"special {row.name!r} (node %{node.id}): no closed-form derivative is implemented")
    return row.partials(ctx.graph, ctx.operands(node), ctx.output(node))


def _refuse(node: Any, i: int) -> AutodiffError:
    name = KINDS[node.attrs["kind"]].name
    return AutodiffError(f"special {name!r} (node %{node.id}): no derivative with respect to operand {i} is implemented")


def _vjp(ctx: Any, node: Any, ct: Any) -> list[Any]:
    wanted = [ctx.wants(node, i) for i in range(len(node.inputs))]
    parts = _partials(node, ctx) if any(wanted) else [None] * len(wanted)
    out: list[Any] = []
    for i, (want, d) in enumerate(zip(wanted, parts)):
        if not want or d is ZERO:
            out.append(None)
        elif d is None:
            raise _refuse(node, i)
        else:
            out.append(ctx.unbroadcast(ct * d, ctx.operand(node, i)))
    return out


def _jvp(ctx: Any, node: Any, tangents: list[Any]) -> Any:
    parts = _partials(node, ctx)
    total = None
    for i, (t, d) in enumerate(zip(tangents, parts)):
        if t is None or d is ZERO:
            continue
        if d is None:
            raise _refuse(node, i)
        term = t * d
        total = term if total is None else total + term
    if total is None:
        return None
    return total if tuple(total.shape) == tuple(node.shape) else ctx.graph.expand(total, target_shape=list(node.shape))


def _doc() -> str:
    rows = "; ".join(f"{k.name}{'(x, n)' if k.name in POLYNOMIALS else ''}" + (f" ({k.doc})" if k.doc else "")
                     for k in KINDS.values() if k.name not in POLYNOMIALS)
    return ("Special functions with torch's semantics (rlx.ops.special). Float operands (gcd / lcm: integers), "
            "broadcast and promoted; the result has the promoted dtype (frexp_exponent: i32). Kinds: " + rows
            + "; and the polynomials " + ", ".join(POLYNOMIALS) + " of (x, n): n is truncated to an integer, n < 0 "
            "gives 0, NaN x gives NaN (torch's CPU kernels return unrelated finite values there). Derivatives "
            "where a closed form exists (Bessel, erfinv, ndtri, log_ndtr, erfcx, zeta in q, Hermite in x, "
            "frexp's mantissa, igamma / igammac in x); the other kinds raise AutodiffError.")


if not all(k.arity in (1, 2) for k in KINDS.values()):  # pragma: no cover - a malformed row
    raise ShapeError("special: every kind takes one or two operands")

defop(
    name="special", precision="f32", family="special", arity=_arity, operands=("x", "y"),
    attrs={"kind": AttrSpec("str", choices=tuple(KINDS))},
    infer=_type, kernel=_kernel, flags={"elementwise"},
    vjp=_vjp, jvp=_jvp, batch=broadcasting_batch, doc=_doc(),
)
