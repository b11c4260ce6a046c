"""Backends and interop: ``jax`` (XLA jit on CPU / GPU, sharding), ``onnx`` (import / export),
``torch`` (import). Each imports its framework lazily; ``import rlx`` imports none of them.

Executable backends register here by name with :func:`rlx.runtime.compile.register_backend`
(the runtime sits below the backends and never imports them); ``import rlx`` imports this
package, so ``rlx.compile(g, backend="jax")`` finds them.
"""

from typing import Any

from rlx.runtime.compile import register_backend


def _jax_backend(obj: Any, **options: Any) -> Any:
    from rlx.backends.jax import compile_jax  # lazy: `import rlx` must not import jax

    return compile_jax(obj, **options)


register_backend("jax", _jax_backend)
