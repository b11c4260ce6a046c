"""Files: versioned canonical JSON documents, a safetensors weights payload, fingerprints, safe loading.

Public functions (re-exported by :mod:`rlx`)::

    to_json(obj) -> str                      # self-contained: every tensor inline (base64)
    from_json(text, limits=None) -> obj      # validated, verified
    save(obj, path, params=None)             # path (JSON) + "<path>.safetensors" sidecar when needed
    load(path, limits=None, with_params=False) -> obj   (obj, params) with with_params=True
    fingerprint(obj) -> str                  # SHA-256 hex of the canonical reference form

``obj`` is a :class:`~rlx.ir.graph.Graph` (document level = its stage: ``"hir"``, ``"mir"``
or ``"lir"``, kind ``"graph"``) or any object whose class has a registered codec. The
schema, limits and payload layout are written down in ``docs/format.md``.

Canonical encoding: ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
allow_nan=False)``; node ids are positions in arrays, never map keys; optional node fields
are omitted when unset; every attribute is written, defaults included. Equal objects give
identical bytes, in any process. Non-finite floats are the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` (schema-typed float attributes) or ``{"float": "NaN"}``
inside untyped ``data`` attributes.

Codec registry (how higher layers add object kinds without ``ir`` importing them)::

    register_codec(level, cls, encode, decode, kind=None)
        encode(obj, enc: Encoder) -> dict      # the object's fields (JSON values)
        decode(doc: dict, dec: Decoder) -> obj # doc holds those fields (header removed)

The dict returned by ``encode`` is merged into the document next to the header keys
``format``, ``version``, ``level``, ``kind`` and ``payload`` (which it must not use).
``kind`` defaults to ``cls.__name__``; the pair (level, kind) selects the decoder.

:class:`Encoder` offers ``graph(g) -> dict``, ``tensor(array) -> dict`` and ``float(x)``.
:class:`Decoder` offers ``graph(doc, path) -> Graph`` (verified), ``tensor(doc, path) ->
ndarray``, and field checks that raise :class:`~rlx.FormatError` naming the path:
``keys(doc, path, required, optional)``, ``get(doc, key, types, path[, default])``,
``int(doc, key, path, lo=, hi=)``, ``str(doc, key, path)``, ``list(doc, key, path)``,
``float(value, path)`` and ``error(path, message)``. Its ``limits`` is the active
:class:`LoadLimits`.

Split for size: the format's constants and :class:`LoadLimits` live in :mod:`rlx.ir.serialize_format`,
:class:`Decoder` in :mod:`rlx.ir.serialize_decode` (both re-exported here).

Safety: no pickle, no eval, nothing imported by name from a file; sizes are checked
against :class:`LoadLimits` before anything is allocated for them; every loaded graph is
verified; only :class:`~rlx.FormatError` and :class:`~rlx.VerifyError` escape a loader.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import math
import os
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from rlx.ir import fileio
from rlx.ir.attrs import FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError, RlxError, UnknownOpError, VerifyError
from rlx.ir.graph import Graph
from rlx.ir.opdef import OpDef, get_op
from rlx.ir.serialize_decode import Decoder, _Bad, _short, _tname, _verify
from rlx.ir.serialize_format import (
    _HEADER,
    _SHA,
    _ST_DTYPE,
    _ST_DTYPE_IN,
    CONST_PREFIX,
    DEFAULT_LIMITS,
    FORMAT,
    INLINE_MAX_BYTES,
    LEVELS,
    PAYLOAD_SUFFIX,
    VERSION,
    LoadLimits,
)
from rlx.ir.shape import TensorType
from rlx.ir.symbolic import encode_ranges, encode_shape

__all__ = [
    "FORMAT", "INLINE_MAX_BYTES", "VERSION", "Decoder", "Encoder", "LoadLimits", "LoadedParams",
    "fingerprint", "from_json", "load", "register_codec", "save", "to_json",
]



# ------------------------------------------------------------------------------------ codecs


@dataclass(frozen=True)
class _Codec:
    level: str
    kind: str
    cls: type
    encode: Callable[[Any, Encoder], dict]
    decode: Callable[[dict, Decoder], Any]


_BY_TYPE: dict[type, _Codec] = {}
_BY_KEY: dict[tuple[str, str], _Codec] = {}


def register_codec(
    level: str,
    cls: type,
    encode: Callable[[Any, Encoder], dict],
    decode: Callable[[dict, Decoder], Any],
    kind: str | None = None,
    *,
    replace: bool = False,
) -> None:
    """Let ``save`` / ``load`` / ``to_json`` / ``from_json`` / ``fingerprint`` handle ``cls``."""
    if level not in LEVELS:
        raise RlxError(f"register_codec: level must be one of {LEVELS}, got {level!r}")
    kind = kind or cls.__name__
    if kind == "graph" or issubclass(cls, Graph):
        raise RlxError("register_codec: Graph has a built-in codec (kind 'graph')")
    if not replace and ((level, kind) in _BY_KEY or cls in _BY_TYPE):
        raise RlxError(f"register_codec: a codec for {cls.__name__} / ({level!r}, {kind!r}) exists (replace=True overrides)")
    codec = _Codec(level, kind, cls, encode, decode)
    _BY_TYPE[cls] = codec
    _BY_KEY[(level, kind)] = codec


def _codec_for(obj: Any) -> _Codec:
    for klass in type(obj).__mro__:
        codec = _BY_TYPE.get(klass)
        if codec is not None:
            return codec
    raise FormatError(f"cannot serialize {type(obj).__name__}: no codec registered (Graph or a class passed to register_codec)")


# ------------------------------------------------------------------------------------ encoding


def _enc_float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def _le(arr: np.ndarray) -> np.ndarray:
    """C-contiguous little-endian copy (or view) of ``arr`` in its rlx dtype."""
    dtype = DType.of(arr.dtype)
    # np.asarray, not np.ascontiguousarray: the latter turns a 0-d array into shape [1]
    return np.asarray(arr, dtype=dtype.numpy.newbyteorder("<"), order="C")


def _const_key(sha: str, dtype: str, shape: tuple[int, ...]) -> str:
    """Sidecar name of a constant: ``rlx.const.<sha256 of its bytes>.<dtype>[<dims>]``."""
    return f"{CONST_PREFIX}{sha}.{dtype}[{','.join(str(d) for d in shape)}]"


def _raw(arr: np.ndarray) -> memoryview:
    return arr.reshape(-1).view(np.uint8).data


class Encoder:
    """Turns objects into JSON values. Codecs call ``graph``, ``tensor`` and ``float``.

    ``inline_max`` is None for fully inline output (``to_json``); otherwise tensors larger
    than it are written as ``{"dtype", "shape", "sha256"}`` references and collected in
    ``blobs`` (sha256 hex -> little-endian array) for the payload.
    """

    def __init__(self, inline_max: int | None = None, max_depth: int = DEFAULT_LIMITS.max_depth):
        self.inline_max = inline_max
        self.max_depth = max_depth
        self.depth = 0
        self.blobs: dict[str, np.ndarray] = {}

    def float(self, x: float) -> float | str:
        return _enc_float(float(x))

    def tensor(self, array: Any) -> dict:
        arr = np.asarray(array.array if isinstance(array, FrozenArray) else array)
        try:
            le = _le(arr)
        except RlxError as exc:
            raise FormatError(f"cannot serialize tensor: {exc}") from None
        raw = _raw(le)
        out: dict[str, Any] = {"dtype": DType.of(arr.dtype).value, "shape": list(arr.shape)}
        if self.inline_max is None or raw.nbytes <= self.inline_max:
            out["data"] = base64.b64encode(raw).decode("ascii")
        else:
            sha = hashlib.sha256(raw).hexdigest()
            self.blobs[_const_key(sha, out["dtype"], arr.shape)] = le
            out["sha256"] = sha
        return out

    def graph(self, g: Graph) -> dict:
        """A graph's JSON object; graphs nested deeper than ``max_depth`` (what ``load`` accepts by
        default) are a :class:`FormatError`, not a document no default load could read back."""
        if self.depth >= self.max_depth:
            raise FormatError(f"cannot serialize graph {g.name!r}: graphs nested deeper than LoadLimits.max_depth={self.max_depth}")
        self.depth += 1
        try:
            return self._graph(g)
        finally:
            self.depth -= 1

    def _graph(self, g: Graph) -> dict:
        nodes = []
        ops: dict[str, OpDef | None] = {}
        for n in g.nodes:
            if n.op in ops:
                opdef = ops[n.op]
            else:
                try:
                    opdef = ops[n.op] = get_op(n.op)
                except UnknownOpError:
                    opdef = ops[n.op] = None
            specs = opdef.attrs if opdef is not None else {}
            attrs = {}
            for key, value in n.attrs.items():
                spec = specs.get(key)
                attrs[key] = self._attr(value, spec.kind if spec is not None else None, f"node %{n.id} attribute {key!r}")
            d: dict[str, Any] = {
                "id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": attrs,
                "shape": encode_shape(n.type.shape), "dtype": n.type.dtype.value,
            }
            if n.extra_types:
                d["results"] = [{"shape": list(t.shape), "dtype": t.dtype.value} for t in n.extra_types]
            if n.name is not None:
                d["name"] = n.name
            if n.prov is not None:
                d["prov"] = {"hir": n.prov.hir, "label": n.prov.label, "passes": list(n.prov.passes)}
            nodes.append(d)
        out: dict[str, Any] = {"name": g.name, "stage": g.stage.value, "nodes": nodes, "outputs": list(g.output_ids)}
        if g.symbol_ranges:  # absent when no symbol is narrowed: such documents read as before
            out["symbols"] = encode_ranges(g.symbol_ranges)
        return out

    def _attr(self, v: Any, kind: str | None, where: str) -> Any:
        if v is None:
            return None
        if kind == "float":
            return _enc_float(float(v))
        if kind == "floats":
            return [_enc_float(float(x)) for x in v]
        if kind == "data":
            return self._data(v, where)
        if isinstance(v, bool | str | int):
            return v
        if isinstance(v, float):
            return _enc_float(v)
        if isinstance(v, DType):
            return v.value
        if isinstance(v, tuple | list):
            return [self._attr(x, None, where) for x in v]
        if isinstance(v, FrozenArray | np.ndarray):
            return self.tensor(v)
        if isinstance(v, Graph):
            return self.graph(v)
        raise FormatError(f"{where}: cannot serialize a {type(v).__name__}")

    def _data(self, v: Any, where: str) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": _enc_float(v)}
        if isinstance(v, tuple | list):
            return [self._data(x, where) for x in v]
        if v is None or isinstance(v, bool | int | str):
            return v
        raise FormatError(f"{where}: cannot serialize a {type(v).__name__} in a data attribute")


def _dumps(doc: Any) -> str:
    try:
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"cannot encode document: {exc} (codecs must return JSON values; use enc.float for floats)") from None


def _document(obj: Any, enc: Encoder) -> dict:
    if isinstance(obj, Graph):
        level, kind, body = obj.stage.value, "graph", enc.graph(obj)
    else:
        codec = _codec_for(obj)
        level, kind = codec.level, codec.kind
        body = codec.encode(obj, enc)
        if not isinstance(body, dict):
            raise FormatError(f"codec for {type(obj).__name__} returned {type(body).__name__}, expected dict")
        clash = [k for k in _HEADER if k in body]
        if clash:
            raise FormatError(f"codec for {type(obj).__name__} uses reserved document keys {clash}")
    return {"format": FORMAT, "version": VERSION, "level": level, "kind": kind, **body}


def to_json(obj: Any) -> str:
    """The canonical, self-contained JSON document of ``obj`` (every tensor inline)."""
    return _dumps(_document(obj, Encoder(None)))


def fingerprint(obj: Any) -> str:
    """SHA-256 (hex) of the canonical reference form: the document ``save`` writes, minus ``payload``.

    Tensors above :data:`INLINE_MAX_BYTES` enter through the SHA-256 of their bytes, so the
    fingerprint changes when any attribute or any constant byte changes, and costs one pass
    over the data, not a base64 copy of it.
    """
    return hashlib.sha256(_dumps(_document(obj, Encoder(INLINE_MAX_BYTES))).encode("ascii")).hexdigest()


# ------------------------------------------------------------------------------------ payload


class _Payload:
    """A validated safetensors sidecar, read into one buffer."""

    def __init__(self, path: str, expect_bytes: int, expect_sha: str, limits: LoadLimits):
        f = os.fdopen(fileio.open_regular(path, "payload file"), "rb")
        with f:
            size = os.fstat(f.fileno()).st_size
            if size != expect_bytes:
                name = os.path.basename(path)
                raise FormatError(f"payload: {name!r} has {size} bytes, the document says {expect_bytes} (stale or truncated)")
            head = f.read(8)
            if len(head) != 8:
                raise FormatError("payload: file shorter than the 8-byte safetensors header length")
            (n,) = struct.unpack("<Q", head)
            if n > limits.max_header_bytes or 8 + n > size:
                limit = limits.max_header_bytes
                raise FormatError(f"payload: header of {n} bytes is too large (file {size} bytes, max_header_bytes={limit})")
            header_bytes = f.read(n)
            data = bytearray(size - 8 - n)
            if f.readinto(data) != len(data):
                raise FormatError("payload: file ended early")
        digest = hashlib.sha256(head)
        digest.update(header_bytes)
        digest.update(data)
        if digest.hexdigest() != expect_sha:
            raise FormatError("payload: SHA-256 of the payload file does not match the document")
        self.data = data
        self.entries = _parse_st_header(header_bytes, len(data), limits)

    def constant(self, sha: str, dtype: DType, dims: tuple[int, ...]) -> memoryview:
        entry = self.entries.get(_const_key(sha, dtype.value, dims))
        if entry is None:
            raise _Bad("payload has no tensor with this sha256", ".sha256")
        edtype, eshape, begin, end = entry
        if edtype is not dtype or eshape != dims:
            raise _Bad(f"payload tensor is {edtype} {list(eshape)}, the document says {dtype} {list(dims)}", ".sha256")
        view = memoryview(self.data)[begin:end]
        if hashlib.sha256(view).hexdigest() != sha:
            raise _Bad("payload tensor bytes do not match their sha256", ".sha256")
        return view

    def array(self, name: str) -> np.ndarray:
        dtype, dims, begin, _ = self.entries[name]
        arr = np.frombuffer(self.data, dtype=dtype.numpy.newbyteorder("<"), count=math.prod(dims), offset=begin).reshape(dims)
        return arr if arr.dtype == dtype.numpy else arr.astype(dtype.numpy)


def _parse_st_header(raw: bytes, data_len: int, limits: LoadLimits) -> dict[str, tuple[DType, tuple[int, ...], int, int]]:
    def bad(where: str, msg: str) -> FormatError:
        return FormatError(f"payload header{where}: {msg}")

    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad("", f"not valid JSON ({exc})"[:300]) from None
    if type(header) is not dict:
        raise bad("", "expected an object")
    entries: dict[str, tuple[DType, tuple[int, ...], int, int]] = {}
    total = 0
    for name, e in header.items():
        where = f"[{name[:80]!r}]"
        if name == "__metadata__":
            if type(e) is not dict or not all(type(v) is str for v in e.values()):
                raise bad(where, "expected an object of strings")
            continue
        if type(e) is not dict or e.keys() != {"dtype", "shape", "data_offsets"}:
            raise bad(where, "expected an object with dtype, shape, data_offsets")
        dtype = _ST_DTYPE_IN.get(e["dtype"]) if type(e["dtype"]) is str else None
        if dtype is None:
            raise bad(f"{where}.dtype", f"unsupported dtype {_short(e['dtype'])}")
        shape, offsets = e["shape"], e["data_offsets"]
        if type(shape) is not list or len(shape) > limits.max_rank or not all(type(d) is int and 0 <= d <= limits.max_dim for d in shape):
            raise bad(f"{where}.shape", "expected a list of non-negative ints")
        if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            raise bad(f"{where}.data_offsets", "expected [begin, end]")
        begin, end = offsets
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > limits.max_tensor_bytes:
            raise bad(f"{where}.shape", f"declares {nbytes} bytes, over max_tensor_bytes={limits.max_tensor_bytes}")
        if not 0 <= begin <= end <= data_len or end - begin != nbytes:
            raise bad(f"{where}.data_offsets", f"[{begin}, {end}] does not hold {nbytes} bytes inside {data_len}")
        total += nbytes
        entries[name] = (dtype, tuple(shape), begin, end)
    if total > limits.max_total_bytes:
        raise bad("", f"{total} bytes of tensors exceed max_total_bytes={limits.max_total_bytes}")
    cursor = 0
    for _, _, begin, end in sorted(entries.values(), key=lambda t: (t[2], t[3])):
        if begin != cursor:
            raise bad("", "tensor data overlaps or leaves a hole (safetensors requires exact coverage)")
        cursor = end
    if cursor != data_len:
        raise bad("", f"tensor data covers {cursor} of {data_len} bytes")
    return entries


def _write_safetensors(f: BinaryIO, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> tuple[int, str]:
    # Larger items first keeps every offset a multiple of each tensor's itemsize (all powers of 2).
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name in order:
        arr = tensors[name]
        st_dtype = _ST_DTYPE[DType.of(arr.dtype).value]
        header[name] = {"dtype": st_dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    hjson = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    hjson += b" " * (-len(hjson) % 8)
    digest = hashlib.sha256()
    size = 0
    chunks: list[bytes | memoryview] = [struct.pack("<Q", len(hjson)), hjson, *(_raw(tensors[k]) for k in order)]
    for chunk in chunks:
        digest.update(chunk)
        f.write(chunk)
        size += len(chunk) if isinstance(chunk, bytes) else chunk.nbytes
    return size, digest.hexdigest()


# ------------------------------------------------------------------------------------ documents


def _reject_constant(name: str) -> Any:
    raise ValueError(f"bare {name} is not JSON (write non-finite floats as the strings \"NaN\", \"Infinity\", \"-Infinity\")")


def _parse_json(text: str | bytes, limits: LoadLimits) -> dict:
    if isinstance(text, bytes | bytearray):
        if len(text) > limits.max_document_bytes:
            raise FormatError(f"document of {len(text)} bytes exceeds max_document_bytes={limits.max_document_bytes}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"document is not UTF-8: {exc}") from None
    if not isinstance(text, str):
        raise FormatError(f"expected a JSON str or bytes, got {type(text).__name__}")
    if len(text) > limits.max_document_bytes:
        raise FormatError(f"document of {len(text)} characters exceeds max_document_bytes={limits.max_document_bytes}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise FormatError("document nests deeper than the JSON parser allows") from None
    except ValueError as exc:  # JSONDecodeError, huge int literals
        raise FormatError(f"not valid JSON: {exc}"[:500]) from None
    if type(doc) is not dict:
        raise FormatError(f"<document>: expected object, got {_tname(doc)}")
    return doc


def _header(doc: dict, dec: Decoder) -> tuple[str, str]:
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise FormatError(f"format: not an rlx-ir document (format is {_short(fmt)}, expected {FORMAT!r})")
    version = doc.get("version")
    if type(version) is not int:
        raise FormatError(f"version: expected int, got {_tname(version)}")
    if version > VERSION:
        raise FormatError(f"version: this file uses rlx-ir format version {version}, newer than this rlx reads (<= {VERSION}); upgrade rlx")
    if version < 1:
        raise FormatError(f"version: {version} is not a valid rlx-ir format version")
    level = dec.str(doc, "level", "")
    if level not in LEVELS:
        raise FormatError(f"level: expected one of {list(LEVELS)}, got {_short(level)}")
    kind = dec.str(doc, "kind", "")
    return level, kind


def _decode(doc: dict, dec: Decoder) -> Any:
    level, kind = _header(doc, dec)
    body = {k: v for k, v in doc.items() if k not in _HEADER}
    if kind == "graph":
        g = dec.graph(body, "", verify=False)
        if g.stage.value != level:
            raise FormatError(f"stage: graph stage {g.stage.value!r} differs from the document level {level!r}")
        _verify(g)
        return g
    codec = _BY_KEY.get((level, kind))
    if codec is None:
        raise FormatError(f"kind: no codec for level {level!r} kind {kind[:80]!r} (import the rlx module that provides it)")
    return codec.decode(body, dec)


def _guard(fn: Callable[[], Any]) -> Any:
    """Run a loader step so that only FormatError / VerifyError escape.

    The cyclic garbage collector is paused meanwhile: a loader makes millions of small
    acyclic objects, and collections triggered by them would only rescan the document.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return fn()
    except (FormatError, VerifyError):
        raise
    except RlxError as exc:
        raise FormatError(str(exc)[:2000]) from exc
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError, UnicodeError) as exc:
        raise FormatError(f"malformed document: {type(exc).__name__}: {exc}"[:2000]) from exc
    finally:
        if paused:
            gc.enable()


