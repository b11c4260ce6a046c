"""The numpy arena backend (rlx.compile), specialization, pictures and the LIR codec."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.lir import LirModule, check, plan, specialize
from rlx.runtime.arena import ArenaExecutor
from rlx.runtime.compile import compile as rlx_compile


def mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (8, 16))
    w = g.param("w", (16, 32))
    b = g.param("b", (32,))
    h = g.gelu(x @ w + b)
    y = g.softmax(h @ g.param("w2", (32, 4)), axis=-1)
    g.set_outputs([y, h])
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((16, 32)).astype(np.float32), "b": rng.standard_normal(32).astype(np.float32),
              "w2": rng.standard_normal((32, 4)).astype(np.float32)}
    return g, {"x": rng.standard_normal((8, 16)).astype(np.float32)}, params


def _equal(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def test_compile_run_and_call_forms():
    g, feed, params = mlp()
    ref = rlx.run(g, feed, params)
    exe = rlx_compile(g, backend="numpy", params=params)
    assert isinstance(exe, ArenaExecutor)
    _equal(exe.run(inputs=feed), ref)
    _equal(exe(**feed), ref)
    exe2 = rlx_compile(g)                       # params at run time instead
    _equal(exe2.run(inputs=feed, params=params), ref)
    _equal(exe2.run(inputs=feed), ref)          # ... and they stay bound
    lir = plan(g, alignment=128)
    _equal(rlx_compile(lir, params=params).run(feed), ref)


def test_runtime_params_replace_bound_ones():
    g, feed, params = mlp()
    exe = rlx_compile(g, params=params)
    other = {k: v * 2 for k, v in params.items()}
    _equal(exe.run(feed, other), rlx.run(g, feed, other))


def test_missing_and_bad_feeds_raise():
    g, feed, params = mlp()
    exe = rlx_compile(g)
    with pytest.raises(rlx.FeedError):
        exe.run(feed)
    with pytest.raises(rlx.FeedError):
        rlx_compile(g, params={**params, "nope": np.zeros(1, np.float32)})
    with pytest.raises(rlx.FeedError):
        rlx_compile(g, params=params).run({"x": np.zeros((8, 15), np.float32)})


def test_unknown_backend_is_a_clear_error():
    g, _, _ = mlp()
    with pytest.raises(rlx.RlxError, match=r"unknown backend 'tpu'.*numpy"):
        rlx_compile(g, backend="tpu")


def test_outputs_are_fresh_arrays_and_runs_repeat():
    g, feed, params = mlp()
    exe = rlx_compile(g, params=params)
    first = exe.run(feed)
    feed2 = {"x": feed["x"] + 1}
    second = exe.run(feed2)
    _equal(first, rlx.run(g, feed, params))     # not clobbered by the second run
    _equal(second, rlx.run(g, feed2, params))
    assert not any(np.shares_memory(o, exe.arena) for o in second)


def test_every_tensor_lives_in_the_arena():
    g, _feed, params = mlp()
    exe = rlx_compile(g, params=params, adopt=False)
    for nid in exe.lir.plan.assignments:
        assert np.shares_memory(exe._env[nid], exe.arena)


def test_outside_inputs_and_params_are_used_in_place():
    g, feed, params = mlp()
    exe = rlx_compile(g, params=params, inputs="outside", param_policy="outside")
    _equal(exe.run(feed), rlx.run(g, feed, params))
    assert exe.lir.plan.arena_size < plan(g).plan.arena_size


def test_low_precision_and_integer_graphs():
    g = rlx.Graph("lp")
    x = g.input("x", (4, 8), "bf16")
    i = g.input("i", (4, 8), "i32")
    y = g.exp(g.tanh(x) * 2.0)
    z = g.cast(i * 3 + 1, to="f32")
    g.set_outputs([y, z, g.maximum(i, i * -1)])
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 8)).astype(rlx.bf16.numpy), "i": rng.integers(-5, 5, (4, 8)).astype(np.int32)}
    _equal(rlx_compile(g).run(feed), rlx.run(g, feed))


def test_symbolic_dims_specialize_and_replan():
    g = rlx.Graph("dyn")
    x = g.input("x", ("batch", 16))
    w = g.param("w", (16, 16))
    y = g.relu(x @ w) + 1.0
    g.set_outputs([g.reshape(y, new_shape=[-1, 4, 4]), y])
    lir = plan(g)
    assert lir.plan.dynamic_symbols == ("batch",)
    assert x.id not in lir.plan.assignments
    lir4 = specialize(lir, {"batch": 4})
    assert lir4.plan.dynamic_symbols == () and lir4.graph.node(x.id).shape == (4, 16)
    assert lir4.plan.assignments[x.id].size == 4 * 16 * 4
    check(lir4)
    with pytest.raises(rlx.RlxError):
        specialize(lir, {"seq": 3})
    rng = np.random.default_rng(0)
    W = rng.standard_normal((16, 16)).astype(np.float32)
    exe = rlx_compile(lir, params={"w": W})
    for b in (3, 5, 3):
        feed = {"x": rng.standard_normal((b, 16)).astype(np.float32)}
        _equal(exe.run(feed), rlx.run(g, feed, {"w": W}))
    assert len(exe._special) == 2


def test_picture_svg_and_png(tmp_path):
    g, _, _ = mlp()
    lir = plan(g)
    svg = lir.draw(str(tmp_path / "plan.svg"))
    text = open(svg).read()
    assert text.startswith("<svg") and text.count("<rect") >= len(lir.plan.lifetimes)
    pytest.importorskip("matplotlib")
    png = lir.draw(str(tmp_path / "plan.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_report_and_repr():
    g, _, _ = mlp()
    lir = plan(g)
    text = lir.report()
    assert "arena_size=" in text and "lower_bound=" in text and f"%{g.output_ids[0]}" in text
    assert "LirModule" in repr(lir)


def test_lir_codec_round_trip_and_tamper_detection():
    serialize = pytest.importorskip("rlx.ir.serialize")
    g, feed, params = mlp()
    lir = plan(g)
    text = serialize.to_json(lir)
    back = serialize.from_json(text)
    assert isinstance(back, LirModule) and back == lir
    assert back.fingerprint() == lir.fingerprint()
    _equal(rlx_compile(back, params=params).run(feed), rlx.run(g, feed, params))
    other = plan(g, alignment=256)
    assert other.fingerprint() != lir.fingerprint()
    import json

    doc = json.loads(text)
    doc["plan"]["assignments"][2][1] = doc["plan"]["assignments"][3][1] + 4
    with pytest.raises(rlx.FormatError):
        serialize.from_json(json.dumps(doc))
    doc = json.loads(text)
    doc["plan"]["schedule"] = "nope"
    with pytest.raises(rlx.FormatError, match=r"plan\.schedule"):
        serialize.from_json(json.dumps(doc))


def test_dispatch_uses_out_kernels_for_common_ops():
    g = rlx.Graph("fast")
    x = g.input("x", (4, 4))
    y = g.relu(g.exp(x) + x) @ x
    g.set_outputs([g.sigmoid(y), g.rsqrt(g.abs(y) + 1.0)])
    feed = {"x": np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)}
    _equal(rlx_compile(g).run(feed), rlx.run(g, feed))


@pytest.mark.parametrize("outputs", ["arena", "outside"])
def test_output_policies(outputs):
    g = rlx.Graph("outp")
    x = g.input("x", (4, 8))
    y = g.exp(x)
    v = g.reshape(y, new_shape=[32])            # an output that is a view of another output
    z = g.layer_norm(y, g.param("g", (8,)), g.param("b", (8,)))
    g.set_outputs([y, v, z, y, x])
    params = {"g": np.ones(8, np.float32), "b": np.zeros(8, np.float32)}
    feed = {"x": np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)}
    exe = rlx_compile(g, params=params, outputs=outputs)
    assert (y.id in exe.lir.plan.assignments) == (outputs == "arena")
    a = exe.run(feed)
    b = exe.run({"x": feed["x"] * 2})
    _equal(a, rlx.run(g, feed, params))
    _equal(b, rlx.run(g, {"x": feed["x"] * 2}, params))
    assert not np.shares_memory(a[0], a[3]) and not np.shares_memory(a[0], b[0])
    assert not np.shares_memory(a[4], feed["x"])


def test_compile_accepts_hir_and_graph_modules():
    define = getattr(rlx, "define", None)
    if define is None:
        pytest.skip("rlx.define is not available")
    m = define("layer", lambda h: h.linear(h.input("x", (2, 8)), h.param("w", (8, 8)), bias=h.param("b", (8,)), activation="gelu"))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((8, 8)).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32)}
    feed = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    mir = m.lower_to_mir()
    ref = rlx.run(mir, feed, params)
    _equal(rlx.compile(m, params=params).run(feed), ref)
    _equal(rlx.compile(rlx.plan(mir), params=params)(**feed), ref)
