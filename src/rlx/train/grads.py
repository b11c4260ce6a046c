"""Gradient post-processing shared by every backend: unscaling (loss scaling), the finite
check, and clipping by global norm with ``torch.nn.utils.clip_grad_norm_``'s formula."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlx.train.errors import TrainingError
from rlx.train.xp import Namespace

__all__ = ["LossScaler", "clip_by_global_norm", "global_norm", "unscale"]


def global_norm(ns: Namespace, grads: list[Any]) -> Any:
    """The 2-norm of the per-tensor 2-norms (torch's ``_get_total_norm``)."""
    norms = [ns.sqrt(ns.sum_sq(g)) for g in grads]
    total = norms[0] * norms[0]
    for n in norms[1:]:
        total = total + n * n
    return ns.sqrt(total)


def clip_by_global_norm(ns: Namespace, grads: Mapping[str, Any], max_norm: float) -> tuple[dict[str, Any], Any]:
    """``g * min(max_norm / (total + 1e-6), 1)`` for every gradient; returns (clipped, total norm)."""
    names = list(grads)
    total = global_norm(ns, [grads[n] for n in names])
    coef = ns.clamp_max(max_norm / (total + 1e-6), 1.0)
    return {n: grads[n] * coef for n in names}, total


def unscale(grads: Mapping[str, Any], inv_scale: Any) -> dict[str, Any]:
    return {n: g * inv_scale for n, g in grads.items()}


@dataclass
class LossScaler:
    """Static (``dynamic=False``) or dynamic loss scaling, ``torch.amp.GradScaler``'s schedule:
    the backward is seeded with ``scale``; a step whose unscaled gradients are not all finite is
    skipped and the scale multiplied by ``backoff``; after ``interval`` finite steps in a row it
    is multiplied by ``growth``."""

    scale: float = 2.0 ** 16
    dynamic: bool = True
    growth: float = 2.0
    backoff: float = 0.5
    interval: int = 2000
    good_steps: int = 0
    skipped: int = 0

    def __post_init__(self) -> None:
        if not (self.scale > 0 and self.growth >= 1 and 0 < self.backoff < 1 and self.interval >= 1):
            raise TrainingError(f"loss scaling: bad settings scale={self.scale} growth={self.growth} backoff={self.backoff} "
                                f"interval={self.interval}")

    @classmethod
    def from_option(cls, option: Any) -> LossScaler | None:
        """``None``/``False`` (off), ``"dynamic"``/``True``, a number (static scale) or a LossScaler."""
        if option is None or option is False:
            return None
        if isinstance(option, LossScaler):
            return option
        if option is True or option == "dynamic":
            return cls()
        if isinstance(option, (int, float)) and not isinstance(option, bool):
            return cls(scale=float(option), dynamic=False)
        raise TrainingError(f"loss_scale must be None, 'dynamic', a positive number or a LossScaler, got {option!r}")

    def update(self, finite: bool) -> None:
        if not finite:
            self.skipped += 1
        if not self.dynamic:
            return
        if finite:
            self.good_steps += 1
            if self.good_steps >= self.interval:
                self.scale *= self.growth
                self.good_steps = 0
        else:
            self.scale *= self.backoff
            self.good_steps = 0

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "good_steps": self.good_steps, "skipped": self.skipped}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.good_steps = int(state["good_steps"])
        self.skipped = int(state["skipped"])


def apply_update(ns: Namespace, opt: Any, params: Mapping[str, Any], master: Mapping[str, Any], states: Mapping[str, Any],
                 grads: Mapping[str, Any], sc: Mapping[str, Any], *, inv_scale: Any = None, max_norm: float | None = None,
                 finite: Any = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One optimizer step over any backend's arrays: unscale, clip, the optimizer rule, on the f32
    ``master`` copy of a low-precision param when there is one (then cast down). ``finite`` (a traced
    flag, jax) keeps the old values where the gradients were not finite. Returns the new
    ``(params, master, states)`` of the updated names."""
    if inv_scale is not None:
        grads = unscale(grads, inv_scale)
    if max_norm is not None:
        grads, _ = clip_by_global_norm(ns, grads, max_norm)
    new_p: dict[str, Any] = {}
    new_m: dict[str, Any] = {}
    new_s: dict[str, Any] = {}
    for name, g in grads.items():
        base = master.get(name, params[name])
        p, st = opt.rule(ns, base, ns.astype(g, base), states[name], sc)
        if finite is not None:
            p = ns.where(finite, p, base)
            st = {k: ns.where(finite, v, states[name][k]) for k, v in st.items()}
        if name in master:
            new_m[name] = p
            p = ns.astype(p, params[name])
        new_p[name], new_s[name] = p, st
    return new_p, new_m, new_s
