"""JAX / XLA backend: ``rlx.compile(obj, backend="jax", ...)`` jit-compiles an MIR graph for
CPU, GPU or a device mesh (data- and tensor-parallel sharding through partition specs).

Importing this package imports jax; ``import rlx`` does not (the ``"jax"`` backend factory
registered in :mod:`rlx.backends` imports it on first use).

- :mod:`.lowering`: the table ``op name -> fn(jnp args, attrs, out_type)``, the fused ops
  lowered through their decomposition, and the documented refusals;
- :mod:`.executable`: :class:`JaxExecutable` (jit once, cached by fingerprint; params on device);
- :mod:`.sharding`: partition specs per input / param name over a ``jax.sharding.Mesh``.
"""

from __future__ import annotations

from typing import Any

from rlx.backends.jax.executable import JaxExecutable, cache_info, clear_cache
from rlx.backends.jax.lowering import DECOMPOSED, LEAVES, LOWERINGS, REFUSED, Lowering, coverage
from rlx.backends.jax.sharding import data_parallel
from rlx.ir.errors import RlxError

_OPTIONS = ("params", "device", "mesh", "in_shardings", "out_shardings", "precision", "host_fallback")


def compile_jax(obj: Any, **options: Any) -> JaxExecutable:
    """``rlx.compile(obj, backend="jax", params=None, device=None, mesh=None, in_shardings=None,
    out_shardings=None, precision="highest", host_fallback=False)``.

    ``obj`` is an MIR Graph, a HIR module (lowered with its policy) or an LirModule (its
    graph; XLA does its own buffer planning). ``precision`` applies to f32 / f64 matmuls and
    convolutions: "highest" (exact f32 products, the reference semantics), "high",
    "default" or None (the platform default, e.g. TF32 on recent NVIDIA GPUs).
    """
    from rlx.runtime.compile import to_mir

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"jax backend: unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    params = options.pop("params", None)
    return JaxExecutable(to_mir(obj), params, **options)


def register_lowering(name: str, fn: Lowering, *, native_low_precision: bool = False, replace: bool = False) -> None:
    """Add the JAX lowering of a (custom) op: ``fn(args, attrs, out_type) -> jax array``."""
    if name in LOWERINGS and not replace:
        raise RlxError(f"op {name!r} already has a jax lowering (pass replace=True)")
    from rlx.backends.jax.lowering import NATIVE_LOW_PRECISION

    LOWERINGS[name] = fn
    if native_low_precision:
        NATIVE_LOW_PRECISION.add(name)


__all__ = [
    "DECOMPOSED", "LEAVES", "LOWERINGS", "REFUSED", "JaxExecutable", "cache_info", "clear_cache", "compile_jax",
    "coverage", "data_parallel", "register_lowering",
]
