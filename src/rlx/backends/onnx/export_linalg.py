"""ONNX export of the factorization family (rlx.ops.linalg_decomp): only ``det`` has an ONNX operator
(Det, opset 11, batched over leading dims); the others are in the exporter's REFUSED table."""

from __future__ import annotations

from rlx.backends.onnx.exporter import exporter


@exporter("det")
def _det(ex, node, ins):
    return ex.node("Det", [ins[0]])
