"""``rlx.torch``: import PyTorch modules into rlx graphs (through ``torch.export``).

``import rlx.torch`` does not import torch; :func:`import_module` does, when called.

>>> g, params = rlx.torch.import_module(module, (example_x,))          # doctest: +SKIP
>>> rlx.run(g, inputs={"x": example_x.numpy()}, params=params)         # doctest: +SKIP

See :mod:`rlx.frontends.torch.importer` for the conversion rules (names, symbols, errors).
"""

from __future__ import annotations

from typing import Any

from rlx.frontends.torch.importer import TorchImportError, UnsupportedOpError, supported_ops

__all__ = ["TorchImportError", "UnsupportedOpError", "import_module", "import_program", "load_program", "supported_ops"]


def import_module(module: Any, example_args: Any = (), dynamic_shapes: Any = None, **options: Any) -> tuple[Any, dict[str, Any]]:
    """``(graph, params)`` for ``module`` exported with ``example_args`` (and ``kwargs=``, ``strict=``,
    ``name=`` options); ``dynamic_shapes`` goes to ``torch.export.export`` and its ``Dim`` names
    become rlx symbol names. ``params`` maps parameter / buffer FQNs to NumPy arrays."""
    from rlx.frontends.torch import importer as torch_import

    return torch_import.import_module(module, example_args, dynamic_shapes, **options)


def import_program(exported_program: Any, **options: Any) -> tuple[Any, dict[str, Any]]:
    """``(graph, params)`` for an existing ``torch.export.ExportedProgram``."""
    from rlx.frontends.torch import importer as torch_import

    return torch_import.import_program(exported_program, **options)


def load_program(path: Any, limits: Any = None) -> Any:
    """The ``ExportedProgram`` saved in the ``.pt2`` archive ``path``; nothing in the file runs:
    the archive is checked first (:mod:`rlx.frontends.torch.pt2_archive`) and refused with a
    ``FormatError`` naming the member when it holds anything beyond tensors and the program."""
    from rlx.frontends.torch import pt2_archive

    return pt2_archive.load_program(path, limits)
