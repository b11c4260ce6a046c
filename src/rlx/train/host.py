"""The host training engine: both LIRs in NumPy arena executors (or any backend's executables),
params as NumPy arrays. With the numpy backend and static shapes the params *are* the weight
slots of the backward arena (zero copy, see :mod:`rlx.train`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir.dtype import needs_f32_master as low_precision
from rlx.ir.graph import Graph
from rlx.lir.plan import LirModule
from rlx.runtime.compile import compile as _compile
from rlx.train.grads import apply_update
from rlx.train.xp import namespace

__all__ = ["HostEngine", "low_precision"]


class HostEngine:
    """``grads`` / ``apply`` / ``step`` / ``loss`` on NumPy arrays (the :class:`Trainer`'s engine API)."""

    kind = "numpy"

    def __init__(self, forward: LirModule, backward: LirModule, state_graph: Graph | None, updates: list[str],
                 wrt: list[str], trainable: list[str], init: dict[str, np.ndarray], backend: str, seed_name: str):
        self.forward, self.backward, self.wrt, self.trainable = forward, backward, wrt, trainable
        self.seed_name = seed_name
        fwd_params, bwd_params = forward.graph.params(), backward.graph.params()
        static = not (forward.plan.dynamic_symbols or backward.plan.dynamic_symbols)
        self.zero_copy = backend == "numpy" and static
        if self.zero_copy:
            # fold_weights=False: the optimizer writes the weight slots in place, behind the executors' back
            self.forward_executor = _compile(forward, backend="numpy", fold_weights=False)
            self.backward_executor = _compile(backward, backend="numpy", fold_weights=False)
            self.forward_executor.set_params({n: a for n, a in init.items() if n in fwd_params})
            self.backward_executor.set_params({n: a for n, a in init.items() if n in bwd_params})
            fexe, bexe = self.forward_executor, self.backward_executor
            self.params = {n: _slot_view(bexe, backward, n) if n in bwd_params else
                           _slot_view(fexe, forward, n) if n in fwd_params else init[n] for n in sorted(init)}
            f_layout, b_layout = forward.plan.weight_layout(), backward.plan.weight_layout()
            self._one_copy = all(n in b_layout for n in f_layout)
            self._region = forward.plan.weight_region[1] if forward.plan.weight_region else 0
        else:
            self.forward_executor = _compile(forward, backend=backend)
            self.backward_executor = _compile(backward, backend=backend)
            self.params = init
        self.state_executor = _compile(state_graph, backend=backend) if state_graph is not None else None
        self._state_params = sorted(state_graph.params()) if state_graph is not None else []
        self.updates = updates
        self._fwd_params = [n for n in sorted(fwd_params) if n in self.params]
        self._bwd_params = [n for n in sorted(bwd_params) if n in self.params]
        self.master = {n: self.params[n].astype(np.float32) for n in trainable if low_precision(self.params[n].dtype)}
        self.states: dict[str, dict[str, np.ndarray]] = {}
        self._stale = False

    # ------------------------------------------------------------------ running
    def sync_forward(self) -> None:
        if not self._stale:
            return
        if self.zero_copy:
            if self._one_copy:  # same offsets in both arenas: one byte copy of the weight region
                self.forward_executor.arena[: self._region] = self.backward_executor.arena[: self._region]
            else:
                for n in self._fwd_params:
                    if n in self.backward.graph.params():
                        np.copyto(_slot_view(self.forward_executor, self.forward, n), self.params[n])
        self._stale = False

    def _feed(self, names: list[str]) -> dict[str, np.ndarray] | None:
        return None if self.zero_copy else {n: self.params[n] for n in names}

    def grads(self, inputs: Mapping[str, Any], seed: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Loss and gradients of every ``wrt`` name; buffer updates written back (as torch's forward does)."""
        feed = dict(inputs)
        feed[self.seed_name] = seed
        outs = self.backward_executor.run(inputs=feed, params=self._feed(self._bwd_params))
        if self.state_executor is not None:
            new = self.state_executor.run(inputs=dict(inputs), params={n: self.params[n] for n in self._state_params})
            for name, value in zip(self.updates, new):
                np.copyto(self.params[name], value)
            self._stale = True
        return float(np.asarray(outs[0]).reshape(-1)[0]), dict(zip(self.wrt, outs[1:]))

    def apply(self, opt: Any, grads: Mapping[str, Any], sc: Mapping[str, float], inv_scale: float | None,
              max_norm: float | None, check_finite: bool) -> bool:
        ns = namespace("numpy")
        grads = {n: np.asarray(grads[n]) for n in self.trainable}
        if check_finite and not all(np.isfinite(g).all() for g in grads.values()):
            return False
        for n in self.trainable:
            if n not in self.states:
                self.states[n] = opt.init_state(self.master.get(n, self.params[n]), np.zeros_like)
        new_p, new_m, new_s = apply_update(ns, opt, self.params, self.master, self.states, grads, sc,
                                           inv_scale=inv_scale, max_norm=max_norm)
        for n, value in new_p.items():
            np.copyto(self.params[n], value, casting="same_kind")
        self.master.update(new_m)
        self.states.update({n: {k: np.asarray(v) for k, v in s.items()} for n, s in new_s.items()})
        self._stale = True
        return True

    def step(self, opt: Any, inputs: Mapping[str, Any], seed: np.ndarray, sc: Mapping[str, float], inv_scale: float | None,
             max_norm: float | None, check_finite: bool) -> tuple[float, bool]:
        loss, grads = self.grads(inputs, seed)
        return loss, self.apply(opt, grads, sc, inv_scale, max_norm, check_finite)

    def loss(self, inputs: Mapping[str, Any]) -> float:
        self.sync_forward()
        outs = self.forward_executor.run(inputs=inputs, params=self._feed(self._fwd_params))
        return float(np.asarray(outs[0]).reshape(-1)[0])

    # ------------------------------------------------------------------ state
    def host_params(self) -> dict[str, np.ndarray]:
        return self.params

    def host_states(self) -> dict[str, dict[str, np.ndarray]]:
        return self.states

    def host_master(self) -> dict[str, np.ndarray]:
        return self.master

    def load(self, params: Mapping[str, np.ndarray], states: Mapping[str, Mapping[str, np.ndarray]],
             master: Mapping[str, np.ndarray]) -> None:
        for n, v in params.items():
            np.copyto(self.params[n], v, casting="same_kind")
        self.states = {n: {k: np.array(v, copy=True) for k, v in s.items()} for n, s in states.items()}
        self.master.update({n: np.array(v, copy=True) for n, v in master.items()})
        self._stale = True

    def scope(self) -> Any:
        """The context the trainer's gradient sums run in (nothing to set for NumPy)."""
        return contextlib.nullcontext()

    def to_host(self, grads: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {n: np.asarray(g) for n, g in grads.items()}


def _slot_view(exe: Any, lir: LirModule, name: str) -> np.ndarray:
    """The writable view of param ``name``'s slot in an arena executor's arena."""
    pid = dict(lir.plan.io.params)[name]
    slot = lir.plan.assignments[pid]
    node = lir.graph.nodes[pid]
    return exe.arena[slot.offset: slot.offset + slot.size].view(node.dtype.numpy).reshape(tuple(node.shape))
