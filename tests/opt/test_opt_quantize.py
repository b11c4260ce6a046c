"""Quantization passes: insert_q_dq and propagate_fake_quant (rlx.opt.quantize)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import rlx
from opt.opt_util import op_counts
from rlx.ir.errors import RlxError
from rlx.opt.cleanup import DCE
from rlx.opt.manager import PassError, run_passes
from rlx.opt.quantize import (
    INSERT_Q_DQ,
    PROPAGATE_FAKE_QUANT,
    QuantSpec,
    insert_q_dq,
    propagate_fake_quant,
)


# ------------------------------------------------------------------ reference (NumPy)
def round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def np_qdq(v: np.ndarray, scales, zero_points=None, axis=None) -> np.ndarray:
    """docs/semantics.md#quantisation in f32: q = clip(round(v · (1/s)) + zp, -128, 127); v' = (q - zp) · s."""
    v = v.astype(np.float32)
    shape = [1] * v.ndim
    if axis is not None:
        shape[axis] = -1
    s = np.asarray(scales, np.float32).reshape(shape)
    zp = np.asarray(zero_points if zero_points is not None else [0] * len(scales), np.float32).reshape(shape)
    q = np.clip(round_half_away(v * (np.float32(1) / s)) + zp, -128, 127)
    return (q - zp) * s


def eighths(rng, shape, bound):
    """Multiples of 1/8 in [-bound, bound]: every product / sum below is exact in f32."""
    return (rng.integers(-8 * bound, 8 * bound + 1, shape) / 8).astype(np.float32)


# ------------------------------------------------------------------------ insert_q_dq
W1_SCALES = [2.0 ** -(3 + i % 6) for i in range(16)]  # powers of two: 1/s is exact
W1_ZPS = [(i % 5) - 2 for i in range(16)]
H_SPEC = QuantSpec.per_tensor(2.0 ** -5, zero_point=3)  # clamps h above (127 - 3) / 32
Y_SPEC = QuantSpec.per_tensor(2.0 ** -4)
W1_SPEC = QuantSpec.per_channel(-1, W1_SCALES, W1_ZPS)  # clamps |w| > 127 · 2^-8


def mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (4, 8))
    w1, b1 = g.param("w1", (8, 16)), g.param("b1", (16,))
    w2, b2 = g.param("w2", (16, 3)), g.param("b2", (3,))
    h = g.relu(g.add(g.matmul(x, w1), b1), name="h")
    y = g.add(g.matmul(h, w2), b2, name="y")
    g.set_outputs([y, h])
    return g, {"w1": w1, "h": h, "y": y}


def mlp_feed(seed=0):
    rng = np.random.default_rng(seed)
    return ({"x": eighths(rng, (4, 8), 2)},
            {"w1": eighths(rng, (8, 16), 1), "b1": eighths(rng, (16,), 1),
             "w2": eighths(rng, (16, 3), 1), "b2": eighths(rng, (3,), 1)})


def test_insert_q_dq_mlp_matches_numpy():
    g, v = mlp()
    res = run_passes(g, [INSERT_Q_DQ.with_options(record={v["w1"]: W1_SPEC, "h": H_SPEC, v["y"].id: Y_SPEC})], check=True)
    out = res.graph
    assert op_counts(out)["quantize"] == 3 and op_counts(out)["dequantize"] == 3
    assert res.log[0].stats == {"inserted": 3}
    inputs, params = mlp_feed()
    y, h = rlx.run(out, inputs, params)

    w1 = np_qdq(params["w1"], W1_SCALES, W1_ZPS, axis=1)
    h_ref = np_qdq(np.maximum(inputs["x"] @ w1 + params["b1"], 0), [2.0 ** -5], [3])
    y_ref = np_qdq(h_ref @ params["w2"] + params["b2"], [2.0 ** -4])
    np.testing.assert_array_equal(h, h_ref)
    np.testing.assert_array_equal(y, y_ref)
    # the taps really changed something: clamping, rounding (incl. ties away from zero)
    assert not np.array_equal(w1, params["w1"])
    assert h_ref.max() == np.float32((127 - 3) / 32) and np.any(np.abs(h_ref - np.maximum(inputs["x"] @ params["w1"], 0)) > 0)
    before = rlx.run(g, inputs, params)
    assert not np.array_equal(before[0], y)


