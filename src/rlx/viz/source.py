"""Where a node came from, in the source model's words: the ONNX op type and node name, or the
torch aten op, FX node and ``nn.Module`` path (:class:`rlx.ir.graph.Origin`, kept on MIR nodes
through import and passes), and the block path the viewer groups a large graph by."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlx.ir.graph import GraphStage, Node, Origin

_LEAVES = ("input", "param", "constant")
#: a large graph is grouped at the shallowest block depth with at least this many groups
MIN_GROUPS = 6


def origins_of(node: Node) -> tuple[Origin, ...]:
    return node.prov.origins if node.prov is not None else ()


def origin_text(o: Origin) -> str:
    """``ONNX Reshape "/decoder/Reshape"`` / ``torch aten.addmm.default %addmm in layers.0.fc``."""
    if o.framework == "onnx":
        return f"ONNX {o.op}" + (f' "{o.name}"' if o.name else "") + (f" in {o.module}" if o.module else "")
    return f"{o.framework} {o.op}" + (f" %{o.name}" if o.name else "") + (f" in {o.module}" if o.module else "")


def source_label(node: Node) -> str | None:
    """The source op types a node computes (``MatMul+Add+Relu`` once fused), for the node's box."""
    ops = list(dict.fromkeys(o.op.removeprefix("aten.").split(".")[0] for o in origins_of(node)))
    if not ops:
        return None
    text = "+".join(ops[:3]) + ("+…" if len(ops) > 3 else "")
    return text if len(text) <= 40 else text[:37] + "..."


def source_search(node: Node) -> str:
    """The words search matches: every origin's op, name and module."""
    return " ".join(f"{o.op} {o.name} {o.module or ''}" for o in origins_of(node))


_ONNX_NAME_PATH = re.compile(r"^/(.+)/[^/]*$")  # torch.onnx's TorchScript names: /layer1/0/conv1/Conv


def block_path(node: Node, stage: GraphStage) -> str:
    """The block path of a node: its HIR / module label, else the module path of the source node
    (an ONNX exporter's namespace, or the path in a ``/a/b/Op`` node name); ``""`` for none."""
    if node.op in _LEAVES:
        return ""
    label = node.prov.label if node.prov is not None else None
    if not label and stage is GraphStage.HIR:
        label = node.name
    if not label:
        for o in origins_of(node):
            if o.module:
                label = o.module
                break
            m = _ONNX_NAME_PATH.match(o.name or "")
            if m:
                label = m.group(1)
                break
        if not label and origins_of(node) and node.name and "/" in node.name.strip("/"):
            label = node.name.strip("/").rsplit("/", 1)[0]  # an unnamed ONNX node's output name: conv2_1/x1/bn_0
    return (label or "").strip("/.")


_PART = re.compile(r"[^/.]+")


def path_parts(path: str) -> list[str]:
    """``"layers.0/attn"`` -> ``["layers", "0", "attn"]`` (module paths use dots, block labels slashes)."""
    return _PART.findall(path)


def path_prefix(path: str, depth: int) -> str:
    """The first ``depth`` parts of ``path`` as written there (``"layers.0"``)."""
    parts = list(_PART.finditer(path))
    return path[: parts[min(depth, len(parts)) - 1].end()] if parts else ""


def group_depth(paths: Sequence[Sequence[str]]) -> int:
    """The shallowest depth at which the block paths make at least :data:`MIN_GROUPS` groups
    (the deepest one when none does): one ``model`` block around everything is no overview."""
    deepest = max((len(p) for p in paths), default=0)
    for depth in range(1, deepest + 1):
        if len({tuple(p[:depth]) for p in paths if p}) >= MIN_GROUPS:
            return depth
    return max(deepest, 1)
