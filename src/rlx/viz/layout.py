"""A layered layout for graph pictures that need no Graphviz (the HTML viewer).

Ranks are longest-path depths from the sources; within a rank nodes are ordered by a few
barycenter sweeps (down, then up), which untangles chains and residual blocks well enough
for browsing. Linear in nodes and edges per sweep, so tens of thousands of nodes lay out in
about a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LINE_H = 13
RANK_GAP = 56
NODE_GAP = 18
CHAR_W = 6.6


@dataclass
class Box:
    x: float  # centre
    y: float  # top
    w: float
    h: float


def node_width(label: str) -> float:
    return max(70.0, CHAR_W * max(len(line) for line in label.split("\n")) + 18)


def node_height(label: str) -> float:
    return LINE_H * (label.count("\n") + 1) + 10


def layered(order: Sequence[int], preds: Mapping[int, Sequence[int]], labels: Mapping[int, str], sweeps: int = 4) -> dict[int, Box]:
    """Boxes for ``order`` (a topological order) with edges ``preds[n]`` → ``n``."""
    rank: dict[int, int] = {}
    for n in order:
        rank[n] = 1 + max((rank[p] for p in preds.get(n, ()) if p in rank), default=-1)
    succs: dict[int, list[int]] = {n: [] for n in order}
    for n in order:
        for p in preds.get(n, ()):
            if p in succs:
                succs[p].append(n)
    for n in reversed(order):  # pull each node down to just above its first reader: a weight's reshape or an
        if succs[n]:            # extra input sits by the op that uses it, not in the first row
            rank[n] = max(rank[n], min(rank[s] for s in succs[n]) - 1)
    layers: list[list[int]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for n in order:
        layers[rank[n]].append(n)
    pos = {n: float(i) for layer in layers for i, n in enumerate(layer)}

    def sweep(seq: Sequence[list[int]], nbrs: Mapping[int, Sequence[int]]) -> None:
        for layer in seq:
            def key(n: int) -> float:
                ps = [pos[p] for p in nbrs.get(n, ()) if p in pos]
                return sum(ps) / len(ps) if ps else pos[n]

            layer.sort(key=key)
            for i, n in enumerate(layer):
                pos[n] = float(i)

    for _ in range(sweeps):
        sweep(layers[1:], preds)
        sweep(layers[-2::-1], succs)
    boxes: dict[int, Box] = {}
    pitch = max((node_height(labels[n]) for n in order), default=LINE_H) + RANK_GAP
    for r, layer in enumerate(layers):
        widths = [node_width(labels[n]) for n in layer]
        total = sum(widths) + NODE_GAP * max(0, len(layer) - 1)
        x = -total / 2
        for n, w in zip(layer, widths):
            boxes[n] = Box(x + w / 2, r * pitch, w, node_height(labels[n]))
            x += w + NODE_GAP
    return boxes
