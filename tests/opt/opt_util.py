"""Helpers shared by the optimizer tests."""

from __future__ import annotations

import numpy as np

import rlx


def feed_for(g: rlx.Graph, seed: int = 0) -> tuple[dict, dict]:
    """Random inputs and params for every leaf of ``g`` (floats in [-1, 1], ints small)."""
    rng = np.random.default_rng(seed)

    def make(v):
        shape = tuple(v.shape)
        dt = v.dtype.numpy
        if v.dtype.is_float:
            return rng.uniform(-1.0, 1.0, shape).astype(dt)
        if v.dtype.is_bool:
            return rng.integers(0, 2, shape).astype(dt)
        return rng.integers(-3, 4, shape).astype(dt)

    return ({k: make(v) for k, v in g.inputs().items()}, {k: make(v) for k, v in g.params().items()})


def assert_same_outputs(before: rlx.Graph, after: rlx.Graph, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    inputs, params = feed_for(before, seed)
    want = rlx.run(before, inputs, params)
    got = rlx.run(after, {k: v for k, v in inputs.items() if k in after.inputs()}, {k: v for k, v in params.items() if k in after.params()})
    assert len(want) == len(got)
    for w, o in zip(want, got):
        assert w.shape == o.shape and w.dtype == o.dtype, (w.shape, o.shape, w.dtype, o.dtype)
        np.testing.assert_allclose(o.astype(np.float64) if o.dtype.kind != "b" else o, w.astype(np.float64) if w.dtype.kind != "b" else w,
                                   rtol=rtol, atol=atol)


def op_counts(g: rlx.Graph) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in g.nodes:
        out[n.op] = out.get(n.op, 0) + 1
    return out
