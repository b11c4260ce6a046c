"""Export round trips: rlx graph -> ONNX (checker, full_check) -> onnxruntime == rlx.run."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402
from rlx.ops.kinds import ACTIVATION_KINDS, UNARY_MATH_KINDS  # noqa: E402


def _rng(seed=0):
    return np.random.default_rng(seed)


def _params(g, seed=1):
    r = _rng(seed)
    return {k: (r.standard_normal(tuple(v.shape)) * 0.3).astype(v.dtype.numpy) for k, v in g.params().items()}


def _round_trip(g, inputs, params, rtol=1e-4, atol=1e-5):
    proto = rlx.onnx.export(g, params)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, inputs)
    want = rlx.run(g, inputs, params)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return proto


def mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (4, 16))
    h = g.gelu(g.matmul(x, g.param("w1", (16, 32))) + g.param("b1", (32,)))
    h = g.relu(g.matmul(h, g.param("w2", (32, 32))) + g.param("b2", (32,)))
    y = g.softmax(g.matmul(h, g.param("w3", (32, 8))) + g.param("b3", (8,)), axis=-1)
    g.set_outputs([y])
    return g


def transformer_block(mask_kind="causal"):
    g = rlx.Graph("block")
    b, s, heads, hd = 2, 5, 2, 4
    d = heads * hd
    x = g.input("x", (b, s, d))
    h = g.layer_norm(x, g.param("ln1_g", (d,)), g.param("ln1_b", (d,)), axis=-1, eps=1e-5)
    q = g.matmul(h, g.param("wq", (d, d)))
    k = g.matmul(h, g.param("wk", (d, d)))
    v = g.matmul(h, g.param("wv", (d, d)))
    a = g.attention(q, k, v, num_heads=heads, head_dim=hd, mask_kind=mask_kind)
    x = x + g.matmul(a, g.param("wo", (d, d)))
    h = g.rms_norm(x, g.param("ln2_g", (d,)), g.param("ln2_b", (d,)), axis=-1, eps=1e-6)
    up = g.silu(g.matmul(h, g.param("w_up", (d, 16))) + g.param("b_up", (16,)))
    y = x + g.matmul(up, g.param("w_down", (16, d)))
    g.set_outputs([y])
    return g


def cnn():
    g = rlx.Graph("cnn")
    x = g.input("x", (2, 3, 12, 12))
    h = g.conv2d(x, g.param("c1", (8, 3, 3, 3)), stride=[1, 1], padding=[1, 1]) + g.reshape(g.param("cb1", (8,)), new_shape=[1, 8, 1, 1])
    h = g.relu(g.group_norm(h, g.param("gn_g", (8,)), g.param("gn_b", (8,)), num_groups=2))
    h = g.pool2d(h, kind="max", kernel_size=[2, 2], stride=[2, 2])
    h = g.conv2d(h, g.param("c2", (8, 2, 3, 3)), stride=[2, 2], padding=[1, 1], groups=4)
    h = g.pool2d(h, kind="mean", kernel_size=[3, 3], stride=[1, 1], padding=[1, 1])
    h = g.reshape(g.mean(h, axes=[2, 3]), new_shape=[2, 8])
    y = g.matmul(h, g.param("fc", (8, 4)))
    g.set_outputs([y])
    return g


def test_mlp_round_trip():
    g = mlp()
    _round_trip(g, {"x": _rng().standard_normal((4, 16)).astype(np.float32)}, _params(g))


@pytest.mark.parametrize("mask_kind", ["causal", "none", "sliding_window"])
def test_transformer_block_round_trip(mask_kind):
    g = transformer_block(mask_kind) if mask_kind != "sliding_window" else None
    if g is None:
        g = rlx.Graph("sw")
        q = g.input("q", (1, 2, 6, 4))
        g.set_outputs([g.attention(q, q, q, num_heads=2, head_dim=4, mask_kind="sliding_window", window=2, attn_logit_softcap=5.0)])
        _round_trip(g, {"q": _rng().standard_normal((1, 2, 6, 4)).astype(np.float32)}, {})
        return
    _round_trip(g, {"x": _rng().standard_normal((2, 5, 8)).astype(np.float32)}, _params(g))


def test_transformer_block_optimized_fused_ops_are_unfused():
    g = transformer_block()
    opt, _ = rlx.optimize(g)
    _round_trip(opt, {"x": _rng().standard_normal((2, 5, 8)).astype(np.float32)}, _params(g))


def test_cnn_round_trip():
    g = cnn()
    _round_trip(g, {"x": _rng().standard_normal((2, 3, 12, 12)).astype(np.float32)}, _params(g))


def test_export_then_import_round_trip():
    g = mlp()
    params = _params(g)
    proto = rlx.onnx.export(g, params)
    back, bparams = rlx.onnx.import_model(proto)
    x = _rng(3).standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(rlx.run(back, {"x": x}, bparams)[0], rlx.run(g, {"x": x}, params)[0], rtol=1e-5, atol=1e-6)


def test_params_without_values_become_inputs():
    g = mlp()
    proto = rlx.onnx.export(g)
    assert {i.name for i in proto.graph.input} >= {"x", "w1", "b3"}
    assert not proto.graph.initializer or all(t.name not in g.params() for t in proto.graph.initializer)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_round_trip(interleaved):
    g = rlx.Graph("rope")
    x = g.input("x", (2, 5, 12))
    cos = g.input("cos", (7, 3))
    sin = g.input("sin", (7, 3))
    g.set_outputs([g.rope(x, cos, sin, head_dim=6, n_rot=4, interleaved=interleaved)])
    r = _rng(4)
    ang = r.standard_normal((7, 3)).astype(np.float32)
    _round_trip(g, {"x": r.standard_normal((2, 5, 12)).astype(np.float32), "cos": np.cos(ang), "sin": np.sin(ang)}, {})


def test_refused_op_names_the_reason():
    g = rlx.Graph("bwd")
    x = g.input("x", (3,))
    dy = g.input("dy", (3,))
    g.set_outputs([g.relu_backward(x, dy)])
    with pytest.raises(rlx.onnx.OnnxUnsupported, match="training-only"):
        rlx.onnx.export(g)


@pytest.mark.parametrize("build", [
    lambda g, x: g.unary_math(x, kind="erf") + g.unary_math(x, kind="trunc") + g.round(x),
    lambda g, x: g.binary_ext(x, g.abs(x) + 1.0, op="mod") + g.cast(g.arg_reduce(x, op="argmax", axis=1), to="f32"),
    lambda g, x: g.cumulative(x, op="sum", axis=1, reverse=True) + g.cumulative(x, op="sum", axis=0, exclusive=True),
    lambda g, x: g.gather_elements(x, g.top_k(x, k=3, axis=1, output="indices"), axis=1),
    lambda g, x: g.pool2d(g.reshape(x, new_shape=[1, 1, 4, 6]), kind="min", kernel_size=[2, 2]),
    lambda g, x: g.dot_general(x, x, lhs_contracting=[1], rhs_contracting=[1]),
    lambda g, x: g.where(g.ne(x, g.scalar(0.5, x.dtype)), g.cast(x, to="i32"), g.scalar(0, rlx.i32)),
    lambda g, x: g.cumsum(x, axis=0, exclusive=True) + g.cumulative(x, op="sum", axis=1, reverse=True),
    lambda g, x: g.apply("top_k", x, k=2, axis=1, output="values") + g.cast(g.top_k(x, k=2, axis=-1, largest=False), to="f32"),
    lambda g, x: g.apply("scatter_add", x, g.constant(np.array([1, -1, 1, 0])), num_rows=3),
], ids=["unary", "mod_argmax", "cumsum", "topk_gather", "minpool", "dot_general", "cast_where", "numerics_cumsum", "numerics_topk",
        "scatter_add"])
def test_small_ops_round_trip(build):
    g = rlx.Graph("small")
    x = g.input("x", (4, 6))
    g.set_outputs([build(g, x)])
    _round_trip(g, {"x": (_rng(5).standard_normal((4, 6)) * 3).astype(np.float32)}, {})


_KINDS = [("activation", k) for k in ACTIVATION_KINDS] + [("unary_math", k) for k in UNARY_MATH_KINDS]


@pytest.mark.parametrize("op,kind", _KINDS, ids=[f"{o}-{k}" for o, k in _KINDS])
def test_every_elementwise_kind_round_trips(op, kind):
    """A registry walk over the kind rows: one ONNX op, or the row's formula on the ONNX namespace."""
    g = rlx.Graph("kind")
    x = g.input("x", (4, 6))
    g.set_outputs([g.apply(op, x, kind=kind)])
    x = np.linspace(-2.7, 2.9, 24, dtype=np.float32).reshape(4, 6)  # NaN outside a domain: equal in both
    _round_trip(g, {"x": x}, {})


def test_gelu_is_exported_in_the_form_onnxruntime_fuses(tmp_path):
    """The gelu row's formula, evaluated on the ONNX namespace, is the pattern onnxruntime turns into one Gelu."""
    g = rlx.Graph("m")
    x = g.input("x", (4, 8))
    g.set_outputs([g.gelu(g.matmul(x, g.param("w", (8, 8))))])
    w = _rng(3).standard_normal((8, 8)).astype(np.float32)
    proto = _round_trip(g, {"x": _rng(4).standard_normal((4, 8)).astype(np.float32)}, {"w": w})
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    assert [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node].count("Gelu") == 1
