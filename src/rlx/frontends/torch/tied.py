"""Tied weights under every name torch gives them.

``torch.export`` lifts a tensor shared by several modules (an LM head tied to the word embeddings) once,
under one of its names (often not the one ``named_parameters()`` keeps). The imported graph's param takes
the name ``named_parameters()`` / ``named_buffers()`` yield (the first), so gradient lists built from them
find it; the returned params mapping also answers every other name of the tensor (``params["lm_head.weight"]``)
while iterating only the graph's names, so it feeds ``rlx.run`` as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

import numpy as np

from rlx.ir.graph import Graph


class TiedParams(dict):
    """Params by graph name; ``aliases`` maps each other name of a tied tensor to the graph's name."""

    def __init__(self, values: Mapping[str, np.ndarray], aliases: Mapping[str, str]):
        super().__init__(values)
        self.aliases = {a: c for a, c in aliases.items() if c in values and a not in values}

    def __missing__(self, key: str) -> np.ndarray:
        if key in self.aliases:
            return self[self.aliases[key]]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.aliases

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default


def _names_by_tensor(module: Any) -> dict[str, list[str]]:
    """name -> every name of the same tensor, the one ``named_parameters()`` keeps first."""
    groups: dict[int, list[str]] = {}
    for name, t in chain(module.named_parameters(remove_duplicate=False), module.named_buffers(remove_duplicate=False)):
        groups.setdefault(id(t), []).append(name)
    return {n: names for names in groups.values() for n in names}


def _renamed(g: Graph, rename: Mapping[str, str]) -> Graph:
    out = Graph(g.name, ranges=g.symbol_ranges)
    for node in g.nodes:
        attrs, name = node.attrs, node.name
        if node.op == "param" and node.attrs["name"] in rename:
            name = rename[node.attrs["name"]]
            attrs = {**dict(node.attrs), "name": name}
        out.append(node.op, node.inputs, attrs, name=name, prov=node.prov, type=node.types, check=False)
    out.set_outputs(g.output_ids)
    return out


def canonical_names(module: Any, g: Graph, params: Mapping[str, np.ndarray]) -> tuple[Graph, TiedParams]:
    """``g`` with each tied param under its ``named_parameters()`` name, and params answering every name."""
    names = _names_by_tensor(module)
    rename = {p: names[p][0] for p in g.params() if p in names and names[p][0] != p}
    if rename:
        g = _renamed(g, rename)
    values = {rename.get(k, k): v for k, v in params.items()}
    aliases = {alias: group[0] for group in names.values() if group[0] in values for alias in group[1:]}
    return g, TiedParams(values, aliases)
