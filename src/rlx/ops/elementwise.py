"""Elementwise ops: activation (17 kinds), cast, bitcast, binary (7 kinds), compare (6), where.

Binary, compare and where promote their operands along the commutative lattice of
:mod:`rlx.ir.dtype` and broadcast like NumPy; the result has the promoted dtype (upstream
keeps the left operand's dtype, which makes ``a + b`` depend on operand order).
Rounding is half away from zero, as upstream's kernels do (not NumPy's half-to-even).
Max / min propagate NaN (``np.maximum``, torch.maximum, ONNX Max); fmax / fmin ignore it (``np.fmax``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.flags import SELECTS
from rlx.ir.opdef import defop
from rlx.ir.shape import TensorType
from rlx.ops import rows
from rlx.ops.common import all_equal, broadcast_promoted, broadcasting_batch, promote_args, same_type_identity
from rlx.ops.evaluate import RAW_OPERANDS
from rlx.ops.facts import CONVERTS
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, NUMPY, GraphNamespace, numpy_erf, numpy_sigmoid


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised error function in x's dtype (the NumPy namespace's, :mod:`rlx.ops.kinds`)."""
    return numpy_erf(x)


sigmoid = numpy_sigmoid


def _gelu_into(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The gelu row's formula x·½(1 + erf(x/√2)) computed in place (no temporaries in the arena)."""
    half = 0.5 * x  # first: out may be x itself
    e = np.asarray(np.divide(x, math.sqrt(2.0), out=out))
    numpy_erf(e, out=e)
    return np.multiply(half, np.add(1.0, e, out=e), out=e)


def round_half_away(x: np.ndarray) -> np.ndarray:
    return ACTIVATION_KINDS["round"].fn(NUMPY, x)


#: activation kind -> its row (formula, derivative, domain, names): :mod:`rlx.ops.kinds`.
ACTIVATIONS = ACTIVATION_KINDS
#: kinds whose NumPy kernel is one ufunc call ``f(x, *constants, out=out)`` (the activation op's ``ufunc`` fact)
_UFUNC_KINDS: dict[str, tuple[np.ufunc, tuple[Any, ...]]] = {
    "relu": (np.maximum, (0,)),
    **{k: (getattr(np, u), ()) for k, u in (("tanh", "tanh"), ("exp", "exp"), ("log", "log"), ("sqrt", "sqrt"),
                                            ("neg", "negative"), ("abs", "abs"), ("sin", "sin"), ("cos", "cos"),
                                            ("tan", "tan"), ("atan", "arctan"))},
}
#: the other NumPy kernels that write into ``out`` (the arena's ``kernel_into``: no temporary per node);
#: every other kind runs its row's formula. Same values as the rows (tests/ops walk every kind).
_INTO = {
    "gelu": _gelu_into, "sigmoid": numpy_sigmoid,
    "silu": lambda x, out=None: np.multiply(x, numpy_sigmoid(x), out=out),
    "rsqrt": lambda x, out=None: np.divide(1.0, np.sqrt(x, out=out), out=out),
}


def check_domain(op: str, kind: str, domain: frozenset[str], dtype: DType) -> None:
    """ShapeError unless ``dtype``'s kind (float / int / bool / complex) is in the kind's domain."""
    cls = "complex" if dtype.is_complex else "bool" if dtype.is_bool else "int" if dtype.is_int else "float"
    if cls not in domain:
        allowed = " / ".join(sorted(domain))
        raise ShapeError(f"{op} {kind!r} is not defined on {dtype} (it takes {allowed} operands)")


def _activation_type(ins: list[TensorType], attrs) -> TensorType:
    check_domain("activation", attrs["kind"], ACTIVATION_KINDS[attrs["kind"]].domain, ins[0].dtype)
    return ins[0]


def _activation_kernel(args, attrs, out_type, out=None):
    x, kind = args[0], attrs["kind"]
    direct = _UFUNC_KINDS.get(kind)
    if direct is not None:
        f, constants = direct
        return f(x, *constants, out=out)
    into = _INTO.get(kind)
    if into is not None:
        return into(x, out=out)
    res = ACTIVATION_KINDS[kind].forward(NUMPY, x, is_int=x.dtype.kind in "iu")
    if out is None:
        return res
    np.copyto(out, res, casting="unsafe")
    return out


# ----------------------------------------------------------------------- autodiff rules
# The derivative is the row's ``times_grad`` evaluated on the graph namespace: primitive
# elementwise ops (never activation_backward), so a derivative graph is again differentiable
# by these same rules (hvp and higher orders work for every kind). Contract: rlx.autodiff.rules.
def times_derivative(g, kind: str, x, y, v):
    """``v · act'(x)`` for activation ``kind`` (x the operand, y the output), emitted into ``g``."""
    return ACTIVATION_KINDS[kind].vjp(GraphNamespace(g), x, y, v, is_complex=x.dtype.is_complex)


def _activation_vjp(ctx, node, ct):
    return [times_derivative(ctx.graph, node.attrs["kind"], ctx.operand(node, 0), ctx.output(node), ct)]


def _activation_jvp(ctx, node, tangents):
    return times_derivative(ctx.graph, node.attrs["kind"], ctx.operand(node, 0), ctx.output(node), tangents[0])


def _activation_keeps_grid(attrs, rank, protected, copies_only) -> bool:
    return ACTIVATION_KINDS[attrs["kind"]].grid in (("keeps_magnitude",) if copies_only else ("keeps", "keeps_magnitude"))


defop(
    name="activation", region_key="kind", shown_kind="kind", precision="elementwise", family="elementwise", arity=1, operands=("x",),
    attrs={"kind": AttrSpec("str", choices=tuple(ACTIVATIONS))},
    methods={k: {"kind": k} for k in ACTIVATIONS},
    infer=_activation_type, kernel=_activation_kernel, kernel_into=_activation_kernel,
    ufunc=lambda attrs, dtypes, out: _UFUNC_KINDS.get(attrs["kind"]), flags={"elementwise", "complex_ad"},
    vjp=_activation_vjp, jvp=_activation_jvp, batch=broadcasting_batch, keeps_grid=_activation_keeps_grid,
    doc="Unary elementwise function (one row per kind: rlx.ops.kinds). gelu is exact (erf); gelu_approx is the tanh form; "
    "round is half away from zero; relu/neg/abs/round also accept integers; only "
    "neg/exp/log/sqrt accept c64. Derivatives (autodiff) follow docs/semantics.md#activations: relu' = 0 at 0, "
    "abs' = sign (0 at 0), sqrt' and rsqrt' are 0 where sqrt(x) <= 0 (real x), round is straight-through; "
    "the c64 kinds are holomorphic (complex_ad: JAX's convention, rlx.autodiff.rules).",
)


def _cast_kernel(args, attrs, out):
    """The cast row (rlx.ops.rows.cast) on NumPy; the result never aliases the operand."""
    with np.errstate(invalid="ignore"):
        y = rows.cast(NUMPY, args, attrs, out)
    return np.array(y) if y is args[0] else y


def _cast_vjp(ctx, node, ct):
    """The cotangent cast back: c64 -> real keeps its real part, real -> c64 embeds it, which is
    JAX's transpose of both directions (the forward cast keeps the real part / embeds)."""
    x = ctx.operand(node, 0)
    return [ctx.cast(ct, x.dtype)]


def _cast_jvp(ctx, node, tangents):
    to = node.attrs["to"]
    return ctx.cast(tangents[0], to) if to.is_float or to.is_complex else None


defop(
    name="cast", region_key="to", work="none", precision="data_movement", family="elementwise", arity=1, operands=("x",),
    attrs={"to": AttrSpec("dtype")},
    infer=lambda ins, attrs: TensorType(ins[0].shape, attrs["to"]),
    kernel=_cast_kernel, flags={"elementwise", "complex_ad", CONVERTS}, identity=same_type_identity,
    vjp=_cast_vjp, jvp=_cast_jvp, batch=broadcasting_batch,
    doc="Convert the element type (x.astype(to)); float to int truncates toward zero, "
    "anything to bool is x != 0, c64 to a real type keeps the real part. Int to a narrower int keeps the low bits "
    "(two's complement; i4 u4 i2 u2 too); float to an int out of its range is defined by float_to_int (x86-64's "
    "result: NaN -> i32 INT_MIN, -1.0 -> u8 255; docs/semantics.md#edge-cases; 0 for i4 u4 i2 u2). "
    "To a narrow float: round to nearest even, overflow to inf (f8e5m2) or NaN (f8e4m3, the fnuz "
    "kinds, which have no -0 either); f4e2m1 has no inf / NaN (overflow saturates to +-6, NaN gives a zero); "
    "f8e8m0 holds powers of two 2**-127..2**127 (nearest, 0 and negatives give NaN). The importers add the "
    "saturating / rounding forms of their formats from primitives (docs/semantics.md#element-types).",
)


def _bitcast_type(ins: list[TensorType], attrs) -> TensorType:
    src, to = ins[0].dtype, attrs["to"]
    if src.bits != to.bits:
        raise ShapeError(f"bitcast: {src} has {src.bits} bits, {to} has {to.bits}; the widths must match")
    return TensorType(ins[0].shape, to)


def _bitcast_kernel(args, attrs, out):
    x, to = np.asarray(args[0]), attrs["to"]  # same itemsize: a view of any strides
    if to.is_bool:
        return x.view(np.uint8) != 0  # a byte other than 0 / 1 is no NumPy bool: normalise
    return x.view(to.numpy)


def _bitcast_compose(inner: dict[str, Any], outer: dict[str, Any]) -> dict[str, Any] | None:
    """Two reinterpretations are the outer one, except through bool (each nonzero byte becomes 1)."""
    return None if DType.of(inner["to"]).is_bool else {"to": outer["to"]}


defop(
    name="bitcast", precision="data_movement", family="elementwise", arity=1, operands=("x",),
    attrs={"to": AttrSpec("dtype")},
    infer=_bitcast_type, kernel=_bitcast_kernel, flags={"elementwise", "no_grad", RAW_OPERANDS},
    identity=same_type_identity, compose=_bitcast_compose, batch=broadcasting_batch,
    doc="Reinterpret each element's bits as dtype `to` of the same bit width (np.ndarray.view, ONNX BitCast, "
    "torch Tensor.view(dtype), lax.bitcast_convert_type); little-endian bytes; the sub-byte types are their low "
    "bits (i4 -1 is u4 15); to bool a nonzero byte is True. Not differentiable (docs/semantics.md#element-types).",
)


_BINARY_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum,
                  "fmax": np.fmax, "fmin": np.fmin, "pow": np.power}
