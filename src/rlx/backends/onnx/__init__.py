"""ONNX interop: :func:`import_model` (ONNX → MIR), :func:`export` (MIR → ONNX) and the conformance runner.

``onnx`` itself is imported lazily, inside the functions that need it.
"""

from rlx.backends.onnx.common import OnnxError, OnnxUnsupported, UnsupportedOpsError
from rlx.backends.onnx.exporter import export
from rlx.backends.onnx.importer import import_model

__all__ = ["OnnxError", "OnnxUnsupported", "UnsupportedOpsError", "export", "import_model"]
