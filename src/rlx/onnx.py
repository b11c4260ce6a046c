"""``rlx.onnx``: ONNX interop (part of the public surface, next to ``rlx.torch``).

``rlx.onnx.import_model(path_or_proto) -> (graph, params)`` and
``rlx.onnx.export(graph, params) -> onnx.ModelProto`` and ``rlx.onnx.import_runnable(path_or_proto).run(feeds)``
(a model as shipped: inputs that shape the graph are value-specialised at run time). The ``onnx`` package is imported
only when one of these is called.
"""

from rlx.backends.onnx import export
from rlx.frontends.onnx import (
    OnnxError,
    OnnxRunnable,
    OnnxUnsupported,
    UnsupportedOpsError,
    import_model,
    import_runnable,
)

__all__ = ["OnnxError", "OnnxRunnable", "OnnxUnsupported", "UnsupportedOpsError", "export", "import_model", "import_runnable"]
