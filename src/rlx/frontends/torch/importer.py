"""Import a ``torch.nn.Module`` into an rlx MIR graph through ``torch.export``.

Pipeline: ``torch.export.export(module, args, kwargs, dynamic_shapes=...)`` gives an
``ExportedProgram``; ``run_decompositions`` is then called with torch's default (core ATen)
table *minus every op this module converts itself*, so high-level ops such as ``linear``,
``layer_norm`` or ``scaled_dot_product_attention`` stay whole (and map onto single rlx ops),
while ops without a converter are decomposed into core ATen where torch knows how. Each
remaining FX node is converted by a small function looked up in ``_CONVERTERS`` by its
overload name (``"aten.add.Tensor"``) or packet name (``"aten.add"``).

Graph signature:

* user inputs become ``input`` nodes named like the placeholders (the ``forward`` argument
  names for top-level tensors);
* parameters **and buffers** (persistent or not) become ``param`` nodes named by their fully
  qualified name (``"encoder.0.norm1.weight"``, ``"bn.running_mean"``); their values are
  returned in the ``params`` dict under the same names, as NumPy arrays. Parameters and
  buffers the exported graph never reads (e.g. BatchNorm's ``num_batches_tracked`` in eval
  mode) are left out of both;
* lifted tensor constants (tensors created in ``forward``) become ``constant`` nodes;
* the graph outputs are the module's outputs, flattened in pytree order, named after the output
  structure (``"logits"``, ``"last_hidden_state"``, ``"1.0"`` for tuples) when there are several;
* every converted node's provenance label is the module path it ran in (the innermost entry of
  torch's ``nn_module_stack``, e.g. ``"model.layers.0.self_attn.q_proj"``): drawings cluster by it
  and ``rlx inspect`` prints it.

Symbolic dims: a ``torch.export.Dim("batch")`` in ``dynamic_shapes`` becomes the rlx symbol
``"batch"``, with the range torch records for it (``Dim("batch", min=2, max=64)`` -> the graph's
``symbol batch in [2, 64]``); other symbols keep torch's name (``"s0"``). A dim that is an expression of
symbols (``2*batch``, ``(seq + 1)//2``) becomes the same rlx dim expression; operations rlx
dims lack raise :class:`TorchImportError` naming the node. Creation ops (``arange``, ``full``, ``zeros`` …) must have static sizes.

Every converted node's rlx type is checked against torch's recorded meta (shape and dtype);
a dtype difference caused by promotion rules is fixed with a ``cast``.

Errors: every problem raises a :class:`TorchImportError` (an :class:`rlx.RlxError`); ops
without a converter are reported all at once, with counts, by :class:`UnsupportedOpError`.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.frontends.common import multiplied_power
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Provenance, Value
from rlx.ir.symbolic import dim_max, dim_min, floordiv, mod, symbol
from rlx.ops.kinds import ACTIVATION_KINDS, COMPARE_KINDS, UNARY_MATH_KINDS

__all__ = ["TorchImportError", "UnsupportedOpError", "import_module", "import_program", "supported_ops"]


class TorchImportError(RlxError):
    """A torch module or exported program could not be imported; the message names the node."""


class UnsupportedOpError(TorchImportError):
    """The exported graph uses ops with no converter. ``ops`` maps each op name to its count."""

    def __init__(self, ops: Mapping[str, int]):
        self.ops = dict(ops)
        listed = "\n".join(f"  - {name} (x{count})" for name, count in sorted(self.ops.items()))
        super().__init__(f"{len(self.ops)} unsupported torch op(s) in the exported graph:\n{listed}")


# ------------------------------------------------------------------------------ registry
Converter = Callable[..., Any]
_CONVERTERS: dict[str, Converter] = {}

# Nodes that carry no data (runtime asserts torch.export inserts); they are dropped.
_IGNORED = frozenset({
    "aten._assert_scalar.default", "aten._assert_tensor_metadata.default", "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default", "aten._assert_async.msg", "aten._assert_async.default",
})


def _conv(*names: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for name in names:
            _CONVERTERS[name] = fn
        return fn

    return register


def _target_name(target: Any) -> str:
    """``aten.add.Tensor`` for ATen overloads, ``operator.mul`` for Python operators."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    if module in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    name = str(target)
    if module == "math" or name.startswith("<built-in function"):
        return f"{module}.{getattr(target, '__name__', name)}"
    return name


def _packet_name(target: Any) -> str | None:
    packet = getattr(target, "overloadpacket", None)
    return None if packet is None else str(packet)


def _lookup(target: Any) -> Converter | None:
    fn = _CONVERTERS.get(_target_name(target))
    if fn is None:
        packet = _packet_name(target)
        fn = _CONVERTERS.get(packet) if packet else None
    return fn


def supported_ops() -> list[str]:
    """Names (overload or packet) of every torch op with a converter."""
    return sorted(_CONVERTERS)


