"""Build benign and hostile ``.pt2`` archives by rewriting what ``torch.export.save`` wrote."""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from collections.abc import Callable, Mapping


def members(path: str) -> dict[str, bytes]:
    """Members by name relative to the root folder (and the root)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        root = names[0].split("/", 1)[0]
        return {"": root.encode(), **{n[len(root) + 1 :]: zf.read(n) for n in names}}


def write(path: str, entries: Mapping[str, bytes], *, root: str, raw: frozenset[str] = frozenset(),
          compress: frozenset[str] = frozenset()) -> str:
    """A zip of ``entries``: names relative to ``root`` except those in ``raw`` (used as given)."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            if name == "":
                continue
            full = name if name in raw else f"{root}/{name}"
            zf.writestr(zipfile.ZipInfo(full), data, compress_type=zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED)
    return path


def rewrite(src: str, dst: str, change: Callable[[dict[str, bytes]], None], **kw) -> str:
    entries = members(src)
    root = entries[""].decode()
    change(entries)
    return write(dst, entries, root=root, **kw)


def edit_json(entries: dict[str, bytes], name: str, edit: Callable[[dict], None]) -> None:
    doc = json.loads(entries[name])
    edit(doc)
    entries[name] = json.dumps(doc).encode()


class Call:
    """Pickles as a call of ``fn(*args)`` (the classic code-execution payload)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def payload(fn, *args, protocol: int = 2) -> bytes:
    return pickle.dumps(Call(fn, *args), protocol=protocol)


def _short_str(s: str) -> bytes:
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def stack_global_call(module: str, name: str, arg: str, *, memo: bool = False) -> bytes:
    """A protocol-4 pickle ``module.name(arg)`` through STACK_GLOBAL (dotted names resolve)."""
    body = _short_str(module) + b"\x94" + _short_str(name) + b"\x94"
    if memo:  # push both names again from the memo
        body += b"0" + b"0" + b"h\x00h\x01"
    return b"\x80\x04" + body + b"\x93" + _short_str(arg) + b"\x85R."


def torch_save_with(pickle_bytes: bytes, extra: Mapping[str, bytes] | None = None) -> bytes:
    """A ``torch.save`` zip whose data.pkl is ``pickle_bytes``."""
    import torch

    buf = io.BytesIO()
    torch.save(torch.zeros(1), buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        names = zf.namelist()
        root = names[0].split("/", 1)[0]
        entries = {n[len(root) + 1 :]: zf.read(n) for n in names}
    entries["data.pkl"] = pickle_bytes
    entries.update(extra or {})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for n, d in entries.items():
            zf.writestr(zipfile.ZipInfo(f"{root}/{n}"), d)
    return out.getvalue()


def patch_central_size(path: str, member_suffix: str, size: int) -> None:
    """Declare ``size`` bytes (compressed and not) for one member in the central directory."""
    data = bytearray(open(path, "rb").read())
    pos = data.find(b"PK\x01\x02")
    while pos != -1:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        name = bytes(data[pos + 46 : pos + 46 + name_len]).decode()
        if name.endswith(member_suffix):
            struct.pack_into("<II", data, pos + 20, size, size)
        pos = data.find(b"PK\x01\x02", pos + 4)
    open(path, "wb").write(bytes(data))
