"""The JAX executable from many threads (each caller its own answer, own params) and its jit
cache after a custom op is re-registered (the executable follows the new op, never the old)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from runtime.hammer import hammer

pytest.importorskip("jax")

THREADS, RUNS = 8, 25


def mlp():
    g = rlx.Graph("jax_threads")
    x = g.input("x", (16, 32))
    h = g.tanh(x @ g.param("w1", (32, 64)) + g.param("b1", (64,)))
    g.set_outputs([h @ g.param("w2", (64, 8))])
    return g


def weights(rng):
    return {"w1": rng.standard_normal((32, 64)).astype(np.float32), "b1": rng.standard_normal(64).astype(np.float32),
            "w2": rng.standard_normal((64, 8)).astype(np.float32)}


def test_threads_times_runs_with_own_inputs_and_params():
    rng = np.random.default_rng(0)
    g = mlp()
    exe = rlx.compile(g, backend="jax", params=weights(rng))
    cases = []
    for _ in range(THREADS):
        feed, params = {"x": rng.standard_normal((16, 32)).astype(np.float32)}, weights(rng)
        cases.append((feed, params, rlx.run(g, feed, params)))
    wrong = hammer(lambda c: np.allclose(exe.run(c[0], c[1])[0], c[2][0], rtol=1e-5, atol=1e-5), cases, RUNS)
    assert wrong == [], f"{len(wrong)} wrong of {THREADS * RUNS}"


@pytest.fixture
def twice_op():
    yield "test_jit_twice"
    if "test_jit_twice" in rlx.custom_ops():
        rlx.unregister_custom_op("test_jit_twice")


def test_replaced_custom_op_is_not_served_from_the_jit_cache(twice_op):
    import jax.numpy as jnp

    def build():
        g = rlx.Graph("twice")
        g.set_outputs([getattr(g, twice_op)(g.input("x", (3,), "f32"))])
        return g

    x = np.arange(3, dtype=np.float32)
    rlx.custom_op(twice_op, infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: 2 * args[0],
                  jax=lambda args, attrs, out: 2 * jnp.asarray(args[0]), batch="elementwise")
    np.testing.assert_array_equal(rlx.compile(build(), backend="jax").run({"x": x})[0], 2 * x)
    rlx.custom_op(twice_op, infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: 5 * args[0],
                  jax=lambda args, attrs, out: 5 * jnp.asarray(args[0]), batch="elementwise", replace=True)
    g = build()
    np.testing.assert_array_equal(rlx.run(g, {"x": x})[0], 5 * x)
    np.testing.assert_array_equal(rlx.compile(g, backend="jax").run({"x": x})[0], 5 * x)
    # the same op and graph again: served from the cache
    from rlx.backends.jax import cache_info

    hits = cache_info()["hits"]
    np.testing.assert_array_equal(rlx.compile(build(), backend="jax").run({"x": x})[0], 5 * x)
    assert cache_info()["hits"] == hits + 1
