"""The reference runtime: ``rlx.run`` and the node evaluator of :mod:`rlx.ops.evaluate`.

The interpreter itself sits in ``ops`` so that ``opt`` (constant folding) can use it without
importing upward; runtimes and backends import it from here.
"""

from rlx.ops.evaluate import SUBGRAPHS, bind_feed, call_graph, compute_dtype, eval_node, kernel_of, run

__all__ = ["SUBGRAPHS", "bind_feed", "call_graph", "compute_dtype", "eval_node", "kernel_of", "run"]
