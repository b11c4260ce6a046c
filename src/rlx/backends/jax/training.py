"""The jax training engine of ``rlx.compile_training(..., backend="jax")``: forward, backward,
buffer updates and the optimizer update as ONE ``jax.jit`` step, params and optimizer state
resident on the devices and donated to it.

With ``mesh=`` every input's leading dim is sharded over ``batch_axis`` (default: the mesh's
first axis), params and their optimizer state are replicated or sharded by ``param_specs``
(FSDP style); the gradients of the global-batch loss are reduced across the axis by XLA inside
the step. Arrays are built with ``jax.make_array_from_callback`` from the full host batch, so
the same code runs with one process or one process per host under ``jax.distributed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from rlx.backends.jax import lowering as L
from rlx.backends.jax import sharding as S
from rlx.backends.jax.executable import evaluate, needs_x64, x64_scope
from rlx.ir.dtype import needs_f32_master
from rlx.ir.errors import FeedError
from rlx.ir.graph import Graph

__all__ = ["Engine"]


class Engine:
    """Holds the params, f32 master copies of low-precision params and optimizer state as jax arrays."""

    kind = "jax"
    zero_copy = False

    def __init__(self, backward: Graph, forward: Graph, state_graph: Graph | None, updates: list[str], wrt: list[str],
                 trainable: list[str], init: dict[str, np.ndarray], seed_name: str, opt: Any, shared: Mapping[str, Any], *,
                 mesh: Any = None,
                 batch_axis: str | None = None, param_specs: Mapping[str, Any] | None = None, device: Any = None,
                 max_norm: float | None = None, scaled: bool = False):
        error = shared["error"]
        self.graph, self.forward, self.state_graph, self.updates = backward, forward, state_graph, list(updates)
        self.wrt, self.trainable, self.seed_name, self.opt = list(wrt), list(trainable), seed_name, opt
        self.ns = shared["namespace"]("jax", jnp)
        self._update = shared["update"]
        self.max_norm, self.scaled, self.mesh = max_norm, scaled, mesh
        self.x64 = needs_x64(backward) or any(a.dtype == np.float64 for a in init.values())
        self._inputs = [n for n in backward.inputs() if n != seed_name]
        self._input_nodes = {n: v.node for n, v in backward.inputs().items()}
        self._bwd_params = list(backward.params())
        self._state_params = list(state_graph.params()) if state_graph is not None else []
        self._state_inputs = list(state_graph.inputs()) if state_graph is not None else []
        self._repl = self._shard_in = None
        self._pshard: dict[str, Any] = {}
        if mesh is not None:
            axis = batch_axis if batch_axis is not None else mesh.axis_names[0]
            if axis not in mesh.axis_names:
                raise error(f"compile_training: batch_axis {axis!r} is not an axis of the mesh {list(mesh.axis_names)}")
            self.axis = axis
            self._repl = NamedSharding(mesh, PartitionSpec())
            specs = dict(param_specs or {})
            unknown = sorted(set(specs) - set(init))
            if unknown:
                raise error(f"compile_training: param_specs names {unknown}, which are not params (the params are {sorted(init)})")
            decl = {**backward.params(), **(state_graph.params() if state_graph is not None else {})}
            for name in init:
                spec = specs.get(name, PartitionSpec())
                spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
                if name in decl:
                    S.check_spec(decl[name].node, spec, mesh)
                self._pshard[name] = NamedSharding(mesh, spec)
        elif device is not None:
            self._repl = jax.sharding.SingleDeviceSharding(device if not isinstance(device, str) else jax.devices(device)[0])
            self._pshard = dict.fromkeys(init, self._repl)
        with x64_scope(self.x64):
            self.params = {n: self._place_param(n, a) for n, a in init.items()}
            self.master = {n: self._place_param(n, init[n].astype(np.float32)) for n in trainable if needs_f32_master(init[n].dtype)}
            self.states = {n: {k: self._place_param(n, np.zeros(init[n].shape, np.float32 if n in self.master else init[n].dtype))
                               for k in opt.slots} for n in trainable}
        self._jit_step = self._jit_grads = self._jit_apply = self._jit_loss = None

    # ------------------------------------------------------------------ placement
    def _place_param(self, name: str, a: np.ndarray) -> Any:
        sharding = self._pshard.get(name)
        if sharding is None:
            return jnp.asarray(a)
        return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])

    def _input_sharding(self, name: str, shape: tuple[int, ...]) -> Any:
        """Leading dim over the batch axis (scalars replicated); the default device without a mesh."""
        if self.mesh is None or not shape:
            return self._repl
        if shape[0] % self.mesh.shape[self.axis]:
            raise self._error(f"input {name!r}: leading dim {shape[0]} does not split over mesh axis {self.axis!r} "
                              f"of size {self.mesh.shape[self.axis]}")
        return NamedSharding(self.mesh, PartitionSpec(self.axis))

    def _error(self, msg: str) -> Exception:
        return FeedError(f"jax training: {msg}")

    def _place_inputs(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        missing = sorted(n for n in {*self._inputs, *self._state_inputs} if n not in inputs)
        if missing:
            raise self._error(f"missing input(s) {missing}")
        out = {}
        for name in dict.fromkeys([*self._inputs, *self._state_inputs]):
            node = self._input_nodes.get(name) or self.state_graph.inputs()[name].node
            a = np.asarray(inputs[name])
            if self._process_local(a, node):  # jax.distributed, each process feeding its own rows
                out[name] = jax.make_array_from_process_local_data(self._input_sharding(name, tuple(node.shape)), a)
                continue
            if a.dtype != node.dtype.numpy or (node.shape.is_static and a.shape != tuple(node.shape)):
                raise self._error(f"input {name!r}: {a.dtype} {list(a.shape)} given, {node.type} declared")
            sharding = self._input_sharding(name, a.shape)
            out[name] = jnp.asarray(a) if sharding is None else jax.make_array_from_callback(a.shape, sharding, lambda idx, a=a: a[idx])
        return out

    def _process_local(self, a: np.ndarray, node: Any) -> bool:
        """Whether ``a`` is this process's share of the declared global batch (several processes)."""
        n = jax.process_count()
        if self.mesh is None or n == 1 or not node.shape.is_static or a.ndim == 0 or a.dtype != node.dtype.numpy:
            return False
        full = tuple(node.shape)
        return a.shape[0] * n == full[0] and a.shape[1:] == full[1:]

    # ------------------------------------------------------------------ traced bodies
    def _fwd_bwd(self, params: Mapping[str, Any], inputs: Mapping[str, Any], seed: Any) -> tuple[Any, dict, dict]:
        g = self.graph
        leaves = {v.id: inputs[n] for n, v in g.inputs().items() if n != self.seed_name}
        leaves[g.inputs()[self.seed_name].id] = seed
        leaves.update({v.id: params[n] for n, v in g.params().items()})
        with L.tracing_precision(jax.lax.Precision.HIGHEST):
            outs = evaluate(g, leaves)
            updates = {}
            if self.state_graph is not None:
                sg = self.state_graph
                sl = {v.id: inputs[n] for n, v in sg.inputs().items()}
                sl.update({v.id: params[n] for n, v in sg.params().items()})
                updates = dict(zip(self.updates, evaluate(sg, sl)))
        return outs[0], dict(zip(self.wrt, outs[1:])), updates

    def _apply(self, params, master, states, grads, sc, inv_scale):
        grads = {n: grads[n] for n in self.trainable}
        finite = self.ns.all_finite(list(grads.values())) if self.scaled else None
        new_p, new_m, new_s = self._update(self.ns, self.opt, params, master, states, grads, sc,
                                           inv_scale=inv_scale if self.scaled else None, max_norm=self.max_norm, finite=finite)
        return {**params, **new_p}, {**master, **new_m}, {**states, **new_s}, (finite if finite is not None else jnp.bool_(True))

    def _step(self, params, master, states, inputs, seed, sc, inv_scale):
        loss, grads, updates = self._fwd_bwd(params, inputs, seed)
        params, master, states, finite = self._apply(params, master, states, grads, sc, inv_scale)
        return loss, {**params, **updates}, master, states, finite

    def _grads(self, params, inputs, seed):
        loss, grads, updates = self._fwd_bwd(params, inputs, seed)
        return loss, grads, {**params, **updates}

    # ------------------------------------------------------------------ jitting
    def _jit(self, fn: Any, in_sh: Any, out_sh: Any, donate: tuple[int, ...]) -> Any:
        if self.mesh is None and self._repl is None:
            return jax.jit(fn, donate_argnums=donate)
        return jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh, donate_argnums=donate)

    def _shardings(self, inputs: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
        ps = {n: self._pshard.get(n, self._repl) for n in self.params}
        ms = {n: self._pshard.get(n, self._repl) for n in self.master}
        ss = {n: {k: self._pshard.get(n, self._repl) for k in self.states[n]} for n in self.states}
        ins = {n: a.sharding for n, a in inputs.items()}
        return ps, ms, ss, ins

    def step(self, opt: Any, inputs: Mapping[str, Any], seed: np.ndarray, sc: Mapping[str, float], inv_scale: float | None,
             max_norm: float | None, check_finite: bool) -> tuple[float, bool]:
        with x64_scope(self.x64):
            placed = self._place_inputs(inputs)
            if self._jit_step is None:  # params, masters and state donated: updated in place on the devices
                ps, ms, ss, ins = self._shardings(placed)
                r = self._repl
                self._jit_step = self._jit(self._step, (ps, ms, ss, ins, r, r, r), (r, ps, ms, ss, r), (0, 1, 2))
            loss, self.params, self.master, self.states, finite = self._jit_step(
                self.params, self.master, self.states, placed, self._scalar(seed), self._scalars(sc), self._scalar(inv_scale or 1.0))
            return float(np.asarray(loss).reshape(-1)[0]), (bool(finite) if check_finite else True)

    def grads(self, inputs: Mapping[str, Any], seed: np.ndarray) -> tuple[float, dict[str, Any]]:
        with x64_scope(self.x64):
            placed = self._place_inputs(inputs)
            if self._jit_grads is None:
                ps, _, _, ins = self._shardings(placed)
                r = self._repl
                gs = {n: ps[n] if n in ps else placed[n].sharding for n in self.wrt} if r is not None else None
                self._jit_grads = self._jit(self._grads, (ps, ins, r), (r, gs, ps), (0,))
            loss, grads, self.params = self._jit_grads(self.params, placed, self._scalar(seed))
            return float(np.asarray(loss).reshape(-1)[0]), grads

    def apply(self, opt: Any, grads: Mapping[str, Any], sc: Mapping[str, float], inv_scale: float | None,
              max_norm: float | None, check_finite: bool) -> bool:
        with x64_scope(self.x64):
            if self._jit_apply is None:
                ps, ms, ss, _ = self._shardings({})
                r = self._repl
                gs = {n: ps[n] for n in self.trainable} if r is not None else None
                self._jit_apply = self._jit(self._apply, (ps, ms, ss, gs, r, r), (ps, ms, ss, r), (0, 1, 2))
            self.params, self.master, self.states, finite = self._jit_apply(
                self.params, self.master, self.states, {n: grads[n] for n in self.trainable}, self._scalars(sc),
                self._scalar(inv_scale or 1.0))
            return bool(finite) if check_finite else True

    def loss(self, inputs: Mapping[str, Any]) -> float:
        with x64_scope(self.x64):
            placed = self._place_inputs(inputs)
            if self._jit_loss is None:
                self._jit_loss = jax.jit(self._forward_loss)
            return float(np.asarray(self._jit_loss(self.params, placed)).reshape(-1)[0])

    def _forward_loss(self, params: Mapping[str, Any], inputs: Mapping[str, Any]) -> Any:
        g = self.forward
        leaves = {v.id: inputs[n] for n, v in g.inputs().items()}
        leaves.update({v.id: params[n] for n, v in g.params().items()})
        with L.tracing_precision(jax.lax.Precision.HIGHEST):
            return evaluate(g, leaves)[0]

    def _scalar(self, x: Any) -> Any:
        return jnp.asarray(x) if np.ndim(x) else x

    def _scalars(self, sc: Mapping[str, float]) -> dict[str, Any]:
        return dict(sc)  # Python floats: weakly typed in the trace, so float32 params stay float32

    # ------------------------------------------------------------------ host state
    def _host(self, a: Any) -> np.ndarray:
        if getattr(a, "is_fully_addressable", True):
            return np.asarray(a)
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(a, tiled=True))

    def host_params(self) -> dict[str, np.ndarray]:
        return {n: self._host(a) for n, a in self.params.items()}

    def host_states(self) -> dict[str, dict[str, np.ndarray]]:
        return {n: {k: self._host(v) for k, v in s.items()} for n, s in self.states.items()}

    def host_master(self) -> dict[str, np.ndarray]:
        return {n: self._host(a) for n, a in self.master.items()}

    def load(self, params: Mapping[str, np.ndarray], states: Mapping[str, Mapping[str, np.ndarray]],
             master: Mapping[str, np.ndarray]) -> None:
        with x64_scope(self.x64):
            for n, v in params.items():
                self.params[n] = self._place_param(n, np.asarray(v, dtype=self.params[n].dtype))
            for n, s in states.items():
                self.states[n] = {k: self._place_param(n, np.asarray(v)) for k, v in s.items()}
            for n, v in master.items():
                self.master[n] = self._place_param(n, np.asarray(v, np.float32))

    def scope(self) -> Any:
        """The context the trainer's gradient sums run in: this engine's x64 setting."""
        return x64_scope(self.x64)

    def to_host(self, grads: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {n: self._host(g) for n, g in grads.items()}
