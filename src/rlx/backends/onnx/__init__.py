"""The ONNX exporter: :func:`export` (MIR → ONNX). The reader (``import_model``, ``import_runnable``, the
conformance runner) lives in :mod:`rlx.frontends.onnx`; both are public as :mod:`rlx.onnx`.

``onnx`` itself is imported lazily, inside the functions that need it.
"""

from rlx.backends.onnx import (  # each registers its exporters on import, after the table they extend
    export_channel_scale,  # noqa: F401  (a depthwise 1x1 conv on a matmul's result as Mul)
    export_control_flow,  # noqa: F401  (if_ / while_ / scan)
    export_index,  # noqa: F401  (advanced_index / advanced_index_put)
    export_kv_attention,  # noqa: F401  (cached_attention: GroupQueryAttention on onnxruntime)
    export_linalg,  # noqa: F401  (det)
    export_moe,  # noqa: F401  (grouped_matmul)
    export_pad,  # noqa: F401  (constant pads as one Pad)
    export_pool,  # noqa: F401  (max / min pooling over a -inf / +inf concat pad as MaxPool pads)
    export_quant,  # noqa: F401  (dequant_matmul: GGUF weights, MatMulNBits)
    export_resample,  # noqa: F401  (constant-index gather as Slice / Concat, interpolation taps as Resize)
)
from rlx.backends.onnx.exporter import export
from rlx.ir.onnx_format import OnnxError, OnnxUnsupported, UnsupportedOpsError

__all__ = ["OnnxError", "OnnxUnsupported", "UnsupportedOpsError", "export"]
