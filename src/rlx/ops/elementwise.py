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
from rlx.ir.errors import AutodiffError, ShapeError
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


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    y = np.asarray(np.multiply(0.5, x, out=out))  # an array even for a 0-d x: the steps below write into it
    return np.multiply(0.5, np.add(1.0, np.tanh(y, out=y), out=y), out=y)


def _gelu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    half = 0.5 * x  # first: out may be x itself
    e = np.asarray(np.divide(x, math.sqrt(2.0), out=out))
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        e[...] = _erf(e)
    else:  # the values of _erf (SciPy's erf keeps f32 and f64), without the f64 round trip
        scipy_erf(e, out=e)
    return np.multiply(half, np.add(1.0, e, out=e), out=e)


def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


ACTIVATIONS = {
    "gelu": _gelu,
    "gelu_approx": lambda x: 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))),
    "silu": lambda x: x * sigmoid(x),
    "relu": lambda x, out=None: np.maximum(x, 0, out=out),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x, out=None: np.divide(1.0, np.sqrt(x, out=out), out=out),
    "neg": np.negative,
    "abs": np.abs,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "atan": np.arctan,
    "round": round_half_away,
}
INT_OK = frozenset({"relu", "neg", "abs", "round"})
_OUT_OK = frozenset({"gelu", "relu", "sigmoid", "rsqrt", *(k for k, f in ACTIVATIONS.items() if isinstance(f, np.ufunc))})  # take out=
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


def _activation_kernel(args, attrs, out_type, out=None):
    x, kind = args[0], attrs["kind"]
    if kind in _OUT_OK:
        return ACTIVATIONS[kind](x, out=out)
    res = x if kind == "round" and x.dtype.kind in "iu" else ACTIVATIONS[kind](x)
    if out is None:
        return res
    np.copyto(out, res, casting="unsafe")
    return out


# ----------------------------------------------------------------------- autodiff rules
# Derivatives are written with primitive elementwise ops (never activation_backward), so a
# derivative graph is again differentiable by these same rules: hvp and higher orders work
# for every activation. Rule contract: rlx.autodiff.rules (module docstring).
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_TAYLOR_RADIUS = 1e-3


def _normal_cdf(g, x):
    """Φ(x) from primitives: gelu(x) / x away from 0, its Taylor series near 0.

    The series ½ + φ(0)(x − x³/6 + x⁵/40) is exact to f64 rounding for |x| < 1e-3, and it
    keeps every derivative right at x = 0 (a plain ``where(x == 0, ½, …)`` guard would
    give Φ' = 0 there). The unselected branch is evaluated on a safe operand (no 0/0).
    """
    near0 = g.lt(g.abs(x), g.scalar(_GELU_TAYLOR_RADIUS, x.dtype))
    xs = g.where(near0, g.scalar(1.0, x.dtype), x)
    far = g.gelu(xs) / xs
    x2 = x * x
    near = 0.5 + (x * (1.0 - x2 * (1.0 / 6.0 - x2 / 40.0))) * _INV_SQRT_2PI
    return g.where(near0, near, far)


def _times_derivative(ctx, kind: str, x, y, v):
    """``v · act'(x)`` for activation ``kind`` (x the operand, y the output), in primitives."""
    g = ctx.graph
    zero = g.scalar(0.0, x.dtype)
    if kind == "relu":
        return ctx.where_zero(g.gt(x, zero), v)
    if kind == "round":  # straight-through estimator
        return v
    if kind == "neg":
        return -v
    if kind == "abs":  # sign(x), 0 at 0
        return g.where(g.gt(x, zero), v, ctx.where_zero(g.lt(x, zero), -v))
    if kind == "exp":
        return v * y
    if kind == "log":
        return v / x
    if kind == "sqrt" and x.dtype.is_complex:  # holomorphic off 0; no real-axis guard (c64 has no order)
        return v * (0.5 / y)
    if kind == "sqrt":  # 0.5 / sqrt(x), 0 where sqrt(x) <= 0
        pos = g.gt(y, zero)
        return ctx.where_zero(pos, v * (0.5 / ctx.safe(y, pos, 1.0)))
    if kind == "rsqrt":  # -0.5 x^-1.5 = -0.5 y^3, 0 where sqrt(x) <= 0
        ys = ctx.safe(y, g.gt(x, zero), 0.0)
        return v * (ys * ys * ys * -0.5)
    if kind == "sigmoid":
        return v * (y * (1.0 - y))
    if kind == "tanh":
        return v * (1.0 - y * y)
    if kind == "sin":
        return v * g.cos(x)
    if kind == "cos":
        return -(v * g.sin(x))
    if kind == "tan":
        return v * (1.0 + y * y)
    if kind == "atan":
        return v / (1.0 + x * x)
    if kind == "silu":
        s = g.sigmoid(x)
        return v * (s * (1.0 + x * (1.0 - s)))
    if kind == "gelu":
        pdf = g.exp(x * x * -0.5) * _INV_SQRT_2PI
        return v * (_normal_cdf(g, x) + x * pdf)
    if kind == "gelu_approx":
        x2 = x * x
        t = g.tanh((x + x2 * x * 0.044715) * _SQRT_2_OVER_PI)
        return v * (0.5 * (1.0 + t) + (0.5 * _SQRT_2_OVER_PI) * x * (1.0 - t * t) * (1.0 + x2 * (3 * 0.044715)))
    raise AutodiffError(f"activation {kind!r} has no derivative in the activation rules")


