"""What an isolated child runs (see isolate.py): one loader call on one file; light imports only."""

from __future__ import annotations

import rlx
import rlx.torch  # imported once by the runner, before it forks a child per case
from rlx.ir.serialize import LoadLimits


def rlx_load_program(path: str, limits: dict | None = None) -> str:
    rlx.torch.load_program(path, LoadLimits(**limits) if limits else None)
    return "loaded"


def torch_export_load(path: str) -> str:
    """Plain ``torch.export.load``: shows a hostile archive's payload is live."""
    import torch

    torch.export.load(path)
    return "loaded"


def rlx_load(path: str) -> str:
    rlx.load(path)
    return "loaded"
