"""Extra elementwise math: ``unary_math`` (erf, floor, ceil, sign, half-to-even round, inverse and
hyperbolic trig) and ``binary_ext`` (floor / truncated modulo, bitwise logic, shifts).

They complete the elementwise vocabulary for frontends (ONNX ``Erf``, ``Floor``, ``Mod``,
``BitShift`` …) where no exact decomposition into :mod:`rlx.ops.elementwise` exists. Both
broadcast and promote like ``binary``; the result keeps the (promoted) operand dtype.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ops.common import broadcast_promoted, promote_args
from rlx.ops.elementwise import erf

UNARY_KINDS = {
    "erf": lambda x: np.asarray(erf(x), dtype=np.float64).astype(x.dtype, copy=False),
    "floor": np.floor,
    "ceil": np.ceil,
    "sign": np.sign,
    "round_even": np.round,
    "trunc": np.trunc,
    "asin": np.arcsin,
    "acos": np.arccos,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
}
#: Kinds defined on integers too (identity for floor / ceil / round / trunc).
_INT_OK = frozenset({"floor", "ceil", "sign", "round_even", "trunc"})
_PIECEWISE_CONSTANT = frozenset({"floor", "ceil", "sign", "round_even", "trunc"})


def _unary_type(ins, attrs):
    t, kind = ins[0], attrs["kind"]
    if t.dtype.is_bool or t.dtype.is_complex:
        raise ShapeError(f"unary_math {kind!r} is not defined on {t.dtype}")
    if t.dtype.is_int and kind not in _INT_OK:
        raise ShapeError(f"unary_math {kind!r} needs a float operand, got {t.dtype}")
    return t


def _unary_kernel(args, attrs, out):
    x, kind = args[0], attrs["kind"]
    if x.dtype.kind in "iu" and kind != "sign":
        return x
    return UNARY_KINDS[kind](x)


def _unary_derivative(g, kind: str, x, v):
    """``v · f'(x)`` in primitive ops; None for the piecewise-constant kinds (zero)."""
    if kind in _PIECEWISE_CONSTANT:
        return None
    one = g.scalar(1.0, x.dtype)
    if kind == "erf":
        return v * (g.exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))
    if kind == "asin":
        return v * g.rsqrt(one - x * x)
    if kind == "acos":
        return -(v * g.rsqrt(one - x * x))
    if kind == "sinh":
        return v * g.unary_math(x, kind="cosh")
    if kind == "cosh":
        return v * g.unary_math(x, kind="sinh")
    if kind == "asinh":
        return v * g.rsqrt(x * x + one)
    if kind == "acosh":
        return v * g.rsqrt(x * x - one)
    if kind == "atanh":
        return v / (one - x * x)
    raise NotImplementedError(kind)  # pragma: no cover


def _unary_vjp(ctx, node, ct):
    return [_unary_derivative(ctx.graph, node.attrs["kind"], ctx.operand(node, 0), ct)]


def _unary_jvp(ctx, node, tangents):
    return _unary_derivative(ctx.graph, node.attrs["kind"], ctx.operand(node, 0), tangents[0])


def _broadcasting_batch(ctx, node, operands, batched):
    return ctx.apply_broadcasting(node, operands, batched)


defop(
    name="unary_math", family="math_ext", arity=1, operands=("x",),
    attrs={"kind": AttrSpec("str", choices=tuple(UNARY_KINDS))},
    infer=_unary_type, kernel=_unary_kernel, flags={"elementwise"},
    vjp=_unary_vjp, jvp=_unary_jvp, batch=_broadcasting_batch,
    doc="Unary elementwise function, NumPy semantics: erf, floor, ceil, sign (0 at 0, NaN stays NaN), "
    "round_even (half to even, np.round: ONNX Round; activation 'round' is half away from zero), trunc, "
    "asin, acos, sinh, cosh, asinh, acosh, atanh (NaN outside the domain). floor / ceil / sign / "
    "round_even / trunc also accept integers (identity, or the sign); the others need a float. "
    "Derivatives: zero for the piecewise-constant kinds, the analytic derivative otherwise.",
)