def _activation_vjp(ctx, node, ct):
    return [_times_derivative(ctx, node.attrs["kind"], ctx.operand(node, 0), ctx.output(node), ct)]


def _activation_jvp(ctx, node, tangents):
    return _times_derivative(ctx, node.attrs["kind"], ctx.operand(node, 0), ctx.output(node), tangents[0])


def _broadcasting_batch(ctx, node, operands, batched):
    return ctx.apply_broadcasting(node, operands, batched)


defop(
    name="activation", family="elementwise", arity=1, operands=("x",),
    attrs={"kind": AttrSpec("str", choices=tuple(ACTIVATIONS))},
    methods={k: {"kind": k} for k in ACTIVATIONS},
    infer=_activation_type, kernel=_activation_kernel, kernel_into=_activation_kernel, flags={"elementwise", "complex_ad"},
    vjp=_activation_vjp, jvp=_activation_jvp, batch=_broadcasting_batch,
    doc="Unary elementwise function. gelu is exact (erf); gelu_approx is the tanh form; "
    "round is half away from zero; relu/neg/abs/round also accept integers; only "
    "neg/exp/log/sqrt accept c64. Derivatives (autodiff) follow OPS.md §7.2: relu' = 0 at 0, "
    "abs' = sign (0 at 0), sqrt' and rsqrt' are 0 where sqrt(x) <= 0 (real x), round is straight-through; "
    "the c64 kinds are holomorphic (complex_ad: JAX's convention, rlx.autodiff.rules).",
)


def _cast_kernel(args, attrs, out):
    x, to = args[0], attrs["to"]
    if to.is_bool:
        return x != 0
    if x.dtype.kind == "c" and not to.is_complex:
        x = np.real(x)  # explicitly, which is what astype does (with a ComplexWarning)
    if to.is_int and x.dtype.kind == "f":
        x = np.trunc(x)
    return x.astype(to.numpy if not to.is_low_precision_float else np.float32)


def _cast_vjp(ctx, node, ct):
    """The cotangent cast back: c64 -> real keeps its real part, real -> c64 embeds it, which is
    JAX's transpose of both directions (the forward cast keeps the real part / embeds)."""
    x = ctx.operand(node, 0)
    return [ctx.cast(ct, x.dtype)]


def _cast_jvp(ctx, node, tangents):
    to = node.attrs["to"]
    return ctx.cast(tangents[0], to) if to.is_float or to.is_complex else None


defop(
    name="cast", family="elementwise", arity=1, operands=("x",),
    attrs={"to": AttrSpec("dtype")},
    infer=lambda ins, attrs: TensorType(ins[0].shape, attrs["to"]),
    kernel=_cast_kernel, flags={"elementwise", "complex_ad"},
    vjp=_cast_vjp, jvp=_cast_jvp, batch=_broadcasting_batch,
    doc="Convert the element type (x.astype(to)); float to int truncates toward zero, "
    "anything to bool is x != 0, c64 to a real type keeps the real part.",
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


_BINARY_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.fmax, "min": np.fmin, "pow": np.power}


def _binary_kernel(args, attrs, out_type, out=None):
    a, b = args
    op = attrs["op"]
    if out is None or not a.dtype == b.dtype == out.dtype:  # (out has the compute dtype already)
        a, b = promote_args(args, out_type.dtype)
    kind = a.dtype.kind  # NumPy's dtype tests: a per-node cost in the arena
    if kind == "b" and op in ("add", "mul"):
        return (np.logical_or if op == "add" else np.logical_and)(a, b, out=out)
    if kind in "biu" and op in ("div", "pow"):
        res = _int_div(a, b) if op == "div" else _int_pow(a, b)
        if out is None:
            return res
        np.copyto(out, res, casting="unsafe")
        return out
    return _BINARY_UFUNCS[op](a, b, out=out)


def _binary_type(ins, attrs):
    t = broadcast_promoted(ins)
    if t.dtype.is_complex and attrs["op"] in ("max", "min", "pow"):
        raise ShapeError(f"binary {attrs['op']!r} is not defined on c64")
    if t.dtype.is_bool and attrs["op"] in ("sub", "div", "pow"):
        raise ShapeError(f"binary {attrs['op']!r} is not defined on bool")
    return t


