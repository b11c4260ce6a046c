"""The ``"hir"`` document codec for :class:`GraphModule`: its graph plus its fusion policy.

A module at stage LIR is saved as its ``LirModule`` (``rlx.save(m.lir, …)``); the LIR layer
owns that codec and ``hir`` must not import it.
"""

from __future__ import annotations

from rlx.hir.module import GraphModule
from rlx.hir.policy import FusionPolicy
from rlx.ir.errors import FormatError
from rlx.ir.graph import GraphStage
from rlx.ir.serialize import Decoder, Encoder, register_codec


def encode_module(module: GraphModule, enc: Encoder) -> dict:
    if module.stage is GraphStage.LIR:
        raise FormatError(f"module {module.name!r} is at stage LIR: save its LirModule (module.lir) instead")
    return {"graph": enc.graph(module.graph), "fusion_policy": module.fusion_policy.value}


def decode_module(doc: dict, dec: Decoder) -> GraphModule:
    dec.keys(doc, "", ("graph", "fusion_policy"))
    graph = dec.graph(doc["graph"], "graph")
    policy = dec.str(doc, "fusion_policy", "")
    if policy not in {p.value for p in FusionPolicy}:
        raise dec.error("fusion_policy", f"expected one of {[p.value for p in FusionPolicy]}, got {policy!r}")
    return GraphModule(graph, policy)


register_codec("hir", GraphModule, encode_module, decode_module, kind="graph_module")
