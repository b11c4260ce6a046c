"""torch converters for the special functions: every aten packet a :mod:`rlx.ops.special` row names maps
to the ``special`` op (operands cast to the node's result dtype first, so integer and bool inputs are
promoted as torch promotes them); ``frexp`` gives its two results from the mantissa and exponent kinds;
``logcumsumexp`` maps to the op of that name."""

from __future__ import annotations

from rlx.frontends.torch.context import _conv, _Ctx, _rlx_dtype, _target_name
from rlx.ir.graph import Value
from rlx.ops.special import KINDS

#: aten overload -> special kind (the Tensor overloads and the scalar-operand ones of binary kinds)
OVERLOADS = {f"{packet}.{overload}": kind.name for kind in KINDS.values() for packet in kind.aten
             for overload in (("default", "Tensor") if kind.arity == 1 else ("default", "self_scalar", "other_scalar",
                                                                               "x_scalar", "n_scalar"))}


def _special(cx: _Ctx, node, *args) -> Value:
    kind = OVERLOADS[_target_name(node.target)]
    dtype = cx.out_dtype()
    operands = [cx.cast(cx.tensor(a, dtype), dtype) for a in args[:KINDS[kind].arity]]
    return cx.g.append("special", operands, {"kind": kind})


@_conv("aten.frexp.Tensor")
def _frexp(cx: _Ctx, node, x) -> tuple[Value, Value]:
    mantissa, exponent = cx.meta()
    x = cx.cast(x, _rlx_dtype(mantissa.dtype))
    return (cx.g.special(x, kind="frexp_mantissa"),
            cx.cast(cx.g.special(x, kind="frexp_exponent"), _rlx_dtype(exponent.dtype)))


_conv(*(name for name in OVERLOADS if not name.startswith("aten.frexp")))(_special)


@_conv("aten.logcumsumexp.default")
def _logcumsumexp(cx: _Ctx, node, x, dim) -> Value:
    dtype = cx.out_dtype()
    x = cx.cast(x, dtype)
    if len(x.shape) == 0:  # torch allows dim 0 / -1 on a scalar: the value itself
        return x
    return cx.g.logcumsumexp(x, axis=int(dim) % len(x.shape))
