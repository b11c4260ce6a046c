"""Kinds as tables: one :class:`Kind` row per sub-op of ``activation`` and ``unary_math``, and
:class:`KindNames` rows for ``binary``, ``binary_ext``, ``compare``, ``reduce`` and ``pool2d``.

A row is the single place a kind is defined. It holds

* ``fn(xp, x)``: the forward formula, written once over an *array namespace* ``xp``;
* ``times_grad(xp, x, y, v)``: ``v · f'(x)`` (``y = f(x)``), over the same namespace, or
  ``None`` where the derivative is zero (piecewise-constant kinds);
* ``domain``: which dtype kinds the op accepts (``"float"``, ``"int"``, ``"complex"``);
* the rewrite facts passes read (:class:`Kind` ``grid``; :class:`KindNames` ``commutative``,
  ``left_identity`` / ``right_identity``, ``selects``), so ``rlx.opt`` keeps no kind lists;
* the kind's names elsewhere: ``onnx`` (one ONNX op computing exactly this, else ``None`` and
  the exporter composes it), ``torch`` (``torch.ops.aten`` overload packets that map to it),
  ``upstream`` (upstream rlx-ir's enum variant).

An array namespace is anything with the array-API functions the formulas call (``exp``,
``log``, ``sqrt``, ``tanh``, ``sin``, ``cos``, ``tan``, ``atan``, ``asin`` … ``atanh``,
``abs``, ``sign``, ``floor``, ``ceil``, ``trunc``, ``round`` (half to even), ``maximum``,
``where``, ``greater``, ``less``) plus ``erf`` and ``sigmoid``, with arithmetic operators on
its arrays. Three exist: :data:`NUMPY` (the reference kernels), the JAX backend's
(``rlx.backends.jax.lowering.JNP``), and :class:`GraphNamespace`, which *emits graph nodes*:
the autodiff rules are ``times_grad`` evaluated on the graph namespace, so a derivative is
written once for the NumPy backward kernel, the JAX lowering and ``rlx.grad``. A new backend
(torch) wraps its module the same way (``ArrayNamespace(torch, erf=torch.special.erf, …)``).

Adding a kind is one row here: the op's attribute choices, builder methods, kernels, rules,
lowerings, exporter / importer tables and the per-kind tests all read the tables
(CONTRIBUTING.md, "How to add an op").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rlx.ir.dtype import DType
from rlx.ops.common import promote_args

FLOAT = frozenset({"float"})
FLOAT_INT = frozenset({"float", "int"})
FLOAT_COMPLEX = frozenset({"float", "complex"})

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_TANH_COEFF = 0.044715


# ------------------------------------------------------------------------------ namespaces
class ArrayNamespace:
    """An array module (numpy, jax.numpy, torch) with the extra functions the formulas use.

    Attribute lookups fall through to ``module``; ``extra`` overrides or adds names.
    """

    def __init__(self, module: Any, **extra: Callable[..., Any]):
        self._module = module
        self.__dict__.update(extra)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._module, name)
        self.__dict__[name] = found  # later lookups are plain attribute reads (rows run per call)
        return found


def _libm_erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x)


def numpy_erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Vectorised error function in x's dtype (SciPy's if installed, else the C library's), written
    into ``out`` (which may be ``x``) when given."""
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        r = np.asarray(_libm_erf(x), dtype=np.float64).astype(np.asarray(x).dtype, copy=False)
        if out is None:
            return r
        np.copyto(out, r)
        return out
    return scipy_erf(x, out=out)


def tanh_sigmoid(xp: Any, x: Any) -> Any:
    """σ(x) = ½(1 + tanh(x/2)): no overflow for large |x| (every namespace's ``sigmoid``)."""
    return 0.5 * (1.0 + xp.tanh(0.5 * x))


