"""``rlx.vmap`` checked against a Python loop over the batch, for every op case."""

from __future__ import annotations

import numpy as np
import pytest
from adcheck import CASES, expected_missing, missing_rules

import rlx

B = 3


def _example(arr: np.ndarray, k: int) -> np.ndarray:
    """The k-th example: floats scaled by (1 + k/10) (signs, zeros, NaN and ties kept), others unchanged."""
    if arr.dtype.kind == "f" or arr.dtype.kind == "c":
        return (arr * (1.0 + k / 10.0)).astype(arr.dtype)
    return arr.copy()


def _loop(g, case, batched: dict[str, int]) -> list[np.ndarray]:
    """Run ``g`` per example and stack the outputs on axis 0."""
    per = []
    for k in range(B):
        feed = {n: _example(a, k) if n in batched else a for n, a in case.feed.items()}
        inputs = {n: a for n, a in feed.items() if n not in case.params}
        params = {n: a for n, a in feed.items() if n in case.params}
        per.append(rlx.run(g, inputs, params))
    return [np.stack([p[i] for p in per]) for i in range(len(per[0]))]


def _batched_feed(case, batched: dict[str, int]) -> tuple[dict, dict]:
    feed = {}
    for n, a in case.feed.items():
        if n in batched:
            feed[n] = np.moveaxis(np.stack([_example(a, k) for k in range(B)]), 0, batched[n])
        else:
            feed[n] = a
    return {n: a for n, a in feed.items() if n not in case.params}, {n: a for n, a in feed.items() if n in case.params}


def _check(case, batched: dict[str, int], batch_size=None):
    g, _ = case.graph()
    if rlx.get_op(case.op).level == "hir":
        pytest.skip("HIR op")
    missing = missing_rules(g, "batch")
    if missing and expected_missing(missing):
        pytest.xfail(f"phase 2: no batch rule yet for {sorted(missing)}")
    vg = rlx.vmap(g, in_axes=batched, batch_size=batch_size)
    rlx.verify(vg)
    inputs, params = _batched_feed(case, batched)
    got = rlx.run(vg, inputs, params)
    want = _loop(g, case, batched)
    assert len(got) == len(want)
    for value, a, w in zip(vg.outputs, got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        if batch_size is not None:
            assert value.shape[0] == batch_size
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, w, rtol=max(case.rtol, 1e-6), atol=max(case.atol, 1e-7))
        else:
            np.testing.assert_array_equal(a, w)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vmap_all_inputs_axis0_matches_loop(case):
    _check(case, {n: 0 for n in case.feed})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vmap_first_input_last_axis_others_shared(case):
    """Only the first feed is batched, on its last axis; the rest broadcast where needed."""
    first = next(iter(case.feed))
    _check(case, {first: -1}, batch_size=B)


# ------------------------------------------------------------------------------ behaviour
def _mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (4, 3), "f64")
    w = g.param("w", (3, 2), "f64")
    b = g.param("b", (2,), "f64")
    y = g.tanh(g.matmul(x, w) + b)
    g.set_outputs([y, g.sum(y), g.sum(w)])
    return g


def test_vmap_batches_every_output_even_unreached_ones():
    g = _mlp()
    vg = rlx.vmap(g, {"x": 0}, batch_size=5)
    assert [tuple(o.shape) for o in vg.outputs] == [(5, 4, 2), (5,), (5,)]
    rng = np.random.default_rng(0)
    xs, w, b = rng.standard_normal((5, 4, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    y, _, sw = rlx.run(vg, {"x": xs}, {"w": w, "b": b})
    np.testing.assert_allclose(y, np.tanh(xs @ w + b), rtol=1e-12)
    np.testing.assert_allclose(sw, np.full(5, w.sum()), rtol=1e-12)


def test_vmap_default_batch_is_symbolic_and_binds_at_run_time():
    g = _mlp()
    vg = rlx.vmap(g, {"x": 0})
    sym = vg.inputs()["x"].shape[0]
    assert isinstance(sym, str)
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    for n in (1, 4):
        xs = rng.standard_normal((n, 4, 3))
        y, _, sw = rlx.run(vg, {"x": xs}, {"w": w, "b": b})
        np.testing.assert_allclose(y, np.tanh(xs @ w + b), rtol=1e-12)
        assert sw.shape == (n,)


def test_vmap_params_and_out_axes():
    g = _mlp()
    vg = rlx.vmap(g, {"w": 2, "x": None}, batch_size=2, out_axes=[1, 0, 0])
    assert tuple(vg.params()["w"].shape) == (3, 2, 2)
    assert tuple(vg.outputs[0].shape) == (4, 2, 2)
    rng = np.random.default_rng(2)
    x, ws, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2, 2)), rng.standard_normal(2)
    y, _, sw = rlx.run(vg, {"x": x}, {"w": ws, "b": b})
    for k in range(2):
        np.testing.assert_allclose(y[:, k], np.tanh(x @ ws[:, :, k] + b), rtol=1e-12)
        np.testing.assert_allclose(sw[k], ws[:, :, k].sum(), rtol=1e-12)


def test_vmap_of_vmap():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    y = g.input("y", (3,), "f64")
    g.set_outputs([g.sum(g.sin(x) * y)])
    inner = rlx.vmap(g, {"x": 0}, batch_size=2)          # x [2, 3]
    outer = rlx.vmap(inner, {"y": 0}, batch_size=4)      # y [4, 3]
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    (out,) = rlx.run(outer, {"x": xs, "y": ys})
    np.testing.assert_allclose(out, ys @ np.sin(xs).T, rtol=1e-12)


def test_vmap_of_grad():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    w = g.param("w", (3,), "f64")
    g.set_outputs([g.sum(g.gelu(x * w))])
    per_example = rlx.vmap(rlx.grad(g, ["w"]), {"x": 0}, batch_size=4)
    rng = np.random.default_rng(4)
    xs, w0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    (dw,) = rlx.run(per_example, {"x": xs, "d_output": np.array(1.0)}, {"w": w0})
    for k in range(4):
        (want,) = rlx.run(rlx.grad(g, ["w"]), {"x": xs[k], "d_output": np.array(1.0)}, {"w": w0})
        np.testing.assert_allclose(dw[k], want, rtol=1e-12)


def test_vmap_errors():
    g = _mlp()
    with pytest.raises(rlx.AutodiffError, match="no input or param named 'z'"):
        rlx.vmap(g, {"z": 0})
    with pytest.raises(rlx.AutodiffError, match="batches nothing"):
        rlx.vmap(g, {"x": None})
    with pytest.raises(rlx.AutodiffError, match="out of range"):
        rlx.vmap(g, {"x": 3})
    with pytest.raises(rlx.AutodiffError, match="out_axes"):
        rlx.vmap(g, {"x": 0}, out_axes=[0])