def from_json(text: str | bytes, limits: LoadLimits | None = None) -> Any:
    """Read a self-contained document (as written by :func:`to_json`); the result is verified."""
    limits = limits or DEFAULT_LIMITS

    def run() -> Any:
        doc = _parse_json(text, limits)
        if "payload" in doc:
            raise FormatError("payload: the document refers to a payload file; read it with rlx.load(path)")
        return _decode(doc, Decoder(limits))

    return _guard(run)


class LoadedParams(dict):
    """Weights loaded with an object: a plain ``dict`` name -> ndarray (dtype as saved).

    Attached as ``obj.params``. Calling it still calls the class's own ``params`` method,
    so on a loaded :class:`Graph` both ``g.params["w"]`` (the array) and ``g.params()``
    (name -> Value, the Graph API) work.
    """

    __slots__ = ("_owner",)
    _owner: Any  # the object the params are attached to (its class's own params method)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = getattr(type(self._owner), "params", None)
        if not callable(method):
            raise TypeError("loaded params are a dict, not callable")
        return method(self._owner, *args, **kwargs)


def _declared_params(obj: Any) -> dict[str, TensorType]:
    g = obj if isinstance(obj, Graph) else getattr(obj, "graph", None)
    if not isinstance(g, Graph):
        return {}
    return {n.attrs["name"]: n.type for n in g.nodes if n.op == "param"}


