"""``rlx.compile_training``: a forward and a backward LIR that share one weight layout, and a
:class:`Trainer` that runs them and applies SGD or Adam to the params (docs/pipeline.md#autodiff).

    trainer = rlx.compile_training(g, optimizer="adam", lr=1e-2, params=init)
    for batch in data:
        loss = trainer.step({"x": xb, "y": yb})        # backward (seed 1.0) + optimizer update
    trainer.loss({"x": xb, "y": yb})                    # forward only
    trainer.forward, trainer.backward                   # the two LirModules
    trainer.params                                      # name -> array, updated in place

Pipeline:

1. ``model`` is a MIR graph with one float scalar output (the loss; shape ``[]`` or ``[1]``)
   or an HIR module, lowered once with ``FusionPolicy.for_autodiff()`` (LIR is refused).
2. Forward: ``rlx.optimize`` (full fusion) → ``rlx.plan(params="reserved")``: the params
   are packed at the bottom of the arena in name order, ``plan.weight_region = (0, top)``.
3. Backward: ``rlx.grad_with_loss`` of the *unoptimized* MIR (``wrt`` by name, so no id
   drift through optimisation, docs/pipeline.md#upstream-bugs-fixed), optimized, then planned with
   ``weight_layout=forward.plan.weight_layout()``: every param sits at the forward's offset
   and every other buffer above the whole weight region (upstream let backward
   activations overlap the shared weights). Both plans are proven by :func:`rlx.lir.check`, which rejects any
   non-param buffer inside the weight region; :func:`compile_training` also checks that
   the two layouts agree.
4. Runtime (``backend="numpy"``, static shapes): both LIRs run in arena executors. The
   params the trainer owns *are* the weight slots of the backward arena (NumPy views), so
   a step needs no weight copy: the backward reads them in place and the optimizer
   updates them in place. Because the offsets agree, the forward arena is brought up to
   date with one byte copy of the weight region, lazily, before the next forward run.
   Other backends, and graphs with symbolic dims (re-planned per binding), use owned
   arrays fed to every run.

Where it lives: the training compiler composes ``autodiff`` and ``opt`` (differentiate,
optimize) with ``lir`` and ``runtime`` (plan, execute), so in the layering of
docs/architecture.md it sits above all of them, with the backends, as the top-level module
``rlx.train`` (nothing below imports it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.autodiff import grad_with_loss
from rlx.hir import FusionPolicy
from rlx.ir.errors import AutodiffError, FeedError, RlxError
from rlx.ir.graph import Graph, GraphStage
from rlx.lir.plan import LirModule, check, plan
from rlx.opt import optimize
from rlx.runtime.compile import compile as _compile

__all__ = ["SGD", "Adam", "Optimizer", "Trainer", "TrainingError", "compile_training", "make_optimizer"]


class TrainingError(RlxError):
    """A model, a ``wrt`` list or an option that :func:`compile_training` cannot train."""


# ============================================================================ optimizers
class Optimizer:
    """Updates params in place from gradients: ``opt.update(params, grads)`` (both name -> array)."""

    name = "optimizer"
    lr: float

    def update(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}


@dataclass
class SGD(Optimizer):
    """``torch.optim.SGD`` semantics: L2 ``weight_decay`` added to the gradient, then (with
    ``momentum``) ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first
    step), ``g = g + momentum * buf`` with ``nesterov`` else ``g = buf``; ``p -= lr * g``."""

    lr: float = 1e-2
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    buffers: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    name = "sgd"

    def __post_init__(self) -> None:
        if self.lr < 0 or self.momentum < 0 or self.weight_decay < 0:
            raise TrainingError(f"SGD: lr, momentum and weight_decay must be >= 0, got {self.lr}, {self.momentum}, {self.weight_decay}")
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise TrainingError("SGD: nesterov needs momentum > 0 and dampening 0")

    def update(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        for name, g in grads.items():
            p = params[name]
            d = g.astype(p.dtype, copy=True)
            if self.weight_decay:
                d += self.weight_decay * p
            if self.momentum:
                buf = self.buffers.get(name)
                if buf is None:
                    buf = self.buffers[name] = d.copy()
                else:
                    buf *= self.momentum
                    buf += (1.0 - self.dampening) * d
                d = d + self.momentum * buf if self.nesterov else buf
            p -= self.lr * d

    def state_dict(self) -> dict[str, Any]:
        return {"momentum_buffer": dict(self.buffers)}


@dataclass
class Adam(Optimizer):
    """``torch.optim.Adam`` (``decoupled=False``) / ``AdamW`` (``decoupled=True``) semantics,
    bias-corrected: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g²``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``. ``weight_decay`` is an
    L2 term added to ``g`` (Adam) or a decay ``p *= 1 - lr * wd`` before the step (AdamW)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    t: int = 0
    m: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    v: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    name = "adam"

    def __post_init__(self) -> None:
        b1, b2 = self.betas
        if self.lr < 0 or self.eps < 0 or self.weight_decay < 0 or not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise TrainingError(f"Adam: bad hyperparameters lr={self.lr} betas={self.betas} eps={self.eps} "
                                f"weight_decay={self.weight_decay}")

    def update(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        b1, b2 = self.betas
        self.t += 1
        bc1 = 1.0 - b1 ** self.t
        bc2_sqrt = math.sqrt(1.0 - b2 ** self.t)
        step_size = self.lr / bc1
        for name, g in grads.items():
            p = params[name]
            d = g.astype(p.dtype, copy=False)
            if self.weight_decay:
                if self.decoupled:
                    p *= 1.0 - self.lr * self.weight_decay
                else:
                    d = d + self.weight_decay * p
            m = self.m.setdefault(name, np.zeros_like(p))
            v = self.v.setdefault(name, np.zeros_like(p))
            m *= b1
            m += (1.0 - b1) * d
            v *= b2
            v += (1.0 - b2) * (d * d)
            denom = np.sqrt(v) / bc2_sqrt
            denom += self.eps
            p -= step_size * (m / denom)

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.t, "exp_avg": dict(self.m), "exp_avg_sq": dict(self.v)}


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
        if kind in ("adam", "adamw"):
            if "betas" in kw:
                kw["betas"] = tuple(float(b) for b in kw["betas"])
            return Adam(decoupled=kind == "adamw" or bool(kw.pop("decoupled", False)), **kw)
    except TypeError as exc:
        raise TrainingError(f"optimizer {kind!r}: {exc}") from None
    raise TrainingError(f"unknown optimizer {optimizer!r}; choose 'sgd', 'adam', 'adamw' or pass an rlx.train.Optimizer")


