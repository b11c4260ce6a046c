"""Learning-rate schedules: a factor of the base lr per step, as ``torch.optim.lr_scheduler.LambdaLR``
applies it (step ``k`` = the number of optimizer steps taken before it, starting at 0)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx.train.errors import TrainingError

__all__ = ["WarmupCosine", "as_schedule"]


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warmup from ``start_factor`` to 1 over ``warmup`` steps, then a cosine from 1 down to
    ``min_factor`` at step ``total`` (held there after): torch's ``LinearLR`` then
    ``CosineAnnealingLR`` in closed form."""

    warmup: int
    total: int
    start_factor: float = 0.0
    min_factor: float = 0.0

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.total < self.warmup or not (0 <= self.start_factor <= 1) or not (0 <= self.min_factor <= 1):
            raise TrainingError(f"WarmupCosine: need 0 <= warmup <= total and factors in [0, 1], got {self}")

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.start_factor + (1.0 - self.start_factor) * step / self.warmup
        span = self.total - self.warmup
        progress = min(step - self.warmup, span) / span if span else 1.0
        return self.min_factor + (1.0 - self.min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def as_schedule(schedule: Any) -> Callable[[int], float] | None:
    """``None``, a callable ``step -> factor`` or a :class:`WarmupCosine` (its config as a dict works too)."""
    if schedule is None:
        return None
    if isinstance(schedule, dict):
        try:
            return WarmupCosine(**schedule)
        except TypeError as exc:
            raise TrainingError(f"schedule: {exc}") from None
    if not callable(schedule):
        raise TrainingError(f"schedule must be a callable step -> lr factor or a WarmupCosine, got {type(schedule).__name__}")
    return schedule
