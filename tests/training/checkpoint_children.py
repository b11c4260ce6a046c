"""Child-process entry points for the checkpoint tests (loaded by tests/security/isolate.py)."""

from __future__ import annotations


def load_checkpoint(path: str) -> str:
    from rlx.train import Trainer

    trainer = Trainer.load(path)
    return f"loaded {trainer.steps} steps"
