"""Read a GGUF file with the ``gguf`` package's reader (memory-mapped; the format is never parsed here by hand).

Everything the reader hands back is checked before use: the counts and sizes are bounded, every tensor's bytes lie
inside the file and match its type and dims, and any failure of the underlying reader (truncated or corrupt file)
becomes a :class:`GgufError` naming the file and what was wrong. Nothing outside the file is read and no code runs.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.ir.errors import FormatError

#: bounds on what a file may declare (far above any real model, far below what would exhaust memory)
MAX_TENSORS = 65536
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 40
MAX_METADATA = 1 << 16


class GgufError(FormatError):
    """A GGUF file that cannot be read or does not describe a model rlx can build."""


@dataclass(frozen=True)
class GgufTensor:
    """One tensor: ggml type name (``"F32"``, ``"Q4_K"`` …), logical shape (outermost first, e.g. ``[N, K]`` for a
    weight whose rows hold K inputs) and the raw memory-mapped data (u8 block bytes for quantized types)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


@dataclass
class GgufFile:
    path: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, GgufTensor] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.metadata:
            raise GgufError(f"{self.path}: metadata key {key!r} is missing")
        return self.metadata[key]


def _field_value(f: Any) -> Any:
    value = f.contents()
    if isinstance(value, (list, str, int, float, bool)) or value is None:
        return value
    return value.tolist() if hasattr(value, "tolist") else value


def read_gguf(path: str | os.PathLike[str]) -> GgufFile:
    """Open ``path`` (memory-mapped) and return its validated metadata and tensor table."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise GgufError(f"{p}: not a file")
    size = os.path.getsize(p)
    if size < 24:
        raise GgufError(f"{p}: {size} bytes is too short for a GGUF header")
    with open(p, "rb") as fh:
        head = fh.read(24)
    if head[:4] != b"GGUF":
        raise GgufError(f"{p}: not a GGUF file (bad magic)")
    # the two counts of the fixed header (u64 after magic and version; a big-endian file shows a version with zero low
    # bits, as the reader decides), bounded before the reader walks them: every key and tensor record takes >= 12 bytes
    order = ">" if struct.unpack("<I", head[4:8])[0] & 0xFFFF == 0 else "<"
    n_tensors, n_kv = struct.unpack(order + "QQ", head[8:24])
    if n_tensors > MAX_TENSORS or n_kv > MAX_METADATA or (n_tensors + n_kv) * 12 > size:
        raise GgufError(f"{p}: header declares {n_tensors} tensors and {n_kv} metadata keys: beyond the bounds or the "
                        f"file's {size} bytes (corrupt or truncated GGUF file)")
    try:
        from gguf import GGMLQuantizationType, GGUFReader
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError as exc:  # pragma: no cover - the llm extra installs it
        raise GgufError("reading GGUF files needs the 'gguf' package (pip install gguf)") from exc
    try:
        reader = GGUFReader(p, "r")
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, UnicodeDecodeError, MemoryError) as exc:
        raise GgufError(f"{p}: corrupt or truncated GGUF file ({type(exc).__name__}: {exc})") from None
    if len(reader.fields) > MAX_METADATA or len(reader.tensors) > MAX_TENSORS:
        raise GgufError(f"{p}: {len(reader.fields)} metadata keys / {len(reader.tensors)} tensors exceed the bounds")
    out = GgufFile(p)
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            out.metadata[key] = _field_value(f)
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise GgufError(f"{p}: metadata key {key!r} is unreadable ({exc})") from None
    for t in reader.tensors:
        dims = [int(d) for d in t.shape]
        qtype = GGMLQuantizationType(int(t.tensor_type))
        if not 1 <= len(dims) <= MAX_DIMS or any(d < 1 for d in dims) or math.prod(dims) > MAX_ELEMENTS:
            raise GgufError(f"{p}: tensor {t.name!r} has invalid dims {dims}")
        block, type_size = GGML_QUANT_SIZES[qtype]
        if dims[0] % block:
            raise GgufError(f"{p}: tensor {t.name!r} ({qtype.name}) rows of {dims[0]} are not whole {block}-element blocks")
        want = math.prod(dims) // block * type_size
        if t.data_offset + want > size or int(t.data.nbytes) != want:
            raise GgufError(f"{p}: tensor {t.name!r} needs {want} bytes at offset {t.data_offset}, the file holds "
                            f"{max(0, size - t.data_offset)} (truncated?)")
        out.tensors[t.name] = GgufTensor(t.name, qtype.name, tuple(reversed(dims)), t.data)
    return out
