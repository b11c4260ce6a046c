"""ONNX interop: :func:`import_model` (ONNX → MIR), :func:`export` (MIR → ONNX), :func:`import_runnable`
(a model as shipped, value-specialised where its shapes need input values) and the conformance runner.

``onnx`` itself is imported lazily, inside the functions that need it.
"""

from rlx.backends.onnx.common import OnnxError, OnnxUnsupported, UnsupportedOpsError
from rlx.backends.onnx.exporter import export
from rlx.backends.onnx.importer import import_model
from rlx.backends.onnx.runnable import OnnxRunnable, import_runnable

__all__ = ["OnnxError", "OnnxRunnable", "OnnxUnsupported", "UnsupportedOpsError", "export", "import_model", "import_runnable"]
