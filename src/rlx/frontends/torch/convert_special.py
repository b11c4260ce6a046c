"""torch converters for the special functions: every aten packet a :mod:`rlx.ops.special` row names maps
to the ``special`` op (operands cast to the node's result dtype first, so integer and bool inputs are
promoted as torch promotes them); ``frexp`` gives its two results from the mantissa and exponent kinds;
``logcumsumexp`` maps to the op of that name."""

from __future__ import annotations

from rlx.frontends.torch.context import _conv, _Ctx, _rlx_dtype, _target_name
from rlx.ir.graph import Value
from rlx.ops.special import KINDS, POLYNOMIALS


def _overloads(kind: str) -> tuple[str, ...]:
    """The aten overloads of a kind's packets: Tensor-Tensor, plus the Python-scalar ones torch has."""
    if kind in POLYNOMIALS:
        return ("default", "x_scalar", "n_scalar")
    return ("default", "self_scalar", "other_scalar") if kind == "zeta" else ("default",)


#: aten overload -> special kind
OVERLOADS = {f"{packet}.{overload}": kind.name for kind in KINDS.values() for packet in kind.aten
             for overload in _overloads(kind.name) if packet != "aten.frexp"}


def _special(cx: _Ctx, node, *args) -> Value:
    kind = OVERLOADS[_target_name(node.target)]
    dtype = cx.out_dtype()
    operands = [cx.cast(cx.tensor(a, dtype), dtype) for a in args[:KINDS[kind].arity]]
    return cx.g.append("special", operands, {"kind": kind})


@_conv("aten.frexp.Tensor", "aten.frexp.default")
def _frexp(cx: _Ctx, node, x) -> tuple[Value, Value]:
    mantissa, exponent = cx.meta()
    x = cx.cast(x, _rlx_dtype(mantissa.dtype))
    return (cx.g.special(x, kind="frexp_mantissa"),
            cx.cast(cx.g.special(x, kind="frexp_exponent"), _rlx_dtype(exponent.dtype)))


_conv(*OVERLOADS)(_special)


@_conv("aten.logcumsumexp.default")
def _logcumsumexp(cx: _Ctx, node, x, dim) -> Value:
    dtype = cx.out_dtype()
    x = cx.cast(x, dtype)
    if len(x.shape) == 0:  # torch allows dim 0 / -1 on a scalar: the value itself
        return x
    return cx.g.logcumsumexp(x, axis=int(dim) % len(x.shape))
