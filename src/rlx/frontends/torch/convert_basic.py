"""torch converters: pass-throughs, symbolic-size scalars, elementwise arithmetic, activations,
comparisons, logic and creation ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.frontends.torch.context import (
    _CONVERTERS,
    Converter,
    TorchImportError,
    _conv,
    _Ctx,
    _fill_like,
    _full,
    _target_name,
)
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ops.kinds import ACTIVATION_KINDS, COMPARE_KINDS
from rlx.ops.powers import multiplied_power


# ------------------------------------------------------------------------ pass-throughs
@_conv("aten.clone", "aten.alias", "aten.detach", "aten.contiguous", "aten.lift_fresh_copy", "aten.alias_copy",
       "aten.detach_copy")
def _identity(cx, node, x, *args, **kwargs):
    return x


@_conv("aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default")
def _dropout(cx, node, x, p=0.5, train=False):
    if train and p > 0:
        raise cx.fail("dropout in training mode is not supported (call module.eval())")
    return x


@_conv("aten._to_copy.default", "aten.to.dtype", "aten.to.device", "aten.to.dtype_layout", "aten.type_as.default",
       "aten._to_dim_order_copy.default")
def _to(cx, node, x, *args, **kwargs):
    return cx.cast(x, cx.out_dtype())


@_conv("aten.view.dtype")
def _view_dtype(cx, node, x, dtype):
    to = cx.out_dtype()
    if to.bits != x.dtype.bits:
        raise cx.fail(f"view as {to} changes the element width ({x.dtype.bits} to {to.bits} bits); only same-width views are supported")
    return cx.g.bitcast(x, to=to)


@_conv("operator.getitem")
def _getitem(cx, node, seq, index):
    if isinstance(seq, Value):
        raise cx.fail("indexing a tensor with getitem is not supported")
    item = seq[index]
    if item is None:
        raise cx.fail(f"output {index} of {node.args[0].name!r} is not supported (only its first output is)")
    return item


def _sym_scalar(cx, node, *args, **kwargs):
    """Symbolic-int arithmetic (sizes): keep the value torch recorded (int or symbol name)."""
    val = cx.meta()
    import torch

    if isinstance(val, torch.SymInt):
        try:
            return cx.dim(val)
        except TorchImportError:
            return None
    return val


for _name in ("aten.sym_size.int", "aten.sym_numel.default", "aten.sym_storage_offset.default", "aten.sym_stride.int",
              "operator.mul", "operator.add", "operator.sub", "operator.floordiv", "operator.truediv", "operator.mod",
              "operator.neg", "math.ceil", "math.floor", "math.sqrt", "operator.eq", "operator.ne", "operator.lt",
              "operator.le", "operator.gt", "operator.ge"):
    _CONVERTERS[_name] = _sym_scalar


# ------------------------------------------------------------------------- elementwise
def _operands(cx: _Ctx, dtype: DType, *xs: Any) -> list[Value]:
    """Tensors cast to the computation dtype, Python scalars made constants of it."""
    return [cx.cast(x, dtype) if isinstance(x, Value) else cx.tensor(x, dtype) for x in xs]


def _float_divmod(cx: _Ctx, x: Value, y: Value, floor: bool) -> tuple[Value, Value]:
    """Float quotient rounded toward -inf (torch's div_floor: from fmod, so ``a // b * b + a % b`` holds
    where it can) or toward zero, and the matching remainder (floor: the divisor's sign, else the dividend's)."""
    g, dtype = cx.g, x.dtype
    zero = cx.scalar(0, dtype)
    r = g.binary_ext(x, y, op="fmod")
    if not floor:
        return g.unary_math(g.binary(x, y, op="div"), kind="trunc"), r
    fix = g.binary(g.ne(r, zero), g.ne(g.lt(r, zero), g.lt(y, zero)), op="mul")
    div = g.binary(x - r, y, op="div")
    div = g.where(fix, div - cx.scalar(1, dtype), div)
    q = g.unary_math(div, kind="floor")
    q = g.where(g.gt(div - q, cx.scalar(0.5, dtype)), q + cx.scalar(1, dtype), q)
    true_div = g.binary(x, y, op="div")
    q = g.where(g.eq(div, zero), true_div * zero, q)  # a zero quotient keeps the sign of a / b
    q = g.where(g.eq(y, zero), true_div, q)
    return q, g.where(fix, r + y, r)


def _int_divmod(cx: _Ctx, a: Any, b: Any, floor: bool) -> tuple[Value, Value]:
    """Quotient and remainder, truncating (C) or flooring (Python) as asked, on integer or float tensors."""
    dtype = cx.out_dtype()
    if dtype.is_float:
        fx, fy = _operands(cx, dtype, a, b)
        return _float_divmod(cx, fx, fy, floor=floor)
    if not dtype.is_int:
        raise cx.fail(f"rounding division / remainder is only supported on integer and float tensors, got {dtype}")
    x, y = _operands(cx, dtype, a, b)
    q = cx.g.binary(x, y, op="div")  # rlx integer division truncates toward zero
    r = x - q * y
    if floor:
        zero = cx.scalar(0, dtype)
        fix = cx.g.binary(cx.g.ne(r, zero), cx.g.ne(cx.g.lt(r, zero), cx.g.lt(y, zero)), op="mul")
        q = cx.g.where(fix, q - cx.scalar(1, dtype), q)
        r = cx.g.where(fix, r + y, r)
    return q, r


@_conv("aten.remainder.Scalar", "aten.remainder.Tensor")
def _remainder(cx, node, a, b):
    return _int_divmod(cx, a, b, floor=True)[1]


@_conv("aten.fmod.Scalar", "aten.fmod.Tensor")
def _fmod(cx, node, a, b):
    return _int_divmod(cx, a, b, floor=False)[1]


@_conv("aten.floor_divide.default", "aten.floor_divide.Scalar")
def _floor_divide(cx, node, a, b):
    return _int_divmod(cx, a, b, floor=True)[0]


def _arith(op: str, swap: bool = False) -> Converter:
    def convert(cx, node, a, b, alpha=1, **kwargs):
        dtype = cx.out_dtype()
        mode = kwargs.get("rounding_mode")
        if mode is not None:
            return _int_divmod(cx, a, b, floor=mode == "floor")[0]
        if op == "pow" and isinstance(a, Value) and isinstance(b, (int, float)) and a.dtype == dtype:
            product = multiplied_power(cx.g, a, float(b))  # pow(Tensor, Scalar): torch multiplies for 2 and 3
            if product is not None:
                return product
        x, y = _operands(cx, dtype, a, b)
        if alpha != 1:
            y = cx.g.binary(y, cx.scalar(alpha, dtype), op="mul")
        if swap:
            x, y = y, x
        return cx.g.binary(x, y, op=op)

    return convert


_conv("aten.add.Tensor", "aten.add.Scalar")(_arith("add"))
_conv("aten.sub.Tensor", "aten.sub.Scalar")(_arith("sub"))
_conv("aten.rsub.Scalar", "aten.rsub.Tensor")(_arith("sub", swap=True))
_conv("aten.mul.Tensor", "aten.mul.Scalar")(_arith("mul"))
_conv("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.true_divide.Tensor")(_arith("div"))
_conv("aten.maximum.default")(_arith("max"))  # NaN propagates
_conv("aten.minimum.default")(_arith("min"))
_conv("aten.fmax.default")(_arith("fmax"))  # NaN ignored
_conv("aten.fmin.default")(_arith("fmin"))
_conv("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")(_arith("pow"))


@_conv("aten.square.default")
def _square(cx, node, x):
    x = cx.cast(x, cx.out_dtype())
    return x * x


_UNARY = {name: kind for kind, row in ACTIVATION_KINDS.items() for name in row.torch}


def _unary(kind: str) -> Converter:
    def convert(cx, node, x):
        if x.dtype.is_complex and "complex" not in ACTIVATION_KINDS[kind].domain:
            if kind == "abs":  # torch.abs of a complex tensor is its modulus (f32), not |Re z|
                return cx.g.sqrt(cx.g.complex_norm_sq(x))
            raise cx.fail(f"{kind} of a complex tensor is not supported")
        return cx.g.activation(cx.cast(x, cx.out_dtype()), kind=kind)

    return convert




@_conv("aten.gelu.default")
def _gelu(cx, node, x, approximate="none"):
    return cx.g.activation(x, kind="gelu_approx" if approximate == "tanh" else "gelu")


@_conv("aten.reciprocal.default")
def _reciprocal(cx, node, x):
    x = cx.cast(x, cx.out_dtype())
    return cx.scalar(1.0, x.dtype) / x


@_conv("aten.leaky_relu.default")
def _leaky_relu(cx, node, x, negative_slope=0.01):
    return cx.g.where(cx.g.gt(x, cx.scalar(0, x.dtype)), x, x * cx.scalar(negative_slope, x.dtype))


def _clamp_values(cx: _Ctx, x: Value, lo: Any, hi: Any) -> Value:
    dtype = cx.out_dtype()
    y = cx.cast(x, dtype)
    if lo is not None:
        y = cx.g.binary(y, cx.cast(lo, dtype) if isinstance(lo, Value) else cx.tensor(lo, dtype), op="max")
    if hi is not None:
        y = cx.g.binary(y, cx.cast(hi, dtype) if isinstance(hi, Value) else cx.tensor(hi, dtype), op="min")
    return y


@_conv("aten.clamp.default", "aten.clamp.Tensor")
def _clamp(cx, node, x, min=None, max=None):
    return _clamp_values(cx, x, min, max)


@_conv("aten.clamp_min.default", "aten.clamp_min.Tensor")
def _clamp_min(cx, node, x, min):
    return _clamp_values(cx, x, min, None)


@_conv("aten.clamp_max.default", "aten.clamp_max.Tensor")
def _clamp_max(cx, node, x, max):
    return _clamp_values(cx, x, None, max)


@_conv("aten.hardtanh.default")
def _hardtanh(cx, node, x, min_val=-1.0, max_val=1.0):
    return _clamp_values(cx, x, min_val, max_val)


@_conv("aten.relu6.default")
def _relu6(cx, node, x):
    return cx.g.minimum(cx.g.relu(x), cx.scalar(6.0, x.dtype))


_COMPARE = {name: kind for kind, row in COMPARE_KINDS.items() for name in row.torch}


def _compare(op: str) -> Converter:
    def convert(cx, node, a, b):
        from rlx.ir.dtype import promote_all

        tensors = [t.dtype for t in (a, b) if isinstance(t, Value)]
        like = promote_all(tensors)
        if any(isinstance(s, float) for s in (a, b)) and not like.is_float:
            like = DType.F32
        x, y = _operands(cx, like, a, b)
        return cx.g.compare(x, y, op=op)

    return convert


for _name, _op in _COMPARE.items():
    for _overload in ("Tensor", "Scalar"):
        _CONVERTERS[f"{_name}.{_overload}"] = _compare(_op)


@_conv("aten.logical_not.default", "aten.bitwise_not.default")
def _logical_not(cx, node, x):
    if not x.dtype.is_bool and _target_name(node.target) == "aten.bitwise_not.default":
        return cx.g.binary_ext(x, cx.scalar(-1 if x.dtype.numpy.kind == "i" else np.iinfo(x.dtype.numpy).max, x.dtype),
                               op="bitwise_xor")  # ~x: every bit flipped
    return cx.g.eq(cx.cast(x, DType.BOOL), cx.scalar(False, DType.BOOL))


_BITWISE = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "left_shift": "shift_left",
            "right_shift": "shift_right"}


@_conv("aten.logical_and.default", "aten.bitwise_and.Tensor", "aten.logical_or.default", "aten.bitwise_or.Tensor",
       "aten.bitwise_and.Scalar", "aten.bitwise_or.Scalar", "aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar",
       "aten.logical_xor.default", "aten.bitwise_left_shift.Tensor", "aten.bitwise_right_shift.Tensor",
       "aten.bitwise_left_shift.Tensor_Scalar", "aten.bitwise_right_shift.Tensor_Scalar", "aten.__lshift__.Scalar",
       "aten.__rshift__.Scalar", "aten.__lshift__.Tensor", "aten.__rshift__.Tensor")
def _logical_binary(cx, node, a, b):
    name = _target_name(node.target)
    word = name.split(".")[1].removeprefix("bitwise_").removeprefix("logical_").strip("_")
    word = {"lshift": "left_shift", "rshift": "right_shift"}.get(word, word)
    dtype = cx.out_dtype()
    if "logical" in name or dtype.is_bool:
        x, y = _operands(cx, DType.BOOL, a, b)
        if word == "xor":
            return cx.g.ne(x, y)
        return cx.g.binary(x, y, op="mul" if word == "and" else "add")
    x, y = _operands(cx, dtype, a, b)
    return cx.g.binary_ext(x, y, op=_BITWISE[word])


@_conv("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(cx, node, cond, a, b):
    dtype = cx.out_dtype()
    x, y = _operands(cx, dtype, a, b)
    return cx.g.where(cx.cast(cond, DType.BOOL), x, y)


@_conv("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(cx, node, x, mask, value):
    dtype = cx.out_dtype()
    fill = cx.cast(value, dtype) if isinstance(value, Value) else cx.scalar(value, dtype)
    return cx.g.where(cx.cast(mask, DType.BOOL), fill, cx.cast(x, dtype))


# ---------------------------------------------------------------------------- creation
@_conv("aten.full.default", "aten.new_full.default")
def _full_op(cx, node, *args, **kwargs):
    value = args[-1] if _target_name(node.target) == "aten.full.default" else args[2]
    return _full(cx, value, cx.out_dtype())


@_conv("aten.zeros.default", "aten.new_zeros.default")
def _zeros(cx, node, *args, **kwargs):
    return _full(cx, 0, cx.out_dtype())


@_conv("aten.ones.default", "aten.new_ones.default")
def _ones(cx, node, *args, **kwargs):
    return _full(cx, 1, cx.out_dtype())


@_conv("aten.scalar_tensor.default")
def _scalar_tensor(cx, node, value, **kwargs):
    return cx.tensor(value, cx.out_dtype())


@_conv("aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default")
def _like(cx, node, x, *args, **kwargs):
    name = _target_name(node.target)
    value = 0 if "zeros" in name else 1 if "ones" in name else args[0]
    dtype = cx.out_dtype()
    if isinstance(value, Value):
        return cx.g.where(cx.scalar(True, DType.BOOL), cx.cast(value, dtype), cx.cast(x, dtype))
    return _fill_like(cx, x, value, dtype)


@_conv("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(cx, node, *args, **kwargs):
    nums = [a for a in args]
    if any(a is None for a in nums):
        raise cx.fail("arange bounds must be static or symbolic sizes")
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) > 2 else 1)
    dtype = cx.out_dtype()
    if isinstance(end, str) or isinstance(start, str):  # symbolic: start + step * (exclusive running sum of ones)
        if isinstance(step, str):
            raise cx.fail("arange with a symbolic step is not supported")
        ones = cx.g.expand(cx.g.constant(np.ones(1, dtype.numpy)), target_shape=[cx.out_shape()[0]])
        count = cx.g.cumulative(ones, op="sum", axis=0, exclusive=True)
        return count * cx.scalar(step, dtype) + cx.tensor(start, dtype) if (start, step) != (0, 1) else count
    values = np.arange(start, end, step, dtype=np.float64 if dtype.is_float else np.int64)
    out = values.astype(dtype.numpy)
    if out.shape != cx.static_out_shape():
        raise cx.fail(f"arange gives {out.shape}, torch recorded {cx.static_out_shape()}")
    return cx.g.constant(out)


@_conv("aten.tril.default", "aten.triu.default")
def _tri(cx, node, x, diagonal=0):
    rows, cols = x.shape[-2], x.shape[-1]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise cx.fail("tril / triu need static trailing dims")
    fn = np.tril if _target_name(node.target).startswith("aten.tril") else np.triu
    keep = fn(np.ones((rows, cols), dtype=bool), k=diagonal)
    return cx.g.where(cx.g.constant(keep), x, cx.scalar(0, x.dtype))
