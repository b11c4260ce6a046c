"""Model variants and the on-disk compile cache.

One model is often compiled several ways: a prefill bucket per sequence length, a decode
step, f16 for one device and f32 for another, numpy here and torch there. A
:class:`ModelVariant` names one such way (symbol sizes, precision policy, backend, backend
options); :func:`compile_variant` builds it — bind the symbols, optimize (with the precision
policy), plan, compile — and its :meth:`~ModelVariant.cache_key` says when two builds are
interchangeable: the graph's fingerprint, the variant, and the versions of rlx, NumPy and
the backend's library.

:class:`CompileCache` keeps the optimized, planned model of each key in a folder, so a later
process skips optimizing and planning. What it promises is in :class:`CompileCache`'s docstring.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import importlib.metadata
import json
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlx.ir import atomic, fileio
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
        from rlx._version import __version__

        doc = {"format": CACHE_FORMAT, "fingerprint": graph_fingerprint, "variant": self.describe(),
               "versions": {"rlx": __version__, "numpy": _version("numpy"),
                            "backend": _version(_BACKEND_PACKAGES.get(self.backend, "numpy"))}}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def buckets(prefix: str, symbol: str, sizes: list[int], **common: Any) -> list[ModelVariant]:
    """One variant per size of ``symbol`` (e.g. prefill buckets of a sequence length)."""
    base = dict(common.pop("dims", {}))
    return [ModelVariant(f"{prefix}-{n}", {**base, symbol: n}, **common) for n in sizes]


class CacheError(RlxError):
    """The compile cache's folder or secret cannot be used safely."""


