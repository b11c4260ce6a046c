"""Integer div / mod / fmod at MIN / -1 and x / 0 on every backend: one defined result (the reference's,
docs/semantics.md "Edge cases"), never a process killed by a feed value (torch's and onnxruntime's
integer kernels trap with SIGFPE on MIN / -1 and fail on a zero divisor unless the lowering guards them).

Each backend runs in a child process with time and memory limits (isolate.py); the oracle is Python's
integer arithmetic, wrapped to the type's bits (signed and unsigned types).
"""

from __future__ import annotations

import os

import pytest

from .isolate import run_cases

CASES = os.path.join(os.path.dirname(__file__), "int_cases.py")
BACKENDS = ("reference", "numpy", "jax", "torch", "onnxruntime")


def _wrap(v: int, dt: str) -> int:
    bits = int(dt[1:])
    v &= (1 << bits) - 1
    return v - (1 << bits) if dt[0] == "i" and v >> (bits - 1) else v


def _oracle(op: str, a: int, b: int, dt: str) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncated
    if op == "div":
        return _wrap(q, dt)
    return _wrap(a % b if op == "mod" else a - b * q, dt)


def test_int_division_edges_on_every_backend():
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    from int_cases import OPS, dtypes, edge_values

    for mod in ("jax", "torch", "onnxruntime"):
        pytest.importorskip(mod)
    outcomes = run_cases(CASES, "int_division", [[b] for b in BACKENDS], memory=8 << 30, wall=120)
    for backend, o in zip(BACKENDS, outcomes):
        assert o.exited and o.error is None, f"{backend}: {o.how} {o.raised[:1]} {o.message[:300]}"
        assert len(o.value) == len(dtypes(backend)) * len(OPS), backend
        for dt in dtypes(backend):
            vals = edge_values(dt)
            for op in OPS:
                want = [[_oracle(op, a, b, dt) for b in vals] for a in vals]
                assert o.value[f"{dt} {op}"] == want, f"{backend} {dt} {op}"
