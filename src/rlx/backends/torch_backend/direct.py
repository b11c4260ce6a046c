"""Direct calls: a node's lowering as the one torch call it makes for that node's static types.

An eager module runs its fx graph op by op, and each lowered node is a Python wrapper around its
lowering (widen, call, cast: ~1.7 µs per node and run on the host). Where the node's operand and
result types make the lowering exactly one torch call with nothing to widen or cast (f32 ``binary``
is ``torch.mul``, ``reshape`` is ``torch.reshape`` with the node's bound shape), the builder emits
that call as the fx target itself (an argument may be a call in turn: a fused conv's activation of
its ``torch.conv2d``). Each entry specialises one registered lowering and applies only
while that lowering is the table's entry for the op (a replaced lowering disables it);
``tests/backends/test_torch_overhead.py`` proves every entry equal to its lowering, edge values included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from rlx.backends.torch_backend import lowering as L
from rlx.ir.dtype import DType
from rlx.ir.shape import TensorType
from rlx.ops.rows import reduce_axes


class Call(NamedTuple):
    """One torch call: an argument that is a Call is made first, its result passed."""

    target: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Maker = Callable[[Sequence[Any], Mapping[str, Any], list[TensorType], TensorType], Call | None]

FLOATS = frozenset({DType.F32, DType.F64})
INTS = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8})
#: the dtypes the shape ops (reshape, transpose, expand, narrow, concat) move as they are
MOVED = FLOATS | INTS | {DType.BOOL}

_FLOAT_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "max": torch.maximum,
                 "min": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin, "pow": torch.pow}
_INT_BINARY = {k: _FLOAT_BINARY[k] for k in ("add", "sub", "mul", "max", "min")}
#: activation kinds whose torch lowering is this one call on a float operand of the result's dtype
_ACTIVATIONS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "relu": (torch.relu, {}), "sigmoid": (torch.sigmoid, {}), "tanh": (torch.tanh, {}), "exp": (torch.exp, {}),
    "log": (torch.log, {}), "sqrt": (torch.sqrt, {}), "neg": (torch.neg, {}), "abs": (torch.abs, {}),
    "sin": (torch.sin, {}), "cos": (torch.cos, {}), "tan": (torch.tan, {}), "atan": (torch.atan, {}),
    "gelu": (torch._C._nn.gelu, {}), "gelu_approx": (torch._C._nn.gelu, {"approximate": "tanh"}),
    "silu": (torch._C._nn.silu, {}),
}
_UNARY_MATH = {"erf": torch.special.erf, "floor": torch.floor, "ceil": torch.ceil, "sign": torch.sign, "trunc": torch.trunc,
               "round_even": torch.round, "asin": torch.asin, "acos": torch.acos, "sinh": torch.sinh, "cosh": torch.cosh,
               "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh}

_REDUCE = {"sum": torch.sum, "mean": torch.mean}

DIRECT: dict[str, tuple[Any, Maker]] = {}


def _direct(op: str) -> Callable[[Maker], Maker]:
    """Register a maker specialising the lowering registered for ``op`` now."""
    def register(maker: Maker) -> Maker:
        DIRECT[op] = (L.LOWERINGS[op], maker)
        return maker

    return register


def _all(in_types: list[TensorType], out: TensorType, allowed: frozenset[DType]) -> bool:
    """Every operand of the result's dtype, that dtype one of ``allowed`` (nothing to widen or cast)."""
    return out.dtype in allowed and all(t.dtype is out.dtype for t in in_types)


def direct_call(op: str, args: Sequence[Any], attrs: Mapping[str, Any], in_types: list[TensorType], out: Any) -> Call | None:
    """The one torch call equal to ``op``'s lowering for these types, or None (the lowering runs)."""
    entry = DIRECT.get(op)
    if entry is None or L.LOWERINGS.get(op) is not entry[0] or out.__class__ is not TensorType:
        return None
    if not all(isinstance(d, int) for d in out.shape):
        return None
    return entry[1](args, attrs, in_types, out)


@_direct("binary")
def _binary(args, attrs, in_types, out):
    op = attrs["op"]
    if _all(in_types, out, FLOATS) and op in _FLOAT_BINARY:
        return Call(_FLOAT_BINARY[op], tuple(args), {})
    if _all(in_types, out, INTS) and op in _INT_BINARY:
        return Call(_INT_BINARY[op], tuple(args), {})
    return None


