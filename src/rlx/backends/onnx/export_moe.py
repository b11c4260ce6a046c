"""grouped_matmul (per-token expert matmul, the MoE layers of transformers' models) to ONNX.

``out[*b, i] = x[*b, i] @ w[*b, ids[*b, i]]`` is GatherND of the expert weights by id (``batch_dims``
= the op's lead dims) and one batched MatMul of each row against its gathered ``[K, N]`` matrix. It
materialises ``[*B, M, K, N]``, the price of staying in standard ONNX. Float ids are truncated toward
zero first, as the op's kernel does.
"""

from __future__ import annotations

from rlx.backends.onnx.exporter import REFUSED, _in_dtype, exporter
from rlx.backends.onnx.namespace import OnnxNamespace
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import onnx_dtype


@exporter("grouped_matmul")
def _grouped_matmul(ex, node, ins):
    x, w, ids = ins
    src = _in_dtype(ex, node, 2)
    if src.is_float:  # truncated toward zero explicitly (ONNX leaves float -> int rounding to the runtime)
        ns = OnnxNamespace(ex, src)
        ids = ex.node("Cast", [ns.trunc(ns.wrap(ids)).name], to=onnx_dtype(DType.I64))
    else:
        ids = ex.cast(ids, src, DType.I64)
    rows = ex.node("GatherND", [w, ex.node("Unsqueeze", [ids, ex.ints([-1])])], batch_dims=node.attrs["batch_dims"])
    out = ex.node("MatMul", [ex.node("Unsqueeze", [x, ex.ints([-2])]), rows])  # [*B, M, 1, N]
    return ex.node("Squeeze", [out, ex.ints([-2])])


REFUSED.pop("grouped_matmul", None)
