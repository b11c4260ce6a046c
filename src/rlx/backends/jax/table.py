"""The JAX lowering table (:class:`rlx.backends.lowering_table.LoweringTable` over ``jax.numpy``) and
the trace-time settings every lowering module reads.

The lowering modules (:mod:`.lowering` and ``lowering_*``) register into :data:`TABLE` from here,
so none of them imports another at module level (no import cycle); :mod:`.lowering` imports
them all, which fills the table.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rlx.backends.lowering_table import LoweringTable
from rlx.ir.dtype import DType
from rlx.ir.shape import TensorType
from rlx.ops.kinds import ArrayNamespace, tanh_sigmoid
from rlx.ops.rows import nan_ignoring

Lowering = Callable[[list[Any], Mapping[str, Any], TensorType], Any]


def jnp_dtype(dtype: DType) -> Any:
    return jnp.dtype(dtype.numpy)


def compute_dtype(dtype: DType) -> Any:
    """The dtype a lowering computes a node of ``dtype`` in (f32 for the narrow floats)."""
    return jnp.dtype(jnp.float32) if dtype.is_low_precision_float else jnp_dtype(dtype)


def cast_all(args: list[Any], out: TensorType) -> list[Any]:
    dt = compute_dtype(out.dtype)
    return [a.astype(dt) if a.dtype != dt else a for a in args]


def _int_power(a, e):
    """a ** e for integer arrays, e >= 0 (square-and-multiply over the exponent's bits, wrapping)."""
    bits = jnp.iinfo(e.dtype).bits
    result = jnp.ones_like(a)
    base = a
    for _ in range(bits - (1 if jnp.issubdtype(e.dtype, jnp.signedinteger) else 0)):
        result = jnp.where((e & 1) == 1, result * base, result)
        base = base * base
        e = e >> 1
    return result


#: The jax.numpy array namespace the rows and the kinds' formulas run in (rlx.ops.rows, rlx.ops.kinds).
JNP = ArrayNamespace(jnp, erf=lax.erf, sigmoid=lambda x: tanh_sigmoid(jnp, x), permute=jnp.transpose,
                     cast_all=cast_all, concat=lambda parts, axis: jnp.concatenate(parts, axis=axis),
                     slice_axis=lambda x, axis, start, length: lax.slice_in_dim(x, start, start + length, axis=axis),
                     full_like_shape=lambda shape, value, like: jnp.full(shape, value, dtype=like.dtype),
                     rlx_dtype=lambda x: DType.of(np.dtype(x.dtype)), astype=lambda x, to: x.astype(jnp_dtype(to)),
                     bitcast=lambda x, to: lax.bitcast_convert_type(x, jnp_dtype(to)),
                     arange_like=lambda n, like: np.arange(n), stop_gradient=lax.stop_gradient,
                     trunc_div=lambda a, b: lax.div(*jnp.broadcast_arrays(a, b)), int_power=_int_power,
                     fmax=lambda a, b: nan_ignoring(jnp, jnp.maximum, a, b),
                     fmin=lambda a, b: nan_ignoring(jnp, jnp.minimum, a, b))

TABLE = LoweringTable(
    "jax", JNP, decompose_families=frozenset({"fused"}),
    leaf_reasons={
        "input": "bound by name from exe.run(inputs=...)",
        "param": "bound by name from compile(params=...) / exe.run(params=...); kept on the device",
        "result": "bound to the multi-result node's lowering's result of that index",
    },
)
LOWERINGS: dict[str, Lowering] = TABLE.lowerings
NATIVE_LOW_PRECISION: set[str] = TABLE.native_low_precision
DECOMPOSED = TABLE.decomposed
REFUSED = TABLE.refused
LEAVES = TABLE.leaves
lowering = TABLE.lowering

# Matmul precision for f32/f64 operands; the executable sets it around each trace, per thread
# ("highest" = exact f32 products as in NumPy; None = the platform default, e.g. TF32 on recent NVIDIA GPUs).
_TRACE = threading.local()


def matmul_precision() -> Any:
    return getattr(_TRACE, "precision", lax.Precision.HIGHEST)


@contextlib.contextmanager
def tracing_precision(precision: Any) -> Iterator[None]:
    saved = matmul_precision()
    _TRACE.precision = precision
    try:
        yield
    finally:
        _TRACE.precision = saved


def target_platform() -> str:
    """The platform ("cpu", "gpu", "tpu") the executable being traced runs on; lowerings may pick by it."""
    return getattr(_TRACE, "platform", None) or jax.default_backend()


@contextlib.contextmanager
def tracing_platform(platform: str | None) -> Iterator[None]:
    saved = getattr(_TRACE, "platform", None)
    _TRACE.platform = platform
    try:
        yield
    finally:
        _TRACE.platform = saved
