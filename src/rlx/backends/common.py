"""Helpers the compiled backends and the importers share: which nodes an output needs, the fast feed
check."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from rlx.ir.graph import Graph


def live_nodes(g: Graph, outputs: Sequence[int] | None = None, given: Collection[int] = ()) -> list[bool]:
    """``live[node id]``: whether one of ``outputs`` (default: ``g``'s) depends on the node, not looking
    past the nodes in ``given`` (values a module receives instead of computing them)."""
    live = [False] * len(g)
    for o in g.output_ids if outputs is None else outputs:
        live[o] = True
    for node in reversed(g.nodes):
        if live[node.id] and node.id not in given:
            for i in node.inputs:
                live[i] = True
    return live


class PlainFeed:
    """The fast path of the feed check a compiled backend runs before the full one (``bind_feed``):
    exactly the declared inputs, as NumPy arrays of the declared dtype and static shape. Anything
    else (a list, another dtype, a symbolic graph) takes the full check, which names every problem."""

    def __init__(self, g: Graph):
        inputs = g.inputs()
        self.static = all(v.node.shape.is_static for v in inputs.values())
        self.expect = {n: (v.node.dtype.numpy, tuple(v.node.shape)) for n, v in inputs.items()} if self.static else {}

    def __call__(self, inputs: Any) -> bool:
        if not self.static or inputs.__class__ is not dict or len(inputs) != len(self.expect):
            return False
        for name, (dtype, shape) in self.expect.items():
            a = inputs.get(name)
            if a.__class__ is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return False
        return True
