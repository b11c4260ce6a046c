"""``rlx.run``'s outputs are the caller's own writable arrays, as every executable backend's: not the fed arrays,
not views of them (a reshape or transpose of an input / param), not another output, not a constant's read-only
array. Values against NumPy."""

from __future__ import annotations

import numpy as np

import rlx


def test_run_outputs_never_alias_the_feed_each_other_or_constants():
    g = rlx.Graph("aliasing")
    x = g.input("x", (2, 3))
    w = g.param("w", (3, 2))
    const = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = g.constant(const)
    g.set_outputs([g.reshape(x, (3, 2)), x, x, g.transpose(w, (1, 0)), c, g.reshape(c, (6,)), x * 2.0])
    xs = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    ws = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)
    x_in, w_in = xs.copy(), ws.copy()
    outs = rlx.run(g, {"x": x_in}, {"w": w_in})
    want = [xs.reshape(3, 2), xs, xs, ws.T, const, const.reshape(6), xs * 2.0]
    for got, ref in zip(outs, want):
        np.testing.assert_array_equal(got, ref)
        assert got.flags.writeable
        assert not np.shares_memory(got, x_in) and not np.shares_memory(got, w_in)
    for i, a in enumerate(outs):
        for b in outs[i + 1:]:
            assert not np.shares_memory(a, b)
    x_in[...] = 0.0  # the caller reuses its input buffer: earlier results keep their values
    w_in[...] = 0.0
    for a in outs:
        a[...] = -1.0  # and may write its results: the graph's constant is untouched
    np.testing.assert_array_equal(rlx.run(g, {"x": xs}, {"w": ws})[4], const)
