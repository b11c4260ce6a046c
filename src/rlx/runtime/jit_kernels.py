"""Compiled kernels for the numpy executor's ``kernels="jit"`` mode (``rlx.compile(g, backend="numpy",
kernels="jit")``), through numba (the ``kernels`` extra: ``pip install rlx[kernels]``).

Why: a NumPy formula makes one pass over memory per operation (layer_norm: seven), where one loop over each
row keeps it in L1; at 1 thread the layer_norm [8, 128, 768] formula takes 0.9 ms, torch's own kernel 0.19 ms
and this one 0.10 ms (``benchmarks/backends_peers.py``). Kernels: layer_norm and rms_norm over the last
axis. The semantics stay the op's (``rlx.ops``): mean and two-pass biased variance (rms_norm: the mean
square) per row, eps inside the square root; only the summation order differs (vectorised, with fused
multiply-adds), so results equal ``rlx.run`` within float rounding, not bit for bit (the reference mode's
promise). NaN and inf propagate as in the formula (no fast-math assumption about them).

:func:`into_of` gives the ``kernel_into``-shaped kernel for a node when one applies (same float32 / float64
dtype for every operand, the last axis, a non-empty row) and None otherwise (the node keeps the op's own
kernel). Each kernel calls the row's formula for operands it was not compiled for (a non-contiguous array),
so a compiled step never refuses a feed. Numba compiles a kernel for a dtype on first request (about 0.5 s,
at ``rlx.compile``), once per process.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Node
from rlx.ir.opdef import get_op
from rlx.ir.shape import TensorType

__all__ = ["KERNELS", "applies", "available", "into_of"]

#: the numpy executor's kernel modes: the ops' own NumPy kernels, or these compiled ones where one applies
KERNELS = ("reference", "jit")

_DTYPES = {DType.F32: np.float32, DType.F64: np.float64}
_COMPILED: dict[Any, Any] = {}
_LOCK = threading.Lock()


def available() -> bool:
    """Whether numba is installed (the ``kernels="jit"`` mode needs it); found, not imported (cheap)."""
    return importlib.util.find_spec("numba") is not None


def _numba() -> Any:
    try:
        import numba
    except ImportError:
        raise RlxError('numpy backend: kernels="jit" needs numba (pip install rlx[kernels])') from None
    return numba


def _norm_rows(centred: bool) -> Callable[[Any], Any]:
    """The maker of the row loop: per row the mean (layer_norm; rms_norm: ``centred`` False, the mean is 0), the
    two-pass variance (rms_norm: the mean square), then ``(x - mu) * rstd * gamma + beta`` in one sweep
    (``x * rstd - mu * rstd``, torch's form, is no faster and loses digits when |mu| >> std). ``centred`` is a
    compile-time constant of the loop. Reassociation lets the sums vectorise; contraction makes fused multiply-adds;
    no NaN / inf assumption."""

    def make(numba: Any) -> Any:
        @numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)
        def rows(x, gamma, beta, out, eps, zero, one, inv):  # pragma: no cover (compiled by numba)
            for r in range(x.shape[0]):
                row, o = x[r], out[r]
                mu = zero
                if centred:
                    s = zero
                    for i in range(row.shape[0]):
                        s += row[i]
                    mu = s * inv
                v = zero
                for i in range(row.shape[0]):
                    d = row[i] - mu
                    v += d * d
                rstd = one / np.sqrt(v * inv + eps)
                for i in range(row.shape[0]):
                    o[i] = (row[i] - mu) * rstd * gamma[i] + beta[i]

        return rows

    return make


def _compiled(name: str, dtype: type, make: Callable[[Any], Any]) -> Any:
    """``make(numba)``'s dispatcher compiled for ``dtype`` (2-d x and out, 1-d gamma and beta, C order): once per process."""
    key = (name, dtype)
    fn = _COMPILED.get(key)
    if fn is None:
        with _LOCK:
            fn = _COMPILED.get(key)
            if fn is None:
                numba = _numba()
                t = numba.from_dtype(np.dtype(dtype))
                fn = make(numba)
                fn.compile((t[:, ::1], t[::1], t[::1], t[:, ::1], t, t, t, t))
                _COMPILED[key] = fn
    return fn


def _norm(op: str, make: Callable[[Any], Any]) -> Callable[[Node, list[TensorType]], Callable[..., Any] | None]:
    """The maker of ``op``'s kernel (layer_norm, rms_norm: x, gamma, beta over one axis)."""

    def of(node: Node, in_types: list[TensorType]) -> Callable[..., Any] | None:
        dtype = _DTYPES.get(node.dtype)
        rank = len(node.shape)
        if (dtype is None or any(t.dtype != node.dtype for t in in_types) or not rank
                or node.attrs["axis"] % rank != rank - 1):
            return None
        n = node.shape[-1]
        if not isinstance(n, int) or not n:  # a symbolic or empty row: the formula
            return None
        rows = _compiled(op, dtype, make)
        formula: Any = get_op(op).kernel  # the op's own, for operands the loop was not compiled for
        eps, zero, one, inv = dtype(node.attrs["eps"]), dtype(0), dtype(1), dtype(1.0 / n)

        def kernel(args: list[np.ndarray], attrs: Any, out_type: TensorType, out: np.ndarray) -> np.ndarray:
            x, gamma, beta = args
            if not (x.flags.c_contiguous and out.flags.c_contiguous and gamma.flags.c_contiguous and beta.flags.c_contiguous):
                np.copyto(out, formula(args, attrs, out_type))
                return out
            rows(x.reshape(-1, n), gamma, beta, out.reshape(-1, n), eps, zero, one, inv)
            return out

        return kernel

    return of


_MAKERS: dict[str, Callable[[Node, list[TensorType]], Callable[..., Any] | None]] = {
    "layer_norm": _norm("layer_norm", _norm_rows(centred=True)), "rms_norm": _norm("rms_norm", _norm_rows(centred=False))}


def applies(graph: Any) -> bool:
    """Whether ``graph`` holds an op with a compiled kernel here (``backend="auto"``'s test for the candidate)."""
    return any(n.op in _MAKERS for n in graph.nodes)


def into_of(node: Node, in_types: list[TensorType]) -> Callable[..., Any] | None:
    """A compiled ``kernel_into(args, attrs, out_type, out)`` for ``node``, or None when none applies."""
    make = _MAKERS.get(node.op)
    return make(node, in_types) if make is not None else None