def numpy_sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`tanh_sigmoid` in NumPy, optionally written into ``out`` (no temporaries)."""
    y = np.asarray(np.multiply(0.5, x, out=out))  # an array even for a 0-d x: the steps below write into it
    return np.multiply(0.5, np.add(1.0, np.tanh(y, out=y), out=y), out=y)


def _numpy_astype(x: np.ndarray, to: Any) -> np.ndarray:
    return x.astype(np.float32 if DType(to).is_low_precision_float else DType(to).numpy, copy=False)


def _numpy_cast_all(args: list[np.ndarray], out: Any) -> list[np.ndarray]:
    return promote_args(args, out.dtype)


def _numpy_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer ``a / b`` truncated toward zero (b holds no 0 / -1): the floor quotient moves up by one where
    the division is inexact and the signs differ (no abs(): abs(MIN) overflows)."""
    q = np.floor_divide(a, b)
    return q + ((q * b != a) & ((a < 0) != (b < 0))).astype(q.dtype)


def _numpy_rlx_dtype(x: np.ndarray) -> DType:
    return DType.of(np.asarray(x).dtype)


#: The NumPy namespace of the reference kernels (the extras rlx.ops.rows reads included).
NUMPY = ArrayNamespace(np, erf=numpy_erf, sigmoid=numpy_sigmoid, cast_all=_numpy_cast_all, astype=_numpy_astype,
                       rlx_dtype=_numpy_rlx_dtype, arange_like=lambda n, like: np.arange(n), permute=np.transpose,
                       trunc_div=_numpy_trunc_div, int_power=np.power,
                       concat=lambda parts, axis: np.concatenate(parts, axis=axis),
                       full_like_shape=lambda shape, value, like: np.full(shape, value, dtype=like.dtype))


