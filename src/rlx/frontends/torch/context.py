"""The torch reader's shared part: its errors, the converter registry (``_CONVERTERS``, filled by the
``convert_*`` modules), torch dtype / size mapping and the conversion context ``_Ctx``."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Value
from rlx.ir.symbolic import dim_max, dim_min, floordiv, mod, symbol


class TorchImportError(RlxError):
    """A torch module or exported program could not be imported; the message names the node."""


class UnsupportedOpError(TorchImportError):
    """The exported graph uses ops with no converter. ``ops`` maps each op name to its count, ``where`` to
    the module paths (``"model.layers.0.mlp"``) it ran in."""

    def __init__(self, ops: Mapping[str, int], where: Mapping[str, Sequence[str]] | None = None):
        self.ops = dict(ops)
        self.where = {name: sorted(set(paths)) for name, paths in (where or {}).items()}

        def paths(name: str) -> str:
            found = self.where.get(name) or []
            shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
            return f" in {shown}" if found else ""

        listed = "\n".join(f"  - {name} (x{count}){paths(name)}" for name, count in sorted(self.ops.items()))
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
    """Register ``fn`` for torch targets ``names``; one converter per target (no silent "last wins")."""

    def register(fn: Converter) -> Converter:
        for name in names:
            if name in _CONVERTERS:
                taken = _CONVERTERS[name]
                raise RuntimeError(f"two torch converters for {name}: {taken.__module__}.{taken.__qualname__} and "
                                   f"{fn.__module__}.{fn.__qualname__}")
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
    if module == "torch" and name.startswith("<function"):  # torch.sym_ite ...: a stable name, not the address
        return f"torch.{target.__name__}"
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
        torch.complex128: DType.C128,
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
        self.training = False  # the module was in training mode: gradient-only rewrites apply

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