#: the selecting kinds: NaN-propagating max / min and NaN-ignoring fmax / fmin
MINMAX = frozenset({"max", "min", "fmax", "fmin"})


def _binary_ufunc(op: str, dtype: np.dtype) -> np.ufunc | None:
    """The ufunc of binary ``op`` on two operands of ``dtype`` (the compute dtype); None for an int div / pow."""
    kind = dtype.kind
    if kind == "b" and op in ("add", "mul"):
        return np.logical_or if op == "add" else np.logical_and
    if kind in "biu" and op in ("div", "pow"):
        return None
    return _BINARY_UFUNCS[op]


def _binary_direct(attrs, dtypes, out) -> tuple[np.ufunc, tuple[()]] | None:
    """The binary op's ``ufunc`` fact: operands already in the result dtype reach its ufunc as they are."""
    f = _binary_ufunc(attrs["op"], out) if all(d == out for d in dtypes) else None
    return None if f is None else (f, ())


def _binary_kernel(args, attrs, out_type, out=None):
    a, b = args
    op = attrs["op"]
    if out is None or not a.dtype == b.dtype == out.dtype:  # (out has the compute dtype already)
        a, b = promote_args(args, out_type.dtype)
    f = _binary_ufunc(op, a.dtype)
    if f is not None:
        return f(a, b, out=out)
    with np.errstate(over="ignore"):  # MIN / -1 wraps to MIN
        res = rows.int_div(NUMPY, a, b) if op == "div" else rows.int_pow(NUMPY, a, b)
    if out is None:
        return res
    np.copyto(out, res, casting="unsafe")
    return out


