"""The ONNX exporter: :func:`export` (MIR → ONNX). The reader (``import_model``, ``import_runnable``, the
conformance runner) lives in :mod:`rlx.frontends.onnx`; both are public as :mod:`rlx.onnx`.

``onnx`` itself is imported lazily, inside the functions that need it.
"""

from rlx.backends.onnx.exporter import export
from rlx.frontends.onnx.common import OnnxError, OnnxUnsupported, UnsupportedOpsError

__all__ = ["OnnxError", "OnnxUnsupported", "UnsupportedOpsError", "export"]