# ============================================================================ compile
def _as_training_mir(model: Any) -> Graph:
    if isinstance(model, LirModule) or getattr(model, "_lir", None) is not None or getattr(model, "stage", None) in (GraphStage.LIR, "lir"):
        raise TrainingError("compile_training: an LIR module cannot be trained (wrong stage); pass the MIR graph or HIR module")
    if isinstance(model, Graph):
        if model.stage is not GraphStage.MIR:
            raise TrainingError(f"compile_training: graph {model.name!r} is at stage {model.stage.value.upper()}; expected MIR")
        return model
    lower = getattr(model, "lower_to_mir", None)
    if callable(lower):
        mir = lower(policy=FusionPolicy.for_autodiff())
        if isinstance(mir, Graph):
            return mir
    raise TrainingError(f"compile_training: expected a MIR Graph or an HIR module, got {type(model).__name__}")


def _check_loss(mir: Graph) -> None:
    if len(mir.output_ids) != 1:
        raise TrainingError(f"compile_training: graph {mir.name!r} must have exactly one output (the loss), it has {len(mir.output_ids)}")
    loss = mir.nodes[mir.output_ids[0]]
    if not loss.dtype.is_float or not loss.type.shape.is_static or math.prod(loss.shape) != 1:
        raise TrainingError(f"compile_training: the loss must be a float scalar (shape [] or [1]), got {loss.type}")


