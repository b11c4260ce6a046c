"""Backends and interop: ``jax`` (XLA jit on CPU / GPU, sharding), ``torch``, ``onnxruntime``,
``openvino``, ``auto`` (executables), ``onnx`` (import / export), ``torch_import``. Each imports its
framework lazily; ``import rlx`` imports none of them.

Executable backends register here by name with :func:`rlx.runtime.compile.register_backend`
(the runtime sits below the backends and never imports them); ``import rlx`` imports this
package, so ``rlx.compile(g, backend="jax")`` finds them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rlx.runtime.compile import register_backend


def _lazy(module: str, factory: str) -> Callable[..., Any]:
    """A factory that imports its backend on first use (``import rlx`` imports no framework)."""
    def make(obj: Any, **options: Any) -> Any:
        return getattr(importlib.import_module(module), factory)(obj, **options)

    make.module = module  # type: ignore[attr-defined]  (rlx.runtime.dispatch reads the backend's coverage() there)
    return make


register_backend("jax", _lazy("rlx.backends.jax", "compile_jax"))
register_backend("torch", _lazy("rlx.backends.torch_backend", "compile_torch"))
register_backend("onnxruntime", _lazy("rlx.backends.ort_backend", "compile_ort"))
register_backend("openvino", _lazy("rlx.backends.openvino_backend", "compile_openvino"))
register_backend("auto", _lazy("rlx.backends.auto", "compile_auto"))  # picks one of the above (rule in rlx.backends.auto)
