"""The JAX executable: interface, feeds, params on device, jit cache, dtypes, inputs kinds, custom ops."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import rlx  # noqa: E402
from backends.jax_cases import assert_close, compile_fn  # noqa: E402
from rlx.backends.jax import cache_info, register_lowering  # noqa: E402

compile_ = compile_fn()


def _mlp(dtype="f32", batch=8):
    g = rlx.Graph(f"mlp_{dtype}")
    x = g.input("x", (batch, 16), dtype)
    w = g.param("w", (16, 32), dtype)
    b = g.param("b", (32,), dtype)
    gamma = g.param("gamma", (32,), dtype)
    beta = g.param("beta", (32,), dtype)
    h = g.gelu(g.matmul(x, w) + b)
    y = g.layer_norm(h, gamma, beta, axis=-1, eps=1e-5)
    g.set_outputs([y, g.sum(y, axes=[1])])
    return g


def _feed(dtype=np.float32, batch=8, seed=0):
    r = np.random.default_rng(seed)
    inputs = {"x": r.standard_normal((batch, 16)).astype(dtype)}
    params = {"w": (r.standard_normal((16, 32)) * 0.3).astype(dtype), "b": r.standard_normal(32).astype(dtype),
              "gamma": r.standard_normal(32).astype(dtype), "beta": r.standard_normal(32).astype(dtype)}
    return inputs, params


def test_import_rlx_does_not_import_jax():
    code = "import rlx, sys; rlx.compile; assert 'jax' not in sys.modules, 'import rlx imported jax'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_run_call_and_params_persist():
    g = _mlp()
    inputs, params = _feed()
    want = rlx.run(g, inputs, params)
    exe = compile_(g, backend="jax", params=params)
    assert exe.backend == "jax"
    assert_close(exe.run(inputs=inputs), want)
    assert_close(exe(**inputs), want)
    assert all(isinstance(p, jax.Array) for p in exe._params.values()), "params live on the device"
    _, params2 = _feed(seed=1)
    assert_close(exe.run(inputs=inputs, params=params2), rlx.run(g, inputs, params2))
    assert_close(exe.run(inputs=inputs), rlx.run(g, inputs, params2)), "params given to run() stay bound"
    outs = exe.run_device(inputs=inputs)
    assert all(isinstance(o, jax.Array) for o in outs)


def test_feed_errors():
    g = _mlp()
    inputs, params = _feed()
    exe = compile_(g, backend="jax")
    with pytest.raises(rlx.FeedError, match="missing"):
        exe.run(inputs=inputs)
    exe.set_params(params)
    with pytest.raises(rlx.FeedError, match="dtype"):
        exe.run(inputs={"x": inputs["x"].astype(np.float64)})
    with pytest.raises(rlx.FeedError, match="shape"):
        exe.run(inputs={"x": inputs["x"][:, :3]})
    with pytest.raises(rlx.FeedError, match="unknown"):
        exe.run(inputs={**inputs, "nope": inputs["x"]})
    with pytest.raises(rlx.FeedError, match="unknown param"):
        exe.set_params({"nope": params["w"]})
    with pytest.raises(rlx.RlxError, match="unknown option"):
        compile_(g, backend="jax", alignment=64)


def test_jit_cached_by_fingerprint():
    g1, g2 = _mlp(), _mlp()  # equal content, distinct objects
    before = cache_info()
    e1 = compile_(g1, backend="jax")
    e2 = compile_(g2, backend="jax")
    after = cache_info()
    assert e1.fingerprint == e2.fingerprint == rlx.fingerprint(g1)
    assert e1._jitted is e2._jitted
    assert after["hits"] >= before["hits"] + 1
    inputs, params = _feed()
    e1.run(inputs=inputs, params=params)
    size = e1._jitted._cache_size()
    e2.run(inputs=inputs, params=params)
    assert e1._jitted._cache_size() == size == 1, "the second executable reuses the compiled program"


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_low_precision_dtypes_kept(dtype):
    npd = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype]
    g = _mlp(dtype)
    inputs, params = _feed(npd)
    got = compile_(g, backend="jax", params=params).run(inputs=inputs)
    want = rlx.run(g, inputs, params)
    assert [o.dtype for o in got] == [np.dtype(npd)] * 2
    tol = 0.05 if dtype == "bf16" else 5e-3
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=tol, atol=tol * np.abs(b.astype(np.float32)).max())


def test_float64_and_int64_kept_under_scoped_x64():
    g = rlx.Graph("x64")
    x = g.input("x", (3, 4), "f64")
    idx = g.input("idx", (2,), "i64")
    y = g.gather(g.exp(x) * 1e-300, idx, axis=0)  # 1e-300 underflows in f32
    g.set_outputs([y, g.cast(idx, to="i64") * 3_000_000_000])
    feed = {"x": np.random.default_rng(0).standard_normal((3, 4)), "idx": np.array([2, -1], np.int64)}
    exe = compile_(g, backend="jax")
    assert exe.x64
    got = exe.run(inputs=feed)
    assert got[0].dtype == np.float64 and got[1].dtype == np.int64
    assert_close(got, rlx.run(g, feed), rtol=1e-12, atol=0)
    assert not jax.config.jax_enable_x64, "x64 is scoped to the executable"


def test_uint64_kept_under_scoped_x64():
    """u64 needs 64-bit mode like i64 (without it jax computes in u32: 2**64-1 // 3 came out 1431655765)."""
    g = rlx.Graph("u64")
    a, b = g.input("a", (4,), "u64"), g.input("b", (4,), "u64")
    g.set_outputs([g.binary(a, b, op="div"), a + b])
    feed = {"a": np.array([7, 0, 2**64 - 1, 2**40], np.uint64), "b": np.array([2, 5, 3, 7], np.uint64)}
    exe = compile_(g, backend="jax")
    assert exe.x64
    got = exe.run(inputs=feed)
    want = [feed["a"] // feed["b"], feed["a"] + feed["b"]]
    for x, y in zip(got, want):
        assert x.dtype == np.uint64
        np.testing.assert_array_equal(x, y)


def test_accepts_hir_module_lir_and_symbolic_batch():
    m = rlx.define("layer", lambda h: h.linear(h.input("x", (2, 16)), h.param("w", (16, 8)), bias=h.param("b", (8,)), activation="gelu"))
    r = np.random.default_rng(0)
    feed = {"x": r.standard_normal((2, 16)).astype(np.float32)}
    params = {"w": r.standard_normal((16, 8)).astype(np.float32), "b": r.standard_normal(8).astype(np.float32)}
    mir = m.lower_to_mir()
    want = rlx.run(mir, feed, params)
    assert_close(compile_(m, backend="jax", params=params).run(inputs=feed), want)
    assert_close(compile_(rlx.plan(mir), backend="jax", params=params).run(inputs=feed), want)

    g = _mlp(batch="batch")
    exe = compile_(g, backend="jax", device="cpu")
    for n in (3, 5):
        inputs, ps = _feed(batch=n)
        assert_close(exe.run(inputs=inputs, params=ps), rlx.run(g, inputs, ps))


def test_custom_op_lowering_and_host_fallback(temporary_op):
    from rlx.ir.opdef import OpDef

    temporary_op(OpDef(name="jaxtest_square", family="test", arity=1, operands=("x",), infer=lambda ins, attrs: ins[0],
                       kernel=lambda args, attrs, out: args[0] * args[0], doc="x*x (test op)"))
    g = rlx.Graph("custom")
    x = g.input("x", (4,))
    g.set_outputs([g.apply("jaxtest_square", x) + 1.0])
    feed = {"x": np.arange(4, dtype=np.float32)}
    with pytest.raises(rlx.RlxError, match="no lowering for op 'jaxtest_square'"):
        compile_(g, backend="jax").run(inputs=feed)
    assert_close(compile_(g, backend="jax", host_fallback=True).run(inputs=feed), rlx.run(g, feed))
    from rlx.backends.jax import LOWERINGS

    register_lowering("jaxtest_square", lambda args, attrs, out: args[0] * args[0])
    try:
        g2 = rlx.Graph("custom2")
        x2 = g2.input("x", (4,))
        g2.set_outputs([g2.apply("jaxtest_square", x2) + 2.0])
        assert_close(compile_(g2, backend="jax").run(inputs=feed), rlx.run(g2, feed))
    finally:
        LOWERINGS.pop("jaxtest_square", None)