def _wrt_names(mir: Graph, wrt: Any) -> list[str]:
    leaves = {**mir.inputs(), **mir.params()}
    if wrt is None:
        names = [n for n, v in sorted(mir.params().items()) if v.dtype.is_float]
        if not names:
            raise TrainingError(f"compile_training: graph {mir.name!r} has no float params to train")
        return names
    if isinstance(wrt, str) or not isinstance(wrt, Sequence):
        wrt = [wrt]
    names = []
    for ref in wrt:
        name = ref if isinstance(ref, str) else getattr(ref, "name", None)
        if name not in leaves or (not isinstance(ref, str) and leaves[name].node.op not in ("input", "param")):
            raise TrainingError(f"compile_training: wrt {ref!r} is not an input or param of {mir.name!r} "
                                f"(it has {sorted(leaves)}); pass leaves by name")
        if name in names:
            raise TrainingError(f"compile_training: wrt names {name!r} twice")
        if name in mir.params() and leaves[name].dtype.is_complex:
            raise TrainingError(f"compile_training: param {name!r} is complex; the optimizers here update real params "
                                f"(in JAX's convention descend along conj(grad): use rlx.grad_with_loss and step yourself)")
        names.append(name)
    return names


def compile_training(
    model: Any,
    wrt: Any = None,
    *,
    optimizer: str | Optimizer = "sgd",
    lr: float | None = None,
    params: Mapping[str, Any] | None = None,
    backend: str = "numpy",
    alignment: int = 64,
    optimize_backward: bool = True,
    **optimizer_options: Any,
) -> Trainer:
    """Compile ``model`` for training; return a :class:`Trainer`.

    ``model``: a MIR :class:`rlx.Graph` whose single output is the scalar loss, or an HIR
    module (lowered with ``FusionPolicy.for_autodiff()``). ``wrt``: the names (or leaf
    Values) to differentiate; default every float param. Params in ``wrt`` are trained;
    inputs in ``wrt`` get gradients from :meth:`Trainer.gradients` only. ``params``:
    initial values for every param (default: ``model.params`` when the model carries
    them); they are copied, the trainer owns its params. ``optimizer``: ``"sgd"``,
    ``"adam"``, ``"adamw"`` or an :class:`Optimizer`; ``lr`` and ``optimizer_options``
    (``momentum``, ``nesterov``, ``betas``, ``eps``, ``weight_decay`` …) configure it.
    ``optimize_backward=False`` plans the backward graph as ``grad_with_loss`` returns it.
    """
    mir = _as_training_mir(model)
    _check_loss(mir)
    names = _wrt_names(mir, wrt)
    opt = make_optimizer(optimizer, lr, **optimizer_options)

    fwd_graph, _ = optimize(mir)
    forward = plan(fwd_graph, alignment, params="reserved", outputs="outside")
    layout = forward.plan.weight_layout()

    seed = "d_output"
    while seed in mir.inputs() or seed in mir.params():
        seed = "_" + seed
    try:
        bwd_graph = grad_with_loss(mir, names, seed=seed)
    except AutodiffError as exc:
        raise AutodiffError(f"compile_training: {exc}") from exc
    if optimize_backward:
        bwd_graph, _ = optimize(bwd_graph)
    backward = plan(bwd_graph, alignment, params="reserved", outputs="outside", weight_layout=layout)
    _check_shared_layout(forward, backward)

    init = params if params is not None else getattr(model, "params", None)
    return Trainer(mir, forward, backward, names, opt, init, backend=backend, seed=seed)