class GraphNamespace:
    """The array namespace on graph :class:`~rlx.ir.graph.Value`\\ s: each call emits a node of ``g``.

    ``times_grad`` evaluated here builds the derivative graph (the autodiff rules); the
    emitted ops have rules themselves, so derivatives of any order work.
    """

    _ACTIVATION: ClassVar[tuple[str, ...]] = ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "atan", "abs", "sigmoid")
    _UNARY_MATH: ClassVar[dict[str, str]] = {
        "erf": "erf", "sign": "sign", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "round_even",
        "asin": "asin", "acos": "acos", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    }

    def __init__(self, g: Any):
        self.g = g

    def __getattr__(self, name: str) -> Any:
        if name in self._ACTIVATION:
            return lambda x: self.g.activation(x, kind=name)
        if name in self._UNARY_MATH:
            return lambda x: self.g.unary_math(x, kind=self._UNARY_MATH[name])
        raise AttributeError(f"the graph namespace has no {name!r}")

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.g.where(cond, a, b)

    def greater(self, a: Any, b: Any) -> Any:
        return self.g.gt(a, b)

    def less(self, a: Any, b: Any) -> Any:
        return self.g.lt(a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.g.maximum(a, b)

    # what the composite rows of rlx.ops.rows read, so they run here too (decompositions, rules)
    def matmul(self, a: Any, b: Any) -> Any:
        return self.g.matmul(a, b)

    def swapaxes(self, x: Any, i: int, j: int) -> Any:
        perm = list(range(len(x.shape)))
        perm[i], perm[j] = perm[j], perm[i]
        return self.g.transpose(x, perm=perm)

    def reshape(self, x: Any, shape: Any) -> Any:
        if isinstance(x, np.ndarray):  # a constant being built (positional masks)
            return x.reshape(shape)
        return self.g.reshape(x, new_shape=[d if isinstance(d, int) else -1 for d in shape])

    def astype(self, x: Any, to: Any) -> Any:
        return self.g.cast(x, to=to)

    def rlx_dtype(self, x: Any) -> Any:
        return x.dtype

    def greater_equal(self, a: Any, b: Any) -> Any:
        return self.g.ge(a, b)

    def arange_like(self, n: int, like: Any) -> np.ndarray:
        return np.arange(n)  # static lengths only: what it builds is a constant

    def isfinite(self, x: Any) -> Any:
        return self.g.eq(x - x, 0.0)  # x - x is 0 exactly where x is finite

    def zeros_like(self, x: Any) -> Any:
        return self.g.scalar(0.0, x.dtype)

    def ones_like(self, x: Any) -> Any:
        return self.g.scalar(1.0, x.dtype)

    # reductions
    def _reduce(self, op: str, x: Any, axis: Any, keepdims: bool) -> Any:
        axes = None if axis is None else [axis] if isinstance(axis, int) else list(axis)
        return self.g.reduce(x, op=op, axes=axes, keep_dim=keepdims)

    def amax(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce("max", x, axis, keepdims)

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce("sum", x, axis, keepdims)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce("mean", x, axis, keepdims)


# ------------------------------------------------------------------------------ rows
Formula = Callable[..., Any]


@dataclass(frozen=True)
class Kind:
    """One unary elementwise kind (see the module doc). ``int_identity``: on integer operands the
    op is the identity (round, floor …). ``complex_times_grad`` replaces ``times_grad`` on c64
    operands where the real formula's guards need an order (sqrt). ``grid``: the kind maps the
    symmetric quantisation grid {k·s : |k| <= q} into itself (``"keeps"``: relu), and also keeps
    |x| (``"keeps_magnitude"``: neg, abs); ``propagate_fake_quant`` reads it."""

    name: str
    fn: Formula
    times_grad: Formula | None
    domain: frozenset[str] = FLOAT
    int_identity: bool = False
    complex_times_grad: Formula | None = None
    grid: str | None = None
    onnx: str | None = None
    torch: tuple[str, ...] = ()
    upstream: str | None = None
    doc: str = ""

    def forward(self, xp: Any, x: Any, *, is_int: bool = False) -> Any:
        """``f(x)`` in namespace ``xp`` (``is_int``: x holds integers)."""
        return x if is_int and self.int_identity else self.fn(xp, x)

    def vjp(self, xp: Any, x: Any, y: Any, v: Any, *, is_complex: bool = False) -> Any:
        """``v · f'(x)``; None when the derivative is identically zero."""
        rule = self.complex_times_grad if is_complex and self.complex_times_grad is not None else self.times_grad
        return None if rule is None else rule(xp, x, y, v)


def _gelu(xp, x):  # in the order onnxruntime fuses into one Gelu kernel (the ONNX exporter evaluates this)
    return x * (xp.erf(x / math.sqrt(2.0)) + 1.0) * 0.5


def _gelu_grad(xp, x, y, v):  # Φ(x) + x·φ(x)
    return v * (0.5 * (1.0 + xp.erf(x / math.sqrt(2.0))) + x * xp.exp(x * x * -0.5) * INV_SQRT_2PI)


def _gelu_approx(xp, x):
    return 0.5 * x * (1.0 + xp.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_COEFF * x * x * x)))


def _gelu_approx_grad(xp, x, y, v):
    x2 = x * x
    t = xp.tanh((x + x2 * x * GELU_TANH_COEFF) * SQRT_2_OVER_PI)
    return v * (0.5 * (1.0 + t) + (0.5 * SQRT_2_OVER_PI) * x * (1.0 - t * t) * (1.0 + x2 * (3 * GELU_TANH_COEFF)))


def _silu_grad(xp, x, y, v):
    s = xp.sigmoid(x)
    return v * (s * (1.0 + x * (1.0 - s)))


def _sqrt_grad(xp, x, y, v):  # 0.5 / sqrt(x), 0 where sqrt(x) <= 0 (the unselected branch stays finite)
    pos = xp.greater(y, 0.0)
    return xp.where(pos, v * (0.5 / xp.where(pos, y, 1.0)), 0.0)


def _rsqrt_grad(xp, x, y, v):  # -0.5 x^-1.5 = -0.5 y³, 0 where sqrt(x) <= 0
    ys = xp.where(xp.greater(x, 0.0), y, 0.0)
    return v * (ys * ys * ys * -0.5)


