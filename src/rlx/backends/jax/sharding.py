"""Sharding helpers: partition specs per input / param name over a ``jax.sharding.Mesh``.

``in_shardings`` maps graph input and param names to a ``PartitionSpec`` (or a ready
``NamedSharding``); names left out are replicated. Specs are checked against the declared
shapes here, so a typo or an indivisible dim is an :class:`rlx.RlxError` naming the tensor,
not an XLA error deep inside ``jax.jit``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Node


def _mesh_size(mesh: Mesh, entry: Any) -> int:
    names = entry if isinstance(entry, tuple) else (entry,)
    for n in names:
        if n not in mesh.shape:
            raise RlxError(f"partition spec names mesh axis {n!r}; the mesh's axes are {list(mesh.axis_names)}")
    return math.prod(mesh.shape[n] for n in names)


def check_spec(node: Node, spec: PartitionSpec, mesh: Mesh) -> None:
    """Rank and divisibility of ``spec`` against a leaf's declared shape (symbolic dims skipped)."""
    name = node.attrs.get("name")
    if len(spec) > len(node.shape):
        raise RlxError(f"{node.op} {name!r}: partition spec {spec} has {len(spec)} entries for rank {len(node.shape)} ({node.type})")
    for axis, entry in enumerate(spec):
        if entry is None:
            continue
        parts = _mesh_size(mesh, entry)
        dim = node.shape[axis]
        if isinstance(dim, int) and dim % parts:
            raise RlxError(f"{node.op} {name!r}: axis {axis} of size {dim} does not split into {parts} shards ({entry!r} of {spec})")


def leaf_shardings(g: Graph, mesh: Mesh, specs: Mapping[str, Any] | None) -> dict[str, Sharding]:
    """A NamedSharding for every input and param of ``g`` (replicated unless ``specs`` names it)."""
    specs = dict(specs or {})
    leaves = {**g.inputs(), **g.params()}
    unknown = sorted(set(specs) - set(leaves))
    if unknown:
        raise RlxError(f"in_shardings names {unknown}, which are not inputs or params of graph {g.name!r} (it has {sorted(leaves)})")
    out: dict[str, Sharding] = {}
    for name, value in leaves.items():
        spec = specs.get(name)
        if spec is None:
            spec = PartitionSpec()
        if isinstance(spec, NamedSharding):
            check_spec(value.node, spec.spec, spec.mesh)
            out[name] = spec
            continue
        if isinstance(spec, Sharding):
            out[name] = spec
            continue
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec) if isinstance(spec, (tuple, list)) else PartitionSpec(spec)
        check_spec(value.node, spec, mesh)
        out[name] = NamedSharding(mesh, spec)
    return out


def output_shardings(g: Graph, mesh: Mesh | None, spec: Any) -> Any:
    """jit's out_shardings from None (let XLA choose), one spec for every output, or one per output."""
    if spec is None:
        return None

    def one(s: Any) -> Any:
        if s is None or isinstance(s, Sharding):
            return s
        if mesh is None:
            raise RlxError("out_shardings given as partition specs need a mesh")
        return NamedSharding(mesh, s if isinstance(s, PartitionSpec) else PartitionSpec(*s))

    if isinstance(spec, (PartitionSpec, Sharding)):
        return tuple(one(spec) for _ in g.output_ids)
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        if len(spec) != len(g.output_ids):
            raise RlxError(f"out_shardings has {len(spec)} entries for {len(g.output_ids)} outputs")
        return tuple(one(s) for s in spec)
    raise RlxError(f"out_shardings must be None, a PartitionSpec / Sharding or a list of them, got {type(spec).__name__}")


def single_device(device: Any) -> SingleDeviceSharding:
    return SingleDeviceSharding(device)


def data_parallel(g: Graph, axis: str = "data", batch_axis: int = 0, inputs: Sequence[str] | None = None) -> dict[str, PartitionSpec]:
    """Specs that split every runtime input (or the named ones) along ``batch_axis`` over mesh axis ``axis``; params stay replicated."""
    chosen = g.inputs() if inputs is None else {n: g.inputs()[n] for n in inputs}
    specs: dict[str, PartitionSpec] = {}
    for name, value in chosen.items():
        rank = len(value.shape)
        if rank == 0:
            continue
        entries = [None] * rank
        entries[batch_axis % rank] = axis
        specs[name] = PartitionSpec(*entries)
    return specs
