"""The JAX lowering of :mod:`rlx.ops.special` and ``logcumsumexp`` (``lax.cumlogsumexp``).

Kinds that ``jax.scipy.special`` / ``jax.numpy`` compute with the reference's edge values run on
device; the rest (Bessel J / Y / K, Airy, zeta, incomplete gamma, the polynomials, gcd / lcm) run
the NumPy kernel on the host (:func:`host_lowering`): XLA has no kernels for most of them, and the
NumPy kernels carry torch's special cases (igamma's corners, zeta at q = inf, gcd's wrap-around)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import jax.scipy.special as jss
from jax import lax

from rlx.backends.jax.lowering_ext import host_lowering
from rlx.backends.jax.table import cast_all, lowering


def _spherical_j0(x: Any) -> Any:
    safe = jnp.where(x == 0, jnp.ones((), x.dtype), x)
    return jnp.where(jnp.isinf(x), jnp.zeros((), x.dtype), jnp.where(x == 0, jnp.ones((), x.dtype), jnp.sin(safe) / safe))


#: kind -> jax function (the others run on the host)
DEVICE: dict[str, Callable[..., Any]] = {
    "i0": jss.i0, "i0e": jss.i0e, "i1": jss.i1, "i1e": jss.i1e, "erfinv": jss.erfinv, "ndtri": jss.ndtri, "erfcx": jss.erfcx,
    "log_ndtr": jss.log_ndtr, "spherical_bessel_j0": _spherical_j0, "nextafter": jnp.nextafter,
    "frexp_mantissa": lambda x: jnp.frexp(x)[0], "frexp_exponent": lambda x: jnp.frexp(x)[1],
}
_HOST = host_lowering("special")


@lowering("special")
def _special(args, attrs, out):
    fn = DEVICE.get(attrs["kind"])
    if fn is None:
        return _HOST(args, attrs, out)
    if attrs["kind"].startswith("frexp"):
        return fn(args[0])
    return fn(*cast_all(args, out))


@lowering("logcumsumexp")
def _logcumsumexp(args, attrs, out):
    x = args[0]
    return lax.cumlogsumexp(x, axis=attrs["axis"] % x.ndim, reverse=attrs["reverse"])
