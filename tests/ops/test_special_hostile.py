"""Hostile values for the ``special`` op, each in a child process with time and memory limits: int64 extremes
in gcd / lcm never kill the process on any backend, a huge polynomial degree is refused before any work."""

from __future__ import annotations

import os

import pytest

from security.isolate import run_cases

CASES = os.path.join(os.path.dirname(__file__), "special_hostile.py")


def test_gcd_lcm_at_int64_extremes_on_every_backend():
    backends = ["reference", "numpy", "jax", "torch"]
    outcomes = run_cases(CASES, "lcm_gcd_extremes", [[b] for b in backends], memory=8 << 30, wall=60)
    values = []
    for backend, out in zip(backends, outcomes):
        assert out.exited and out.error is None, (backend, out.how, out.message)
        values.append(out.value)
    assert all(v == values[0] for v in values), values
    assert values[0][0][3] == -(2 ** 63)  # gcd(0, MIN) = |MIN| wraps to MIN in C arithmetic, as torch's does


@pytest.mark.parametrize("degree", [1e12, 2.0 ** 62])
def test_huge_polynomial_degree_is_refused(degree):
    (out,) = run_cases(CASES, "huge_degree", [[degree]], wall=30)
    assert out.exited and out.is_a("RlxError") and "bounded-work" in out.message, (out.how, out.message)
