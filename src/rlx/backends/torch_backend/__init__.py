"""Torch backend: ``rlx.compile(obj, backend="torch", device="cpu" | "cuda", mode="eager" | "inductor" | ...)``
lowers an MIR graph to a ``torch.fx.GraphModule`` of torch calls (:mod:`.executable`) through one
lowering table over the registry (:mod:`.lowering`, ``coverage()``).

Named ``torch_backend`` because ``rlx.torch`` is the torch.export frontend. Importing this package
imports torch; ``import rlx`` does not.
"""

from __future__ import annotations

from typing import Any

from rlx.backends.torch_backend.executable import MEMORY_FORMATS, MODES, TorchExecutable
from rlx.backends.torch_backend.lowering import DECOMPOSED, LEAVES, LOWERINGS, REFUSED, coverage
from rlx.ir.errors import RlxError

_OPTIONS = ("params", "device", "mode", "fold_weights", "memory_format")


def compile_torch(obj: Any, **options: Any) -> TorchExecutable:
    """``rlx.compile(obj, backend="torch", params=None, device=None, mode="eager", fold_weights=True,
    memory_format="channels_last")``.

    ``obj`` is an MIR Graph, a HIR module or an LirModule (its graph). ``mode``: "eager" runs the
    fx module op by op; "inductor" (``torch.compile``), "reduce-overhead" and "max-autotune"
    compile it (the first run of each input binding pays the compilation). ``fold_weights`` and
    ``memory_format``: see :class:`TorchExecutable`.
    """
    from rlx.runtime.compile import to_mir

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"torch backend: unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    params = options.pop("params", None)
    return TorchExecutable(to_mir(obj), params, **options)


__all__ = ["DECOMPOSED", "LEAVES", "LOWERINGS", "MEMORY_FORMATS", "MODES", "REFUSED", "TorchExecutable", "compile_torch", "coverage"]
