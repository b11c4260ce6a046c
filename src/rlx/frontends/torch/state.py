"""Buffer and input mutations of an exported torch module, functionalized.

A module in training mode updates buffers in ``forward`` (BatchNorm's ``running_mean`` /
``running_var`` / ``num_batches_tracked``, in-place rescales of a registered buffer).
``torch.export`` records each as a ``BUFFER_MUTATION`` output: the new value, computed from the
values before the call. The importer keeps them as extra graph outputs after the user outputs,
each named ``UPDATE_PREFIX + buffer FQN``; whoever runs the graph writes them back to the
buffer after the call, as torch does (``rlx.compile_training`` does it after every step).

A function that updates a tensor it is *given* (``F.batch_norm(x, running_mean, running_var,
training=True)`` writes the running statistics in place) gives ``USER_INPUT_MUTATION`` outputs:
they follow the buffer updates, each named ``INPUT_UPDATE_PREFIX + input name`` (the graph input
it replaces); a caller that wants torch's behaviour copies each into the array it passed.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph

__all__ = ["INPUT_UPDATE_PREFIX", "UPDATE_PREFIX", "OutputPlan", "buffer_updates", "buffers_of", "input_updates",
           "output_plan", "remember_buffers", "user_graph"]

UPDATE_PREFIX = "buffer_update:"
INPUT_UPDATE_PREFIX = "input_update:"


@dataclass(frozen=True)
class OutputPlan:
    """Where the exported outputs go: ``user`` positions first, then ``(position, buffer FQN)``, then
    ``(position, input name)`` of the mutated user inputs."""

    user: tuple[int, ...]
    updates: tuple[tuple[int, str], ...]
    inputs: tuple[tuple[int, str], ...] = ()

    def reorder(self, outs: Sequence[Any]) -> list[Any]:
        return [outs[i] for i in self.user] + [outs[i] for i, _ in self.updates] + [outs[i] for i, _ in self.inputs]

    def mark(self, g: Graph) -> Graph:
        """Name the update outputs (the last ones) after their buffers / inputs; a leaf output (a mutation
        that writes the old value back) goes through an identity so it can carry the name."""
        named = [UPDATE_PREFIX + t for _, t in self.updates] + [INPUT_UPDATE_PREFIX + t for _, t in self.inputs]
        if not named:
            return g
        ids = list(g.output_ids)
        first = len(self.user)
        for k, name in enumerate(named):
            oid = ids[first + k]
            node = g.node(oid)
            if node.op in ("input", "param", "constant") or ids.count(oid) > 1:
                oid = ids[first + k] = g.apply("reshape", oid, new_shape=list(node.shape)).id
            g.rename(oid, name)
        g.set_outputs(ids)
        return g

    @property
    def extra(self) -> int:
        """How many outputs follow the user outputs."""
        return len(self.updates) + len(self.inputs)


def output_plan(ep: Any, error: type[RlxError] = RlxError) -> OutputPlan:
    """The output plan of an exported program; mutations other than of buffers and user inputs raise ``error``."""
    from torch.export.graph_signature import OutputKind

    user: list[int] = []
    updates: list[tuple[int, str]] = []
    inputs: list[tuple[int, str]] = []
    bad: list[str] = []
    for i, spec in enumerate(ep.graph_signature.output_specs):
        if spec.kind is OutputKind.USER_OUTPUT:
            user.append(i)
        elif spec.kind is OutputKind.BUFFER_MUTATION:
            updates.append((i, str(spec.target)))
        elif spec.kind is OutputKind.USER_INPUT_MUTATION:
            inputs.append((i, str(spec.target)))
        else:
            bad.append(f"{spec.kind.name} of {spec.target!r}")
    if bad:
        raise error(f"the exported module mutates state rlx cannot write back ({', '.join(bad)}); only buffer "
                    "and input mutations (BatchNorm running statistics, in-place updates) are functionalized")
    return OutputPlan(tuple(user), tuple(updates), tuple(inputs))


# graph id -> the params that were torch buffers (not nn.Parameters); dropped with the graph
_BUFFERS: dict[int, frozenset[str]] = {}


def remember_buffers(g: Graph, ep: Any) -> Graph:
    """Record which params of the imported ``g`` were buffers of the module (``inv_freq``,
    running statistics ...): torch's optimizers never see them, so training leaves them alone."""
    from torch.export.graph_signature import InputKind

    names = _buffer_names(s.target for s in ep.graph_signature.input_specs if s.kind is InputKind.BUFFER)
    key = id(g)
    _BUFFERS[key] = frozenset(n for n in names if n in g.params())
    weakref.finalize(g, _BUFFERS.pop, key, None)
    return g