@_direct("activation")
def _activation(args, attrs, in_types, out):
    if not _all(in_types, out, FLOATS):
        return None
    if attrs["kind"] == "rsqrt":  # the row's 1.0 / sqrt(x): torch divides a number by a tensor as reciprocal * number
        return Call(torch.mul, (Call(torch.reciprocal, (Call(torch.sqrt, tuple(args), {}),), {}), 1.0), {})
    found = _ACTIVATIONS.get(attrs["kind"])
    return None if found is None else Call(found[0], tuple(args), found[1])


@_direct("unary_math")
def _unary_math(args, attrs, in_types, out):
    fn = _UNARY_MATH.get(attrs["kind"])
    return Call(fn, tuple(args), {}) if fn is not None and _all(in_types, out, FLOATS) else None


@_direct("matmul")
def _matmul(args, attrs, in_types, out):
    return Call(torch.matmul, tuple(args), {}) if _all(in_types, out, FLOATS | {DType.F16, DType.BF16}) else None


@_direct("layer_norm")
def _layer_norm(args, attrs, in_types, out):
    rank = len(out.shape)
    if not (_all(in_types, out, FLOATS) and rank and attrs["axis"] in (-1, rank - 1)):
        return None
    x, gamma, beta = args
    return Call(torch.layer_norm, (x, (out.shape[-1],), gamma, beta, attrs["eps"]), {})


@_direct("reshape")
def _reshape(args, attrs, in_types, out):
    return Call(torch.reshape, (args[0], tuple(out.shape)), {}) if _all(in_types, out, MOVED) else None


@_direct("transpose")
def _transpose(args, attrs, in_types, out):
    if not _all(in_types, out, MOVED):
        return None
    rank = len(in_types[0].shape)
    perm = attrs["perm"] if attrs["perm"] is not None else tuple(range(rank - 1, -1, -1))
    return Call(torch.permute, (args[0], tuple(perm)), {})


@_direct("expand")
def _expand(args, attrs, in_types, out):
    return Call(torch.broadcast_to, (args[0], tuple(out.shape)), {}) if _all(in_types, out, MOVED) else None


@_direct("reduce")
def _reduce(args, attrs, in_types, out):
    """sum / mean of floats over at least one axis (no axes: the lowering returns its operand)."""
    fn = _REDUCE.get(attrs["op"])
    if fn is None or not _all(in_types, out, FLOATS):
        return None
    axes = reduce_axes(attrs["axes"], len(in_types[0].shape))
    return Call(fn, (args[0], axes), {"keepdim": attrs["keep_dim"]}) if axes else None


def _pair(v: Any) -> tuple[int, int]:
    return int(v[0]), int(v[1])


@_direct("fused_conv2d_bias_act")
def _conv2d_bias_act(args, attrs, in_types, out):
    """F.conv2d (as the lowering: read when the module is built) with its bias, then the activation's call
    (if any) on its result."""
    act = attrs["activation"]
    found = _ACTIVATIONS.get(act) if act is not None else (None, {})
    if found is None or not _all(in_types, out, FLOATS):
        return None
    x, w, *b = args
    conv = Call(F.conv2d, (x, w, b[0] if b else None, _pair(attrs["stride"]), _pair(attrs["padding"]),
                               _pair(attrs["dilation"]), attrs["groups"]), {})
    return conv if found[0] is None else Call(found[0], (conv,), found[1])


@_direct("narrow")
def _narrow(args, attrs, in_types, out):
    """torch.narrow where the slice fits the operand's bound size (the lowering's bounds check, made once here;
    a slice out of bounds keeps the lowering, which raises on the run)."""
    shape = in_types[0].shape
    if not (_all(in_types, out, MOVED) and len(shape) and all(isinstance(d, int) for d in shape)):
        return None
    axis, start, length = attrs["axis"] % len(shape), attrs["start"], attrs["length"]
    return Call(torch.narrow, (args[0], axis, start, length), {}) if start + length <= shape[axis] else None


_COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


@_direct("compare")
def _compare(args, attrs, in_types, out):
    """Operands of one dtype: nothing to promote."""
    same = in_types[0].dtype in FLOATS | INTS and in_types[1].dtype is in_types[0].dtype
    return Call(_COMPARE[attrs["op"]], tuple(args), {}) if same and out.dtype is DType.BOOL else None


@_direct("where")
def _where(args, attrs, in_types, out):
    """A bool condition and branches of the result's dtype."""
    if in_types[0].dtype is not DType.BOOL or not _all(in_types[1:], out, FLOATS | INTS):
        return None
    return Call(torch.where, tuple(args), {})


@_direct("concat")
def _concat(args, attrs, in_types, out):
    if not _all(in_types, out, MOVED):
        return None
    return Call(torch.cat, (list(args), attrs["axis"] % len(out.shape)), {})