def _binary_type(ins, attrs):
    t = broadcast_promoted(ins)
    if t.dtype.is_complex and (attrs["op"] in MINMAX or attrs["op"] == "pow"):
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
    elif op in MINMAX:  # ties go to a (where a == out); where a is NaN, to b
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
    if op in MINMAX:
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


def _binary_identity(attrs, ins, out, consts) -> int | None:
    """x op e == x (e the kind's right identity) and e op x == x (its left identity)."""
    row = BINARY_KINDS[attrs["op"]]
    for keep, unit, other in ((0, row.right_identity, 1), (1, row.left_identity, 0)):
        if unit is not None and ins[keep] == out and all_equal(consts[other], unit):
            return keep
    return None


BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min", "fmax": "fmax",
                  "fmin": "fmin", "pow": "pow"}

defop(
    name="binary", region_key="op", shown_kind="op", precision="elementwise", family="elementwise", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=("add", "sub", "mul", "div", "max", "min", "fmax", "fmin", "pow"))},
    methods={m: {"op": k} for m, k in BINARY_METHODS.items()},
    infer=_binary_type, kernel=_binary_kernel, kernel_into=_binary_kernel, ufunc=_binary_direct,
    flags={"elementwise", "complex_ad", "broadcasts"},
    vjp=_binary_vjp, jvp=_binary_jvp, batch=broadcasting_batch,
    identity=_binary_identity, commutes=lambda attrs: BINARY_KINDS[attrs["op"]].commutative,
    doc="Broadcasting binary arithmetic in the promoted dtype. Builder methods: add, sub, "
    "mul, div, maximum, minimum, fmax, fmin, pow (g.max / g.min are reductions). Float div is IEEE; "
    "integer div truncates toward zero; max / min propagate NaN (np.maximum, torch.maximum, ONNX Max); "
    "fmax / fmin ignore it, NaN only when both are NaN (np.fmax, torch.fmax, upstream's f32::max). "
    "Gradients: max / min / fmax / fmin send the whole gradient to lhs where lhs == out (ties), else to "
    "rhs; pow's exponent gradient "
    "y·ln(lhs) is 0 where lhs == 0.",
)

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}