class CompileCache:
    """A folder of optimized, planned models keyed by :meth:`ModelVariant.cache_key`.

    What it promises:

    - **An entry runs only if it verifies.** Each entry ``<key>.rlx`` (plus its sidecar) has a tag
      ``<key>.mac``: HMAC-SHA256, under the cache's secret, of the key and the fingerprint of the
      module (graph, plan, constants: :func:`rlx.fingerprint`). :meth:`get` loads the entry with the
      safe loader (no pickle, no code), recomputes the fingerprint of what it loaded and compares
      tags in constant time. An edited constant or op, another model or another key's entry under
      this key, a truncated or garbage file: the tag does not match, the entry is removed and the
      model rebuilt, never run. Whoever can read the secret can forge entries: the promise holds
      against anyone who can write the folder but not read the secret file.
    - **The secret** is ``<folder>/cache-secret``: 32 random bytes, created once (mode 0600, by the
      first process to use the folder); one that is a symlink, not a regular file, not owned by
      this user, readable by others or of the wrong size is a :class:`CacheError`.
    - **Nothing outside the folder is read**: an entry file that is a symlink or not a regular file is
      refused (removed, rebuilt); the loader only reads a sidecar named next to the document.
    - **Concurrent processes and threads are safe**: one ``fcntl.flock`` per key (``<key>.lock``)
      serialises reading, building and writing that key, so a second builder waits and then hits;
      writes are atomic (:mod:`rlx.ir.atomic`) and a writer removes only its own temporaries.
    - Not promised: secrecy of the entries (anyone who can read the folder can read the models),
      or anything on file systems without ``flock``.
    """

    SECRET = "cache-secret"

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = os.fspath(folder)
        self.hits = self.misses = self.rejected = 0
        self._secret: bytes | None = None
        self._held = threading.local()

    def _path(self, key: str, suffix: str = ".rlx") -> str:
        if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{64}", key):
            raise CacheError(f"cache key must be 64 lowercase hex digits, got {str(key)[:80]!r}")
        return os.path.join(self.folder, key + suffix)

    # ------------------------------------------------------------------ secret and lock
    def secret(self) -> bytes:
        """The folder's HMAC key (created on first use)."""
        if self._secret is None:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            path = os.path.join(self.folder, self.SECRET)
            if not os.path.lexists(path):
                self._create_secret(path)
            self._secret = self._read_secret(path)
        return self._secret

    def _create_secret(self, path: str) -> None:
        tmp = fileio.temp_name(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, os.urandom(32))
            os.fsync(fd)
            os.close(fd)
            os.link(tmp, path)  # fails if another process made it first: then theirs is the secret
        except FileExistsError:
            pass
        finally:
            fileio.remove_quietly(tmp)
        fileio.sync_folder(path)

    def _read_secret(self, path: str) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise CacheError(f"compile cache secret {path!r} cannot be opened safely: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077 or st.st_size != 32:
                raise CacheError(f"compile cache secret {path!r} is not a private 32-byte file of this user (mode 0600)")
            data = os.read(fd, 33)
        finally:
            os.close(fd)
        if len(data) != 32:
            raise CacheError(f"compile cache secret {path!r} changed while being read")
        return data

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold ``key``'s lock (re-entrant within a thread; other threads and processes wait)."""
        held = self._held.__dict__.setdefault("keys", set())
        if key in held:
            yield
            return
        path = self._path(key, ".lock")
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise CacheError(f"compile cache lock {path!r} cannot be opened safely: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _tag(self, key: str, lir: LirModule) -> str:
        msg = b"rlx-compile-cache\0" + key.encode() + b"\0" + fingerprint(lir).encode()
        return hmac.new(self.secret(), msg, hashlib.sha256).hexdigest()

    # ------------------------------------------------------------------ entries
    def get(self, key: str) -> LirModule | None:
        """The verified entry for ``key``, or None (missing; or refused: then removed)."""
        with self.lock(key):
            path = self._path(key)
            if not os.path.lexists(path):
                self.misses += 1
                return None
            try:
                lir = self._load_verified(key, path)
            except (RlxError, OSError, ValueError):
                self.rejected += 1
                self._remove(key)
                return None
            self.hits += 1
            return lir

    def _load_verified(self, key: str, path: str) -> LirModule:
        mac_path = self._path(key, ".mac")
        for name in os.listdir(self.folder):  # the document, its (staged) sidecar and the tag
            if name.startswith(key + ".") and name != key + ".lock":
                p = os.path.join(self.folder, name)
                if not stat.S_ISREG(os.lstat(p).st_mode):  # a symlink (in or out of the folder), FIFO, folder
                    raise RlxError(f"cache entry file {p!r} is not a regular file")
        tag = fileio.read_regular(mac_path, 128, "cache tag").decode("ascii", "replace").strip()
        lir = load(path)
        if not isinstance(lir, LirModule) or lir.options.get("cache_key") != key:
            raise RlxError("not this key's entry")
        if not hmac.compare_digest(tag, self._tag(key, lir)):
            raise RlxError("cache entry does not match its tag")
        return lir

    def put(self, key: str, lir: LirModule) -> None:
        """Store ``lir`` under ``key`` with its tag (the tag last: a killed writer leaves no valid entry)."""
        with self.lock(key):
            lir.options["cache_key"] = key
            tag = self._tag(key, lir)
            try:
                fileio.remove_quietly(self._path(key, ".mac"))
                save(lir, self._path(key))
                atomic.write_text(self._path(key, ".mac"), tag + "\n")
            except OSError as exc:
                raise CacheError(f"compile cache: cannot write the entry {self._path(key)!r}: {exc.strerror or exc}") from None

    def _remove(self, key: str) -> None:
        base = key + ".rlx"
        for name in os.listdir(self.folder):
            if name == key + ".mac" or name == base or name.startswith(base + ".safetensors"):
                try:
                    os.unlink(os.path.join(self.folder, name))
                except OSError:  # gone already, or a planted folder: then writing the entry fails instead
                    pass


def build_variant(model: Any, variant: ModelVariant, cache: CompileCache | None = None) -> LirModule:
    """The optimized, planned LirModule of ``model`` for ``variant`` (from ``cache`` when it holds it)."""
    graph = to_mir(model)
    if not isinstance(graph, Graph):
        raise RlxError(f"build_variant: cannot build a {type(model).__name__}")
    if cache is None:
        return _build(graph, variant)
    key = variant.cache_key(fingerprint(graph))
    with cache.lock(key):  # a second builder of this key waits, then hits
        hit = cache.get(key)
        if hit is not None:
            return hit
        lir = _build(graph, variant)
        cache.put(key, lir)
        return lir


def _build(graph: Graph, variant: ModelVariant) -> LirModule:
    present = {s for node in graph.nodes for s in node.type.shape.symbols}
    unknown = sorted(set(variant.dims) - present)
    if unknown:
        raise RlxError(f"variant {variant.name!r}: symbol(s) {unknown} do not occur in {graph.name!r} (it has {sorted(present)})")
    bound = bind_graph(graph, variant.dims) if variant.dims else graph
    opt, _ = optimize(bound, precision=variant.precision)
    return plan(opt)


def compile_variant(model: Any, variant: ModelVariant, cache: CompileCache | None = None, **params: Any) -> Any:
    """``rlx.compile`` of :func:`build_variant`'s module on the variant's backend (``params=`` binds weights)."""
    lir = build_variant(model, variant, cache)
    target: Any = lir if variant.backend == "numpy" else lir.graph
    return compile_backend(target, backend=variant.backend, **dict(variant.options), **params)
