"""The few array functions the update rules need, for NumPy, jax.numpy and torch.

The optimizer formulas (:mod:`rlx.train.optim`) and gradient clipping / unscaling
(:mod:`rlx.train.grads`) are written once over arithmetic operators plus this namespace, so the
host trainer and the jax / torch training engines (which build a Namespace over their own
module: the training package imports no framework) run the same formulas on their own arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Namespace", "namespace"]


class Namespace:
    """``sqrt``, ``sum_sq`` (a 0-d sum of squares), ``clamp_max``, ``all_finite``, ``astype``, ``where``."""

    def __init__(self, kind: str, xp: Any):
        self.kind = kind  # "numpy", "jax" or "torch": the engines pass their own module (jax.numpy, torch)
        self.xp = xp

    def sqrt(self, x: Any) -> Any:
        return self.xp.sqrt(x)

    def sum_sq(self, x: Any) -> Any:
        return (x * x).sum()

    def clamp_max(self, x: Any, hi: float) -> Any:
        if self.kind == "torch":
            return self.xp.clamp(x, max=hi)
        return self.xp.minimum(x, hi)

    def all_finite(self, xs: list[Any]) -> Any:
        if self.kind == "torch":
            return self.xp.stack([self.xp.isfinite(x).all() for x in xs]).all()
        return self.xp.all(self.xp.stack([self.xp.all(self.xp.isfinite(x)) for x in xs]))

    def astype(self, x: Any, like: Any) -> Any:
        return x.to(like.dtype) if self.kind == "torch" else x.astype(like.dtype)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        if isinstance(cond, bool):  # decided on the host: no select
            return a if cond else b
        return self.xp.where(cond, a, b)


def namespace(kind: str = "numpy") -> Namespace:
    """The NumPy namespace (the jax and torch engines build theirs from their own modules)."""
    if kind != "numpy":
        raise ValueError(f"namespace({kind!r}): the {kind} engine builds its own Namespace")
    return _NUMPY


_NUMPY = Namespace("numpy", np)