def _aten(*names: str) -> tuple[str, ...]:
    return tuple(f"aten.{n}" for n in names)


#: ``activation``'s kinds (the rlx-native unary functions; derivatives per docs/semantics.md#activations).
ACTIVATION_KINDS: Mapping[str, Kind] = {k.name: k for k in (
    Kind("gelu", _gelu, _gelu_grad, upstream="Gelu", doc="exact: x·Φ(x) with erf"),
    Kind("gelu_approx", _gelu_approx, _gelu_approx_grad, upstream="GeluApprox", doc="the tanh form"),
    Kind("silu", lambda xp, x: x * xp.sigmoid(x), _silu_grad, torch=_aten("silu"), upstream="Silu"),
    Kind("relu", lambda xp, x: xp.maximum(x, 0), lambda xp, x, y, v: xp.where(xp.greater(x, 0.0), v, 0.0),
         domain=FLOAT_INT, grid="keeps", onnx="Relu", torch=_aten("relu"), upstream="Relu", doc="relu' = 0 at 0"),
    Kind("sigmoid", lambda xp, x: xp.sigmoid(x), lambda xp, x, y, v: v * (y * (1.0 - y)),
         onnx="Sigmoid", torch=_aten("sigmoid"), upstream="Sigmoid"),
    Kind("tanh", lambda xp, x: xp.tanh(x), lambda xp, x, y, v: v * (1.0 - y * y),
         onnx="Tanh", torch=_aten("tanh"), upstream="Tanh"),
    Kind("exp", lambda xp, x: xp.exp(x), lambda xp, x, y, v: v * y,
         domain=FLOAT_COMPLEX, onnx="Exp", torch=_aten("exp"), upstream="Exp"),
    Kind("log", lambda xp, x: xp.log(x), lambda xp, x, y, v: v / x,
         domain=FLOAT_COMPLEX, onnx="Log", torch=_aten("log"), upstream="Log"),
    Kind("sqrt", lambda xp, x: xp.sqrt(x), _sqrt_grad, domain=FLOAT_COMPLEX,
         complex_times_grad=lambda xp, x, y, v: v * (0.5 / y),  # holomorphic off 0; c64 has no order
         onnx="Sqrt", torch=_aten("sqrt"), upstream="Sqrt", doc="sqrt' = 0 where sqrt(x) <= 0 (real x)"),
    Kind("rsqrt", lambda xp, x: 1.0 / xp.sqrt(x), _rsqrt_grad, torch=_aten("rsqrt"), upstream="Rsqrt",
         doc="rsqrt' = 0 where sqrt(x) <= 0"),
    Kind("neg", lambda xp, x: -x, lambda xp, x, y, v: -v,
         domain=frozenset({"float", "int", "complex"}), grid="keeps_magnitude", onnx="Neg", torch=_aten("neg"), upstream="Neg"),
    Kind("abs", lambda xp, x: xp.abs(x), lambda xp, x, y, v: v * xp.sign(x),
         domain=FLOAT_INT, grid="keeps_magnitude", onnx="Abs", torch=_aten("abs"), upstream="Abs", doc="abs' = sign(x), 0 at 0"),
    Kind("sin", lambda xp, x: xp.sin(x), lambda xp, x, y, v: v * xp.cos(x), onnx="Sin", torch=_aten("sin"), upstream="Sin"),
    Kind("cos", lambda xp, x: xp.cos(x), lambda xp, x, y, v: -(v * xp.sin(x)), onnx="Cos", torch=_aten("cos"), upstream="Cos"),
    Kind("tan", lambda xp, x: xp.tan(x), lambda xp, x, y, v: v * (1.0 + y * y), onnx="Tan", torch=_aten("tan"), upstream="Tan"),
    Kind("atan", lambda xp, x: xp.atan(x), lambda xp, x, y, v: v / (1.0 + x * x),
         onnx="Atan", torch=_aten("atan"), upstream="Atan"),
    Kind("round", lambda xp, x: xp.sign(x) * xp.floor(xp.abs(x) + 0.5), lambda xp, x, y, v: v,
         domain=FLOAT_INT, int_identity=True, upstream="Round",
         doc="half away from zero; straight-through derivative"),
    # new activation kinds go here: one row (CONTRIBUTING.md, "Adding an elementwise kind")
)}

