"""``rlx.onnx``: ONNX interop (part of the public surface, next to ``rlx.torch``).

``rlx.onnx.import_model(path_or_proto) -> (graph, params)`` and
``rlx.onnx.export(graph, params) -> onnx.ModelProto``. The ``onnx`` package is imported
only when one of these is called.
"""

from rlx.backends.onnx import OnnxError, OnnxUnsupported, UnsupportedOpsError, export, import_model

__all__ = ["OnnxError", "OnnxUnsupported", "UnsupportedOpsError", "export", "import_model"]
