"""``rlx.compile_training``: a forward and a backward LIR that share one weight layout, and a
:class:`Trainer` that runs them and applies SGD, Adam or AdamW to the params (docs/training.md).

    trainer = rlx.compile_training(g, optimizer="adamw", lr=1e-3, params=init)
    for batch in data:
        loss = trainer.step({"x": xb, "y": yb})        # backward (seed 1.0) + optimizer update
    trainer.loss({"x": xb, "y": yb})                    # forward only
    trainer.save("ckpt.safetensors"); trainer = rlx.train.Trainer.load("ckpt.safetensors")

Pipeline:

1. ``model`` is a MIR graph whose one user output is the float scalar loss (buffer updates that
   :func:`rlx.torch.import_module` adds for a training-mode BatchNorm are split off into a state
   graph) or an HIR module, lowered once with ``FusionPolicy.for_autodiff()`` (LIR is refused).
2. Forward: ``rlx.optimize`` → ``rlx.plan(params="reserved")``: the params packed at the
   bottom of the arena in name order, ``plan.weight_region = (0, top)``.
3. Backward: ``rlx.grad_with_loss`` of the *unoptimized* MIR (``wrt`` by name), optimized,
   planned with ``weight_layout=forward.plan.weight_layout()``: every param at the forward's
   offset, every other buffer above the weight region; both plans proven by :func:`rlx.lir.check`.
4. Engines: numpy (:mod:`.host`: with static shapes the params *are* the backward arena's
   weight slots, the forward brought up to date by one byte copy), jax (one jitted step with
   donated params / optimizer state, optionally over a mesh), torch (one fx module, resident
   tensors). The optimizer formulas (:mod:`.optim`) and clipping / unscaling (:mod:`.grads`)
   are written once over an array namespace (:mod:`.xp`) and shared by all three.

Where it lives: above autodiff, opt, lir and runtime and beside the backends (it imports the
jax / torch engines lazily); nothing below imports it.
"""

from __future__ import annotations

from rlx.train.compile import OPTIMIZER_OPTIONS, compile_training
from rlx.train.errors import TrainingError
from rlx.train.grads import LossScaler
from rlx.train.optim import SGD, Adam, AdamW, Optimizer, make_optimizer
from rlx.train.schedules import WarmupCosine
from rlx.train.trainer import Trainer

__all__ = ["OPTIMIZER_OPTIONS", "SGD", "Adam", "AdamW", "LossScaler", "Optimizer", "Trainer", "TrainingError",
           "WarmupCosine", "compile_training", "make_optimizer"]