_INV_SQRT = {"asin": 1.0, "acos": -1.0}


#: ``unary_math``'s kinds (NumPy semantics; the frontends' vocabulary beyond ``activation``).
UNARY_MATH_KINDS: Mapping[str, Kind] = {k.name: k for k in (
    Kind("erf", lambda xp, x: xp.erf(x), lambda xp, x, y, v: v * (xp.exp(-(x * x)) * (2.0 / math.sqrt(math.pi))),
         onnx="Erf", torch=_aten("erf")),
    Kind("floor", lambda xp, x: xp.floor(x), None, domain=FLOAT_INT, int_identity=True, onnx="Floor", torch=_aten("floor")),
    Kind("ceil", lambda xp, x: xp.ceil(x), None, domain=FLOAT_INT, int_identity=True, onnx="Ceil", torch=_aten("ceil")),
    Kind("sign", lambda xp, x: xp.sign(x), None, domain=FLOAT_INT, onnx="Sign", torch=_aten("sign"),
         doc="0 at 0, NaN stays NaN"),
    Kind("round_even", lambda xp, x: xp.round(x), None, domain=FLOAT_INT, int_identity=True, onnx="Round",
         doc="half to even (np.round, ONNX Round)"),
    Kind("trunc", lambda xp, x: xp.trunc(x), None, domain=FLOAT_INT, int_identity=True, torch=_aten("trunc")),
    Kind("asin", lambda xp, x: xp.asin(x), lambda xp, x, y, v: v / xp.sqrt(1.0 - x * x), onnx="Asin", torch=_aten("asin")),
    Kind("acos", lambda xp, x: xp.acos(x), lambda xp, x, y, v: -(v / xp.sqrt(1.0 - x * x)), onnx="Acos", torch=_aten("acos")),
    Kind("sinh", lambda xp, x: xp.sinh(x), lambda xp, x, y, v: v * xp.cosh(x), onnx="Sinh", torch=_aten("sinh")),
    Kind("cosh", lambda xp, x: xp.cosh(x), lambda xp, x, y, v: v * xp.sinh(x), onnx="Cosh", torch=_aten("cosh")),
    Kind("asinh", lambda xp, x: xp.asinh(x), lambda xp, x, y, v: v / xp.sqrt(x * x + 1.0), onnx="Asinh", torch=_aten("asinh")),
    Kind("acosh", lambda xp, x: xp.acosh(x), lambda xp, x, y, v: v / xp.sqrt(x * x - 1.0), onnx="Acosh", torch=_aten("acosh")),
    Kind("atanh", lambda xp, x: xp.atanh(x), lambda xp, x, y, v: v / (1.0 - x * x), onnx="Atanh", torch=_aten("atanh")),
)}


@dataclass(frozen=True)
class KindNames:
    """A kind of a binary / compare / reduce / pool op: its rlx name, dtype domain and its names
    in the other IRs (``onnx`` op type, ``torch`` aten packets, ``upstream`` enum variant).
    Their kernels stay in the op modules (integer and bool cases differ per backend).

    Algebraic facts: ``commutative`` (the operands may be swapped: ``cse``), ``left_identity`` /
    ``right_identity`` (the element e with ``e op x == x`` / ``x op e == x``: ``simplify``),
    ``selects`` (the result is one of the operand's elements: max / min reductions and pools)."""

    name: str
    domain: frozenset[str] = field(default_factory=lambda: frozenset({"float", "int", "bool", "complex"}))
    onnx: str | None = None
    torch: tuple[str, ...] = ()
    upstream: str | None = None
    method: str | None = None  # the Graph builder method, if it is not the name
    commutative: bool = False
    left_identity: float | None = None
    right_identity: float | None = None
    selects: bool = False