def test_insert_q_dq_rounds_half_away_and_clamps():
    g = rlx.Graph("t")
    x = g.input("x", (8,))
    g.set_outputs([g.neg(x)])
    out = insert_q_dq(g, {"x": QuantSpec.per_tensor(0.5, zero_point=-1)}).graph
    xs = np.array([0.25, -0.25, 0.75, -0.75, 63.0, 64.0, -64.5, -70.0], np.float32)
    (got,) = rlx.run(out, {"x": xs})
    # q = clip(round(2x) - 1): 0.25 -> 1 - 1 = 0 -> 0.5·1; -0.25 -> -1 - 1; 64 -> 127 (clamped)
    want = -np.array([0.5, -0.5, 1.0, -1.0, 63.0, 64.0, -63.5, -63.5], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, -np_qdq(xs, [0.5], [-1]))


def test_insert_q_dq_id_map_composes_and_outputs_redirected():
    g, v = mlp()
    res = run_passes(g, [INSERT_Q_DQ.with_options(record={"h": H_SPEC, "y": Y_SPEC}), DCE], check=True)
    out = res.graph
    for name in ("h", "y"):
        new = out.nodes[res.id_map[v[name].id]]
        assert new.op == "dequantize" and new.name == f"{name}.dq" and new.type == v[name].type
        assert out.nodes[new.inputs[0]].op == "quantize"
        assert "insert_q_dq" in new.prov.passes
    assert out.output_ids == (res.id_map[v["y"].id], res.id_map[v["h"].id])
    # the later consumer of h (the second matmul) reads the dequantize
    mm2 = next(n for n in out.nodes if n.op == "matmul" and res.id_map[v["h"].id] in n.inputs)
    assert mm2.type.shape == (4, 3)
    inputs, params = mlp_feed(1)
    y, h = rlx.run(out, inputs, params)
    _, h_raw = rlx.run(g, inputs, params)
    np.testing.assert_array_equal(h, np_qdq(h_raw, [2.0 ** -5], [3]))
    np.testing.assert_array_equal(y, np_qdq(h @ params["w2"] + params["b2"], [2.0 ** -4]))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f64"])
def test_dequantize_has_the_tap_dtype(dtype):
    g = rlx.Graph("t")
    x = g.input("x", (3, 4), dtype)
    r = g.relu(x)
    g.set_outputs([r, x])
    spec = QuantSpec.per_channel(0, [0.25, 0.5, 0.125], [0, 1, -1])
    res = run_passes(g, [INSERT_Q_DQ.with_options(record={x: spec})], check=True)
    out = res.graph
    dq = out.nodes[res.id_map[x.id]]
    assert dq.op == "dequantize" and str(dq.dtype) == dtype and dq.type == x.type
    assert str(out.nodes[dq.inputs[0]].dtype) == "i8"
    assert [str(out.nodes[i].dtype) for i in out.output_ids] == [dtype, dtype]
    np_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.dtype(dtype.replace("f", "float"))
    xs = np.random.default_rng(0).uniform(-40, 40, (3, 4)).astype(np_dtype)
    got_r, got_x = rlx.run(out, {"x": xs})
    want = np_qdq(xs, [0.25, 0.5, 0.125], [0, 1, -1], axis=0)
    np.testing.assert_array_equal(got_x, want.astype(np_dtype))
    np.testing.assert_array_equal(got_r, np.maximum(want, 0).astype(np_dtype))


