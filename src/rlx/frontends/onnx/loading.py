"""Reading an ONNX model safely: the protobuf, its external data, and its tensors as NumPy.

Nothing here hands a proto to onnx's C++ checker or shape inference (they can crash the
process on a malformed model). External data is read by rlx itself, only from regular
files inside the model's folder (the folder of the path, or the ``base_dir`` the caller
names for bytes / a ``ModelProto``): never the working directory, no absolute location, no
``..`` or symlink leaving the folder, no FIFO / device / directory, and each file region is
checked against the tensor's declared size before anything is read. Every refusal is an
:class:`~rlx.ir.onnx_format.OnnxFormatError` (a :class:`rlx.FormatError`).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from typing import Any

import numpy as np

from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported, rlx_dtype
from rlx.ir.serialize import LoadLimits

_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_STRING = 8
#: bits per element of each TensorProto data type stored as raw bytes; the sub-byte ones
#: (uint4 int4 float4e2m1: 4, uint2 int2: 2) are packed, low bits first, the last byte padded
_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128,
         16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2}


def raw_bytes(data_type: int, n: int) -> int:
    """Bytes of ``n`` elements of ``data_type`` stored raw (packed for the sub-byte types)."""
    return -(-n * _BITS[data_type] // 8)
_GRAPH, _GRAPHS, _TENSOR, _TENSORS, _SPARSE, _SPARSES = 5, 10, 4, 9, 11, 12


def onnx_module() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover
        raise OnnxUnsupported("rlx.onnx needs the 'onnx' package: pip install 'rlx[onnx]'") from exc
    return onnx


def read_model(model: Any, base_dir: str | os.PathLike | None, limits: LoadLimits) -> Any:
    """The ``onnx.ModelProto`` of a path, bytes or proto, with its external data read in (a copy when it had any)."""
    onnx = onnx_module()
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        data = _read_regular(path, 0, None, limits.max_document_bytes, "model file")
        model = _parse(onnx, data, f"{path}: ")
        base_dir = os.path.dirname(os.path.abspath(path)) if base_dir is None else base_dir
    elif isinstance(model, (bytes, bytearray, memoryview)):
        if len(model) > limits.max_document_bytes:
            raise OnnxFormatError(f"model of {len(model)} bytes exceeds LoadLimits.max_document_bytes={limits.max_document_bytes}")
        model = _parse(onnx, bytes(model), "")
    elif not isinstance(model, onnx.ModelProto):
        raise OnnxFormatError(f"import_model expects a path, bytes or an onnx.ModelProto, got {type(model).__name__}")
    external = [t for t in tensors_of(model, limits.max_depth) if t.data_location == _EXTERNAL]
    if not external:
        return model
    if base_dir is None:
        raise OnnxFormatError(f"tensor {external[0].name!r} has external data: importing bytes or a ModelProto with "
                              "external data needs base_dir= (the folder its data files are in)")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    base = os.path.realpath(os.fspath(base_dir))
    if not os.path.isdir(base):
        raise OnnxFormatError(f"base_dir {os.fspath(base_dir)!r} is not a directory")
    budget = [limits.max_total_bytes]
    for t in tensors_of(copy, limits.max_depth):
        if t.data_location == _EXTERNAL:
            _load_external(t, base, limits, budget)
    return copy


def _parse(onnx: Any, data: bytes, where: str) -> Any:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, or its recursion limit
        raise OnnxFormatError(f"{where}not an ONNX model (protobuf could not be parsed: {type(exc).__name__}: {exc})") from None
    return proto


def tensors_of(model: Any, max_depth: int) -> Iterator[Any]:
    """Every TensorProto of the model: initializers, attribute tensors, sparse parts, nested graphs, functions."""
    yield from _graph_tensors(model.graph, 0, max_depth)
    for fn in model.functions:
        for node in fn.node:
            yield from _attribute_tensors(node, 1, max_depth)


def _graph_tensors(graph: Any, depth: int, max_depth: int) -> Iterator[Any]:
    if depth > max_depth:
        raise OnnxFormatError(f"graph {graph.name!r}: subgraphs nested deeper than LoadLimits.max_depth={max_depth}")
    yield from graph.initializer
    for sp in graph.sparse_initializer:
        yield sp.values
        yield sp.indices
    for node in graph.node:
        yield from _attribute_tensors(node, depth, max_depth)


def _attribute_tensors(node: Any, depth: int, max_depth: int) -> Iterator[Any]:
    for a in node.attribute:
        if a.type == _TENSOR or a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.type == _SPARSE or a.HasField("sparse_tensor"):
            yield a.sparse_tensor.values
            yield a.sparse_tensor.indices
        for sp in a.sparse_tensors:
            yield sp.values
            yield sp.indices
        if a.HasField("g"):
            yield from _graph_tensors(a.g, depth + 1, max_depth)
        for g in a.graphs:
            yield from _graph_tensors(g, depth + 1, max_depth)


def declared_elements(t: Any, limits: LoadLimits) -> int:
    """Element count of a TensorProto from its dims, each checked (non-negative, rank and size bounded)."""
    dims = list(t.dims)
    if len(dims) > limits.max_rank:
        raise OnnxFormatError(f"tensor {t.name!r}: rank {len(dims)} exceeds LoadLimits.max_rank={limits.max_rank}")
    for d in dims:
        if d < 0 or d > limits.max_dim:
            raise OnnxFormatError(f"tensor {t.name!r}: dim {d} is negative or exceeds LoadLimits.max_dim={limits.max_dim}")
    return math.prod(dims)


def _load_external(t: Any, base: str, limits: LoadLimits, budget: list[int]) -> None:
    """Replace ``t``'s external reference by its bytes (raw_data), read from a checked file region."""
    info = {e.key: e.value for e in t.external_data}
    where = f"tensor {t.name!r}: external data"
    if t.data_type not in _BITS:
        raise OnnxFormatError(f"{where}: element type {t.data_type} cannot be stored externally")
    nbytes = raw_bytes(t.data_type, declared_elements(t, limits))
    if nbytes > limits.max_tensor_bytes:
        raise OnnxFormatError(f"{where}: {nbytes} bytes exceed LoadLimits.max_tensor_bytes={limits.max_tensor_bytes}")
    offset = _non_negative(info.get("offset", "0"), f"{where} offset")
    if "length" in info and _non_negative(info["length"], f"{where} length") != nbytes:
        raise OnnxFormatError(f"{where}: length {info['length']} differs from the declared tensor's {nbytes} bytes")
    if nbytes > budget[0]:
        raise OnnxFormatError(f"{where}: reading {nbytes} more bytes exceeds LoadLimits.max_total_bytes={limits.max_total_bytes}")
    budget[0] -= nbytes
    path = _inside(base, info.get("location", ""), where)
    t.raw_data = _read_regular(path, offset, nbytes, limits.max_tensor_bytes, where)
    del t.external_data[:]
    t.data_location = 0


