"""``backend="auto"``: the fastest installed backend for the device, by a fixed, documented rule.

The rule (from the side-by-side figures in ``benchmarks/README.md``):

1. ``device`` names a GPU (``"cuda"``, ``"gpu"``) or is None while ``torch.cuda.is_available()``:
   the torch backend on CUDA when torch sees a GPU, else the JAX backend on its GPU when jax sees one.
2. On CPU: onnxruntime when installed and the graph exports to ONNX (the fastest rlx path on the
   kernels and the transformer layer measured, 0.8–1.0× torch eager); else the torch backend when
   torch is installed and every op of the graph has a torch device lowering (no op falls back to its
   NumPy kernel on the host); else the numpy arena executor.

``exe.backend`` tells which was chosen. Only ``params`` and ``device`` are accepted (the chosen
backend's own options need that backend named explicitly).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from rlx.ir.errors import RlxError

_OPTIONS = ("params", "device")


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _all_on_device(mir: Any) -> bool:
    from rlx.backends.torch_backend.lowering import DECOMPOSED, LEAVES, LOWERINGS

    return all(n.op in LOWERINGS or n.op in DECOMPOSED or n.op in LEAVES for n in mir.nodes)


def _gpu_choice(device: Any) -> tuple[str, dict[str, Any]] | None:
    if _installed("torch"):
        import torch

        if torch.cuda.is_available():
            return "torch", {"device": "cuda" if device in (None, "gpu") else device}
    if _installed("jax"):
        import jax

        if any(d.platform == "gpu" for d in jax.devices()):
            return "jax", {"device": "gpu"}
    return None


def choose(obj: Any, device: Any = None) -> tuple[str, dict[str, Any]]:
    """The backend name and its device options that ``backend="auto"`` picks for ``obj``."""
    from rlx.runtime.compile import to_mir

    wants_gpu = isinstance(device, str) and device.split(":")[0] in ("cuda", "gpu")
    if wants_gpu or device is None:
        found = _gpu_choice(device)
        if found is not None:
            return found
        if wants_gpu:
            raise RlxError(f"backend='auto': device {device!r} requested but neither torch nor jax sees a GPU")
    if device not in (None, "cpu"):
        raise RlxError(f"backend='auto': device must be None, 'cpu', 'cuda[:N]' or 'gpu', got {device!r}")
    mir = to_mir(obj)
    if _installed("onnxruntime") and _installed("onnx"):
        from rlx.backends.onnx import export

        try:
            export(mir)
        except RlxError:
            pass
        else:
            return "onnxruntime", {}
    if _installed("torch") and _all_on_device(mir):
        return "torch", {"device": "cpu"}
    return "numpy", {}


def compile_auto(obj: Any, **options: Any) -> Any:
    """``rlx.compile(obj, backend="auto", params=None, device=None)``."""
    from rlx.runtime.compile import compile as compile_for

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RlxError(f"backend='auto' takes only {list(_OPTIONS)}; unknown option(s) {unknown} (name the backend to pass them)")
    name, extra = choose(obj, options.get("device"))
    params = options.get("params")
    return compile_for(obj, backend=name, **extra, **({"params": params} if params is not None else {}))
