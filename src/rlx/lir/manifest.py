"""Binding manifest: a planned model described for a runtime written in another language.

A C, C++ or Rust host that embeds an rlx plan needs to know, without rlx, where each input,
param and output lives in the arena, which weights to load where (with checksums), which
symbols are still free, and in what order the nodes run. :func:`binding_manifest` writes
that as plain JSON (schema in ``docs/format.md``, "Binding manifest");
:func:`write_binding` adds the weights file (``weights-<sha>.bin``, named by its content), the
params packed back to back, each at the ``file_offset`` its entry names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir import atomic, fileio
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph
from rlx.lir.plan import LirModule

MANIFEST_FORMAT = "rlx-binding-manifest"
MANIFEST_VERSION = 1
WEIGHTS_FILE = "weights.bin"  # the name before weights files were named by content (removed when rewritten)
_WEIGHTS_NAME = re.compile(r"weights(-[0-9a-f]{16})?\.bin")


def _dims(shape: Any) -> list[int | str]:
    return [d if isinstance(d, int) else str(d) for d in shape]


def _le_bytes(arr: np.ndarray) -> bytes:
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def _entry(lir: LirModule, node_id: int, name: str) -> dict[str, Any]:
    node = lir.graph.node(node_id)
    plan = lir.plan
    slot = plan.assignments.get(node_id)
    alias = plan.view_aliases.get(node_id)
    return {
        "name": name,
        "node": node_id,
        "dtype": str(node.dtype),
        "itemsize": node.dtype.itemsize,
        "shape": _dims(node.shape),
        "bytes": node.type.nbytes,
        "offset": slot.offset if slot is not None else None,
        "is_view": alias is not None,
        "root": alias.root if alias is not None else None,
    }


def _output_names(g: Graph) -> list[str]:
    names, seen = [], set()
    for i, oid in enumerate(g.output_ids):
        name = g.node(oid).name or f"output{i}"
        if name in seen:
            name = f"output{i}"
        seen.add(name)
        names.append(name)
    return names


def _param_bytes(lir: LirModule, params: Mapping[str, Any]) -> dict[str, bytes]:
    """Each param's little-endian bytes in the graph's dtype, checked against its declared size."""
    g = lir.graph
    missing = sorted(name for name, _ in lir.plan.io.params if name not in params)
    if missing:
        raise RlxError(f"binding manifest: no value for params {missing}")
    out = {}
    for name, nid in lir.plan.io.params:
        node = g.node(nid)
        data = _le_bytes(np.asarray(params[name], dtype=node.dtype.numpy))
        if node.type.nbytes is not None and len(data) != node.type.nbytes:
            raise RlxError(f"binding manifest: param {name!r} has {len(data)} bytes, the graph declares {node.type.nbytes}")
        out[name] = data
    return out


def binding_manifest(lir: LirModule, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of ``lir`` as a JSON-ready dict; with ``params``, every param entry gets the
    SHA-256 of its little-endian bytes and a ``file_offset`` into the weights file."""
    if not isinstance(lir, LirModule):
        raise RlxError(f"binding manifest: expected an LirModule (rlx.plan's result), got {type(lir).__name__}")
    return _manifest(lir, None if params is None else _param_bytes(lir, params))