def _check_param(name: str, arr: np.ndarray, declared: dict[str, TensorType]) -> None:
    t = declared.get(name)
    if t is None:
        return
    ok = arr.dtype == t.dtype.numpy and arr.ndim == len(t.shape)
    ok = ok and all(isinstance(d, str) or d == s for d, s in zip(t.shape, arr.shape))
    if not ok:
        raise FormatError(f"params[{name!r}]: {DType.of(arr.dtype)} {list(arr.shape)} does not match the declared param {t}")


def _payload_name(path: str) -> str:
    return os.path.basename(path) + PAYLOAD_SUFFIX


def _staged_name(side_path: str, sha: str) -> str:
    """Where a new sidecar waits (named by its content) until the document naming it is committed."""
    return f"{side_path}.{sha[:16]}"


def _remove_leftovers(path: str, has_payload: bool) -> None:
    """Temporary and staged files of interrupted saves of ``path`` (and a sidecar no document names)."""
    folder, base = os.path.split(os.path.abspath(path))
    side = base + PAYLOAD_SUFFIX
    staged = re.compile(re.escape(side) + r"\.[0-9a-f]{16}")
    for name in os.listdir(folder):
        if fileio.is_temp_of(name, base) or fileio.is_temp_of(name, side) or staged.fullmatch(name) or (name == side and not has_payload):
            fileio.remove_quietly(os.path.join(folder, name))


