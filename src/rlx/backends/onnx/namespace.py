"""The array namespace over an ONNX graph being exported: each call appends ONNX nodes.

A kind with no single ONNX op (gelu, gelu_approx, silu, rsqrt, round, trunc) is exported by
evaluating its row's formula (:mod:`rlx.ops.kinds`) here, so the exporter holds no copy of it.
"""

from __future__ import annotations

from typing import Any

from rlx.ir.dtype import DType

#: array-API function -> the ONNX operator computing it elementwise
_UNARY = {
    "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh", "sin": "Sin", "cos": "Cos", "tan": "Tan",
    "atan": "Atan", "asin": "Asin", "acos": "Acos", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh",
    "acosh": "Acosh", "atanh": "Atanh", "abs": "Abs", "sign": "Sign", "floor": "Floor", "ceil": "Ceil",
    "erf": "Erf", "sigmoid": "Sigmoid", "round": "Round",
}


class OnnxTensor:
    """An ONNX value name with arithmetic operators that append nodes (Python numbers become
    scalars of the namespace's dtype)."""

    def __init__(self, ns: OnnxNamespace, name: str):
        self.ns, self.name = ns, name

    def _binary(self, op: str, other: Any, swap: bool = False) -> OnnxTensor:
        a, b = self.name, self.ns.operand(other)
        return self.ns.emit(op, b, a) if swap else self.ns.emit(op, a, b)

    def __add__(self, o: Any) -> OnnxTensor:
        return self._binary("Add", o)

    def __radd__(self, o: Any) -> OnnxTensor:
        return self._binary("Add", o, swap=True)

    def __sub__(self, o: Any) -> OnnxTensor:
        return self._binary("Sub", o)

    def __rsub__(self, o: Any) -> OnnxTensor:
        return self._binary("Sub", o, swap=True)

    def __mul__(self, o: Any) -> OnnxTensor:
        return self._binary("Mul", o)

    def __rmul__(self, o: Any) -> OnnxTensor:
        return self._binary("Mul", o, swap=True)

    def __truediv__(self, o: Any) -> OnnxTensor:
        return self._binary("Div", o)

    def __rtruediv__(self, o: Any) -> OnnxTensor:
        return self._binary("Div", o, swap=True)

    def __neg__(self) -> OnnxTensor:
        return self.ns.emit("Neg", self.name)


class OnnxNamespace:
    """``xp`` for :meth:`rlx.ops.kinds.Kind.forward` on an :class:`~rlx.backends.onnx.exporter.Exporter`."""

    def __init__(self, ex: Any, dtype: DType):
        self.ex, self.dtype = ex, dtype

    def wrap(self, name: str) -> OnnxTensor:
        return OnnxTensor(self, name)

    def operand(self, v: Any) -> str:
        return v.name if isinstance(v, OnnxTensor) else self.ex.scalar(v, self.dtype)

    def emit(self, op: str, *inputs: str) -> OnnxTensor:
        return self.wrap(self.ex.node(op, list(inputs)))

    def __getattr__(self, name: str) -> Any:
        op = _UNARY.get(name)
        if op is None:
            raise AttributeError(f"the ONNX namespace has no {name!r}")
        return lambda x: self.emit(op, self.operand(x))

    def trunc(self, x: Any) -> OnnxTensor:
        return self.sign(x) * self.floor(self.abs(x))

    def maximum(self, a: Any, b: Any) -> OnnxTensor:
        return self.emit("Max", self.operand(a), self.operand(b))

    def greater(self, a: Any, b: Any) -> OnnxTensor:
        return self.emit("Greater", self.operand(a), self.operand(b))

    def less(self, a: Any, b: Any) -> OnnxTensor:
        return self.emit("Less", self.operand(a), self.operand(b))

    def where(self, c: Any, a: Any, b: Any) -> OnnxTensor:
        return self.emit("Where", self.operand(c), self.operand(a), self.operand(b))


class MaskNamespace(OnnxNamespace):
    """The attention mask row (:func:`rlx.ops.rows.position_keep`) on int64 ONNX positions: what the
    export builds for symbolic sequence lengths (static ones embed the row's NumPy constant)."""

    def __init__(self, ex: Any):
        super().__init__(ex, DType.I64)

    def positions_from_end(self, n: Any, like: Any, axis: int) -> OnnxTensor:
        from rlx.backends.onnx.export_shapes import scalar_dim

        last = self.ex.node("Sub", [scalar_dim(self.ex, n), self.operand(1)])
        return self.emit("Range", last, self.operand(-1), self.operand(-1))

    def reshape(self, x: OnnxTensor, shape: Any) -> OnnxTensor:
        from rlx.backends.onnx.export_shapes import reshape_target

        return self.emit("Reshape", x.name, reshape_target(self.ex, list(shape), list(shape)))

    def greater_equal(self, a: Any, b: Any) -> OnnxTensor:
        return self.emit("GreaterOrEqual", self.operand(a), self.operand(b))

    def logical_and(self, a: OnnxTensor, b: OnnxTensor) -> OnnxTensor:
        return self.emit("And", a.name, b.name)