def _check_shared_layout(forward: LirModule, backward: LirModule) -> None:
    """Both plans sound; every shared param at the same offset; the backward weight region
    covers the forward's and holds nothing but params (the checker proves the last part)."""
    check(forward)
    check(backward)
    f_layout, b_layout = forward.plan.weight_layout(), backward.plan.weight_layout()
    moved = {n: (o, b_layout[n]) for n, o in f_layout.items() if n in b_layout and b_layout[n] != o}
    if moved:
        raise TrainingError(f"compile_training: the backward plan moved params away from the forward's offsets: {moved}")
    fw, bw = forward.plan.weight_region, backward.plan.weight_region
    if fw is None or bw is None or bw[0] > fw[0] or bw[1] < fw[1]:
        raise TrainingError(f"compile_training: weight regions disagree (forward {fw}, backward {bw})")


# ============================================================================ trainer
class Trainer:
    """A compiled training step. See :func:`compile_training` and the module docstring.

    ``forward`` / ``backward``: the LirModules; ``params``: name -> array (owned, updated in
    place); ``wrt``: the differentiated names; ``trainable``: the params among them;
    ``optimizer``; ``steps``: how many updates ran; ``history``: the loss of every step;
    ``forward_executor`` / ``backward_executor``: the executables running the two LIRs;
    ``zero_copy``: whether ``params`` are views of the backward arena (numpy, static shapes).
    """

    def __init__(self, mir: Graph, forward: LirModule, backward: LirModule, wrt: list[str], optimizer: Optimizer,
                 params: Mapping[str, Any] | None, *, backend: str = "numpy", seed: str = "d_output"):
        self.graph = mir
        self.forward = forward
        self.backward = backward
        self.wrt = list(wrt)
        self.optimizer = optimizer
        self.backend = backend
        self.seed_name = seed
        self.steps = 0
        self.history: list[float] = []
        declared = mir.params()
        self.trainable = [n for n in self.wrt if n in declared]
        init = self._initial(declared, params)
        loss_node = backward.graph.nodes[backward.graph.output_ids[0]]
        self._seed = np.ones(tuple(loss_node.shape), loss_node.dtype.numpy)
        fwd_params, bwd_params = forward.graph.params(), backward.graph.params()
        static = not (forward.plan.dynamic_symbols or backward.plan.dynamic_symbols)
        self.zero_copy = backend == "numpy" and static
        if self.zero_copy:
            # fold_weights=False: the optimizer writes the weight slots in place, behind the executors' back
            self.forward_executor = _compile(forward, backend="numpy", fold_weights=False)
            self.backward_executor = _compile(backward, backend="numpy", fold_weights=False)
            self.forward_executor.set_params({n: a for n, a in init.items() if n in fwd_params})
            self.backward_executor.set_params({n: a for n, a in init.items() if n in bwd_params})
            # the owned params are the backward arena's weight slots; params only the forward reads live there
            fexe, bexe = self.forward_executor, self.backward_executor
            self.params = {n: _slot_view(bexe, backward, n) if n in bwd_params else _slot_view(fexe, forward, n) for n in sorted(init)}
            f_layout, b_layout = forward.plan.weight_layout(), backward.plan.weight_layout()
            self._one_copy = all(n in b_layout for n in f_layout)
            self._region = forward.plan.weight_region[1] if forward.plan.weight_region else 0
        else:
            self.forward_executor = _compile(forward, backend=backend)
            self.backward_executor = _compile(backward, backend=backend)
            self.params = init
        self._fwd_params = [n for n in sorted(fwd_params) if n in self.params]
        self._bwd_params = [n for n in sorted(bwd_params) if n in self.params]
        self._stale = False  # forward weights behind the owned params

    @staticmethod
    def _initial(declared: Mapping[str, Any], params: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
        params = dict(params or {})
        problems = [f"missing initial value for param {n!r} ({v.type})" for n, v in sorted(declared.items()) if n not in params]
        problems += [f"unknown param {n!r}; the graph's params are {sorted(declared)}" for n in sorted(set(params) - set(declared))]
        out: dict[str, np.ndarray] = {}
        for name, value in sorted(params.items()):
            if name not in declared:
                continue
            node = declared[name].node
            arr = np.asarray(value)
            if arr.dtype != node.dtype.numpy or arr.shape != tuple(node.shape):
                problems.append(f"param {name!r}: {arr.dtype} {list(arr.shape)} given, {node.type} declared")
                continue
            out[name] = np.array(arr, copy=True)
        if problems:
            raise FeedError("compile_training: bad initial params:\n  - " + "\n  - ".join(problems))
        return out

    # ------------------------------------------------------------------ running
    def _sync_forward(self) -> None:
        if not self._stale:
            return
        if self.zero_copy:
            if self._one_copy:  # same offsets in both arenas: one byte copy of the weight region
                self.forward_executor.arena[: self._region] = self.backward_executor.arena[: self._region]
            # else: the owned arrays of forward-only params already are forward slots; copy the rest
            else:
                for n in self._fwd_params:
                    if n in self.backward.graph.params():
                        np.copyto(_slot_view(self.forward_executor, self.forward, n), self.params[n])
        self._stale = False

    def _feed(self, names: list[str]) -> dict[str, np.ndarray] | None:
        return None if self.zero_copy else {n: self.params[n] for n in names}

    def gradients(self, inputs: Mapping[str, Any]) -> tuple[float, dict[str, np.ndarray]]:
        """Run the backward with seed 1.0: ``(loss, {wrt name: gradient})``; nothing is updated."""
        inputs = dict(inputs)
        if self.seed_name in inputs:
            raise FeedError(f"input {self.seed_name!r} is the backward seed; the trainer feeds it")
        inputs[self.seed_name] = self._seed
        outs = self.backward_executor.run(inputs=inputs, params=self._feed(self._bwd_params))
        return float(np.asarray(outs[0]).reshape(-1)[0]), dict(zip(self.wrt, outs[1:]))

    def step(self, inputs: Mapping[str, Any]) -> float:
        """One training step: loss and gradients at the current params, then the optimizer
        update of the trainable params (in place). Returns the loss before the update."""
        loss, grads = self.gradients(inputs)
        self.optimizer.update(self.params, {n: grads[n] for n in self.trainable})
        self.steps += 1
        self._stale = True
        self.history.append(loss)
        return loss

    def loss(self, inputs: Mapping[str, Any]) -> float:
        """The loss at the current params, from the optimized forward plan."""
        self._sync_forward()
        outs = self.forward_executor.run(inputs=inputs, params=self._feed(self._fwd_params))
        return float(np.asarray(outs[0]).reshape(-1)[0])

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Overwrite some params' values (copied into the owned arrays, in place)."""
        for name, value in params.items():
            if name not in self.params:
                raise FeedError(f"unknown param {name!r}; the trainer's params are {sorted(self.params)}")
            arr = np.asarray(value)
            if arr.shape != self.params[name].shape:
                raise FeedError(f"param {name!r}: shape {list(arr.shape)} given, {list(self.params[name].shape)} held")
            np.copyto(self.params[name], arr, casting="same_kind")
        self._stale = True

    def __repr__(self) -> str:
        return (f"<Trainer {self.graph.name!r}: {self.optimizer.name} lr={self.optimizer.lr}, wrt={self.wrt}, "
                f"forward arena {self.forward.plan.arena_size} B, backward arena {self.backward.plan.arena_size} B, "
                f"weights [0, {self.backward.plan.weight_region[1] if self.backward.plan.weight_region else 0}) B, "
                f"{self.steps} steps>")


def _slot_view(exe: Any, lir: LirModule, name: str) -> np.ndarray:
    """The writable view of param ``name``'s slot in an arena executor's arena."""
    pid = dict(lir.plan.io.params)[name]
    slot = lir.plan.assignments[pid]
    node = lir.graph.nodes[pid]
    return exe.arena[slot.offset: slot.offset + slot.size].view(node.dtype.numpy).reshape(tuple(node.shape))
