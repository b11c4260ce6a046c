"""``rlx.compile_training``: a forward and a backward LIR that share one weight layout, an engine
for the backend, and the :class:`Trainer` around them (pipeline in :mod:`rlx.train`)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.autodiff import grad_with_loss
from rlx.frontends.torch.state import buffer_updates, buffers_of, input_updates, user_graph
from rlx.hir import FusionPolicy
from rlx.ir.errors import AutodiffError, FeedError
from rlx.ir.graph import Graph, GraphStage
from rlx.lir.plan import LirModule, check, plan
from rlx.opt import optimize
from rlx.runtime.compile import BACKENDS
from rlx.train.errors import TrainingError
from rlx.train.grads import LossScaler, apply_update
from rlx.train.optim import Optimizer, make_optimizer
from rlx.train.schedules import as_schedule
from rlx.train.trainer import Trainer
from rlx.train.xp import Namespace

__all__ = ["OPTIMIZER_OPTIONS", "compile_training"]

#: the optimizer keywords compile_training passes on; any other unknown keyword is an error
OPTIMIZER_OPTIONS = frozenset({"momentum", "dampening", "nesterov", "weight_decay", "betas", "eps", "decoupled"})


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
        raise TrainingError(f"compile_training: graph {mir.name!r} must have exactly one output (the loss) besides buffer "
                            f"updates, it has {len(mir.output_ids)}")
    loss = mir.nodes[mir.output_ids[0]]
    if not loss.dtype.is_float or not loss.type.shape.is_static or math.prod(loss.shape) != 1:
        raise TrainingError(f"compile_training: the loss must be a float scalar (shape [] or [1]), got {loss.type}")


def _wrt_names(mir: Graph, wrt: Any, frozen: Sequence[str], buffers: frozenset[str] = frozenset()) -> list[str]:
    leaves = {**mir.inputs(), **mir.params()}
    if wrt is None:  # torch's optimizers see nn.Parameters only: imported module buffers stay as they are
        names = [n for n, v in sorted(mir.params().items()) if v.dtype.is_float and n not in frozen and n not in buffers]
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
        if name in frozen:
            raise TrainingError(f"compile_training: {name!r} is a buffer the model updates itself; it cannot be trained")
        if name in mir.params() and leaves[name].dtype.is_complex:
            raise TrainingError(f"compile_training: param {name!r} is complex; the optimizers here update real params "
                                f"(in JAX's convention descend along conj(grad): use rlx.grad_with_loss and step yourself)")
        names.append(name)
    return names


def _initial(declared: Mapping[str, Any], params: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
    params = dict(params or {})
    problems = [f"missing initial value for param {n!r} ({v.type})" for n, v in sorted(declared.items()) if n not in params]
    problems += [f"unknown param {n!r}; the graph's params are {sorted(declared)}" for n in sorted(set(params) - set(declared))]
    out: dict[str, np.ndarray] = {}
    for name, value in sorted(params.items()):
        if name not in declared:
            continue
        node = declared[name].node
        arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        if arr.dtype != node.dtype.numpy or arr.shape != tuple(node.shape):
            problems.append(f"param {name!r}: {arr.dtype} {list(arr.shape)} given, {node.type} declared")
            continue
        out[name] = np.array(arr, copy=True)
    if problems:
        raise FeedError("compile_training: bad initial params:\n  - " + "\n  - ".join(problems))
    return out


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
    schedule: Any = None,
    clip_grad_norm: float | None = None,
    accumulate: int = 1,
    loss_scale: Any = None,
    mesh: Any = None,
    batch_axis: str | None = None,
    param_specs: Mapping[str, Any] | None = None,
    device: Any = None,
    **optimizer_options: Any,
) -> Trainer:
    """Compile ``model`` for training; return a :class:`Trainer`.

    ``model``: a MIR :class:`rlx.Graph` whose output is the scalar loss (plus the buffer updates
    :func:`rlx.torch.import_module` adds for a module that mutates buffers), or an HIR module.
    ``wrt``: the names (or leaf Values) to differentiate; default every float param that is
    not a buffer of an imported torch module. ``params``: initial values for every param (copied). ``optimizer``:
    ``"sgd"``, ``"adam"``, ``"adamw"`` or an :class:`Optimizer`, configured by ``lr`` and the
    keywords in :data:`OPTIMIZER_OPTIONS`; any other keyword is a :class:`TrainingError`.
    ``schedule``: ``step -> lr factor`` or :class:`WarmupCosine`; ``clip_grad_norm``: max global
    norm; ``accumulate``: micro-batches per optimizer step (gradients averaged);
    ``loss_scale``: ``"dynamic"``, a number or a :class:`LossScaler` (low-precision params keep
    float32 master copies). ``backend``: ``"numpy"``, ``"jax"``, ``"torch"`` (engines keeping
    params and optimizer state resident) or any other backend's executables. ``mesh``,
    ``batch_axis``, ``param_specs`` (jax): data-parallel / sharded training, see docs/training.md.
    """
    unknown = sorted(set(optimizer_options) - OPTIMIZER_OPTIONS)
    if unknown:
        raise TrainingError(f"compile_training: unknown keyword(s) {unknown}; optimizer options are {sorted(OPTIMIZER_OPTIONS)}")
    if backend != "jax" and (mesh is not None or batch_axis is not None or param_specs is not None):
        raise TrainingError(f"compile_training: mesh=, batch_axis= and param_specs= need backend='jax', got {backend!r}")
    if mesh is None and (batch_axis is not None or param_specs is not None):
        raise TrainingError("compile_training: batch_axis= and param_specs= need mesh=")
    if not isinstance(accumulate, int) or isinstance(accumulate, bool) or accumulate < 1:
        raise TrainingError(f"compile_training: accumulate must be an int >= 1, got {accumulate!r}")
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise TrainingError(f"compile_training: clip_grad_norm must be > 0, got {clip_grad_norm!r}")
    full = _as_training_mir(model)
    update_pos = buffer_updates(full)
    mir = user_graph(full) if update_pos or input_updates(full) else full  # an input's in-place update is not trained
    state_graph = user_graph(full, list(update_pos.values())) if update_pos else None
    updates = list(update_pos)
    _check_loss(mir)
    names = _wrt_names(mir, wrt, updates, buffers_of(full))
    opt = make_optimizer(optimizer, lr, **optimizer_options)
    sched = as_schedule(schedule)
    scaler = LossScaler.from_option(loss_scale)

    fwd_graph = optimize(mir)[0]
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
        bwd_graph = optimize(bwd_graph)[0]
    backward = plan(bwd_graph, alignment, params="reserved", outputs="outside", weight_layout=layout)
    _check_shared_layout(forward, backward)

    declared = full.params()
    init = _initial(declared, params if params is not None else getattr(model, "params", None))
    trainable = [n for n in names if n in declared]
    engine = _engine(backend, forward, backward, state_graph, updates, names, trainable, init, seed, opt,
                     mesh=mesh, batch_axis=batch_axis, param_specs=param_specs, device=device, max_norm=clip_grad_norm,
                     scaled=scaler is not None)
    options = {"backend": backend, "wrt": list(names), "alignment": alignment, "optimize_backward": optimize_backward,
               "clip_grad_norm": clip_grad_norm, "accumulate": accumulate, "schedule": sched,
               "mesh": mesh, "batch_axis": batch_axis, "param_specs": param_specs, "device": device}
    return Trainer(full, forward, backward, names, trainable, opt, engine, seed_name=seed, schedule=sched,
                   max_norm=clip_grad_norm, accumulate=accumulate, scaler=scaler, buffers=updates, options=options)


def _engine(backend: str, forward: LirModule, backward: LirModule, state_graph: Graph | None, updates: list[str],
            wrt: list[str], trainable: list[str], init: dict[str, np.ndarray], seed: str, opt: Optimizer, **kw: Any) -> Any:
    static = not (forward.plan.dynamic_symbols or backward.plan.dynamic_symbols)
    if kw.get("device") is not None and backend not in ("jax", "torch"):
        raise TrainingError(f"compile_training: device= needs backend 'jax' or 'torch', got {backend!r}")
    if backend == "jax" or (backend == "torch" and static):
        cls = _engine_class(backend)
        shared = {"update": apply_update, "namespace": Namespace, "error": TrainingError}
        if backend == "jax":
            return cls(backward.graph, forward.graph, state_graph, updates, wrt, trainable, init, seed, opt, shared, **kw)
        return cls(backward.graph, forward.graph, state_graph, updates, wrt, trainable, init, seed, opt, shared,
                   device=kw.get("device"), max_norm=kw.get("max_norm"))
    from rlx.train.host import HostEngine

    return HostEngine(forward, backward, state_graph, updates, wrt, trainable, init, backend, seed)


def _engine_class(backend: str) -> Any:
    """The backend's training engine, ``<backend package>.training.Engine``: found from the lazy
    factory the backend registered (the backends sit beside this package, so it imports none of
    them by name; the engines get the shared update rule passed in)."""
    factory = BACKENDS.get(backend)
    module = getattr(factory, "module", None)
    if module is None:
        raise TrainingError(f"compile_training: backend {backend!r} is not registered")
    return importlib.import_module(f"{module}.training").Engine


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
