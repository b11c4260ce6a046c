"""Extra elementwise math: ``unary_math`` (erf, floor, ceil, sign, half-to-even round, inverse and
hyperbolic trig) and ``binary_ext`` (floor / truncated modulo, bitwise logic, shifts).

They complete the elementwise vocabulary for frontends (ONNX ``Erf``, ``Floor``, ``Mod``,
``BitShift`` …) where no exact decomposition into :mod:`rlx.ops.elementwise` exists. Both
broadcast and promote like ``binary``; the result keeps the (promoted) operand dtype.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ops.common import broadcast_promoted, broadcasting_batch, promote_args
from rlx.ops.elementwise import check_domain
from rlx.ops.kinds import NUMPY, UNARY_MATH_KINDS, GraphNamespace

#: unary_math kind -> its row (formula, derivative, domain, names): :mod:`rlx.ops.kinds`.
UNARY_KINDS = UNARY_MATH_KINDS


def _unary_type(ins, attrs):
    check_domain("unary_math", attrs["kind"], UNARY_KINDS[attrs["kind"]].domain, ins[0].dtype)
    return ins[0]


def _unary_kernel(args, attrs, out):
    x = args[0]
    return UNARY_KINDS[attrs["kind"]].forward(NUMPY, x, is_int=x.dtype.kind in "iu")


def _unary_vjp(ctx, node, ct):
    x = ctx.operand(node, 0)
    return [UNARY_KINDS[node.attrs["kind"]].vjp(GraphNamespace(ctx.graph), x, ctx.output(node), ct)]


def _unary_jvp(ctx, node, tangents):
    x = ctx.operand(node, 0)
    return UNARY_KINDS[node.attrs["kind"]].vjp(GraphNamespace(ctx.graph), x, ctx.output(node), tangents[0])


defop(
    name="unary_math", precision="elementwise", family="math_ext", arity=1, operands=("x",),
    attrs={"kind": AttrSpec("str", choices=tuple(UNARY_KINDS))},
    infer=_unary_type, kernel=_unary_kernel, flags={"elementwise"},
    vjp=_unary_vjp, jvp=_unary_jvp, batch=broadcasting_batch,
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
    name="binary_ext", precision="elementwise", family="math_ext", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=BINARY_EXT_OPS)},
    infer=_binary_ext_type, kernel=_binary_ext_kernel, flags={"elementwise"},
    vjp=_binary_ext_vjp, jvp=_binary_ext_jvp, batch=broadcasting_batch,
    doc="Broadcasting binary op in the promoted dtype. mod: floor modulo, the result has the divisor's sign "
    "(np.mod, Python %); fmod: truncated modulo, the dividend's sign (np.fmod, C fmod). Integer mod / fmod by 0 "
    "give 0. bitwise_and / or / xor on integers (and bool); shift_left / shift_right on integers: the shift count is read as "
    "unsigned (a negative count is huge); a count of the bit width or more gives 0, or -1 for a right shift of a "
    "negative signed value (arithmetic shift; NumPy would wrap the count). Gradients (mod / fmod only): d/dlhs = 1, "
    "d/drhs = -floor(lhs/rhs) (mod) or -trunc(lhs/rhs) (fmod).",
)
