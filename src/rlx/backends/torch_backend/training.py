"""The torch training engine of ``rlx.compile_training(..., backend="torch")``: the backward
graph (forward recomputation + gradients, one graph) as one fx module, called on params and
optimizer state that stay torch tensors on the device between steps; the optimizer rule runs
on them with torch ops (the shared formula of ``rlx.train.optim``, under ``no_grad``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlx.backends.torch_backend.executable import TorchExecutable, to_numpy, to_torch
from rlx.ir.dtype import needs_f32_master
from rlx.ir.errors import FeedError
from rlx.ir.graph import Graph

__all__ = ["Engine"]


class _Module:
    """A graph's fx module called on tensors: inputs by name, params (declaration order) by name."""

    def __init__(self, graph: Graph, init: Mapping[str, np.ndarray], device: Any):
        decl = graph.params()
        self.exe = TorchExecutable(graph, {n: init[n] for n in decl}, device=device, fold_weights=False,
                                   memory_format="contiguous")
        self.inputs = {n: v.node.dtype for n, v in graph.inputs().items()}
        self.params = list(decl)
        self.device = self.exe.device

    def __call__(self, inputs: Mapping[str, torch.Tensor], params: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        tensors = [inputs[n] for n in self.inputs] + self.exe._from_params([params[n] for n in self.params])
        # looked up per call: the first call's module checks result shapes, later calls get the bare one
        return list(self.exe._call(self.exe._module({}), tensors))


class Engine:
    """Params, f32 master copies of low-precision params and optimizer state as resident tensors."""

    kind = "torch"
    zero_copy = False

    def __init__(self, backward: Graph, forward: Graph, state_graph: Graph | None, updates: list[str], wrt: list[str],
                 trainable: list[str], init: dict[str, np.ndarray], seed_name: str, opt: Any, shared: Mapping[str, Any], *,
                 device: Any = None, max_norm: float | None = None):
        self.wrt, self.trainable, self.updates, self.seed_name, self.opt = list(wrt), list(trainable), list(updates), seed_name, opt
        self.ns = shared["namespace"]("torch", torch)
        self._update = shared["update"]
        self.backward = _Module(backward, init, device)
        self.device = self.backward.device
        self._forward_graph, self._init_decl = forward, {n: init[n] for n in forward.params()}
        self._forward: _Module | None = None
        self.state = _Module(state_graph, init, device) if state_graph is not None else None
        self._decl = {n: v for n, v in {**backward.inputs(), **(state_graph.inputs() if state_graph is not None else {})}.items()}
        self._dtypes = {n: _dtype_of(backward, state_graph, forward, n) for n in init}
        self.params = {n: to_torch(np.array(a, copy=True), self._dtypes[n], self.device) for n, a in init.items()}
        self.master = {n: self.params[n].to(torch.float32).clone() for n in trainable if needs_f32_master(init[n].dtype)}
        self.states = {n: opt.init_state(self.master.get(n, self.params[n]), torch.zeros_like) for n in trainable}

    def _tensors(self, inputs: Mapping[str, Any], names: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        missing = sorted(n for n in names if n not in inputs and n != self.seed_name)
        if missing:
            raise FeedError(f"torch training: missing input(s) {missing}")
        out = {}
        for n, v in names.items():
            if n == self.seed_name:
                continue
            a = inputs[n]
            if isinstance(a, torch.Tensor):
                out[n] = a.to(self.device)
                continue
            a = np.asarray(a)
            node = v.node
            if a.dtype != node.dtype.numpy or (node.shape.is_static and a.shape != tuple(node.shape)):
                raise FeedError(f"torch training: input {n!r}: {a.dtype} {list(a.shape)} given, {node.type} declared")
            out[n] = to_torch(a, node.dtype, self.device)
        return out

    @torch.no_grad()
    def grads(self, inputs: Mapping[str, Any], seed: np.ndarray) -> tuple[float, dict[str, torch.Tensor]]:
        feed = self._tensors(inputs, self._decl)
        feed[self.seed_name] = torch.from_numpy(np.array(seed)).to(self.device)
        outs = self.backward(feed, self.params)
        if self.state is not None:
            for name, value in zip(self.updates, self.state(feed, self.params)):
                self.params[name] = value
        return float(outs[0].reshape(-1)[0]), dict(zip(self.wrt, outs[1:]))

    @torch.no_grad()
    def apply(self, opt: Any, grads: Mapping[str, Any], sc: Mapping[str, float], inv_scale: float | None,
              max_norm: float | None, check_finite: bool) -> bool:
        grads = {n: grads[n] for n in self.trainable}
        if check_finite and not bool(self.ns.all_finite(list(grads.values()))):
            return False
        new_p, new_m, new_s = self._update(self.ns, opt, self.params, self.master, self.states, grads, sc,
                                           inv_scale=inv_scale, max_norm=max_norm)
        self.params.update(new_p)
        self.master.update(new_m)
        self.states.update(new_s)
        return True

    def step(self, opt: Any, inputs: Mapping[str, Any], seed: np.ndarray, sc: Mapping[str, float], inv_scale: float | None,
             max_norm: float | None, check_finite: bool) -> tuple[float, bool]:
        loss, grads = self.grads(inputs, seed)
        return loss, self.apply(opt, grads, sc, inv_scale, max_norm, check_finite)

    @torch.no_grad()
    def loss(self, inputs: Mapping[str, Any]) -> float:
        if self._forward is None:
            self._forward = _Module(self._forward_graph, self._init_decl, self.device)
        feed = self._tensors(inputs, self._forward_graph.inputs())
        return float(self._forward(feed, self.params)[0].reshape(-1)[0])

    # ------------------------------------------------------------------ host state
    def host_params(self) -> dict[str, np.ndarray]:
        return {n: np.array(to_numpy(t, self._dtypes[n]), copy=True) for n, t in self.params.items()}

    def host_states(self) -> dict[str, dict[str, np.ndarray]]:
        return {n: {k: v.detach().cpu().numpy().copy() for k, v in s.items()} for n, s in self.states.items()}

    def host_master(self) -> dict[str, np.ndarray]:
        return {n: t.detach().cpu().numpy().copy() for n, t in self.master.items()}

    def load(self, params: Mapping[str, np.ndarray], states: Mapping[str, Mapping[str, np.ndarray]],
             master: Mapping[str, np.ndarray]) -> None:
        for n, v in params.items():
            self.params[n] = to_torch(np.array(v, copy=True), self._dtypes[n], self.device)
        for n, s in states.items():
            self.states[n] = {k: torch.from_numpy(np.array(v, copy=True)).to(self.device) for k, v in s.items()}
        for n, v in master.items():
            self.master[n] = torch.from_numpy(np.array(v, np.float32, copy=True)).to(self.device)

    def scope(self) -> Any:
        """The context the trainer's gradient sums run in."""
        return torch.no_grad()

    def to_host(self, grads: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {n: g.detach().cpu().numpy().copy() for n, g in grads.items()}


def _dtype_of(*graphs_and_name: Any) -> Any:
    *graphs, name = graphs_and_name
    for g in graphs:
        if g is not None and name in g.params():
            return g.params()[name].node.dtype
    raise FeedError(f"torch training: param {name!r} is read by no graph")
