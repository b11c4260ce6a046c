"""Scalar powers as the frameworks compute them: ``pow``'s semantics for exponents 2 and 3, which
torch and onnxruntime multiply out. The ONNX and torch.export readers write them, the ONNX exporter
reads them back; it lives in ``ops`` (pow's semantics) so that readers and exporter, which share a
layer, both import it from below."""

from __future__ import annotations

from rlx.ir.dtype import DType
from rlx.ir.graph import Graph, Value

#: Exponents that torch's ``pow(Tensor, Scalar)`` and onnxruntime's ``Pow`` with a one-element exponent
#: compute by multiplying, ``(x * x) * x``, in f32 and f64: bit for bit, where a libm ``pow`` (NumPy's
#: ``power``) is off by an ulp on about 30% of the cubes and some 50x slower.
MULTIPLIED_EXPONENTS = (2.0, 3.0)
MULTIPLIED_DTYPES = (DType.F32, DType.F64)


def multiplied_power(g: Graph, x: Value, exponent: float) -> Value | None:
    """``x ** exponent`` as the products the frameworks compute (importers of ``pow(x, 3)``, GPT-2's
    gelu, RMSNorm's square), or None where they call ``pow`` (other exponents, other dtypes)."""
    if x.dtype not in MULTIPLIED_DTYPES or exponent not in MULTIPLIED_EXPONENTS:
        return None
    square = g.binary(x, x, op="mul")
    return square if exponent == 2.0 else g.binary(square, x, op="mul")