def _non_negative(text: str, what: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise OnnxFormatError(f"{what} {text!r} is not a non-negative integer")
    return int(text)


def _inside(base: str, location: str, where: str) -> str:
    """The real path of ``location`` under ``base``; refused when it is absolute or resolves (via .. or symlinks) outside."""
    if not location or "\0" in location or os.path.isabs(location) or location.startswith(("\\", "/")) or ":" in location:
        raise OnnxFormatError(f"{where}: location {location!r} must be a relative path inside the model's folder")
    real = os.path.realpath(os.path.join(base, location))
    if real == base or os.path.commonpath([base, real]) != base:
        raise OnnxFormatError(f"{where}: location {location!r} leaves the model's folder {base!r}")
    return real


def _read_regular(path: str, offset: int, nbytes: int | None, max_bytes: int, where: str) -> bytes:
    """``nbytes`` bytes at ``offset`` of a regular file (all of it when None), never blocking on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise OnnxFormatError(f"{where} {path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise OnnxFormatError(f"{where} {path}: cannot be opened: {exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OnnxFormatError(f"{where} {path!r} is not a regular file")
        if nbytes is None:
            nbytes = st.st_size - offset
            if nbytes > max_bytes:
                raise OnnxFormatError(f"{where} {path!r}: {nbytes} bytes exceed the limit {max_bytes}")
        if offset + nbytes > st.st_size:
            raise OnnxFormatError(f"{where} {path!r}: bytes {offset}..{offset + nbytes} lie past its end ({st.st_size} bytes)")
        chunks, done = [], 0
        while done < nbytes:
            chunk = os.pread(fd, min(nbytes - done, 1 << 26), offset + done)
            if not chunk:
                raise OnnxFormatError(f"{where} {path!r} shrank while being read")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise OnnxFormatError(f"{where} {path!r} cannot be read: {exc}") from None
    finally:
        os.close(fd)


def tensor_to_array(t: Any, limits: LoadLimits) -> np.ndarray:
    """A TensorProto as NumPy in its rlx dtype; dims, data sizes and types are checked first."""
    onnx = onnx_module()
    if t.data_type == _STRING:
        raise OnnxUnsupported("string tensors have no rlx equivalent")
    want = rlx_dtype(t.data_type, f"tensor {t.name!r}: ")
    if t.data_location == _EXTERNAL:
        raise OnnxFormatError(f"tensor {t.name!r}: external data outside a model file (pass base_dir=)")
    n = declared_elements(t, limits)
    if n * want.itemsize > limits.max_tensor_bytes:  # rlx's (unpacked) size is what gets allocated
        raise OnnxFormatError(f"tensor {t.name!r}: {n} elements exceed LoadLimits.max_tensor_bytes={limits.max_tensor_bytes}")
    if t.HasField("raw_data") and len(t.raw_data) != raw_bytes(t.data_type, n):
        raise OnnxFormatError(f"tensor {t.name!r}: raw_data holds {len(t.raw_data)} bytes, its dims "
                              f"{list(t.dims)} need {raw_bytes(t.data_type, n)}")
    try:
        arr = np.asarray(onnx.numpy_helper.to_array(t))
        arr = arr.reshape(tuple(t.dims))
    except Exception as exc:  # mis-sized typed fields, malformed values
        raise OnnxFormatError(f"tensor {t.name!r}: its data does not match its dims {list(t.dims)} "
                              f"and type ({type(exc).__name__}: {str(exc)[:200]})") from None
    return arr.astype(want.numpy, copy=False) if arr.dtype != want.numpy else arr
