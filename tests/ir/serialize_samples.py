"""Graphs shared by the serialization tests, the fuzz test, the fixtures and the subprocess check.

Also the test-only op ``zz_serialize_probe``: one attribute of every kind (graph included),
registered by :func:`probe_op` and removed by :func:`remove_probe_op` so other tests never
see it in the registry.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import rlx
from rlx.ir import opdef as _opdef
from rlx.ir.attrs import AttrSpec

PROBE = "zz_serialize_probe"


def probe_op() -> None:
    if _opdef.has_op(PROBE):
        return
    _opdef.register_op(rlx.OpDef(
        name=PROBE, family="test", arity=1, operands=("x",),
        attrs={
            "i": AttrSpec("int", default=0), "f": AttrSpec("float", default=1.0), "b": AttrSpec("bool", default=False),
            "s": AttrSpec("str", default="a"), "dt": AttrSpec("dtype", default=rlx.f32), "ints": AttrSpec("ints", default=()),
            "floats": AttrSpec("floats", default=()), "dims": AttrSpec("dims", default=()),
            "t": AttrSpec("tensor", default=None), "body": AttrSpec("graph", default=None),
            "data": AttrSpec("data", default=None), "opt": AttrSpec("float", default=None),
            "mode": AttrSpec("str", default="x", choices=("x", "y")),
        },
        infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0],
        doc="test-only op with one attribute of every kind",
    ))


def remove_probe_op() -> None:
    _opdef._REGISTRY.pop(PROBE, None)
    _opdef._METHODS.pop(PROBE, None)


def mlp() -> rlx.Graph:
    """A small MIR graph: inputs, bf16 / fp8 params, an inline and a payload-sized constant."""
    g = rlx.Graph("mlp")
    x = g.input("x", ("batch", 16))
    w = g.param("w", (16, 8))
    b = g.param("b", (8,))
    g.param("w_bf16", (4, 4), "bf16")
    g.param("w_fp8", (4, 4), "f8e4m3")
    big = g.constant(np.arange(2048, dtype=np.float32).reshape(256, 8) / 7, name="big")  # 8 KiB: payload
    small = g.constant(np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, 2.0, 3.0, 4.0], np.float32), name="small")
    h = g.matmul(x, w) + b
    y = h * small
    g.set_outputs([y, big])
    return g


def mlp_params() -> dict[str, np.ndarray]:
    return {
        "w": (np.arange(128, dtype=np.float32).reshape(16, 8) / 3),
        "b": np.linspace(-1, 1, 8, dtype=np.float32),
        "w_bf16": np.array([[1.5, -2, np.nan, np.inf]] * 4, dtype=ml_dtypes.bfloat16),
        "w_fp8": np.array([[0.5, -1, 448, 2]] * 4, dtype=ml_dtypes.float8_e4m3fn),
    }


def nested(depth: int = 3) -> rlx.Graph:
    """Graph-valued attributes nested ``depth`` levels deep, with every other attribute kind."""
    probe_op()
    body = None
    for level in range(depth):
        g = rlx.Graph(f"level{level}")
        x = g.input("x", (2, 3), "bf16")
        attrs = {
            "i": -(2**63), "f": math.nan, "b": True, "s": "é\u2028\ud800", "dt": rlx.f8e5m2,
            "ints": (1, -2, 2**63 - 1), "floats": (math.inf, -math.inf, 1e-300, -0.0), "dims": (4, "batch"),
            "t": np.array([[1, 2], [3, 4]], np.int64) + level, "data": (None, 1, 1.0, "s", (True, math.nan)),
            "mode": "y", "opt": 1e-5,
        }
        if body is not None:
            attrs["body"] = body
        y = g.append(PROBE, [x], attrs, name=f"probe{level}")
        g.set_outputs([y])
        body = g
    assert body is not None
    return body


def chain(n: int, name: str = "chain") -> rlx.Graph:
    """A long MIR chain of about ``n`` nodes: matmul, add, gelu repeated."""
    g = rlx.Graph(name)
    x = g.input("x", (8, 64))
    w = g.param("w", (64, 64))
    cur = x
    while len(g) + 3 <= n:
        cur = g.gelu(g.matmul(cur, w) + cur)
    g.set_outputs([cur])
    return g


def hir_module():
    return rlx.define("block", lambda h: h.linear(h.input("x", (2, 16)), h.param("w", (16, 16)), bias=h.param("b", (16,)),
                                                   activation="gelu"))


if __name__ == "__main__":  # used by the subprocess fingerprint test
    import sys

    print(rlx.fingerprint(mlp()))
    print(rlx.fingerprint(nested()))
    if len(sys.argv) > 1:
        print(rlx.fingerprint(rlx.load(sys.argv[1])))