def _bad_graph():
    g = rlx.Graph("bad")
    x = g.input("x", (2, 3))
    i = g.input("ids", (2,), "i32")
    g.relu(x, name="a")
    g.relu(x, name="dup")
    g.relu(x, name="dup")
    g.set_outputs([x, i])
    return g, x, i


@pytest.mark.parametrize(("record", "match"), [
    ({99: QuantSpec.per_tensor(0.1)}, "no node %99"),
    ({-1: QuantSpec.per_tensor(0.1)}, "no node %-1"),
    ({"ids": QuantSpec.per_tensor(0.1)}, r"%1 \(input 'ids'.*i32"),
    ({"nope": QuantSpec.per_tensor(0.1)}, "no node named 'nope'"),
    ({"dup": QuantSpec.per_tensor(0.1)}, "2 nodes"),
    ({"x": QuantSpec.per_channel(1, [0.1, 0.2])}, r"%0 \(input 'x'.*2 scales"),
    ({"x": QuantSpec.per_channel(2, [0.1])}, "axis 2 is out of range for node %0"),
    ({"x": {"scales": [0.1]}}, "not a QuantSpec"),
    ({0: QuantSpec.per_tensor(0.1), "x": QuantSpec.per_tensor(0.2)}, "recorded twice"),
    ({1.5: QuantSpec.per_tensor(0.1)}, "record keys"),
])
def test_bad_records_raise(record, match):
    g, _, _ = _bad_graph()
    with pytest.raises(RlxError, match=match):
        insert_q_dq(g, record)


def test_bad_records_in_pipeline_and_foreign_values():
    g, _, i = _bad_graph()
    with pytest.raises(PassError, match=r"insert_q_dq.*%1"):
        run_passes(g, [INSERT_Q_DQ.with_options(record={i: QuantSpec.per_tensor(0.1)})])
    with pytest.raises(PassError, match="needs a record"):
        run_passes(g, [INSERT_Q_DQ])
    other, _, _ = _bad_graph()
    with pytest.raises(RlxError, match="belongs to graph"):
        insert_q_dq(g, {other.value(0): QuantSpec.per_tensor(0.1)})
    assert insert_q_dq(g, {}).graph is g


@pytest.mark.parametrize(("make", "match"), [
    (lambda: QuantSpec.per_tensor(0.0), "finite and > 0"),
    (lambda: QuantSpec.per_tensor(float("nan")), "finite and > 0"),
    (lambda: QuantSpec.per_tensor(0.1, zero_point=128), r"\[-128, 127\]"),
    (lambda: QuantSpec.per_channel(0, [0.1, 0.2], [1]), "1 zero points for 2 scales"),
    (lambda: QuantSpec((0.1, 0.2)), "one scale"),
    (lambda: QuantSpec.per_channel(0, []), "at least one"),
    (lambda: QuantSpec.per_tensor(True), "number"),
])
def test_quantspec_validation(make, match):
    with pytest.raises(RlxError, match=match):
        make()


def test_quantspec_canonical():
    assert QuantSpec.per_tensor(0.5) == QuantSpec.per_tensor(0.5, zero_point=0) == QuantSpec((0.5,))
    assert QuantSpec.per_tensor(0.5).symmetric and not QuantSpec.per_tensor(0.5, 2).symmetric
    spec = QuantSpec.per_channel(1, np.array([0.5, 0.25]), [0, 0])
    assert spec.scales == (0.5, 0.25) and spec.zero_points is None and spec.axis == 1
    hash(spec)


# ------------------------------------------------------------- propagate_fake_quant
SCALE = 0.0137  # not a power of two: the grid values are inexact products
FIXED = {"scale_mode": "fixed"}


