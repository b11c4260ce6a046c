"""The numpy executor's fast paths: weight-only nodes computed once per params binding, fresh kernel
results adopted (never copied into a slot), both matching ``rlx.run`` exactly; a run lets go of the
arrays it was given and made."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import rlx
from rlx.runtime.compile import compile as rlx_compile


@pytest.fixture
def counted(custom_cleanup):
    """A custom op ``test_counted`` (2·x) whose kernel counts its calls."""
    calls = []

    def kernel(args, attrs, out):
        calls.append(1)
        return 2 * args[0]

    rlx.custom_op("test_counted", infer=lambda ins, attrs: ins[0], kernel=kernel, batch="elementwise")
    return calls


def graph():
    g = rlx.Graph("weights_once")
    x, w = g.input("x", (4, 8)), g.param("w", (6, 8))
    wt = g.transpose(g.test_counted(w), perm=[1, 0])  # weight-only: computed when w is bound
    g.set_outputs([g.tanh(x @ wt) + g.sum(wt, axes=[0])])
    return g


def test_weight_only_nodes_run_once_per_binding(counted):
    rng = np.random.default_rng(0)
    g = graph()
    W, W2 = (rng.standard_normal((6, 8)).astype(np.float32) for _ in range(2))
    feeds = [{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(3)]
    exe = rlx_compile(g, params={"w": W})
    for f in feeds:
        np.testing.assert_array_equal(exe.run(f)[0], rlx.run(g, f, {"w": W})[0])
    n_ref = 3  # one call per rlx.run above
    assert len(counted) == n_ref + 1
    exe.set_params({"w": W2})
    np.testing.assert_array_equal(exe.run(feeds[0])[0], rlx.run(g, feeds[0], {"w": W2})[0])
    np.testing.assert_array_equal(exe.run(feeds[1], {"w": W})[0], rlx.run(g, feeds[1], {"w": W})[0])  # this call's params
    assert len(counted) == n_ref + 1 + 2 + 2  # rebinding recomputes once; each rlx.run once
    every_run = rlx_compile(g, params={"w": W}, fold_weights=False)
    before = len(counted)
    for f in feeds:  # the transpose is copied into its slot here, so the sums may round differently
        np.testing.assert_allclose(every_run.run(f)[0], rlx.run(g, f, {"w": W})[0], rtol=1e-6)
    assert len(counted) - before == 2 * len(feeds)


@pytest.mark.parametrize("adopt", [True, False])
def test_adopted_and_slotted_runs_match_the_reference(adopt):
    rng = np.random.default_rng(1)
    g = rlx.Graph("mixed")
    x = g.input("x", (8, 16))
    w = g.param("w", (16, 16))
    h = g.cumsum(g.relu(x @ w), axis=1)  # cumulative has no kernel_into: adopted when adopt=True
    g.set_outputs([g.softmax(h, axis=-1) * 2.0, g.concat([h, x], axis=1)])
    W = rng.standard_normal((16, 16)).astype(np.float32)
    exe = rlx_compile(g, params={"w": W}, adopt=adopt)
    for _ in range(3):
        feed = {"x": rng.standard_normal((8, 16)).astype(np.float32)}
        for got, want in zip(exe.run(feed), rlx.run(g, feed, {"w": W})):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("adopt", [True, False])
def test_a_run_keeps_no_reference_to_its_inputs_or_results(adopt):
    """Inputs read in place and outputs written to fresh arrays (one a view of another) belong to the caller
    after the run: the executor holds none of them (they are freed when the caller drops them)."""
    rng = np.random.default_rng(2)
    g = rlx.Graph("let_go")
    x = g.input("x", (8, 16))
    h = g.cumsum(g.relu(x @ g.param("w", (16, 16))), axis=1)  # cumulative: a fresh result, adopted when adopt=True
    a, b = g.split(g.tanh(x), axis=1, sizes=[10, 6])  # a multi-result node inside the arena: copied into its slots
    g.set_outputs([g.reshape(h * 2.0, (16, 8)), h, g.concat([b, a], axis=1) * 1.5])  # a view of an output too
    W = rng.standard_normal((16, 16)).astype(np.float32)
    exe = rlx_compile(g, params={"w": W}, adopt=adopt)
    feed = {"x": rng.standard_normal((8, 16)).astype(np.float32)}
    want = rlx.run(g, feed, {"w": W})
    outs = exe.run(feed)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(outs[i], w)
    refs = [weakref.ref(feed["x"]), *(weakref.ref(o) for o in outs)]
    del feed, outs
    gc.collect()
    assert [r() is None for r in refs] == [True] * len(refs)
    again = {"x": rng.standard_normal((8, 16)).astype(np.float32)}
    for got, w in zip(exe.run(again), rlx.run(g, again, {"w": W})):  # the next run binds its own again
        np.testing.assert_array_equal(got, w)
