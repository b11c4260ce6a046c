"""Child-process entry points for the checkpoint tests (loaded by tests/security/isolate.py; rlx
is imported here, once, before the runner forks a child per case)."""

from __future__ import annotations

import rlx  # noqa: F401
from rlx.train import Trainer


def load_checkpoint(path: str) -> str:
    trainer = Trainer.load(path)
    return f"loaded {trainer.steps} steps"