# ------------------------------------------------------------------------------- dtypes
def _dtype_table() -> dict[Any, DType]:
    import torch

    table = {
        torch.float32: DType.F32, torch.float16: DType.F16, torch.bfloat16: DType.BF16, torch.float64: DType.F64,
        torch.int8: DType.I8, torch.int16: DType.I16, torch.int32: DType.I32, torch.int64: DType.I64,
        torch.uint8: DType.U8, torch.bool: DType.BOOL, torch.complex64: DType.C64,
    }
    for name, rlx_dtype in (("uint32", DType.U32), ("float8_e4m3fn", DType.F8E4M3), ("float8_e5m2", DType.F8E5M2),
                            ("float8_e4m3fnuz", DType.F8E4M3FNUZ), ("float8_e5m2fnuz", DType.F8E5M2FNUZ),
                            ("float8_e8m0fnu", DType.F8E8M0), ("uint16", DType.U16), ("uint64", DType.U64)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = rlx_dtype
    return table


def _rlx_dtype(torch_dtype: Any) -> DType:
    try:
        return _dtype_table()[torch_dtype]
    except KeyError:
        raise TorchImportError(f"torch dtype {torch_dtype} has no rlx equivalent") from None


def _to_numpy(t: Any) -> np.ndarray:
    """A C-contiguous NumPy copy of a tensor (bf16 / fp8 through their bit patterns)."""
    import torch

    t = t.detach().cpu().contiguous()
    dtype = _rlx_dtype(t.dtype)
    if dtype.is_low_precision_float and t.dtype != torch.float16:
        bits = torch.int16 if dtype is DType.BF16 else torch.uint8
        return t.view(bits).numpy().view(dtype.numpy).copy()
    return np.array(t.numpy(), copy=True)


# ------------------------------------------------------------------------------ context
def _sympy_dim(expr: Any, names: dict[str, str]) -> Any:
    """A torch size expression (sympy) as an rlx dim, symbols renamed through ``names``
    (torch's ``s0`` -> the user's ``Dim`` name); None for an operation rlx dims lack."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        name = str(expr)
        return symbol(names.setdefault(name, name))
    args = [_sympy_dim(a, names) for a in expr.args]
    if any(a is None for a in args):
        return None
    kind = type(expr).__name__
    if kind == "Add":
        return functools.reduce(operator.add, args)
    if kind == "Mul":
        return math.prod(args)
    if kind == "Pow" and isinstance(args[1], int) and args[1] >= 1:
        return math.prod([args[0]] * args[1])
    ops = {"FloorDiv": floordiv, "Mod": mod, "PythonMod": mod, "Max": dim_max, "Min": dim_min}
    if kind in ops and len(args) >= 2:
        return ops[kind](*args) if kind in ("Max", "Min") else ops[kind](args[0], args[1])
    return None


class _Ctx:
    """Conversion state: the rlx graph, values by FX node name, symbol names."""

    def __init__(self, g: Graph, symbols: Mapping[str, str]):
        self.g = g
        self.symbols = dict(symbols)
        self.env: dict[str, Any] = {}
        self.node: Any = None  # the FX node being converted
        self.training = False  # a module in training mode: the gradients must be torch's too (state.py)

    # ---- dims and meta
    def dim(self, d: Any) -> Any:
        """An rlx dim from a torch size entry (int, or SymInt: an expression of symbols)."""
        import torch

        if isinstance(d, torch.SymInt):
            expr = d.node.expr
            if getattr(expr, "is_number", False):
                return int(expr)
            dim = _sympy_dim(expr, self.symbols)
            if dim is None:
                raise TorchImportError(f"{self.where()}: symbolic size {expr} uses an operation rlx dims do not have "
                                       "(rlx dims are polynomials with floordiv, mod, max, min)")
            return dim
        return int(d)

    def shape(self, t: Any) -> tuple:
        return tuple(self.dim(d) for d in t.shape)

    def meta(self, node: Any = None) -> Any:
        node = self.node if node is None else node
        return node.meta.get("val")

    def out_shape(self) -> tuple:
        return self.shape(self.meta())

    def out_dtype(self) -> DType:
        return _rlx_dtype(self.meta().dtype)

    def static_out_shape(self) -> tuple[int, ...]:
        shape = self.out_shape()
        if not all(isinstance(d, int) for d in shape):
            raise TorchImportError(f"{self.where()}: needs a static output shape, got {list(shape)}")
        return shape  # type: ignore[return-value]

    def where(self) -> str:
        if self.node is None:
            return "torch import"
        return f"node {self.node.name!r} ({_target_name(self.node.target)})"

    def fail(self, message: str) -> TorchImportError:
        return TorchImportError(f"{self.where()}: {message}")

    # ---- values
    def scalar(self, value: Any, dtype: DType) -> Value:
        return self.g.constant(np.asarray(value, dtype=dtype.numpy))

    def tensor(self, value: Any, dtype: DType) -> Value:
        """A Value as is, or a Python scalar as a rank-0 constant of ``dtype``."""
        if isinstance(value, Value):
            return value
        if isinstance(value, str):
            return self.dim_value(value, dtype)
        if value is None:
            raise self.fail("a None operand where a tensor is expected")
        return self.scalar(value, dtype)

    def dim_value(self, dim: Any, dtype: DType) -> Value:
        """A rank-0 tensor holding the size ``dim`` (a symbolic size torch uses as a number: a cache
        position ``past + i``): the sum of ``dim`` ones, so it is bound at run time with the symbols."""
        ones = self.g.expand(self.g.constant(np.ones(1, dtype.numpy)), target_shape=[dim])
        return self.g.reduce(ones, op="sum", axes=[0], keep_dim=False)

    def cast(self, v: Value, dtype: DType) -> Value:
        return v if v.dtype is dtype else self.g.cast(v, to=dtype)

    def static(self, value: Any, what: str) -> int:
        if isinstance(value, str):
            raise self.fail(f"{what} is symbolic ({value!r}); only static values are supported")
        return int(value)


def _axis(axis: int, rank: int) -> int:
    return axis % rank if rank else 0


def _reshape(cx: _Ctx, x: Value, shape: Sequence[Any]) -> Value:
    """Reshape to ``shape`` (ints and symbol names); the one symbol, if any, is carried by -1."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return cx.g.reshape(x, new_shape=list(shape))


def _fill_like(cx: _Ctx, x: Value, value: Any, dtype: DType) -> Value:
    """A tensor of x's shape (symbols included) filled with ``value``: where(True, value, x)."""
    filled = cx.g.where(cx.scalar(True, DType.BOOL), cx.scalar(value, dtype), cx.cast(x, dtype))
    return filled


def _full(cx: _Ctx, value: Any, dtype: DType) -> Value:
    shape = cx.static_out_shape()
    if isinstance(value, Value):
        return cx.g.expand(cx.cast(value, dtype), target_shape=list(shape))
    return cx.g.constant(np.full(shape, value, dtype=dtype.numpy))


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


def _int_divmod(cx: _Ctx, a: Any, b: Any, floor: bool) -> tuple[Value, Value]:
    """Integer quotient and remainder, truncating (C) or flooring (Python) as asked."""
    dtype = cx.out_dtype()
    if not dtype.is_int:
        raise cx.fail(f"rounding division / remainder is only supported on integer tensors, got {dtype}")
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
        raise cx.fail("bitwise_not is only supported on bool tensors")
    return cx.g.eq(cx.cast(x, DType.BOOL), cx.scalar(False, DType.BOOL))


@_conv("aten.logical_and.default", "aten.bitwise_and.Tensor", "aten.logical_or.default", "aten.bitwise_or.Tensor")
def _logical_binary(cx, node, a, b):
    name = _target_name(node.target)
    if name.startswith("aten.bitwise") and not (a.dtype.is_bool and b.dtype.is_bool):
        raise cx.fail("bitwise ops are only supported on bool tensors")
    x, y = _operands(cx, DType.BOOL, a, b)
    return cx.g.binary(x, y, op="mul" if "and" in name else "add")


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


# ------------------------------------------------------------------------------- shape
@_conv("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.flatten.using_ints",
       "aten.unflatten.int", "aten.view_copy.default", "aten.squeeze.dim", "aten.squeeze.dims",
       "aten.squeeze.default", "aten.unsqueeze.default", "aten.view_as.default", "aten.reshape_as.default",
       "aten._reshape_alias.default", "aten.unsqueeze_copy.default", "aten.squeeze_copy.dim")
def _view(cx, node, x, *args, **kwargs):
    return _reshape(cx, x, cx.out_shape())


@_conv("aten.permute.default", "aten.permute_copy.default")
def _permute(cx, node, x, dims):
    rank = len(x.shape)
    return cx.g.transpose(x, perm=[_axis(d, rank) for d in dims])


@_conv("aten.transpose.int", "aten.swapaxes.default", "aten.transpose_copy.int")
def _transpose(cx, node, x, d0, d1):
    rank = len(x.shape)
    perm = list(range(rank))
    a, b = _axis(d0, rank), _axis(d1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return x if a == b else cx.g.transpose(x, perm=perm)


@_conv("aten.t.default", "aten.numpy_T.default")
def _t(cx, node, x):
    rank = len(x.shape)
    return x if rank < 2 else cx.g.transpose(x, perm=list(range(rank))[::-1])


@_conv("aten.expand.default", "aten.expand_copy.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(cx, node, x, *args, **kwargs):
    out = cx.out_shape()
    if tuple(x.shape) == out:
        return x
    lead = len(out) - len(x.shape)
    target = []
    for i, d in enumerate(out):
        target.append(-1 if isinstance(d, str) and i >= lead and x.shape[i - lead] == d else d)
    return cx.g.expand(x, target_shape=target)


@_conv("aten.repeat.default")
def _repeat(cx, node, x, repeats):
    reps = [cx.static(r, "repeat count") for r in repeats]
    shape = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    if not all(isinstance(d, int) for d in shape):
        raise cx.fail("repeat needs a static input shape")
    y = _reshape(cx, x, [v for d in shape for v in (1, d)])
    y = cx.g.expand(y, target_shape=[v for r, d in zip(reps, shape) for v in (r, d)])
    return _reshape(cx, y, cx.out_shape())


def _slice_bounds(cx: _Ctx, size: Any, start: Any, end: Any) -> tuple[int, int]:
    if isinstance(size, str):
        if (start in (None, 0)) and (end is None or (isinstance(end, int) and end >= 2**62)):
            return 0, -1  # full symbolic axis
        raise cx.fail(f"slicing a symbolic axis ({size!r}) is not supported")
    start = 0 if start is None else cx.static(start, "slice start")
    end = size if end is None else cx.static(end, "slice end")
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return start, end


def _symbolic_slice(cx: _Ctx, x: Value, axis: int, start: Any, end: Any, step: Any) -> Value:
    """A unit-step slice where the axis or a bound is symbolic: the length is the size torch
    recorded; the start is the given one (int >= 0 or symbolic) or, for a slice that runs to
    the end from a negative start, size - length."""
    if cx.static(step, "slice step") != 1:
        raise cx.fail("a strided slice of a symbolic axis is not supported")
    size, length = x.shape[axis], cx.out_shape()[axis]
    to_end = end is None or (isinstance(end, int) and end >= 2**62)
    if start is None or isinstance(start, str) or start >= 0:
        lo = start or 0
    elif to_end:
        lo = size - length
    else:
        raise cx.fail(f"slice [{start}:{end}] of a symbolic axis ({size}) is not supported")
    if lo == 0 and length == size:
        return x
    return cx.g.narrow(x, axis, lo, length)


@_conv("aten.slice.Tensor", "aten.slice_copy.Tensor")
def _slice(cx, node, x, dim=0, start=None, end=None, step=1):
    axis = _axis(dim, len(x.shape))
    if any(isinstance(v, str) for v in (x.shape[axis], start, end)):
        return _symbolic_slice(cx, x, axis, start, end, step)
    lo, hi = _slice_bounds(cx, x.shape[axis], start, end)
    if hi == -1:
        return x
    step = cx.static(step, "slice step")
    if step == 1:
        if lo == 0 and hi == x.shape[axis]:
            return x
        return cx.g.narrow(x, axis, lo, hi - lo)
    idx = np.arange(lo, hi, step, dtype=np.int64)
    return cx.g.gather(x, cx.g.constant(idx), axis=axis)


@_conv("aten.flip.default")
def _flip(cx, node, x, dims):
    for d in dims:
        axis = _axis(d, len(x.shape))
        n = cx.static(x.shape[axis], "flipped axis size")
        x = cx.g.gather(x, cx.g.constant(np.arange(n - 1, -1, -1, dtype=np.int64)), axis=axis)
    return x


def _position(cx: _Ctx, x: Value, dim: int, index: Any, what: str) -> tuple[int, int]:
    """(axis, static non-negative position) of a torch (dim, index) pair; negative indices count from the end."""
    axis = _axis(dim, len(x.shape))
    index = cx.static(index, what)
    if index < 0:
        index += cx.static(x.shape[axis], "axis size")
    return axis, index


@_conv("aten.narrow.default")
def _narrow(cx, node, x, dim, start, length):
    axis, start = _position(cx, x, dim, start, "narrow start")
    return cx.g.narrow(x, axis, start, cx.static(length, "narrow length"))


@_conv("aten.select.int", "aten.select_copy.int")
def _select(cx, node, x, dim, index):
    axis, index = _position(cx, x, dim, index, "select index")
    return _reshape(cx, cx.g.narrow(x, axis, index, 1), cx.out_shape())


def _split_parts(cx: _Ctx, x: Value, sizes: Sequence[int], dim: int) -> list[Value]:
    axis = _axis(dim, len(x.shape))
    parts, start = [], 0
    for size in sizes:
        parts.append(cx.g.narrow(x, axis, start, size))
        start += size
    return parts


@_conv("aten.split.Tensor", "aten.split_with_sizes.default", "aten.split_copy.Tensor", "aten.split_with_sizes_copy.default",
       "aten.chunk.default", "aten.tensor_split.sections", "aten.unsafe_split.Tensor")
def _split(cx, node, x, size_or_sizes, dim=0):
    sizes = [int(cx.dim(t.shape[_axis(dim, len(x.shape))])) for t in cx.meta()]
    return _split_parts(cx, x, sizes, dim)


@_conv("aten.unbind.int", "aten.unbind_copy.int")
def _unbind(cx, node, x, dim=0):
    axis = _axis(dim, len(x.shape))
    n = cx.static(x.shape[axis], "unbind axis size")
    out_shapes = [cx.shape(t) for t in cx.meta()]
    return [_reshape(cx, p, s) for p, s in zip(_split_parts(cx, x, [1] * n, axis), out_shapes)]


@_conv("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(cx, node, tensors, dim=0):
    dtype = cx.out_dtype()
    parts = [cx.cast(t, dtype) for t in tensors if not (t.shape == (0,) and len(cx.out_shape()) != 1)]
    return cx.g.concat(parts, axis=_axis(dim, len(parts[0].shape)))


@_conv("aten.stack.default")
def _stack(cx, node, tensors, dim=0):
    rank = len(tensors[0].shape) + 1
    axis = _axis(dim, rank)
    parts = []
    for t in tensors:
        shape = list(t.shape)
        shape.insert(axis, 1)
        parts.append(_reshape(cx, cx.cast(t, cx.out_dtype()), shape))
    return cx.g.concat(parts, axis=axis)


@_conv("aten.embedding.default")
def _embedding(cx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if cx.training and padding_idx is not None and padding_idx >= 0:
        from rlx.frontends.torch.state import embedding_with_padding  # no gradient to the padding row

        return embedding_with_padding(cx, weight, indices, int(padding_idx))
    return cx.g.gather(weight, indices, axis=0)


@_conv("aten.index_select.default")
def _index_select(cx, node, x, dim, index):
    return cx.g.gather(x, index, axis=_axis(dim, len(x.shape)))


# -------------------------------------------------------------------------- reductions
def _reduce(op: str) -> Converter:
    def convert(cx, node, x, dims=None, keepdim=False, **kwargs):
        rank = len(x.shape)
        axes = list(range(rank)) if dims is None or (isinstance(dims, Sequence) and len(dims) == 0) else dims
        axes = [axes] if isinstance(axes, int) else axes
        dtype = cx.out_dtype()
        x = cx.cast(x, dtype)
        return cx.g.reduce(x, op=op, axes=sorted({_axis(a, rank) for a in axes}), keep_dim=bool(keepdim))

    return convert


_conv("aten.sum.dim_IntList", "aten.sum.default")(_reduce("sum"))
_conv("aten.mean.dim", "aten.mean.default")(_reduce("mean"))
_conv("aten.amax.default")(_reduce("max"))
_conv("aten.amin.default")(_reduce("min"))
_conv("aten.prod.dim_int", "aten.prod.default")(_reduce("prod"))


@_conv("aten.max.default", "aten.min.default")
def _max_all(cx, node, x):
    op = "max" if _target_name(node.target).startswith("aten.max") else "min"
    return cx.g.reduce(x, op=op, axes=list(range(len(x.shape))), keep_dim=False)


@_conv("aten.max.dim", "aten.min.dim")
def _max_dim(cx, node, x, dim, keepdim=False):
    op = "max" if _target_name(node.target).startswith("aten.max") else "min"
    return (cx.g.reduce(x, op=op, axes=[_axis(dim, len(x.shape))], keep_dim=bool(keepdim)), None)


# ------------------------------------------------------- unary math, scans, selection, scatter
def _unary_math(kind: str) -> Converter:
    def convert(cx, node, x):
        return cx.g.unary_math(cx.cast(x, cx.out_dtype()), kind=kind)  # erf of an int promotes first (torch)

    return convert




@_conv("aten.cumsum.default", "aten.cumprod.default")
def _cumulative(cx, node, x, dim, dtype=None):
    """torch.cumsum / cumprod: the one scan op, in torch's result dtype (ints accumulate in i64)."""
    op = "sum" if _target_name(node.target) == "aten.cumsum.default" else "prod"
    if len(x.shape) == 0:  # torch scans a scalar as itself
        return cx.cast(x, cx.out_dtype())
    return cx.g.cumulative(cx.cast(x, cx.out_dtype()), op=op, axis=_axis(dim, len(x.shape)))


@_conv("aten.argmax.default", "aten.argmin.default")
def _argmax(cx, node, x, dim=None, keepdim=False):
    """First index of the extreme (torch and np.argmax agree, NaN included); dim=None: over the flattened x."""
    op = "argmax" if _target_name(node.target) == "aten.argmax.default" else "argmin"
    rank = len(x.shape)
    if dim is None or rank == 0:
        r = cx.g.arg_reduce(_reshape(cx, x, [-1]) if rank != 1 else x, op=op, axis=0, keep_dim=False)
        return _reshape(cx, r, cx.out_shape())
    return cx.g.arg_reduce(x, op=op, axis=_axis(dim, rank), keep_dim=bool(keepdim))


@_conv("aten.topk.default")
def _topk(cx, node, x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) as one two-result top_k node. rlx always sorts (ties: lower index first),
    which is one valid order for sorted=False."""
    if len(x.shape) == 0:
        raise cx.fail("topk of a 0-d tensor is not supported")
    return cx.g.top_k(x, k=cx.static(k, "topk k"), axis=_axis(dim, len(x.shape)), largest=bool(largest), output="both")


_SCATTER_REDUCE = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}


def _scatter_src(cx: _Ctx, x: Value, index: Value, src: Any) -> Value:
    """The updates shaped like ``index``: a scalar expanded, or src narrowed (torch reads src[:index.shape])."""
    if not isinstance(src, Value):
        return cx.g.expand(cx.scalar(src, x.dtype), target_shape=list(index.shape))
    src = cx.cast(src, x.dtype)
    for axis, (n, m) in enumerate(zip(src.shape, index.shape)):
        if n != m:
            src = cx.g.narrow(src, axis, 0, cx.static(m, "scatter index size"))
    return src


@_conv("aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default", "aten.scatter.reduce",
       "aten.scatter.value_reduce", "aten.scatter_reduce.two")
def _scatter(cx, node, x, dim, index, src, reduce=None, include_self=True):
    """scatter_elements. Without a reduction torch leaves the winner among duplicate indices unspecified
    (rlx: the last); add / mul / max / min combine exactly. scatter_reduce 'mean' and include_self=False
    have no rlx form."""
    name = _target_name(node.target)
    red = "add" if name == "aten.scatter_add.default" else "none" if reduce is None else _SCATTER_REDUCE.get(reduce)
    if red is None or not include_self:
        raise cx.fail(f"scatter reduce={reduce!r} include_self={include_self} is not supported (sum, prod, amax, amin with "
                      "include_self=True are)")
    if len(x.shape) == 0:
        raise cx.fail("scatter into a 0-d tensor is not supported")
    index = cx.cast(index, DType.I64)
    return cx.g.scatter_elements(x, index, _scatter_src(cx, x, index, src), axis=_axis(dim, len(x.shape)), reduction=red)


@_conv("aten.var.correction", "aten.var.dim", "aten.var_mean.correction")
def _var(cx, node, x, dims=None, *args, correction=None, keepdim=False, **kwargs):
    name = _target_name(node.target)
    unbiased = True
    if name == "aten.var.dim" and args:
        unbiased, keepdim = bool(args[0]), bool(args[1]) if len(args) > 1 else keepdim
    rank = len(x.shape)
    axes = list(range(rank)) if not dims else sorted({_axis(a, rank) for a in ([dims] if isinstance(dims, int) else dims)})
    n = math.prod(cx.static(x.shape[a], "var axis size") for a in axes)
    corr = (1 if unbiased else 0) if correction is None else correction
    mean = cx.g.reduce(x, op="mean", axes=axes, keep_dim=True)
    d = x - mean
    var = cx.g.reduce(d * d, op="sum", axes=axes, keep_dim=bool(keepdim)) * cx.scalar(1.0 / max(n - corr, 0), x.dtype)
    if name == "aten.var_mean.correction":
        return (var, mean if keepdim else _reshape(cx, mean, [x.shape[i] for i in range(rank) if i not in axes]))
    return var


@_conv("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default")
def _softmax(cx, node, x, dim, *args, **kwargs):
    return cx.g.softmax(cx.cast(x, cx.out_dtype()), axis=_axis(dim, len(x.shape)))


@_conv("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(cx, node, x, dim, *args, **kwargs):
    x = cx.cast(x, cx.out_dtype())
    axis = _axis(dim, len(x.shape))
    shifted = x - cx.g.reduce(x, op="max", axes=[axis], keep_dim=True)
    return shifted - cx.g.log(cx.g.reduce(cx.g.exp(shifted), op="sum", axes=[axis], keep_dim=True))


# ------------------------------------------------------------------------------ linalg
def _matmul_any(cx: _Ctx, a: Value, b: Value) -> Value:
    """np.matmul with torch's 1-D promotion (rlx matmul needs rank >= 2)."""
    a1, b1 = len(a.shape) == 1, len(b.shape) == 1
    if a1:
        a = _reshape(cx, a, (1, a.shape[0]))
    if b1:
        b = _reshape(cx, b, (b.shape[0], 1))
    out = cx.g.matmul(a, b)
    if a1 or b1:
        out = _reshape(cx, out, cx.out_shape())
    return out


@_conv("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def _matmul(cx, node, a, b):
    return _matmul_any(cx, a, b)


@_conv("aten.linear.default")
def _linear(cx, node, x, w, b=None):
    wt = cx.g.transpose(w, perm=[1, 0]) if len(w.shape) == 2 else w
    y = _matmul_any(cx, x, wt)
    return y if b is None else y + b


@_conv("aten.addmm.default")
def _addmm(cx, node, bias, a, b, beta=1, alpha=1):
    y = _matmul_any(cx, a, b)
    if alpha != 1:
        y = y * cx.scalar(alpha, y.dtype)
    if beta == 0:
        return y
    return y + (bias if beta == 1 else bias * cx.scalar(beta, bias.dtype))


# ------------------------------------------------------------------------ normalization
def _norm_affine(cx: _Ctx, value: Value | None, n: int, fill: float, dtype: DType) -> Value:
    return cx.g.constant(np.full((n,), fill, dtype=dtype.numpy)) if value is None else value


@_conv("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(cx, node, x, normalized_shape, weight=None, bias=None, eps=1e-5, *args):
    native = _target_name(node.target) == "aten.native_layer_norm.default"
    k = len(normalized_shape)
    dims = [cx.static(d, "normalized dim") for d in normalized_shape]
    n = math.prod(dims)
    w = _norm_affine(cx, weight, n, 1.0, x.dtype)
    b = _norm_affine(cx, bias, n, 0.0, x.dtype)
    if k == 1:
        y = cx.g.layer_norm(x, w, b, axis=-1, eps=float(eps))
    else:
        lead = list(x.shape[:-k])
        flat = _reshape(cx, x, [*lead, n])
        y = cx.g.layer_norm(flat, _reshape(cx, w, [n]), _reshape(cx, b, [n]), axis=-1, eps=float(eps))
        y = _reshape(cx, y, x.shape)
    return (y, None, None) if native else y


def _channel(cx: _Ctx, v: Value, rank: int) -> Value:
    """A [C] vector laid along axis 1 of a rank-``rank`` tensor."""
    return _reshape(cx, v, [v.shape[0]] + [1] * (rank - 2))


def _batch_norm_eval(cx: _Ctx, x: Value, weight, bias, mean, var, eps: float) -> Value:
    """(x - mean) * (weight / sqrt(var + eps)) + bias per channel (axis 1), in elementwise ops."""
    rank = len(x.shape)
    if mean is None or var is None:
        raise cx.fail("batch norm without running statistics (track_running_stats=False) is not supported in eval import")
    scale = cx.g.rsqrt(var + cx.scalar(eps, var.dtype))
    if weight is not None:
        scale = scale * weight
    y = (x - _channel(cx, mean, rank)) * _channel(cx, scale, rank)
    return y if bias is None else y + _channel(cx, bias, rank)


@_conv("aten._native_batch_norm_legit_no_training.default")
def _bn_no_training(cx, node, x, weight, bias, mean, var, momentum, eps):
    return (_batch_norm_eval(cx, x, weight, bias, mean, var, float(eps)), None, None)


@_conv("aten.batch_norm.default", "aten._native_batch_norm_legit.default", "aten.native_batch_norm.default",
       "aten._native_batch_norm_legit_functional.default")
def _batch_norm(cx, node, x, weight, bias, mean, var, training, momentum, eps, *args):
    if training:
        if _target_name(node.target) == "aten._native_batch_norm_legit_functional.default":
            from rlx.frontends.torch.state import batch_norm_train  # running stats become buffer updates

            return batch_norm_train(cx, x, weight, bias, mean, var, momentum, float(eps))
        raise cx.fail("batch norm in training mode is not supported (call module.eval() before importing)")
    y = _batch_norm_eval(cx, x, weight, bias, mean, var, float(eps))
    return y if _target_name(node.target) == "aten.batch_norm.default" else (y, None, None)


def _group_norm_values(cx: _Ctx, x: Value, num_groups: int, weight, bias, eps: float) -> Value:
    c = cx.static(x.shape[1], "channels")
    w = _norm_affine(cx, weight, c, 1.0, x.dtype)
    b = _norm_affine(cx, bias, c, 0.0, x.dtype)
    return cx.g.group_norm(x, w, b, num_groups=int(num_groups), eps=float(eps))


@_conv("aten.group_norm.default")
def _group_norm(cx, node, x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _group_norm_values(cx, x, num_groups, weight, bias, eps)


@_conv("aten.native_group_norm.default")
def _native_group_norm(cx, node, x, weight, bias, n, c, hw, num_groups, eps):
    return (_group_norm_values(cx, x, num_groups, weight, bias, eps), None, None)


# ------------------------------------------------------------------------------ conv
def _pair(v: Any, n: int = 2) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = [int(e) for e in v]
    return v * n if len(v) == 1 else v


def _conv_nd(cx: _Ctx, x: Value, w: Value, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    rank = len(x.shape)
    if rank == 3:  # conv1d as a conv2d over [N, C, 1, L]
        if transposed:
            raise cx.fail("transposed 1-D convolution is not supported")
        n, c, length = x.shape
        x = _reshape(cx, x, [n, c, 1, length])
        w = _reshape(cx, w, [w.shape[0], w.shape[1], 1, w.shape[2]])
        stride, dilation = [1, _pair(stride, 1)[0]], [1, _pair(dilation, 1)[0]]
        padding = padding if isinstance(padding, str) else [0, _pair(padding, 1)[0]]
    elif rank != 4:
        raise cx.fail(f"only 1-D and 2-D convolutions are supported, got input rank {rank}")
    kh, kw = w.shape[2], w.shape[3]
    stride, dilation = _pair(stride), _pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        else:  # "same", stride 1
            total = [d * (k - 1) for d, k in zip(dilation, (kh, kw))]
            if any(t % 2 for t in total):
                raise cx.fail("padding='same' with an even effective kernel needs asymmetric padding, which rlx conv2d lacks")
            padding = [t // 2 for t in total]
    padding = _pair(padding)
    if transposed:
        y = cx.g.conv_transpose2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=int(groups),
                                  output_padding=_pair(output_padding))
    else:
        y = cx.g.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=int(groups))
    if b is not None:
        y = y + _reshape(cx, b, [b.shape[0], 1, 1])
    return _reshape(cx, y, cx.out_shape()) if rank == 3 else y


@_conv("aten.conv2d.default", "aten.conv2d.padding", "aten.conv1d.default", "aten.conv1d.padding")
def _conv2d(cx, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups)


@_conv("aten.convolution.default", "aten._convolution.default")
def _convolution(cx, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups, *args):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups, bool(transposed), output_padding)


@_conv("aten.conv_transpose2d.input")
def _conv_transpose2d(cx, node, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups, True, output_padding)


def _check_pool_shape(cx: _Ctx, y: Value, what: str) -> Value:
    if tuple(y.shape) != cx.out_shape():
        raise cx.fail(f"{what}: rlx pool2d gives {list(y.shape)}, torch {list(cx.out_shape())} (ceil_mode is not supported)")
    return y


@_conv("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default")
def _max_pool2d(cx, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if _pair(dilation) != [1, 1]:
        raise cx.fail("max pooling with dilation is not supported")
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    y = cx.g.pool2d(x, kind="max", kernel_size=k, stride=s, padding=_pair(padding))
    if _target_name(node.target) == "aten.max_pool2d_with_indices.default":
        if tuple(y.shape) != cx.shape(cx.meta()[0]):
            raise cx.fail("ceil_mode is not supported")
        return (y, None)
    return _check_pool_shape(cx, y, "max_pool2d")


@_conv("aten.avg_pool2d.default")
def _avg_pool2d(cx, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    if divisor_override is not None:
        y = cx.g.pool2d(x, kind="sum", kernel_size=k, stride=s, padding=_pair(padding))
        return _check_pool_shape(cx, y * cx.scalar(1.0 / divisor_override, y.dtype), "avg_pool2d")
    y = cx.g.pool2d(x, kind="mean", kernel_size=k, stride=s, padding=_pair(padding), count_include_pad=bool(count_include_pad))
    return _check_pool_shape(cx, y, "avg_pool2d")


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_pool(cx: _Ctx, x: Value, output_size: Any, op: str) -> Value:
    if len(x.shape) != 4:
        raise cx.fail(f"adaptive pooling needs an NCHW input, got rank {len(x.shape)}")
    h, w = (cx.static(d, "spatial dim") for d in x.shape[2:])
    oh, ow = (h if o is None else int(o) for o in ((output_size[0], output_size[-1]) if len(output_size) else (h, w)))
    if (oh, ow) == (1, 1):
        return cx.g.reduce(x, op=op, axes=[2, 3], keep_dim=True)
    if h % oh == 0 and w % ow == 0:
        k = [h // oh, w // ow]
        return cx.g.pool2d(x, kind=op, kernel_size=k, stride=k)
    y = x
    for axis, size, out in ((2, h, oh), (3, w, ow)):
        if size == out:
            continue
        parts = [cx.g.reduce(cx.g.narrow(y, axis, lo, hi - lo), op=op, axes=[axis], keep_dim=True)
                 for lo, hi in _adaptive_windows(size, out)]
        y = parts[0] if len(parts) == 1 else cx.g.concat(parts, axis=axis)
    return y


@_conv("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(cx, node, x, output_size):
    return _adaptive_pool(cx, x, output_size, "mean")


@_conv("aten.adaptive_max_pool2d.default")
def _adaptive_max_pool2d(cx, node, x, output_size):
    return (_adaptive_pool(cx, x, output_size, "max"), None)


@_conv("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
def _upsample_nearest2d(cx, node, x, *args, **kwargs):
    n, c, h, w = x.shape
    static = isinstance(h, int) and isinstance(w, int)
    if not static or cx.out_shape() != (n, c, 2 * h, 2 * w):
        raise cx.fail("only 2x nearest upsampling of static H, W is supported (rlx resize_nearest_2x)")
    return cx.g.resize_nearest_2x(x)


# --------------------------------------------------------------------------- attention
def _repeat_kv_heads(cx: _Ctx, t: Value, heads: int) -> Value:
    """Grouped-query attention (enable_gqa): query head h reads key/value head h // (heads / kv_heads)."""
    b, kv, s, d = t.shape
    kv = cx.static(kv, "number of key/value heads")
    if heads % kv:
        raise cx.fail(f"{heads} query heads are not a multiple of {kv} key/value heads")
    if kv == heads:
        return t
    grouped = cx.g.expand(_reshape(cx, t, [b, kv, 1, s, d]), target_shape=[-1, kv, heads // kv, -1, d])
    return _reshape(cx, grouped, [b, heads, s, d])


@_conv("aten.scaled_dot_product_attention.default")
def _sdpa(cx, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise cx.fail("attention dropout is not supported (dropout_p must be 0; call module.eval())")
    rank = len(q.shape)
    if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
        raise cx.fail(f"attention operands must all be rank 3 or 4, got {q.shape!r}, {k.shape!r}, {v.shape!r}")
    head_dim = cx.static(q.shape[-1], "head dim")
    if k.shape[-1] != head_dim or v.shape[-1] != head_dim:
        raise cx.fail("key / value head dims different from the query's are not supported")
    heads = cx.static(q.shape[1], "number of heads") if rank == 4 else 1
    if rank == 4 and (k.shape[1] != heads or v.shape[1] != heads):
        k, v = (_repeat_kv_heads(cx, t, heads) for t in (k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    dtype = q.dtype
    attrs: dict[str, Any] = {"num_heads": heads, "head_dim": head_dim, "score_scale": None if scale is None else float(scale)}
    if attn_mask is not None and is_causal:
        raise cx.fail("attn_mask together with is_causal is not supported (torch rejects it too)")
    if attn_mask is not None:
        bias = attn_mask
        if bias.dtype.is_bool:
            bias = cx.g.where(bias, cx.scalar(0.0, dtype), cx.scalar(-np.inf, dtype))
        else:
            bias = cx.cast(bias, dtype)
        if rank == 3 and len(bias.shape) == 3:  # [B, Sq, Sk] -> [B, 1, Sq, Sk] (one head)
            bias = _reshape(cx, bias, [bias.shape[0], 1, *bias.shape[1:]])
        return cx.g.attention(q, k, v, bias, mask_kind="bias", **attrs)
    if is_causal:
        if sq == sk:
            return cx.g.attention(q, k, v, mask_kind="causal", **attrs)
        rows, cols = cx.static(sq, "query length"), cx.static(sk, "key length")
        keep = np.tril(np.ones((rows, cols), dtype=bool))  # torch aligns the causal mask top-left
        bias = cx.g.constant(np.where(keep, 0.0, -np.inf).astype(dtype.numpy))
        return cx.g.attention(q, k, v, bias, mask_kind="bias", **attrs)
    return cx.g.attention(q, k, v, mask_kind="none", **attrs)


# -------------------------------------------------------------------------------- import
def _decomposition_table() -> Any:
    """torch's default core-ATen table without the ops converted here (they stay whole)."""
    from torch.export import default_decompositions

    table = default_decompositions()
    for op in list(table.keys()):
        if _lookup(op) is not None:
            table.pop(op)
    return table


def _symbol_names(module: Any, args: tuple, kwargs: dict, dynamic_shapes: Any, ep: Any) -> dict[str, str]:
    """torch symbol (``s0``) -> rlx name, from the ``Dim`` objects named in ``dynamic_shapes``."""
    import torch

    if dynamic_shapes is None:
        return {}
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    if isinstance(dynamic_shapes, Mapping):
        specs = dict(dynamic_shapes)
    else:
        names = params[: len(args)] + list(kwargs)
        specs = dict(zip(names, dynamic_shapes))
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    found: dict[str, str] = {}
    for arg_name, spec in specs.items():
        node = placeholders.get(arg_name)
        val = None if node is None else node.meta.get("val")
        if val is None or not hasattr(val, "shape") or spec is None:
            continue
        items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
        for axis, dim in items:
            name = getattr(dim, "__name__", None)
            if name is None or not isinstance(axis, int) or axis >= len(val.shape):
                continue
            size = val.shape[axis]
            if isinstance(size, torch.SymInt) and getattr(size.node.expr, "is_Symbol", False):
                found[str(size.node.expr)] = name
    return found


def import_module(
    module: Any,
    example_args: Any = (),
    dynamic_shapes: Any = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    strict: bool = False,
    name: str | None = None,
) -> tuple[Graph, dict[str, np.ndarray]]:
    """Export ``module`` with ``torch.export`` and convert it: returns ``(graph, params)``.

    ``example_args`` is a tuple of example inputs (a single tensor is accepted too);
    ``kwargs`` holds example keyword inputs; ``dynamic_shapes`` is passed to
    ``torch.export.export`` as is (``Dim`` names become rlx symbol names). ``params`` maps
    each parameter and buffer FQN the graph reads to a NumPy array.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise TorchImportError("rlx.torch.import_module needs torch (pip install 'rlx[torch]')") from exc
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"import_module expects a torch.nn.Module, got {type(module).__name__}")
    args = (example_args,) if isinstance(example_args, torch.Tensor) else tuple(example_args)
    kw = dict(kwargs or {})
    try:
        ep = torch.export.export(module, args, kw or None, dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as exc:
        raise TorchImportError(f"torch.export failed for {type(module).__name__}: {type(exc).__name__}: {exc}") from exc
    symbols = _symbol_names(module, args, kw, dynamic_shapes, ep)
    return import_program(ep, name=name or type(module).__name__, symbols=symbols, training=bool(module.training))


def import_program(ep: Any, *, name: str = "torch_module", symbols: Mapping[str, str] | None = None,
                   decompose: bool = True, training: bool = False) -> tuple[Graph, dict[str, np.ndarray]]:
    """Convert a ``torch.export.ExportedProgram`` (see :func:`import_module`); ``training``: the
    module was in training mode (gradients through embeddings skip ``padding_idx`` as torch's do)."""
    from torch.export.graph_signature import InputKind

    from rlx.frontends.torch.state import output_plan, remember_buffers

    if decompose:
        try:
            ep = ep.run_decompositions(_decomposition_table())
        except Exception as exc:
            raise TorchImportError(f"run_decompositions failed: {type(exc).__name__}: {exc}") from exc
    gm = ep.graph_module
    nodes = list(gm.graph.nodes)

    missing: Counter[str] = Counter()
    for node in nodes:
        if node.op == "call_function" and _target_name(node.target) not in _IGNORED and _lookup(node.target) is None:
            missing[_target_name(node.target)] += 1
        elif node.op in ("call_module", "call_method"):
            missing[f"{node.op}:{node.target}"] += 1
    if missing:
        raise UnsupportedOpError(missing)

    out_plan = output_plan(ep, TorchImportError)  # buffer mutations become extra outputs (state.py)

    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    state = dict(ep.state_dict)
    constants = dict(getattr(ep, "constants", {}) or {})
    g = Graph(name, ranges=_symbol_ranges(ep, symbols or {}))
    cx = _Ctx(g, symbols or {})
    cx.training = training
    params: dict[str, np.ndarray] = {}
    modules: dict[int, str] = {}  # rlx node id -> module path of the FX node it came from
    import torch

    for node in nodes:
        cx.node = node
        if node.op == "placeholder":
            cx.env[node.name] = _placeholder(cx, node, specs.get(node.name), state, constants, params, InputKind)
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise cx.fail(f"get_attr of a {type(value).__name__} is not supported")
            cx.env[node.name] = g.constant(_to_numpy(value), name=node.target)
        elif node.op == "call_function":
            if _target_name(node.target) in _IGNORED:
                cx.env[node.name] = None
                continue
            first = len(g.nodes)
            cx.env[node.name] = _convert(cx, node)
            path = _module_path(node)
            if path:
                modules.update(dict.fromkeys(range(first, len(g.nodes)), path))
        elif node.op == "output":
            outs = []
            for item in _flatten(node.args[0]):
                value = cx.env[item.name] if hasattr(item, "name") and item.name in cx.env else item
                if isinstance(value, Value):
                    outs.append(value)
                elif isinstance(value, (int, float, bool)):
                    outs.append(g.constant(np.asarray(value)))
                else:
                    raise cx.fail(f"graph output {item!r} is not a tensor")
            g.set_outputs(out_plan.reorder(outs))
    _drop_unused_params(g, params)
    return remember_buffers(out_plan.mark(_named(g, modules, _output_names(ep) + [None] * len(out_plan.updates))), ep), params


def _symbol_ranges(ep: Any, names: Mapping[str, str]) -> dict[str, tuple[int, int | None]]:
    """rlx name -> (lo, hi) of each symbol torch bounds (``Dim("batch", min=2, max=64)``): torch's
    lower bound 0 (its default) is rlx's default 1, and an unbounded top (``int_oo``) stays unbounded."""
    out: dict[str, tuple[int, int | None]] = {}
    for sym, vr in (getattr(ep, "range_constraints", None) or {}).items():
        if not getattr(sym, "is_Symbol", False):
            continue
        lo = max(int(vr.lower), 1) if getattr(vr.lower, "is_Integer", False) else 1
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else None
        if lo > 1 or hi is not None:
            out[names.get(str(sym), str(sym))] = (lo, hi)
    return out


def _module_path(node: Any) -> str | None:
    """The innermost module of an FX node's ``nn_module_stack`` (``"model.layers.0.self_attn"``)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()), ("",))[0] if stack else ""
    return path or None


def _output_names(ep: Any) -> list[str | None]:
    """A name per flattened output from the output pytree (``"logits"``, ``"past_key_values.0.1"``)."""
    spec = getattr(getattr(ep, "call_spec", None), "out_spec", None)
    names: list[str | None] = []

    def walk(node: Any, prefix: str) -> None:
        if node is None or node.is_leaf():
            names.append(prefix or None)
            return
        keys = node.context if isinstance(node.context, (list, tuple)) and len(node.context) == node.num_children else \
            range(node.num_children)
        for key, child in zip(keys, node.children_specs):
            walk(child, f"{prefix}.{key}" if prefix else str(key))

    walk(spec, "")
    return names if len(names) > 1 or names != [None] else []


def _named(g: Graph, modules: Mapping[int, str], out_names: Sequence[str | None]) -> Graph:
    """``g`` rebuilt (same ids) with each converted node's module path as its provenance label (drawings
    cluster by it, ``inspect`` shows it) and the outputs named after the module's output structure."""
    names: dict[int, str] = {}
    if len(out_names) == len(g.output_ids):
        for oid, name in zip(g.output_ids, out_names):
            if name and g.output_ids.count(oid) == 1 and g.node(oid).op not in ("input", "param"):
                names[oid] = name
    out = Graph(g.name, ranges=g.symbol_ranges)
    for node in g.nodes:
        prov = Provenance(label=modules[node.id]) if node.id in modules else node.prov
        out.append(node.op, node.inputs, node.attrs, name=names.get(node.id, node.name), prov=prov, type=node.types, check=False)
    out.set_outputs(g.output_ids)
    return out


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    return [x]


def _placeholder(cx: _Ctx, node: Any, spec: Any, state: dict, constants: dict, params: dict, InputKind: Any) -> Any:
    import torch

    val = cx.meta(node)
    kind = None if spec is None else spec.kind
    if not isinstance(val, torch.Tensor):
        if kind in (None, InputKind.USER_INPUT):
            return cx.dim(val) if isinstance(val, (int, torch.SymInt)) else val
        raise cx.fail(f"non-tensor input of kind {kind}")
    shape, dtype = cx.shape(val), _rlx_dtype(val.dtype)
    if kind in (None, InputKind.USER_INPUT):
        return cx.g.input(node.name, shape, dtype)
    target = spec.target
    if kind in (InputKind.PARAMETER, InputKind.BUFFER):
        tensor = state.get(target, constants.get(target))
        if tensor is None:
            raise cx.fail(f"no value for {kind} {target!r}")
        params[target] = _to_numpy(tensor)
        if not node.users:
            return None
        return cx.g.param(target, shape, dtype)
    if kind == InputKind.CONSTANT_TENSOR:
        tensor = constants.get(target)
        if tensor is None:
            raise cx.fail(f"no value for lifted constant {target!r}")
        return cx.g.constant(_to_numpy(tensor), name=target)
    raise cx.fail(f"inputs of kind {kind} are not supported")


def _drop_unused_params(g: Graph, params: dict[str, np.ndarray]) -> None:
    declared = g.params()
    for key in [k for k in params if k not in declared]:
        del params[key]


def _convert(cx: _Ctx, node: Any) -> Any:
    import torch
    from torch.fx.node import map_arg

    fn = _lookup(node.target)
    assert fn is not None
    args = map_arg(node.args, lambda n: cx.env[n.name])
    kwargs = map_arg(node.kwargs, lambda n: cx.env[n.name])
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory", "layout", "memory_format", "non_blocking")}
    try:
        result = fn(cx, node, *args, **kwargs)
    except TorchImportError:
        raise
    except RlxError as exc:
        raise cx.fail(f"{type(exc).__name__}: {exc}") from exc
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise cx.fail(f"cannot convert ({type(exc).__name__}: {exc})") from exc
    val = cx.meta()
    if isinstance(result, Value) and isinstance(val, torch.Tensor):
        return _check_type(cx, result, val)
    if isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
        checked = [_check_type(cx, r, v) if isinstance(r, Value) and isinstance(v, torch.Tensor) else r for r, v in zip(result, val)]
        return type(result)(checked) if isinstance(result, tuple) else checked
    return result


def _check_type(cx: _Ctx, v: Value, val: Any) -> Value:
    shape, dtype = cx.shape(val), _rlx_dtype(val.dtype)
    if tuple(v.shape) != shape:
        raise cx.fail(f"converted to shape {list(v.shape)} but torch recorded {list(shape)}")
    return cx.cast(v, dtype)



from rlx.frontends.torch import (  # noqa: E402  (each module registers its converters on import)
    convert_grid,  # noqa: F401  (grid_sampler 2-D / 3-D)
    convert_index,  # noqa: F401  (index / index_put / gather / slice_scatter / select_scatter / copy)
    convert_pad,  # noqa: F401  (every pad mode, vector norms)
)

# The kind rows' aten names register last: a row names the aten op computing exactly its kind,
# so it wins over a hand converter above (rlx.ops.kinds; CONTRIBUTING.md).
for _name, _kind in _UNARY.items():
    _CONVERTERS[f"{_name}.default"] = _unary(_kind)
for _kind, _row in UNARY_MATH_KINDS.items():
    for _name in _row.torch:
        _CONVERTERS[f"{_name}.default"] = _unary_math(_kind)
