"""Helpers the compiled backends share: which nodes an output needs, the fast feed check."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.ir.graph import Graph


def live_nodes(g: Graph) -> list[bool]:
    """``live[node id]``: whether some output of ``g`` depends on the node."""
    live = [False] * len(g)
    for o in g.output_ids:
        live[o] = True
    for node in reversed(g.nodes):
        if live[node.id]:
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
