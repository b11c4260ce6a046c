"""The :class:`Trainer`: one compiled training step and what happens around it (schedule,
accumulation, loss scaling, checkpoints), over an engine that owns the params:
:class:`rlx.train.host.HostEngine` (NumPy arenas), the jax engine (one jitted, donated step,
optionally over a device mesh) or the torch engine (forward + backward as one fx module,
params and optimizer state resident)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.ir.errors import FeedError
from rlx.ir.graph import Graph
from rlx.lir.plan import LirModule
from rlx.train.errors import TrainingError
from rlx.train.grads import LossScaler
from rlx.train.optim import Optimizer

__all__ = ["Trainer"]


class Trainer:
    """A compiled training step. See :func:`rlx.compile_training`.

    ``forward`` / ``backward``: the LirModules; ``params``: name -> NumPy array (the numpy
    engine's own arrays, updated in place; on jax / torch a host copy made on each read);
    ``wrt``: the differentiated names; ``trainable``: the params among them; ``buffers``: the
    params a buffer update writes (BatchNorm running statistics); ``optimizer``; ``steps``:
    optimizer steps taken; ``history``: the loss of every ``step`` call (each micro-batch).
    """

    def __init__(self, graph: Graph, forward: LirModule, backward: LirModule, wrt: list[str], trainable: list[str],
                 optimizer: Optimizer, engine: Any, *, seed_name: str, schedule: Callable[[int], float] | None = None,
                 max_norm: float | None = None, accumulate: int = 1, scaler: LossScaler | None = None,
                 buffers: list[str] | None = None, options: Mapping[str, Any] | None = None):
        self.graph, self.forward, self.backward = graph, forward, backward
        self.wrt, self.trainable, self.buffers = list(wrt), list(trainable), list(buffers or [])
        self.optimizer, self.engine, self.seed_name = optimizer, engine, seed_name
        self.schedule, self.max_norm, self.accumulate, self.scaler = schedule, max_norm, accumulate, scaler
        self.options = dict(options or {})
        self.base_lr = optimizer.lr
        self.steps = 0
        self.history: list[float] = []
        loss_node = backward.graph.nodes[backward.graph.output_ids[0]]
        self._seed_dtype, self._seed_shape = loss_node.dtype.numpy, tuple(loss_node.shape)
        self._acc: dict[str, Any] | None = None
        self._micro = 0

    # ------------------------------------------------------------------ compat
    @property
    def backend(self) -> str:
        return self.options.get("backend", self.engine.kind)

    @property
    def zero_copy(self) -> bool:
        return bool(getattr(self.engine, "zero_copy", False))

    @property
    def forward_executor(self) -> Any:
        return getattr(self.engine, "forward_executor", None)

    @property
    def backward_executor(self) -> Any:
        return getattr(self.engine, "backward_executor", None)

    @property
    def params(self) -> dict[str, np.ndarray]:
        return self.engine.host_params()

    # ------------------------------------------------------------------ running
    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0-based), as ``LambdaLR`` gives it."""
        return self.base_lr * float(self.schedule(step)) if self.schedule is not None else self.base_lr

    def _seed(self) -> np.ndarray:
        scale = self.scaler.scale if self.scaler is not None else 1.0
        with np.errstate(over="ignore"):  # a scale past a float16 loss's range: inf, the step is skipped
            return np.full(self._seed_shape, scale).astype(self._seed_dtype)

    def _check_feed(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        inputs = dict(inputs)
        if self.seed_name in inputs:
            raise FeedError(f"input {self.seed_name!r} is the backward seed; the trainer feeds it")
        return inputs

    def gradients(self, inputs: Mapping[str, Any]) -> tuple[float, dict[str, np.ndarray]]:
        """Run the backward with seed 1.0: ``(loss, {wrt name: gradient})``; no optimizer step
        (buffer updates, e.g. BatchNorm running statistics, do apply, as in torch's forward)."""
        inputs = self._check_feed(inputs)
        loss, grads = self.engine.grads(inputs, np.ones(self._seed_shape, self._seed_dtype))
        return loss, self.engine.to_host(grads)

    def step(self, inputs: Mapping[str, Any]) -> float:
        """One training step (or micro-batch with ``accumulate=k``): loss and gradients at the
        current params, then the optimizer update. Returns the loss before the update."""
        inputs = self._check_feed(inputs)
        opt, scaler = self.optimizer, self.scaler
        lr = self.lr_at(self.steps)
        opt.lr = lr
        sc = opt.scalars(lr, opt.t + 1)
        inv = 1.0 / scaler.scale if scaler is not None else None
        check = scaler is not None
        if self.accumulate == 1:
            loss, finite = self.engine.step(opt, inputs, self._seed(), sc, inv, self.max_norm, check)
        else:
            with self.engine.scope():  # the engine's dtype settings (jax: x64) for the sums below
                loss, finite = self._micro_step(inputs, sc, inv, check)
            if finite is None:
                return loss
        finite = bool(finite)
        if finite:
            opt.t += 1
        if scaler is not None:
            scaler.update(finite)
        self.steps += 1
        self.history.append(loss)
        return loss

    def _micro_step(self, inputs: Mapping[str, Any], sc: Mapping[str, float], inv: float | None, check: bool) -> tuple[float, Any]:
        """Accumulate one micro-batch's gradients; on the k-th, the update (its finite flag), else None."""
        loss, grads = self.engine.grads(inputs, self._seed())
        acc = self._acc
        self._acc = {n: grads[n] for n in self.trainable} if acc is None else {n: acc[n] + grads[n] for n in self.trainable}
        self._micro += 1
        if self._micro < self.accumulate:
            self.history.append(loss)
            return loss, None
        grads, self._acc, self._micro = {n: g * (1.0 / self.accumulate) for n, g in self._acc.items()}, None, 0
        return loss, self.engine.apply(self.optimizer, grads, sc, inv, self.max_norm, check)

    def loss(self, inputs: Mapping[str, Any]) -> float:
        """The loss at the current params, from the optimized forward plan."""
        return self.engine.loss(dict(inputs))

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Overwrite some params' values (copied into the trainer's own arrays)."""
        held = self.engine.host_params()
        new = {}
        for name, value in params.items():
            if name not in held:
                raise FeedError(f"unknown param {name!r}; the trainer's params are {sorted(held)}")
            arr = np.asarray(value)
            if arr.shape != held[name].shape:
                raise FeedError(f"param {name!r}: shape {list(arr.shape)} given, {list(held[name].shape)} held")
            new[name] = arr.astype(held[name].dtype, casting="same_kind", copy=False)
        master = {n: v.astype(np.float32) for n, v in new.items() if n in self.engine.host_master()}
        self.engine.load(new, self.engine.host_states(), master)

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: Any) -> None:
        """Params, optimizer state, step count, schedule / loss-scale state and the graph, in one
        safetensors file written atomically (see :mod:`rlx.train.checkpoint`)."""
        from rlx.train.checkpoint import save

        if self._micro:
            raise TrainingError("Trainer.save: in the middle of a gradient accumulation; save after the optimizer step")
        save(self, path)

    @classmethod
    def load(cls, path: Any, **overrides: Any) -> Trainer:
        """A trainer rebuilt from a checkpoint (``overrides``: e.g. ``backend=``, ``schedule=``, ``mesh=``)."""
        from rlx.train.checkpoint import load

        return load(path, **overrides)

    def __repr__(self) -> str:
        bw = self.backward.plan.weight_region
        return (f"<Trainer {self.graph.name!r}: {self.optimizer.name} lr={self.optimizer.lr}, wrt={self.wrt}, "
                f"{self.engine.kind} engine, forward arena {self.forward.plan.arena_size} B, backward arena "
                f"{self.backward.plan.arena_size} B, weights [0, {bw[1] if bw else 0}) B, {self.steps} steps>")

