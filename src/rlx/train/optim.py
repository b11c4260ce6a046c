"""SGD, Adam and AdamW with ``torch.optim``'s exact update formulas, written once.

Each optimizer is a rule ``rule(ns, p, g, state, sc) -> (p, state)`` over arithmetic operators and
an array :class:`~rlx.train.xp.Namespace`, so NumPy (the host trainer), jax (inside the jitted
step) and torch (resident tensors) apply the same formula. ``sc`` holds the per-step scalars the
host computes in float64 as torch does (learning rate, bias corrections), ``state`` the
per-param tensors (``momentum_buffer``; ``exp_avg`` / ``exp_avg_sq``), named as in torch's
``state_dict``. The operation order follows torch's single-tensor CPU kernels (``lerp_``,
``addcmul_``, ``addcdiv_``), so float32 runs agree to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.train.errors import TrainingError
from rlx.train.xp import Namespace, namespace

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "make_optimizer"]


class Optimizer:
    """Hyperparameters, the step count ``t`` and (host trainer) the per-param ``state``.

    ``update(params, grads)`` applies one step to NumPy arrays in place; the backends call
    ``scalars`` / ``rule`` / ``init_state`` on their own arrays instead.
    """

    name = "optimizer"
    lr: float
    t: int
    state: dict[str, dict[str, Any]]
    slots: tuple[str, ...] = ()

    def scalars(self, lr: float, t: int) -> dict[str, float]:
        """The per-step scalars of step ``t`` (1-based) at learning rate ``lr``."""
        raise NotImplementedError

    def rule(self, ns: Namespace, p: Any, g: Any, state: Mapping[str, Any], sc: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError

    def init_state(self, p: Any, zeros: Callable[[Any], Any]) -> dict[str, Any]:
        return {k: zeros(p) for k in self.slots}

    def update(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray], lr: float | None = None) -> None:
        """One step on NumPy arrays, written into ``params`` in place."""
        ns = namespace("numpy")
        self.t += 1
        sc = self.scalars(self.lr if lr is None else lr, self.t)
        for name, g in grads.items():
            p = params[name]
            st = self.state.get(name)
            if st is None:
                st = self.state[name] = self.init_state(p, np.zeros_like)
            new_p, new_st = self.rule(ns, p, np.asarray(g).astype(p.dtype, copy=False), st, sc)
            np.copyto(p, new_p, casting="same_kind")
            self.state[name] = {k: np.asarray(v, dtype=p.dtype) for k, v in new_st.items()}

    def hyperparameters(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("t", "state")}  # type: ignore[attr-defined]

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.t, "state": {n: dict(s) for n, s in self.state.items()}}


@dataclass
class SGD(Optimizer):
    """``torch.optim.SGD``: ``g += wd * p``; with momentum ``buf = g`` on the first step, then
    ``buf = momentum * buf + (1 - dampening) * g``; ``g = g + momentum * buf`` (nesterov) or
    ``g = buf``; ``p += -lr * g``."""

    lr: float = 1e-2
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    t: int = 0
    state: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    name = "sgd"

    def __post_init__(self) -> None:
        if self.lr < 0 or self.momentum < 0 or self.weight_decay < 0:
            raise TrainingError(f"SGD: lr, momentum and weight_decay must be >= 0, got {self.lr}, {self.momentum}, {self.weight_decay}")
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise TrainingError("SGD: nesterov needs momentum > 0 and dampening 0")
        self.slots = ("momentum_buffer",) if self.momentum else ()

    @property
    def buffers(self) -> dict[str, Any]:
        return {n: s["momentum_buffer"] for n, s in self.state.items() if "momentum_buffer" in s}

    def scalars(self, lr: float, t: int) -> dict[str, float]:
        return {"neg_lr": -lr, "first": 1.0 if t == 1 else 0.0}

    def rule(self, ns, p, g, state, sc):
        if self.weight_decay:
            g = g + self.weight_decay * p
        new_state = {}
        if self.momentum:
            buf = ns.where(sc["first"] > 0, g, state["momentum_buffer"] * self.momentum + (1.0 - self.dampening) * g)
            new_state["momentum_buffer"] = buf
            g = g + self.momentum * buf if self.nesterov else buf
        return p + sc["neg_lr"] * g, new_state


@dataclass
class Adam(Optimizer):
    """``torch.optim.Adam`` (``decoupled=False``: ``g += wd * p``) / ``AdamW`` (``decoupled=True``:
    ``p *= 1 - lr * wd`` first); ``m = lerp(m, g, 1 - b1)``, ``v = b2 v + (1 - b2) g g``,
    ``p += -(lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    t: int = 0
    state: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    name = "adam"
    slots = ("exp_avg", "exp_avg_sq")

    def __post_init__(self) -> None:
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        b1, b2 = self.betas
        if self.lr < 0 or self.eps < 0 or self.weight_decay < 0 or not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise TrainingError(f"{type(self).__name__}: bad hyperparameters lr={self.lr} betas={self.betas} eps={self.eps} "
                                f"weight_decay={self.weight_decay}")
        if self.decoupled:
            self.name = "adamw"

    @property
    def m(self) -> dict[str, Any]:
        return {n: s["exp_avg"] for n, s in self.state.items()}

    @property
    def v(self) -> dict[str, Any]:
        return {n: s["exp_avg_sq"] for n, s in self.state.items()}

    def scalars(self, lr: float, t: int) -> dict[str, float]:
        b1, b2 = self.betas
        return {"neg_step_size": -(lr / (1.0 - b1 ** t)), "bc2_sqrt": math.sqrt(1.0 - b2 ** t),
                "decay": 1.0 - lr * self.weight_decay}

    def rule(self, ns, p, g, state, sc):
        b1, b2 = self.betas
        if self.weight_decay:
            if self.decoupled:
                p = p * sc["decay"]
            else:
                g = g + self.weight_decay * p
        m, v = state["exp_avg"], state["exp_avg_sq"]
        w = 1.0 - b1
        m = m + w * (g - m) if w < 0.5 else g - (g - m) * (1.0 - w)  # torch's lerp
        v = v * b2 + ((1.0 - b2) * g) * g
        denom = ns.sqrt(v) / sc["bc2_sqrt"] + self.eps
        return p + (sc["neg_step_size"] * m) / denom, {"exp_avg": m, "exp_avg_sq": v}


@dataclass
class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (default 0.01, as torch's)."""

    weight_decay: float = 1e-2
    decoupled: bool = True


def make_optimizer(optimizer: str | Optimizer = "sgd", lr: float | None = None, **options: Any) -> Optimizer:
    """An optimizer from its name (``"sgd"``, ``"adam"``, ``"adamw"``) and options, or one given as is."""
    if isinstance(optimizer, Optimizer):
        if lr is not None or options:
            raise TrainingError("pass hyperparameters to the Optimizer instance, not to compile_training")
        return optimizer
    kind = str(optimizer).lower()
    kw = dict(options)
    if lr is not None:
        kw["lr"] = float(lr)
    try:
        if kind == "sgd":
            return SGD(**kw)
        if kind == "adam":
            return Adam(decoupled=bool(kw.pop("decoupled", False)), **kw)
        if kind == "adamw":
            kw.pop("decoupled", None)
            return AdamW(**kw)
    except TypeError as exc:
        raise TrainingError(f"optimizer {kind!r}: {exc}") from None
    raise TrainingError(f"unknown optimizer {optimizer!r}; choose 'sgd', 'adam', 'adamw' or pass an rlx.train.Optimizer")