def _pow_log_term(ctx, a, y):
    """``y·ln(a)``, the derivative of ``a**b`` in b; 0 where a == 0 (torch's convention), NaN-free."""
    g = ctx.graph
    is0 = g.eq(a, g.scalar(0.0, a.dtype))
    a_safe = g.where(is0, g.scalar(1.0, a.dtype), a)
    return ctx.where_zero(is0, y * g.log(a_safe), keep_where=False)


def _binary_vjp(ctx, node, ct):
    g, op = ctx.graph, node.attrs["op"]
    a, b = ctx.operands(node)
    if op == "add":
        ga, gb = ct, ct
    elif op == "sub":
        ga, gb = ct, -ct
    elif op == "mul":
        ga, gb = ct * b, ct * a
    elif op == "div":
        ga = ct / b
        gb = -(ga * ctx.output(node)) if ctx.wants(node, 1) else None
    elif op in ("max", "min"):  # ties and NaN in b go to a (where a == out)
        take = g.eq(a, ctx.output(node))
        ga, gb = ctx.where_zero(take, ct), ctx.where_zero(take, ct, keep_where=False)
    else:  # pow
        ga = ct * b * g.pow(a, b - 1) if ctx.wants(node, 0) else None
        gb = ct * _pow_log_term(ctx, a, ctx.output(node)) if ctx.wants(node, 1) else None
    return [None if v is None or not ctx.wants(node, i) else ctx.unbroadcast(v, (a, b)[i]) for i, v in enumerate((ga, gb))]


def _binary_jvp(ctx, node, tangents):
    g, op = ctx.graph, node.attrs["op"]
    a, b = ctx.operands(node)
    ta, tb = tangents
    if op in ("max", "min"):
        take = g.eq(a, ctx.output(node))
        zero = g.scalar(0.0, node.dtype)
        return g.where(take, zero if ta is None else ta, zero if tb is None else tb)
    if op == "pow":
        parts = [ta * b * g.pow(a, b - 1) if ta is not None else None,
                 tb * _pow_log_term(ctx, a, ctx.output(node)) if tb is not None else None]
    elif op == "add":
        parts = [ta, tb]
    elif op == "sub":
        parts = [ta, None if tb is None else -tb]
    elif op == "mul":
        parts = [None if ta is None else ta * b, None if tb is None else a * tb]
    else:  # div: (ta - y·tb) / b
        parts = [None if ta is None else ta / b, None if tb is None else -(tb * ctx.output(node) / b)]
    present = [p for p in parts if p is not None]
    return present[0] if len(present) == 1 else present[0] + present[1]


BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min", "pow": "pow"}

defop(
    name="binary", family="elementwise", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=("add", "sub", "mul", "div", "max", "min", "pow"))},
    methods={m: {"op": k} for m, k in BINARY_METHODS.items()},
    infer=_binary_type, kernel=_binary_kernel, kernel_into=_binary_kernel, flags={"elementwise", "complex_ad"},
    vjp=_binary_vjp, jvp=_binary_jvp, batch=_broadcasting_batch,
    doc="Broadcasting binary arithmetic in the promoted dtype. Builder methods: add, sub, "
    "mul, div, maximum, minimum, pow (g.max / g.min are reductions). Float div is IEEE; "
    "integer div truncates toward zero; max/min ignore NaN. Gradients: max/min send the whole "
    "gradient to lhs where lhs == out (ties and a NaN rhs), else to rhs; pow's exponent gradient "
    "y·ln(lhs) is 0 where lhs == 0.",
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
    flags={"elementwise", "no_grad"}, batch=_broadcasting_batch,
    doc="Broadcasting comparison in the promoted dtype; the result is bool. Not differentiable.",
)


def _where_type(ins, attrs):
    out = broadcast_promoted(ins[1:])
    full = broadcast_promoted([TensorType(ins[0].shape, out.dtype), out])
    return TensorType(full.shape, out.dtype)


def _where_vjp(ctx, node, ct):
    c, a, b = ctx.operands(node)
    return [
        None,
        ctx.unbroadcast(ctx.where_zero(c, ct), a) if ctx.wants(node, 1) else None,
        ctx.unbroadcast(ctx.where_zero(c, ct, keep_where=False), b) if ctx.wants(node, 2) else None,
    ]


def _where_jvp(ctx, node, tangents):
    g = ctx.graph
    c = ctx.operand(node, 0)
    zero = g.scalar(0.0, node.dtype)
    ta, tb = tangents[1], tangents[2]
    return g.where(c, zero if ta is None else ta, zero if tb is None else tb)


defop(
    name="where", family="elementwise", arity=3, operands=("cond", "on_true", "on_false"),
    infer=_where_type,
    kernel=lambda args, attrs, out: np.where(args[0] != 0, *promote_args(args[1:], out.dtype)),
    flags={"elementwise", "complex_ad"}, vjp=_where_vjp, jvp=_where_jvp, batch=_broadcasting_batch,
    doc="np.where(cond != 0, on_true, on_false) with three-way broadcasting; the branches "
    "are promoted to a common dtype.",
)
