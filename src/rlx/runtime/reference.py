"""The reference runtime: ``rlx.run`` and the node evaluator of :mod:`rlx.ops.evaluate`, plus
the param checks the executable backends share.

The interpreter itself sits in ``ops`` so that ``opt`` (constant folding) can use it without
importing upward; runtimes and backends import it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir.errors import FeedError
from rlx.ir.graph import Graph
from rlx.ops.common import compute_dtype
from rlx.ops.evaluate import (
    SUBGRAPHS,
    bind_feed,
    call_graph,
    eval_node,
    feed_maps,
    kernel_of,
    node_out_type,
    run,
    widens,
)

__all__ = ["SUBGRAPHS", "bind_feed", "call_graph", "checked_params", "compute_dtype", "eval_node", "feed_maps", "kernel_of",
           "node_out_type", "run", "widens"]


def checked_params(g: Graph, params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``params`` as arrays, each checked against the graph's declared param (name, dtype, static shape)."""
    declared = g.params()
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise FeedError(f"unknown param(s) {unknown}; the graph's params are {sorted(declared)}")
    out: dict[str, np.ndarray] = {}
    for name, value in params.items():
        node = declared[name].node
        arr = np.asarray(value)
        if arr.dtype != node.dtype.numpy or (node.shape.is_static and arr.shape != tuple(node.shape)):
            raise FeedError(f"param {name!r}: {arr.dtype} {list(arr.shape)} given, {node.type} declared")
        out[name] = arr
    return out
