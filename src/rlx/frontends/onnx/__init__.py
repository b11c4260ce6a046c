"""The ONNX reader: :func:`import_model` (ONNX → MIR), :func:`import_runnable` (a model as shipped,
value-specialised where its shapes need input values) and the conformance runner. Public as :mod:`rlx.onnx`,
with the exporter (:mod:`rlx.backends.onnx`).

``onnx`` itself is imported lazily, inside the functions that need it.
"""

from rlx.frontends.onnx.importer import import_model
from rlx.frontends.onnx.runnable import OnnxRunnable, import_runnable
from rlx.ir.onnx_format import OnnxError, OnnxUnsupported, UnsupportedOpsError

__all__ = ["OnnxError", "OnnxRunnable", "OnnxUnsupported", "UnsupportedOpsError", "import_model", "import_runnable"]
