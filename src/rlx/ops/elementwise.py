"""Elementwise ops: activation (17 kinds), cast, binary (7 kinds), compare (6), where.

Binary, compare and where promote their operands along the commutative lattice of
:mod:`rlx.ir.dtype` and broadcast like NumPy; the result has the promoted dtype (upstream
keeps the left operand's dtype, which makes ``a + b`` depend on operand order).
Rounding is half away from zero, as upstream's kernels do (not NumPy's half-to-even).
Max / min ignore NaN (``np.fmax`` / ``np.fmin``).
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import TensorType
from rlx.ops.common import broadcast_promoted, promote_args

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised error function (SciPy's if installed, else the C library's, elementwise)."""
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        return _libm_erf(x)
    return scipy_erf(x)


_libm_erf = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(erf(x), dtype=np.float64).astype(x.dtype, copy=False)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_approx": lambda x: 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))),
    "silu": lambda x: x * sigmoid(x),
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "neg": np.negative,
    "abs": np.abs,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "atan": np.arctan,
    "round": round_half_away,
}
INT_OK = frozenset({"relu", "neg", "abs", "round"})
COMPLEX_OK = frozenset({"neg", "exp", "log", "sqrt"})


def _activation_type(ins: list[TensorType], attrs) -> TensorType:
    kind, t = attrs["kind"], ins[0]
    if t.dtype.is_bool:
        raise ShapeError(f"activation {kind!r} is not defined on bool")
    if t.dtype.is_complex and kind not in COMPLEX_OK:
        raise ShapeError(f"activation {kind!r} is not defined on c64 (only {sorted(COMPLEX_OK)})")
    if t.dtype.is_int and kind not in INT_OK:
        raise ShapeError(f"activation {kind!r} needs a float operand, got {t.dtype}")
    return t


def _activation_kernel(args, attrs, out):
    x = args[0]
    if attrs["kind"] == "round" and x.dtype.kind in "iu":
        return x
    return ACTIVATIONS[attrs["kind"]](x)


defop(
    name="activation", family="elementwise", arity=1, operands=("x",),
    attrs={"kind": AttrSpec("str", choices=tuple(ACTIVATIONS))},
    methods={k: {"kind": k} for k in ACTIVATIONS},
    infer=_activation_type, kernel=_activation_kernel, flags={"elementwise"},
    doc="Unary elementwise function. gelu is exact (erf); gelu_approx is the tanh form; "
    "round is half away from zero; relu/neg/abs/round also accept integers; only "
    "neg/exp/log/sqrt accept c64.",
)


def _cast_kernel(args, attrs, out):
    x, to = args[0], attrs["to"]
    if to.is_bool:
        return x != 0
    if to.is_int and x.dtype.kind in "fc":
        x = np.trunc(np.real(x) if x.dtype.kind == "c" else x)
    return x.astype(to.numpy if not to.is_low_precision_float else np.float32)


defop(
    name="cast", family="elementwise", arity=1, operands=("x",),
    attrs={"to": AttrSpec("dtype")},
    infer=lambda ins, attrs: TensorType(ins[0].shape, attrs["to"]),
    kernel=_cast_kernel, flags={"elementwise"},
    doc="Convert the element type (x.astype(to)); float to int truncates toward zero, "
    "anything to bool is x != 0.",
)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C / XLA semantics); x / 0 gives 0."""
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe)
    return np.where(b == 0, 0, np.where((a < 0) != (safe < 0), -q, q)).astype(np.result_type(a, b))


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer power; a negative exponent gives the truncated reciprocal (0 unless |a| == 1)."""
    a, b = np.broadcast_arrays(a, b)
    pos = np.power(a, np.where(b < 0, 0, b))
    recip = np.where(np.abs(a) == 1, np.power(a, np.abs(b) % 2 + 0 * b), 0)
    return np.where(b < 0, recip, pos)


def _binary_kernel(args, attrs, out):
    a, b = promote_args(args, out.dtype)
    op = attrs["op"]
    is_int = out.dtype.is_int or out.dtype.is_bool
    if op == "add":
        return np.logical_or(a, b) if out.dtype.is_bool else a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return np.logical_and(a, b) if out.dtype.is_bool else a * b
    if op == "div":
        return _int_div(a, b) if is_int else a / b
    if op == "max":
        return np.fmax(a, b)
    if op == "min":
        return np.fmin(a, b)
    return _int_pow(a, b) if is_int else np.power(a, b)


def _binary_type(ins, attrs):
    t = broadcast_promoted(ins)
    if t.dtype.is_complex and attrs["op"] in ("max", "min", "pow"):
        raise ShapeError(f"binary {attrs['op']!r} is not defined on c64")
    if t.dtype.is_bool and attrs["op"] in ("sub", "div", "pow"):
        raise ShapeError(f"binary {attrs['op']!r} is not defined on bool")
    return t


BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min", "pow": "pow"}

defop(
    name="binary", family="elementwise", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=("add", "sub", "mul", "div", "max", "min", "pow"))},
    methods={m: {"op": k} for m, k in BINARY_METHODS.items()},
    infer=_binary_type, kernel=_binary_kernel, flags={"elementwise"},
    doc="Broadcasting binary arithmetic in the promoted dtype. Builder methods: add, sub, "
    "mul, div, maximum, minimum, pow (g.max / g.min are reductions). Float div is IEEE; "
    "integer div truncates toward zero; max/min ignore NaN.",
)

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}


def _compare_type(ins, attrs):
    t = broadcast_promoted(ins)
    if t.dtype.is_complex and attrs["op"] not in ("eq", "ne"):
        raise ShapeError(f"compare {attrs['op']!r} is not defined on c64")
    return TensorType(t.shape, DType.BOOL)


defop(
    name="compare", family="elementwise", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=tuple(_COMPARE))},
    methods={k: {"op": k} for k in _COMPARE},
    infer=_compare_type,
    kernel=lambda args, attrs, out: _COMPARE[attrs["op"]](*promote_args(args, DType.promote(args[0].dtype, args[1].dtype))),
    flags={"elementwise"},
    doc="Broadcasting comparison in the promoted dtype; the result is bool. Not differentiable.",
)


def _where_type(ins, attrs):
    out = broadcast_promoted(ins[1:])
    full = broadcast_promoted([TensorType(ins[0].shape, out.dtype), out])
    return TensorType(full.shape, out.dtype)


defop(
    name="where", family="elementwise", arity=3, operands=("cond", "on_true", "on_false"),
    infer=_where_type,
    kernel=lambda args, attrs, out: np.where(args[0] != 0, *promote_args(args[1:], out.dtype)),
    flags={"elementwise"},
    doc="np.where(cond != 0, on_true, on_false) with three-way broadcasting; the branches "
    "are promoted to a common dtype.",
)
