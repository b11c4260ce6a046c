"""Child-process cases for tests/ops/test_special_hostile.py (imported by tests/security/isolate.py's runner)."""

from __future__ import annotations

import numpy as np

import rlx

MIN = -(2 ** 63)


def lcm_gcd_extremes(backend: str) -> list[list[int]]:
    """gcd / lcm at INT64_MIN and -1 (torch's own lcm traps there with SIGFPE)."""
    a = np.array([MIN, MIN, -1, 0, MIN], np.int64)
    b = np.array([-1, MIN, MIN, MIN, 7], np.int64)
    g = rlx.Graph("ints")
    x, y = g.input("a", (5,), "i64"), g.input("b", (5,), "i64")
    g.set_outputs([g.special(x, y, kind="gcd"), g.special(x, y, kind="lcm")])
    feed = {"a": a, "b": b}
    outs = rlx.run(g, feed) if backend == "reference" else rlx.compile(g, backend=backend).run(inputs=feed)
    return [o.tolist() for o in outs]


def huge_degree(degree: float) -> str:
    """A polynomial degree far past the bounded-work limit: refused before any loop runs."""
    g = rlx.Graph("poly")
    x, n = g.input("x", (2,), "f64"), g.input("n", (2,), "f64")
    g.set_outputs([g.special(x, n, kind="hermite_polynomial_h")])
    return str(rlx.run(g, {"x": np.array([0.5, 0.1]), "n": np.array([3.0, degree])})[0])
