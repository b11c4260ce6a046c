"""HIR: block ops for model builders, ``FusionPolicy`` lowering to MIR, staged modules.

``rlx.define(name, build)`` builds a :class:`GraphModule` at stage HIR through the HIR
builder ``h`` (:class:`HirGraph`); ``m.lower_to_mir(policy)`` lowers it to a verified
MIR graph whose nodes keep their HIR provenance. The block ops themselves are defined in
:mod:`rlx.ops.hir_blocks`.
"""

from rlx.hir import codec as _codec  # noqa: F401  (registers the module codec)
from rlx.hir.builder import HirGraph
from rlx.hir.errors import LowerError
from rlx.hir.extensions import (
    apply_hir_extensions,
    apply_hir_extensions_named,
    hir_extensions,
    register_block,
    register_hir_extension,
    unregister_block,
    unregister_hir_extension,
    user_blocks,
)
from rlx.hir.inspect import inspect, inspect_graph_diff, inspect_hir, inspect_lir, inspect_mir, op_histogram, pretty_print, pretty_stats
from rlx.hir.lower import lower_to_mir
from rlx.hir.module import GraphModule, HirModule, define
from rlx.hir.policy import FusionPolicy
from rlx.hir.stages import AdPipelineStage

__all__ = [
    "AdPipelineStage",
    "FusionPolicy",
    "GraphModule",
    "HirGraph",
    "HirModule",
    "LowerError",
    "apply_hir_extensions",
    "apply_hir_extensions_named",
    "define",
    "hir_extensions",
    "inspect",
    "inspect_graph_diff",
    "inspect_hir",
    "inspect_lir",
    "inspect_mir",
    "lower_to_mir",
    "op_histogram",
    "pretty_print",
    "pretty_stats",
    "register_block",
    "register_hir_extension",
    "unregister_block",
    "unregister_hir_extension",
    "user_blocks",
]