def _manifest(lir: LirModule, blobs: Mapping[str, bytes] | None) -> dict[str, Any]:
    g, plan = lir.graph, lir.plan
    param_entries = [_entry(lir, nid, name) for name, nid in plan.io.params]
    if blobs is not None:
        cursor = 0
        for entry in param_entries:
            data = blobs[entry["name"]]
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            cursor = -(-cursor // lir.plan.alignment) * lir.plan.alignment
            entry["file_offset"] = cursor
            cursor += len(data)
    blocks: dict[str, list[dict[str, Any]]] = {}
    for entry in param_entries:
        blocks.setdefault(entry["name"].split(".", 1)[0], []).append(entry)
    weight_blocks = []
    for block, members in sorted(blocks.items()):
        placed = [m for m in members if m["offset"] is not None and m["bytes"] is not None]
        row: dict[str, Any] = {
            "name": block,
            "params": [m["name"] for m in members],
            "offset": min((m["offset"] for m in placed), default=None),
            "end": max((m["offset"] + m["bytes"] for m in placed), default=None),
        }
        if blobs is not None:
            digest = hashlib.sha256()
            for m in members:
                digest.update(bytes.fromhex(m["sha256"]))
            row["sha256"] = digest.hexdigest()
        weight_blocks.append(row)
    schedule = []
    for step, nid in enumerate(plan.schedule):
        node = g.node(nid)
        slot = plan.assignments.get(nid)
        schedule.append({
            "step": step,
            "node": nid,
            "op": node.op,
            "attrs": _json_attrs(node.attrs),
            "inputs": list(node.inputs),
            "dtype": str(node.dtype),
            "shape": _dims(node.shape),
            "offset": slot.offset if slot is not None else None,
            "bytes": slot.size if slot is not None else None,
            "view_of": plan.view_aliases[nid].root if nid in plan.view_aliases else None,
            "inplace_over": plan.inplace.get(nid),
            "phase": plan.phases.get(nid),
        })
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "module": g.name,
        "fingerprint": lir.fingerprint(),
        "byte_order": "little",
        "alignment": plan.alignment,
        "arena_size": plan.arena_size,
        "symbols": list(plan.dynamic_symbols),
        "inputs": [_entry(lir, nid, name) for name, nid in plan.io.inputs],
        "params": param_entries,
        "outputs": [_entry(lir, oid, name) for oid, name in zip(g.output_ids, _output_names(g))],
        "weight_blocks": weight_blocks,
        "schedule": schedule,
    }


def _json_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes a foreign runtime can read: scalars, strings, lists; tensors and graphs by
    a placeholder naming their kind (their data lives in the .rlx file, not here)."""
    out: dict[str, Any] = {}
    for key, value in sorted(attrs.items()):
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value if not (isinstance(value, float) and not np.isfinite(value)) else str(value)
        elif isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str)) for v in value):
            out[key] = [v if not (isinstance(v, float) and not np.isfinite(v)) else str(v) for v in value]
        else:
            out[key] = {"kind": type(value).__name__}
    return out


def write_binding(lir: LirModule, folder: str | os.PathLike[str], params: Mapping[str, Any] | None = None) -> str:
    """Write ``manifest.json`` (and, with ``params``, the weights file) into ``folder``; returns the
    manifest's path.

    The weights file is named by its content (``weights-<sha256[:16]>.bin``) and written first,
    the manifest naming it last, each atomically (:mod:`rlx.ir.atomic`): a process killed at any
    moment leaves the old manifest with its own weights or the new pair, never a manifest with
    another's weights. Weights files the new manifest does not name are removed after it is in place."""
    if not isinstance(lir, LirModule):
        raise RlxError(f"binding manifest: expected an LirModule (rlx.plan's result), got {type(lir).__name__}")
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    blobs = None if params is None else _param_bytes(lir, params)
    doc = _manifest(lir, blobs)
    if blobs is not None:
        packed = bytearray()
        for entry in doc["params"]:
            packed.extend(bytes(entry["file_offset"] - len(packed)))
            packed.extend(blobs[entry["name"]])
        name = f"weights-{hashlib.sha256(packed).hexdigest()[:16]}.bin"
        atomic.write_bytes(os.path.join(folder, name), bytes(packed))
        doc["weights_file"] = name
    path = os.path.join(folder, "manifest.json")
    atomic.write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="ascii")
    for old in os.listdir(folder):
        if _WEIGHTS_NAME.fullmatch(old) and old != doc.get("weights_file"):
            fileio.remove_quietly(os.path.join(folder, old))
    return path