def _compare_type(ins, attrs):
    t = broadcast_promoted(ins)
    if t.dtype.is_complex and attrs["op"] not in ("eq", "ne"):
        raise ShapeError(f"compare {attrs['op']!r} is not defined on c64")
    return TensorType(t.shape, DType.BOOL)


defop(
    name="compare", region_key="op", shown_kind="op", precision="elementwise", family="elementwise", arity=2, operands=("lhs", "rhs"),
    attrs={"op": AttrSpec("str", choices=tuple(_COMPARE))},
    methods={k: {"op": k} for k in _COMPARE},
    infer=_compare_type,
    kernel=lambda args, attrs, out: _COMPARE[attrs["op"]](*promote_args(args, DType.promote(args[0].dtype, args[1].dtype))),
    flags={"elementwise", "no_grad", "broadcasts"}, batch=broadcasting_batch,
    commutes=lambda attrs: COMPARE_KINDS[attrs["op"]].commutative,
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


def _where_identity(attrs, ins, out, consts) -> int | None:
    """A constant condition that picks one branch everywhere (the torch reader's fully-masked-row guard
    under a constant mask) leaves that branch, when it already has the result type."""
    cond = consts[0]
    if cond is None or cond.size == 0 or cond.size > 1 << 20:
        return None
    branch = 1 if np.all(cond != 0) else 2 if not np.any(cond) else None
    return branch if branch is not None and ins[branch] == out else None


defop(
    name="where", region_key="", precision="elementwise", family="elementwise", arity=3, operands=("cond", "on_true", "on_false"),
    infer=_where_type,
    kernel=lambda args, attrs, out: np.where(args[0] != 0, *promote_args(args[1:], out.dtype)),
    flags={"elementwise", "complex_ad", "broadcasts", SELECTS}, vjp=_where_vjp, jvp=_where_jvp, batch=broadcasting_batch,
    identity=_where_identity,
    doc="np.where(cond != 0, on_true, on_false) with three-way broadcasting; the branches "
    "are promoted to a common dtype.",
)