def fq_chain(mid, *, kw1=None, kw2=None, shape=(2, 3, 4, 4), dtype="f32", channels=1, second=True, state2=False):
    """x -> FQ₁ -> mid -> FQ₂ -> output (fixed scale from param 's' unless kw says otherwise)."""
    kw1 = FIXED if kw1 is None else kw1
    kw2 = kw1 if kw2 is None else kw2
    g = rlx.Graph("fq")
    x = g.input("x", shape, dtype)
    stateful = kw1.get("scale_mode", "per_batch") != "per_batch"
    s = g.param("s", (channels,), dtype) if stateful else None
    s2 = g.param("s2", (channels,), dtype) if state2 else s
    a = g.fake_quantize(x, *[s][:stateful], **kw1)
    m = mid(g, a)
    g.set_outputs([g.fake_quantize(m, *[s2][:stateful], **kw2) if second else m])
    return g


def fq_feed(g, seed=0, scale=SCALE):
    """Negatives, values far outside ±127·s, an exact tie 2.5·s; odd seeds add ±inf and NaN
    (an inf makes a per_batch scale inf and every value NaN, so even seeds have none)."""
    rng = np.random.default_rng(seed)
    x = g.inputs()["x"]
    np_dtype = x.dtype.numpy
    xs = rng.normal(0, 1.5, tuple(x.shape)).astype(np.float32)
    flat = xs.reshape(-1)
    flat[:4] = [np.inf, -np.inf, np.nan, 2.5 * scale] if seed % 2 else [-0.0, 0.1 * scale, -0.4 * scale, 2.5 * scale]
    params = {k: np.full(tuple(p.shape), scale, np_dtype) for k, p in g.params().items()}
    return {"x": xs.astype(np_dtype)}, params


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical once -0.0 is read as +0.0 (the one difference the pass may make)."""
    view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal((a + 0).view(view), (b + 0).view(view))


def assert_collapses(g, removed=1, seeds=(0, 1, 2)):
    res = run_passes(g, [PROPAGATE_FAKE_QUANT], check=True)
    assert res.log[0].stats == {"removed": removed}
    assert op_counts(res.graph)["fake_quantize"] == op_counts(g)["fake_quantize"] - removed
    for seed in seeds:
        inputs, params = fq_feed(g, seed)
        for want, got in zip(rlx.run(g, inputs, params), rlx.run(res.graph, inputs, params)):
            assert same_bits(want, got)
    return res


def relu(g, v):
    return g.relu(v)


def maxpool(g, v):
    return g.pool2d(v, kind="max", kernel_size=[2, 2], padding=[1, 1])


COLLAPSING = {
    "relu": relu,
    "reshape": lambda g, v: g.reshape(v, new_shape=[6, 16]),
    "maxpool": maxpool,
    "minpool": lambda g, v: g.pool2d(v, kind="min", kernel_size=[3, 3], stride=[1, 1]),
    "transpose": lambda g, v: g.transpose(v, perm=[3, 1, 0, 2]),
    "narrow": lambda g, v: g.narrow(v, axis=2, start=1, length=2),
    "expand": lambda g, v: g.expand(g.reshape(v, new_shape=[1, 96]), target_shape=[3, 96]),
    "concat1": lambda g, v: g.concat([v], axis=0),
    "neg_abs": lambda g, v: g.abs(g.neg(v)),
    "direct": lambda g, v: v,
    "chain": lambda g, v: g.reshape(g.relu(maxpool(g, v)), new_shape=[-1]),
}


@pytest.mark.parametrize("name", sorted(COLLAPSING))
def test_fixed_scale_chains_collapse_bit_identically(name):
    res = assert_collapses(fq_chain(COLLAPSING[name]))
    out = res.graph
    (ret,) = out.output_ids
    assert out.nodes[ret].op != "fake_quantize" or name == "direct"


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f64"])
@pytest.mark.parametrize("bits", [8, 4, 2])
def test_fixed_scale_other_dtypes_and_bits(dtype, bits):
    kw = {**FIXED, "bits": bits}
    assert_collapses(fq_chain(relu, kw1=kw, dtype=dtype))
    assert_collapses(fq_chain(maxpool, kw1=kw, dtype=dtype))


def test_tiny_scales_f16_subnormal_grid():
    g = fq_chain(relu, dtype="f16")
    res = propagate_fake_quant(g)
    for scale in (1e-7, 3e-8, 2.0 ** -24, 1e-5, 300.0):
        inputs, params = fq_feed(g, 3, scale)
        inputs["x"] = np.clip(inputs["x"].astype(np.float32) * np.float32(scale) * 60, -6e4, 6e4).astype(np.float16)
        assert same_bits(rlx.run(g, inputs, params)[0], rlx.run(res.graph, inputs, params)[0])


@pytest.mark.parametrize(("mid", "kw"), [
    (relu, {**FIXED, "axis": 1}),
    (maxpool, {**FIXED, "axis": 0}),
    (lambda g, v: g.narrow(v, axis=3, start=0, length=3), {**FIXED, "axis": 1}),
    (lambda g, v: g.transpose(v, perm=[0, 1, 3, 2]), {**FIXED, "axis": 1}),
    (relu, {**FIXED, "axis": 2, "batch_dims": 1}),
])
def test_per_channel_chains_that_keep_the_channel_collapse(mid, kw):
    channels = 3 if kw["axis"] + kw.get("batch_dims", 0) == 1 else 2 if kw["axis"] == 0 else 4
    shape = (2, 3, 4, 4)
    g = rlx.Graph("pc")
    x = g.input("x", shape)
    s = g.param("s", (2, channels) if kw.get("batch_dims") else (channels,))
    a = g.fake_quantize(x, s, **kw)
    g.set_outputs([g.fake_quantize(mid(g, a), s, **kw)])
    assert_collapses(g)


@pytest.mark.parametrize("name", ["reshape", "transpose", "concat1", "expand", "neg_abs", "direct"])
@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
def test_per_batch_copies_collapse(name, dtype):
    """per_batch re-derives the same scale when max|x| is kept (see the pass docstring)."""
    assert_collapses(fq_chain(COLLAPSING[name], kw1={"bits": 8 if name != "neg_abs" else 4}, dtype=dtype), seeds=range(4))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_per_batch_every_low_precision_amax(dtype):
    """One channel per representable |value| a (the channel's max) holding the grid points k·s."""
    np_dtype = rlx.DType.of(dtype).numpy
    every = np.arange(2 ** 16, dtype=np.uint16).view(np_dtype).astype(np.float32)
    amax = np.unique(np.abs(every[np.isfinite(every)]))[1::3]
    s = np.maximum(amax / np.float32(127), np.float32(1e-12))[:, None]
    k = np.array([-127, -126, -64, -3, -1, 0, 1, 2, 63, 126, 127], np.float32)
    xs = np.concatenate([amax[:, None], np.minimum(np.abs(k) * s, amax[:, None]) * np.sign(k)], axis=1).astype(np_dtype)
    g = rlx.Graph("every")
    x = g.input("x", xs.shape, dtype)
    g.set_outputs([g.fake_quantize(g.fake_quantize(x, axis=0), axis=0)])
    res = assert_collapses(g, seeds=())
    assert same_bits(rlx.run(g, {"x": xs})[0], rlx.run(res.graph, {"x": xs})[0])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("bits", [8, 4, 2])
def test_per_batch_below_the_scale_floor(dtype, bits):
    g = fq_chain(COLLAPSING["reshape"], kw1={"bits": bits}, dtype=dtype)
    res = propagate_fake_quant(g)
    inputs, _ = fq_feed(g)
    qmax = {8: 127, 4: 7, 2: 1}[bits]
    for amax in (qmax * 1e-12 * 0.999, qmax * 1e-12 * 0.9999999, 1e-13):
        xs = inputs["x"].astype(np.float64)
        xs = (xs / np.abs(xs).max() * amax).astype(inputs["x"].dtype)
        assert same_bits(rlx.run(g, {"x": xs})[0], rlx.run(res.graph, {"x": xs})[0])


LEFT_ALONE = {
    "exp": (lambda g, v: g.exp(v), {}),
    "add": (lambda g, v: g.add(v, v), {}),
    "avgpool": (lambda g, v: g.pool2d(v, kind="mean", kernel_size=[2, 2]), {}),
    "sigmoid": (lambda g, v: g.sigmoid(v), {}),
    "bits": (relu, {"kw2": {**FIXED, "bits": 4}}),
    "axis": (relu, {"kw2": {**FIXED, "axis": 0}, "channels": 1}),
    "state": (relu, {"state2": True}),
    "ste_tanh": (relu, {"kw1": {**FIXED, "ste": "tanh"}}),
    "ste_differs": (relu, {"kw2": {**FIXED, "ste": "clipped_identity"}}),
    "clipped_f16": (relu, {"kw1": {**FIXED, "ste": "clipped_identity"}, "dtype": "f16"}),
    "per_batch_relu": (relu, {"kw1": {}}),
    "per_batch_pool": (maxpool, {"kw1": {}}),
    "per_batch_narrow": (lambda g, v: g.narrow(v, axis=2, start=1, length=2), {"kw1": {}}),
    "ema": (COLLAPSING["reshape"], {"kw1": {"scale_mode": "ema"}}),
    "pc_reshape": (lambda g, v: g.reshape(v, new_shape=[4, 3, 2, 4]), {"kw1": {**FIXED, "axis": 1}, "channels": 3}),
    "pc_transpose": (lambda g, v: g.transpose(v, perm=[1, 0, 2, 3]), {"kw1": {**FIXED, "axis": 1}, "channels": 3, "shape": (3, 3, 4, 4)}),
    "pc_narrow": (lambda g, v: g.narrow(v, axis=1, start=0, length=3), {"kw1": {**FIXED, "axis": 1}, "channels": 3}),
}


@pytest.mark.parametrize("name", sorted(LEFT_ALONE))
def test_non_preserving_chains_are_left_alone(name):
    mid, kw = LEFT_ALONE[name]
    g = fq_chain(mid, **kw) if name != "axis" else fq_chain(mid, kw1=FIXED, kw2={**FIXED, "axis": 0}, shape=(1, 3, 4, 4))
    res = propagate_fake_quant(g)
    assert res.stats == {"removed": 0} and res.graph is g and res.id_map is None


def test_clipped_identity_in_f32_collapses():
    assert_collapses(fq_chain(relu, kw1={**FIXED, "ste": "clipped_identity"}))


def test_per_batch_relu_really_is_not_redundant():
    """FQ₂ re-derives its scale from relu's output (smaller max): removing it would change values."""
    g = fq_chain(relu, kw1={})
    without = fq_chain(relu, kw1={}, second=False)
    xs = np.array([-10.0, 1.0, 0.3, 0.7] * 24, np.float32).reshape(2, 3, 4, 4)
    _, params = fq_feed(g)
    assert not np.array_equal(rlx.run(g, {"x": xs}, params)[0], rlx.run(without, {"x": xs}, params)[0])
    assert propagate_fake_quant(g).stats["removed"] == 0


def test_upstream_redirect_would_miscompute():
    """Upstream sent FQ₂'s users to FQ₁ (skipping the relu); ours reads FQ₂'s own input."""
    g = fq_chain(relu)
    fq1 = next(n.id for n in g.nodes if n.op == "fake_quantize")
    relu_id = next(n.id for n in g.nodes if n.op == "activation")
    (fq2,) = g.output_ids
    res = propagate_fake_quant(g)
    assert res.id_map[fq2] == res.id_map[relu_id] and res.graph.output_ids == (res.id_map[relu_id],)

    upstream = fq_chain(relu)
    upstream.set_outputs([fq1])  # what upstream's rewrite returned
    inputs, params = fq_feed(g)
    want = rlx.run(g, inputs, params)[0]
    assert not np.array_equal(rlx.run(upstream, inputs, params)[0], want, equal_nan=True)
    assert same_bits(rlx.run(res.graph, inputs, params)[0], want)


def test_repeated_fake_quants_and_shared_uses():
    g = rlx.Graph("rep")
    x = g.input("x", (2, 3, 4, 4))
    s = g.param("s", (1,))
    a = g.fake_quantize(x, s, **FIXED)
    b = g.fake_quantize(g.relu(a), s, **FIXED)
    c = g.fake_quantize(g.reshape(b, new_shape=[96]), s, **FIXED)
    d = g.add(g.exp(b), g.reshape(c, new_shape=[2, 3, 4, 4]))
    g.set_outputs([c, d, b])
    res = assert_collapses(g, removed=2)
    assert "fake_quantize" not in [res.graph.nodes[i].op for i in res.graph.output_ids]


def test_equal_constant_states_match_and_pipeline_composes():
    g = rlx.Graph("consts")
    x = g.input("x", (4, 6))
    a = g.fake_quantize(x, g.constant(np.array([0.05], np.float32)), **FIXED)
    r = g.relu(a)
    b = g.fake_quantize(r, g.constant(np.array([0.05], np.float32)), **FIXED)
    out = g.tanh(b)
    g.set_outputs([out])
    res = run_passes(g, [INSERT_Q_DQ.with_options(record={x: QuantSpec.per_tensor(0.01)}), PROPAGATE_FAKE_QUANT, DCE], check=True)
    assert [e.stats for e in res.log] == [{"inserted": 1}, {"removed": 1}, {"removed": 1}]  # dce: b's constant
    new = res.graph
    assert new.nodes[res.id_map[x.id]].op == "dequantize"
    assert res.id_map[b.id] == res.id_map[r.id] and new.nodes[res.id_map[r.id]].op == "activation"
    assert op_counts(new)["fake_quantize"] == 1
    xs = np.random.default_rng(0).normal(0, 3, (4, 6)).astype(np.float32)
    ref = np_qdq(xs, [0.01])
    s = np.float32(0.05)
    ref = np.tanh(np.maximum(np.clip(round_half_away(ref / s), -127, 127) * s, 0))
    np.testing.assert_allclose(rlx.run(new, {"x": xs})[0], ref, rtol=1e-6)


def test_gradient_unchanged_by_removal():
    g = fq_chain(relu, kw1={**FIXED, "ste": "clipped_identity"})
    res = propagate_fake_quant(g)
    inputs, params = fq_feed(g)
    inputs["x"] = np.nan_to_num(inputs["x"], nan=0.5, posinf=3.0, neginf=-3.0)
    dy = np.random.default_rng(5).normal(size=inputs["x"].shape).astype(np.float32)
    grads = []
    for graph in (g, res.graph):
        dg = rlx.grad(graph, [graph.inputs()["x"]])
        grads.append(rlx.run(dg, {**inputs, "d_output": dy}, params)[0])
    assert same_bits(*grads)


def test_insert_q_dq_never_runs_on_control_flow_bodies():
    """The record's ids name outer nodes; a body (another id namespace) must stay untouched."""
    body = rlx.Graph("body")
    bx = body.input("x", [3], "f32")
    body.set_outputs([body.exp(bx) * 2.0])  # node ids 0..3, the same ids as the outer taps below
    g = rlx.Graph("outer")
    p, x = g.input("p", [], "bool"), g.input("x", [3], "f32")
    y = g.exp(x)
    g.set_outputs([g.if_([p, y], then_branch=body, else_branch=body)])
    result = run_passes(g, [INSERT_Q_DQ.with_options(record={y.id: QuantSpec.per_tensor(0.125)})], check=True)
    branch = next(n for n in result.graph.nodes if n.op == "if_").attrs["then_branch"]
    assert [n.op for n in branch.nodes] == [n.op for n in body.nodes]
    assert sum(n.op == "quantize" for n in result.graph.nodes) == 1
