"""Graph surgery utilities of upstream's optimizer crate: inline one graph into another, and
turn params into inputs (docs/pipeline.md#graph-edits).

* :func:`inline_into` copies ``source`` into ``target``: its inputs are bound by name to values
  of ``target`` (a missing binding is an error naming it), its params by name when a map is
  given, else re-created as params of ``target`` (an existing param of the same name and type is
  shared; a different type is an error), constants are re-emitted, nested bodies are copied as
  they are. It returns the ``target`` values of ``source``'s outputs.
* :func:`promote_params_to_inputs` returns a copy of a graph whose listed params are inputs of
  the same name, shape and dtype (names that are not params are ignored, as upstream), e.g. to
  vmap or differentiate over weights as data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Value


def inline_into(target: Graph, source: Graph, input_bindings: Mapping[str, Value],
                param_bindings: Mapping[str, Value] | None = None) -> list[Value]:
    """Copy ``source`` into ``target``; the values of its outputs there."""
    if target is source:
        raise RlxError("inline_into: a graph cannot be inlined into itself")
    env: dict[int, Value] = {}
    existing = target.params()
    for node in source.nodes:
        if node.op == "input":
            name = node.attrs["name"]
            if name not in input_bindings:
                raise RlxError(f"inline_into: input {name!r} of {source.name!r} has no binding (bound: {sorted(input_bindings)})")
            env[node.id] = _bound(target, input_bindings[name], node.type, f"input {name!r}")
        elif node.op == "param":
            name = node.attrs["name"]
            if param_bindings is not None:
                if name not in param_bindings:
                    raise RlxError(f"inline_into: param {name!r} of {source.name!r} has no binding (bound: {sorted(param_bindings)})")
                env[node.id] = _bound(target, param_bindings[name], node.type, f"param {name!r}")
            elif name in existing:
                env[node.id] = _bound(target, existing[name], node.type, f"param {name!r} (already in {target.name!r})")
            else:
                env[node.id] = target.param(name, node.shape, node.dtype)
        else:
            env[node.id] = target.append(node.op, [env[i] for i in node.inputs], dict(node.attrs), name=node.name,
                                         prov=node.prov)
    return [env[i] for i in source.output_ids]


def _bound(target: Graph, value: Value, want, what: str) -> Value:
    if not isinstance(value, Value) or value.graph is not target:
        raise RlxError(f"inline_into: the binding of {what} must be a value of the target graph, got {value!r}")
    if value.type != want:
        raise RlxError(f"inline_into: {what} is {want} in the source but bound to {value.type}")
    return value


def promote_params_to_inputs(g: Graph, names: Iterable[str]) -> Graph:
    """A copy of ``g`` (same node ids) in which the params ``names`` are inputs."""
    promote = set(names)
    out = Graph(g.name, g.stage, g.symbol_ranges)
    for node in g.nodes:
        op = "input" if node.op == "param" and node.attrs["name"] in promote else node.op
        out.append(op, node.inputs, dict(node.attrs), name=node.name, prov=node.prov)
    out.set_outputs(g.output_ids)
    return out
