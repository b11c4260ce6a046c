"""What an isolated child runs for the integer division tests (see isolate.py): every pair of edge
values through div / mod / fmod on one backend, for i8 … i64 and u8 … u64, returned as Python ints."""

from __future__ import annotations

import numpy as np

import rlx

DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
OPS = ("div", "mod", "fmod")


def dtypes(backend: str) -> tuple[str, ...]:
    """torch has no u64 division kernel (a typed RlxError, not a crash): u64 is left out there."""
    return tuple(d for d in DTYPES if not (backend == "torch" and d == "u64"))


def edge_values(dt: str) -> list[int]:
    info = np.iinfo(npdtype(dt))
    if info.min == 0:
        return [0, 1, 2, 7, int(info.max) // 2, int(info.max) // 2 + 1, int(info.max) - 1, int(info.max)]
    return [int(info.min), int(info.min) + 1, -7, -2, -1, 0, 1, 2, 7, int(info.max) - 1, int(info.max)]


def npdtype(dt: str) -> np.dtype:
    return np.dtype(("int" if dt[0] == "i" else "uint") + dt[1:])


def int_division(backend: str) -> dict[str, list[list[int]]]:
    """``{"<dtype> <op>": rows}`` of ``op(a, b)`` for a (rows) and b (columns) over :func:`edge_values`."""
    g = rlx.Graph("int_division")
    feed, keys = {}, []
    for dt in dtypes(backend):
        vals = np.array(edge_values(dt), npdtype(dt))
        a, b = g.input(f"a_{dt}", (len(vals), 1), dt), g.input(f"b_{dt}", (1, len(vals)), dt)
        feed[f"a_{dt}"], feed[f"b_{dt}"] = vals.reshape(-1, 1), vals.reshape(1, -1)
        for op in OPS:
            keys.append(f"{dt} {op}")
            g.set_outputs([*g.outputs, g.div(a, b) if op == "div" else g.binary_ext(a, b, op=op)])
    outs = rlx.run(g, feed) if backend == "reference" else rlx.compile(g, backend=backend).run(feed)
    return {k: np.asarray(o).tolist() for k, o in zip(keys, outs)}