def _buffer_names(targets: Iterable[Any]) -> list[str]:
    return [str(t) for t in targets if t is not None]


def buffers_of(g: Graph) -> frozenset[str]:
    """The params of ``g`` that the torch importer read from module buffers (empty for other graphs)."""
    return _BUFFERS.get(id(g), frozenset())


def _named_outputs(g: Graph, prefix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for pos, oid in enumerate(g.output_ids):
        name = g.node(oid).name or ""
        if name.startswith(prefix):
            out[name[len(prefix):]] = pos
    return out


def buffer_updates(g: Graph) -> dict[str, int]:
    """Buffer FQN -> output position, for the outputs the importer named as buffer updates."""
    return _named_outputs(g, UPDATE_PREFIX)


def input_updates(g: Graph) -> dict[str, int]:
    """Input name -> output position of its new value, for the user inputs the exported program mutates."""
    return _named_outputs(g, INPUT_UPDATE_PREFIX)


def user_graph(g: Graph, keep: Sequence[int] | None = None) -> Graph:
    """``g`` with only its user outputs (or the output positions in ``keep``); same node ids."""
    updates = set(buffer_updates(g).values()) | set(input_updates(g).values())
    positions = [i for i in range(len(g.output_ids)) if i not in updates] if keep is None else list(keep)
    out = Graph(g.name, stage=g.stage, ranges=g.symbol_ranges)
    for node in g.nodes:
        out.append(node.op, node.inputs, node.attrs, name=node.name, prov=node.prov, type=node.types, check=False)
    out.set_outputs([g.output_ids[i] for i in positions])
    return out


def updated_params(g: Graph, params: Mapping[str, Any]) -> list[str]:
    """The params of ``g`` that a buffer update writes (never trained)."""
    return [n for n in buffer_updates(g) if n in params]


def batch_norm_train(cx: Any, x: Any, weight: Any, bias: Any, mean: Any, var: Any, momentum: Any, eps: float) -> tuple:
    """``aten._native_batch_norm_legit_functional`` in training mode: normalize with the batch's
    statistics (biased variance) and return torch's five results ``(y, mean, rstd, new running
    mean, new running var)``; the running variance takes the unbiased batch variance, as torch does."""
    g = cx.g
    rank = len(x.shape)
    axes = [0, *range(2, rank)]
    sizes = [x.shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        raise cx.fail("batch norm in training mode needs static batch and spatial sizes")
    if momentum is None and (mean is not None or var is not None):
        raise cx.fail("batch norm in training mode with momentum=None (a cumulative average) is not supported")
    count = 1
    for s in sizes:
        count *= s
    c = x.shape[1]
    bshape = [1, c] + [1] * (rank - 2)
    mu = g.mean(x, axes=axes, keep_dim=True)
    centered = x - mu
    var_b = g.mean(centered * centered, axes=axes, keep_dim=True)
    rstd = g.rsqrt(var_b + cx.scalar(eps, x.dtype))
    y = centered * rstd
    if weight is not None:
        y = y * g.reshape(weight, new_shape=bshape)
    if bias is not None:
        y = y + g.reshape(bias, new_shape=bshape)
    mu_c, var_c, rstd_c = (g.reshape(v, new_shape=[c]) for v in (mu, var_b, rstd))
    new_mean = new_var = None
    m = 0.0 if momentum is None else float(momentum)
    if mean is not None:
        new_mean = mean * cx.scalar(1.0 - m, mean.dtype) + g.cast(mu_c, to=mean.dtype) * cx.scalar(m, mean.dtype)
    if var is not None:
        unbiased = var_c * cx.scalar(count / max(count - 1, 1), x.dtype)
        new_var = var * cx.scalar(1.0 - m, var.dtype) + g.cast(unbiased, to=var.dtype) * cx.scalar(m, var.dtype)
    return (y, mu_c, rstd_c, new_mean, new_var)

