"""Model variants and the on-disk compile cache.

One model is often compiled several ways: a prefill bucket per sequence length, a decode
step, f16 for one device and f32 for another, numpy here and torch there. A
:class:`ModelVariant` names one such way (symbol sizes, precision policy, backend, backend
options); :func:`compile_variant` builds it — bind the symbols, optimize (with the precision
policy), plan, compile — and its :meth:`~ModelVariant.cache_key` says when two builds are
interchangeable: the graph's fingerprint, the variant, and the versions of rlx, NumPy and
the backend's library.

:class:`CompileCache` keeps the optimized, planned model of each key in a folder, so a later
process skips optimizing and planning. Entries are rlx files, read by the ordinary safe
loader (no pickle, no code: an entry is data, verified and plan-checked on load); an entry
that is unreadable, tampered with, truncated or written for another key is ignored, deleted
and rebuilt, never run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph
from rlx.ir.serialize import fingerprint, load, save
from rlx.lir.plan import LirModule, plan
from rlx.lir.specialize import bind_graph
from rlx.opt import optimize
from rlx.runtime.compile import compile as compile_backend
from rlx.runtime.compile import to_mir

CACHE_FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_BACKEND_PACKAGES = {"jax": "jax", "torch": "torch", "onnxruntime": "onnxruntime"}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@dataclass(frozen=True)
class ModelVariant:
    """One way to compile a model: ``dims`` binds symbols (a shape bucket), ``precision`` is an
    ``rlx.optimize`` precision policy (None: as built), ``backend`` and its ``options``."""

    name: str
    dims: Mapping[str, int] = field(default_factory=dict)
    precision: str | None = None
    backend: str = "numpy"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise RlxError(f"variant name must be 1-128 letters, digits, '_', '.' or '-', got {self.name!r}")
        for sym, size in self.dims.items():
            if not isinstance(sym, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise RlxError(f"variant {self.name!r}: dims must map symbol names to ints >= 0, got {sym!r}: {size!r}")
        object.__setattr__(self, "dims", dict(sorted(self.dims.items())))
        object.__setattr__(self, "options", dict(sorted(self.options.items())))

    def describe(self) -> dict[str, Any]:
        """The variant as canonical JSON-ready data (what its cache key hashes)."""
        try:
            options = json.loads(json.dumps(self.options, sort_keys=True))
        except TypeError:
            raise RlxError(f"variant {self.name!r}: backend options must be JSON data to be cached, got {self.options!r}") from None
        return {"name": self.name, "dims": dict(self.dims), "precision": self.precision, "backend": self.backend,
                "options": options}

    def cache_key(self, graph_fingerprint: str) -> str:
        """SHA-256 (hex) of the model's fingerprint, this variant and the library versions."""
        from rlx import __version__

        doc = {"format": CACHE_FORMAT, "fingerprint": graph_fingerprint, "variant": self.describe(),
               "versions": {"rlx": __version__, "numpy": _version("numpy"),
                            "backend": _version(_BACKEND_PACKAGES.get(self.backend, "numpy"))}}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def buckets(prefix: str, symbol: str, sizes: list[int], **common: Any) -> list[ModelVariant]:
    """One variant per size of ``symbol`` (e.g. prefill buckets of a sequence length)."""
    base = dict(common.pop("dims", {}))
    return [ModelVariant(f"{prefix}-{n}", {**base, symbol: n}, **common) for n in sizes]


class CompileCache:
    """A folder of optimized, planned models keyed by :meth:`ModelVariant.cache_key`."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = os.fspath(folder)
        self.hits = self.misses = self.rejected = 0

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, f"{key}.rlx")

    def get(self, key: str) -> LirModule | None:
        """The entry for ``key``, or None (missing, unreadable or not this key's: then removed)."""
        path = self._path(key)
        if not os.path.isfile(path):
            self.misses += 1
            return None
        try:
            lir = load(path)
            if not isinstance(lir, LirModule) or lir.options.get("cache_key") != key:
                raise RlxError("not this key's entry")
        except (RlxError, OSError, ValueError):
            self.rejected += 1
            self._remove(path)
            return None
        self.hits += 1
        return lir

    def put(self, key: str, lir: LirModule) -> None:
        os.makedirs(self.folder, exist_ok=True)
        lir.options["cache_key"] = key
        save(lir, self._path(key))

    def _remove(self, path: str) -> None:
        for p in (path, path + ".safetensors"):
            try:
                os.remove(p)
            except OSError:
                pass


def build_variant(model: Any, variant: ModelVariant, cache: CompileCache | None = None) -> LirModule:
    """The optimized, planned LirModule of ``model`` for ``variant`` (from ``cache`` when it holds it)."""
    graph = to_mir(model)
    if not isinstance(graph, Graph):
        raise RlxError(f"build_variant: cannot build a {type(model).__name__}")
    key = variant.cache_key(fingerprint(graph)) if cache is not None else None
    if cache is not None:
        hit = cache.get(key)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    present = {s for node in graph.nodes for s in node.type.shape.symbols}
    unknown = sorted(set(variant.dims) - present)
    if unknown:
        raise RlxError(f"variant {variant.name!r}: symbol(s) {unknown} do not occur in {graph.name!r} (it has {sorted(present)})")
    bound = bind_graph(graph, variant.dims) if variant.dims else graph
    opt, _ = optimize(bound, precision=variant.precision)
    lir = plan(opt)
    if cache is not None:
        cache.put(key, lir)  # type: ignore[arg-type]
    return lir


def compile_variant(model: Any, variant: ModelVariant, cache: CompileCache | None = None, **params: Any) -> Any:
    """``rlx.compile`` of :func:`build_variant`'s module on the variant's backend (``params=`` binds weights)."""
    lir = build_variant(model, variant, cache)
    target: Any = lir if variant.backend == "numpy" else lir.graph
    return compile_backend(target, backend=variant.backend, **dict(variant.options), **params)