def save(obj: Any, path: str | os.PathLike[str], params: Mapping[str, Any] | None = None) -> None:
    """Write ``obj`` to ``path`` (canonical JSON) and, when there are weights or tensors over
    :data:`INLINE_MAX_BYTES`, the safetensors sidecar ``path + ".safetensors"``.

    Durable over an existing model: the new sidecar is written to a temporary file, synced and
    renamed to a content-addressed name; the document (which records the sidecar's size and
    SHA-256) is then renamed over the old one, the commit point; only after that the sidecar
    takes its final name (:func:`load` also finds it under the staged name). A process killed at
    any moment leaves the old model or the new one loadable; the next successful save removes
    what an interrupted one left behind. One writer per path at a time."""
    path = os.fspath(path)
    enc = Encoder(INLINE_MAX_BYTES)
    doc = _document(obj, enc)
    tensors = dict(enc.blobs)
    if params is not None:
        declared = _declared_params(obj)
        for name, value in params.items():
            if not isinstance(name, str) or not name or name == "__metadata__" or name.startswith(CONST_PREFIX):
                raise FormatError(f"params: invalid weight name {_short(name)} (reserved or not a str)")
            arr = np.asarray(value)
            try:
                le = _le(arr)
            except RlxError as exc:
                raise FormatError(f"params[{name!r}]: {exc}") from None
            _check_param(name, arr, declared)
            tensors[name] = le
    side_path = staged = None
    try:
        if tensors or params is not None:
            side = _payload_name(path)
            side_path = os.path.join(os.path.dirname(path), side)
            meta = {"format": "rlx-ir-payload", "version": str(VERSION)}
            tmp, (size, sha) = fileio.write_temp(side_path, lambda f: _write_safetensors(f, tensors, meta))
            staged = _staged_name(side_path, sha)
            fileio.commit(tmp, staged)
            doc["payload"] = {"file": side, "bytes": size, "sha256": sha}
            if params is not None:
                doc["payload"]["params"] = sorted(params)
        text = (_dumps(doc) + "\n").encode("ascii")
        tmp, _ = fileio.write_temp(path, lambda f: f.write(text))
        fileio.commit(tmp, path)  # the commit point: from here on the new model is the one loaded
    except BaseException:
        if staged is not None:
            fileio.remove_quietly(staged)
        raise
    if staged is not None:
        fileio.commit(staged, side_path)  # type: ignore[arg-type]
    _remove_leftovers(path, staged is not None)


