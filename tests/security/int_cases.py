"""What an isolated child runs for the integer division tests (see isolate.py): every pair of edge
values through div / mod / fmod on one backend, for i8 i16 i32 i64, returned as Python ints."""

from __future__ import annotations

import numpy as np

import rlx

DTYPES = ("i8", "i16", "i32", "i64")
OPS = ("div", "mod", "fmod")


def edge_values(dt: str) -> list[int]:
    info = np.iinfo(np.dtype(f"int{dt[1:]}"))
    return [int(info.min), int(info.min) + 1, -7, -2, -1, 0, 1, 2, 7, int(info.max) - 1, int(info.max)]


def int_division(backend: str) -> dict[str, list[list[int]]]:
    """``{"<dtype> <op>": rows}`` of ``op(a, b)`` for a (rows) and b (columns) over :func:`edge_values`."""
    g = rlx.Graph("int_division")
    feed, keys = {}, []
    for dt in DTYPES:
        vals = np.array(edge_values(dt), np.dtype(f"int{dt[1:]}"))
        a, b = g.input(f"a_{dt}", (len(vals), 1), dt), g.input(f"b_{dt}", (1, len(vals)), dt)
        feed[f"a_{dt}"], feed[f"b_{dt}"] = vals.reshape(-1, 1), vals.reshape(1, -1)
        for op in OPS:
            keys.append(f"{dt} {op}")
            g.set_outputs([*g.outputs, g.div(a, b) if op == "div" else g.binary_ext(a, b, op=op)])
    outs = rlx.run(g, feed) if backend == "reference" else rlx.compile(g, backend=backend).run(feed)
    return {k: np.asarray(o).tolist() for k, o in zip(keys, outs)}