_ALL = frozenset({"float", "int", "bool", "complex"})
_REAL = frozenset({"float", "int", "bool"})
_NUMERIC = frozenset({"float", "int", "complex"})

BINARY_KINDS: Mapping[str, KindNames] = {k.name: k for k in (
    KindNames("add", _ALL, "Add", _aten("add"), "Add", commutative=True, left_identity=0.0, right_identity=0.0),
    KindNames("sub", _NUMERIC, "Sub", _aten("sub"), "Sub", right_identity=0.0),
    KindNames("mul", _ALL, "Mul", _aten("mul"), "Mul", commutative=True, left_identity=1.0, right_identity=1.0),
    KindNames("div", _NUMERIC, "Div", _aten("div"), "Div", right_identity=1.0),
    KindNames("max", _REAL, "Max", _aten("maximum"), None, method="maximum", commutative=True),
    KindNames("min", _REAL, "Min", _aten("minimum"), None, method="minimum", commutative=True),
    KindNames("fmax", _REAL, None, _aten("fmax"), "Max", commutative=True),  # upstream's f32::max ignores NaN
    KindNames("fmin", _REAL, None, _aten("fmin"), "Min", commutative=True),
    KindNames("pow", frozenset({"float", "int"}), "Pow", _aten("pow"), "Pow", right_identity=1.0),
)}

BINARY_EXT_KINDS: Mapping[str, KindNames] = {k.name: k for k in (
    KindNames("mod", frozenset({"float", "int"}), None, _aten("remainder")),
    KindNames("fmod", frozenset({"float", "int"}), None, _aten("fmod")),
    KindNames("bitwise_and", frozenset({"int", "bool"}), "BitwiseAnd", _aten("bitwise_and")),
    KindNames("bitwise_or", frozenset({"int", "bool"}), "BitwiseOr", _aten("bitwise_or")),
    KindNames("bitwise_xor", frozenset({"int", "bool"}), "BitwiseXor", _aten("bitwise_xor")),
    KindNames("shift_left", frozenset({"int"}), None, _aten("bitwise_left_shift")),
    KindNames("shift_right", frozenset({"int"}), None, _aten("bitwise_right_shift")),
)}

COMPARE_KINDS: Mapping[str, KindNames] = {k.name: k for k in (
    KindNames("eq", _ALL, "Equal", _aten("eq"), "Eq", commutative=True),
    KindNames("ne", _ALL, None, _aten("ne"), "Ne", commutative=True),
    KindNames("lt", _REAL, "Less", _aten("lt"), "Lt"),
    KindNames("le", _REAL, "LessOrEqual", _aten("le"), "Le"),
    KindNames("gt", _REAL, "Greater", _aten("gt"), "Gt"),
    KindNames("ge", _REAL, "GreaterOrEqual", _aten("ge"), "Ge"),
)}

REDUCE_KINDS: Mapping[str, KindNames] = {k.name: k for k in (
    KindNames("sum", _NUMERIC, "ReduceSum", _aten("sum"), "Sum"),
    KindNames("mean", frozenset({"float", "complex"}), "ReduceMean", _aten("mean"), "Mean"),
    KindNames("max", _REAL, "ReduceMax", _aten("amax"), None, selects=True),
    KindNames("min", _REAL, "ReduceMin", _aten("amin"), None, selects=True),
    KindNames("fmax", _REAL, None, (), "Max", selects=True),  # NaN-ignoring (np.fmax.reduce), upstream's reductions
    KindNames("fmin", _REAL, None, (), "Min", selects=True),
    KindNames("prod", _NUMERIC, "ReduceProd", _aten("prod"), "Prod"),
)}