def load(path: str | os.PathLike[str], limits: LoadLimits | None = None, *, with_params: bool = False) -> Any:
    """Read a file written by :func:`save`; the result is verified.

    If weights were saved, the object gets ``.params`` (a :class:`LoadedParams` dict).
    ``with_params=True`` returns ``(obj, params)`` instead (params ``{}`` if none were saved).
    """
    path = os.fspath(path)
    limits = limits or DEFAULT_LIMITS

    def run() -> tuple[Any, dict[str, np.ndarray] | None]:
        doc = _parse_json(fileio.read_regular(path, limits.max_document_bytes, "document", "max_document_bytes"), limits)
        dec = Decoder(limits)
        _header(doc, dec)
        names = None
        if "payload" in doc:
            pl = dec.keys(doc["payload"], "payload", ("file", "bytes", "sha256"), ("params",))
            side = dec.str(pl, "file", "payload")
            if side != os.path.basename(side) or side in ("", ".", "..") or "\\" in side or "\0" in side:
                raise dec.error("payload.file", "must be a plain file name next to the document")
            nbytes = dec.int(pl, "bytes", "payload", lo=0, hi=limits.max_total_bytes + limits.max_header_bytes + 8)
            sha = dec.str(pl, "sha256", "payload")
            if not _SHA.fullmatch(sha):
                raise dec.error("payload.sha256", "expected 64 lowercase hex digits")
            if "params" in pl:
                names = dec.list(pl, "params", "payload")
                for j, n in enumerate(names):
                    if type(n) is not str or n.startswith(CONST_PREFIX) or n == "__metadata__":
                        raise dec.error(f"payload.params[{j}]", "expected a weight name")
            side_path = os.path.join(os.path.dirname(path), side)
            staged = _staged_name(side_path, sha)  # a save was stopped between its commit and the sidecar's rename
            dec.payload = _Payload(staged if os.path.lexists(staged) else side_path, nbytes, sha, limits)
        obj = _decode(doc, dec)
        if names is None:
            return obj, None
        params: dict[str, np.ndarray] = {}
        declared = _declared_params(obj)
        stored = {k for k in dec.payload.entries if not k.startswith(CONST_PREFIX)}  # type: ignore[union-attr]
        if stored != set(names):
            raise FormatError(f"payload.params: lists {len(names)} weights, the payload file holds {len(stored)}")
        for name in sorted(names):
            arr = dec.payload.array(name)  # type: ignore[union-attr]
            _check_param(name, arr, declared)
            params[name] = arr
        return obj, params

    obj, params = _guard(run)
    if with_params:
        return obj, params if params is not None else {}
    if params is not None:
        loaded = LoadedParams(params)
        loaded._owner = obj
        try:
            object.__setattr__(obj, "params", loaded)
        except (AttributeError, TypeError):
            raise FormatError(f"cannot attach .params to a {type(obj).__name__}; use load(path, with_params=True)") from None
    return obj