BINARY_EXT_OPS = ("mod", "fmod", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")
_INT_ONLY = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"})


def _binary_ext_type(ins, attrs):
    t, op = broadcast_promoted(ins), attrs["op"]
    if t.dtype.is_complex:
        raise ShapeError(f"binary_ext {op!r} is not defined on c64")
    if op in _INT_ONLY and not (t.dtype.is_int or (t.dtype.is_bool and op.startswith("bitwise"))):
        raise ShapeError(f"binary_ext {op!r} needs integer operands, got {t.dtype}")
    if op in ("mod", "fmod") and t.dtype.is_bool:
        raise ShapeError(f"binary_ext {op!r} is not defined on bool")
    return t


def _binary_ext_kernel(args, attrs, out):
    a, b = promote_args(args, out.dtype)
    op = attrs["op"]
    if op in ("mod", "fmod") and out.dtype.is_int:
        safe = np.where(b == 0, 1, b)
        r = np.mod(a, safe) if op == "mod" else np.fmod(a, safe)
        return np.where(b == 0, 0, r)
    if op == "mod":
        return np.mod(a, b)
    if op == "fmod":
        return np.fmod(a, b)
    if op == "bitwise_and":
        return np.bitwise_and(a, b)
    if op == "bitwise_or":
        return np.bitwise_or(a, b)
    if op == "bitwise_xor":
        return np.bitwise_xor(a, b)
    bits = a.dtype.itemsize * 8
    count = b.astype(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64)  # the count is read as unsigned
    big = count >= bits
    shift = np.where(big, 0, count).astype(a.dtype)
    if op == "shift_left":
        return np.where(big, 0, np.left_shift(a, shift)).astype(a.dtype)
    fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0  # arithmetic shift keeps the sign
    return np.where(big, fill, np.right_shift(a, shift)).astype(a.dtype)


def _quotient(g, a, b, op: str):
    q = a / b
    return g.unary_math(q, kind="floor" if op == "mod" else "trunc")


def _binary_ext_vjp(ctx, node, ct):
    op = node.attrs["op"]
    if op not in ("mod", "fmod"):
        raise AutodiffError(f"binary_ext {op!r} has integer operands only: no gradient")
    a, b = ctx.operands(node)
    ga = ctx.unbroadcast(ct, a) if ctx.wants(node, 0) else None
    gb = ctx.unbroadcast(-(ct * _quotient(ctx.graph, a, b, op)), b) if ctx.wants(node, 1) else None
    return [ga, gb]


def _binary_ext_jvp(ctx, node, tangents):
    op = node.attrs["op"]
    if op not in ("mod", "fmod"):
        return None
    a, b = ctx.operands(node)
    ta, tb = tangents
    g = ctx.graph
    parts = []
    if ta is not None:
        parts.append(g.expand(ta, target_shape=list(node.shape)) if tuple(ta.shape) != tuple(node.shape) else ta)
    if tb is not None:
        parts.append(-(tb * _quotient(g, a, b, op)))
    out = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return out if tuple(out.shape) == tuple(node.shape) else g.expand(out, target_shape=list(node.shape))


defop(
    name="binary_ext", family="math_ext", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=BINARY_EXT_OPS)},
    infer=_binary_ext_type, kernel=_binary_ext_kernel, flags={"elementwise"},
    vjp=_binary_ext_vjp, jvp=_binary_ext_jvp, batch=_broadcasting_batch,
    doc="Broadcasting binary op in the promoted dtype. mod: floor modulo, the result has the divisor's sign "
    "(np.mod, Python %); fmod: truncated modulo, the dividend's sign (np.fmod, C fmod). Integer mod / fmod by 0 "
    "give 0. bitwise_and / or / xor on integers (and bool); shift_left / shift_right on integers: the shift count is read as "
    "unsigned (a negative count is huge); a count of the bit width or more gives 0, or -1 for a right shift of a "
    "negative signed value (arithmetic shift; NumPy would wrap the count). Gradients (mod / fmod only): d/dlhs = 1, "
    "d/drhs = -floor(lhs/rhs) (mod) or -trunc(lhs/rhs) (fmod).",
)
