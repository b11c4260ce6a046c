"""fuse_conv_bias_act: conv2d [→ per-channel bias add] [→ activation] (one reshape keeping [N, C] allowed
between, as 1-D convs import) rewritten to fused_conv2d_bias_act, only where every intermediate has one
use. Numbers against torch (F.conv{1,2,3}d + bias + activation), the verifier after the pass, graphs
that must stay unfused, the backends and ONNX export of the fused op, autodiff against finite
differences on a graph holding it."""

from __future__ import annotations

import io

import numpy as np
import pytest

import rlx
from rlx.opt import default_passes, fuse_conv_bias_act, optimize
from rlx.opt.fold_affine import fold_conv_affine

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn

FUSED = "fused_conv2d_bias_act"
ACTS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


def _count(g, op=FUSED) -> int:
    return sum(n.op == op for n in g.nodes)


def _import(module, x):
    module = module.eval()
    g, params = rlx.torch.import_module(module, (x,))
    with torch.no_grad():
        want = module(x).numpy()
    return g, params, want


def _fused(g):
    res = fuse_conv_bias_act(g)
    rlx.verify(res.graph)
    return res.graph


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ------------------------------------------------------------------ numbers vs torch
GEOMETRY_2D = [  # (cin, cout, kernel, stride, padding, dilation, groups)
    (3, 8, 3, 1, 1, 1, 1),
    (4, 6, (3, 2), (2, 1), (1, 0), (1, 2), 2),
    (6, 6, 3, 2, 1, 1, 6),  # depthwise
    (5, 4, 1, 1, 0, 1, 1),  # pointwise
    (4, 8, 3, 1, 2, 2, 4),
]


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("geo", GEOMETRY_2D, ids=lambda g: "x".join(map(str, g[:3])) + f"_g{g[-1]}")
def test_conv2d_bias_act_matches_torch(geo, act):
    cin, cout, k, s, p, d, groups = geo
    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(cin, cout, k, s, p, d, groups), ACTS[act]())
    x = torch.randn(2, cin, 9, 10)
    g, params, want = _import(m, x)
    fused = _fused(g)
    assert _count(fused) == 1 and _count(fused, "conv2d") == 0
    node = next(n for n in fused.nodes if n.op == FUSED)
    assert node.attrs["activation"] == act and node.attrs["has_bias"]
    assert not any(n.op in ("activation", "binary") and len(n.shape) == 4 for n in fused.nodes)
    feed = {"input": x.numpy()}
    _close(rlx.run(fused, feed, params)[0], want)
    _close(rlx.compile(fused, params=params).run(feed)[0], want)
    _close(rlx.compile(fused, params=params, adopt=False, fold_weights=False).run(feed)[0], want)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ["relu", None])
def test_conv1d_through_its_reshape_matches_torch(bias, act):
    """torch imports conv1d as conv2d over [N, C, 1, L] → add [C, 1, 1] → reshape → activation."""
    torch.manual_seed(2)
    layers = [nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1, bias=bias)] + ([nn.ReLU()] if act else [])
    x = torch.randn(3, 4, 17)
    g, params, want = _import(nn.Sequential(*layers), x)
    fused = _fused(g)
    assert _count(fused) == (1 if bias or act else 0)
    if bias or act:
        node = next(n for n in fused.nodes if n.op == FUSED)
        assert (node.attrs["has_bias"], node.attrs["activation"]) == (bias, act)
    _close(rlx.compile(fused, params=params).run({"input": x.numpy()})[0], want)


def _onnx_import(module, x):
    pytest.importorskip("onnx")
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (x,), buf, dynamo=False, input_names=["x"])
    return rlx.onnx.import_model(buf.getvalue())


def test_onnx_conv1d_reshape_before_the_bias_fuses():
    """ONNX import of a 1-D Conv: conv2d → reshape [N, C, L] → add [1, C, 1] → activation."""
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv1d(3, 5, 3, padding=1), nn.GELU())
    x = torch.randn(2, 3, 12)
    g, params = _onnx_import(m, x)
    fused = _fused(g)
    assert _count(fused) == 1 and not any(n.op == "activation" for n in fused.nodes)
    with torch.no_grad():
        _close(rlx.run(fused, {"x": x.numpy()}, params)[0], m(x).numpy())


def test_conv3d_stays_correct_and_unfused():
    """rlx has no 3-D conv op: ONNX import writes one as a sum of conv2d taps, so nothing here is a
    conv followed by its bias; the pass leaves the graph's values alone."""
    torch.manual_seed(4)
    m = nn.Sequential(nn.Conv3d(2, 4, 3, stride=(2, 1, 1), padding=1), nn.ReLU())
    x = torch.randn(1, 2, 5, 6, 6)
    g, params = _onnx_import(m, x)
    res = fuse_conv_bias_act(g)
    rlx.verify(res.graph)
    assert _count(res.graph) == 0
    with torch.no_grad():
        _close(rlx.run(res.graph, {"x": x.numpy()}, params)[0], m(x).numpy())


def test_folded_batchnorm_bias_and_relu_fuse():
    """Eval BatchNorm folded into the conv (fold_conv_affine) leaves conv + [C, 1, 1] shift + relu: one node."""
    torch.manual_seed(5)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    g, params, want = _import(m, x)
    fused = _fused(fold_conv_affine(g).graph)
    assert _count(fused) == 1
    assert not any(n.op in ("activation", "binary") and tuple(n.shape)[:1] == (2,) for n in fused.nodes)  # the rest: weights
    _close(rlx.compile(fused, params=params).run({"input": x.numpy()})[0], want)


# ------------------------------------------------------------------------ no fusion
def _graph(build):
    g = rlx.Graph("t")
    x = g.input("x", (2, 3, 6, 6), "f64")
    w = g.param("w", (4, 3, 3, 3), "f64")
    g.set_outputs(build(g, x, w, g.conv2d(x, w, padding=[1, 1])))
    return g


def test_conv_read_twice_is_not_fused():
    g = _graph(lambda g, x, w, y: [g.relu(y + g.param("b", (4, 1, 1), "f64")), g.sum(y)])
    assert _count(_fused(g)) == 0
    missed = optimize(g)[1].missed_by("conv_bias_act")
    assert len(missed) == 1 and "2 uses" in missed[0].reason


def test_conv_that_is_an_output_is_not_fused():
    g = _graph(lambda g, x, w, y: [g.relu(y), y])
    assert _count(_fused(g)) == 0


def test_bias_add_read_twice_fuses_the_bias_only():
    g = _graph(lambda g, x, w, y: [g.relu(s := y + g.param("b", (1, 4, 1, 1), "f64")), s * 2.0])
    fused = _fused(g)
    node = next(n for n in fused.nodes if n.op == FUSED)
    assert node.attrs["has_bias"] and node.attrs["activation"] is None
    assert _count(fused, "activation") == 1


@pytest.mark.parametrize("shape", [(6,), (4, 6, 6), (1, 4, 6, 1), (2, 4, 1, 1), (6, 1)], ids=str)
def test_bias_that_is_not_per_channel_is_not_fused(shape):
    """[W], a full [C, H, W] tensor, per-(C, H) and per-(N, C) operands, and [H, 1] (per-row)."""
    g = _graph(lambda g, x, w, y: [g.relu(y + g.param("b", shape, "f64"))])
    fused = _fused(g)
    assert _count(fused) == 0 and _count(fused, "binary") == 1 and _count(fused, "conv2d") == 1


def test_bias_of_another_dtype_is_not_fused():
    g = _graph(lambda g, x, w, y: [y + g.param("b", (4, 1, 1), "f32")])
    assert _count(_fused(g)) == 0
    rlx.verify(_fused(g))


def test_activation_before_the_bias_fuses_only_the_activation():
    """act(conv) + b is not act(conv + b): the add after the activation stays."""
    g = _graph(lambda g, x, w, y: [g.relu(y) + g.param("b", (4, 1, 1), "f64")])
    fused = _fused(g)
    node = next(n for n in fused.nodes if n.op == FUSED)
    assert node.attrs["activation"] == "relu" and not node.attrs["has_bias"]
    assert _count(fused, "binary") == 1


# ------------------------------------------------------------------ pipeline, backends
def _cnn():
    torch.manual_seed(6)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2), nn.SiLU(),
                      nn.Conv2d(8, 4, 1))
    x = torch.randn(2, 3, 10, 10)
    return _import(m, x), x


def test_default_pipeline_fuses_and_reports_the_fusion():
    (g, params, want), x = _cnn()
    opt, report = optimize(g)
    assert report.created.get(FUSED) == 3 and report.applied["fuse_conv_bias_act"]["fused"] == 3
    assert _count(opt, "conv2d") == 0
    _close(rlx.compile(opt, params=params).run({"input": x.numpy()})[0], want)


def test_backends_that_do_not_claim_the_op_skip_the_pass():
    assert "fuse_conv_bias_act" not in [p.name for p in default_passes("tpu")]
    assert "fuse_conv_bias_act" in [p.name for p in default_passes("numpy")]
    (g, _, _), _ = _cnn()
    opt, _ = optimize(g, backend="tpu")
    assert _count(opt) == 0 and _count(opt, "conv2d") == 3


def test_numpy_executor_writes_the_fused_conv_into_its_slot():
    (g, params, _), _ = _cnn()
    exe = rlx.compile(optimize(g)[0], params=params)
    rows = [r for r in exe.dispatch_report().rows if r.op == FUSED]
    assert len(rows) == 3 and all(r.kind == "native" and "writes into its arena slot" in r.reason for r in rows)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_backend_runs_the_fused_op_natively(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    (g, params, want), x = _cnn()
    opt = optimize(g)[0]
    exe = rlx.compile(opt, backend=backend, params=params)
    rows = [r for r in exe.dispatch_report().rows if r.op == FUSED]
    assert rows and all(r.kind == "native" for r in rows)
    _close(np.asarray(exe.run({"input": x.numpy()})[0]), want, 1e-4)


def test_onnx_export_writes_conv_with_its_bias_then_the_activation():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    (g, params, want), x = _cnn()
    model = rlx.onnx.export(optimize(g)[0], params)
    ops = [n.op_type for n in model.graph.node if n.op_type != "Identity"]
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 3 and all(len(n.input) == 3 for n in convs)  # the bias is the Conv's third input
    assert "Add" not in ops and ops.count("Relu") == 1
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    _close(sess.run(None, {"input": x.numpy()})[0], want, 1e-4)


# ------------------------------------------------------------------------- autodiff
def test_gradient_through_the_fused_op_matches_finite_differences():
    """The pass runs on any graph; autodiff unfuses the op through its decomposition first."""
    rng = np.random.default_rng(0)
    g = rlx.Graph("loss")
    x = g.input("x", (1, 2, 5, 5), "f64")
    w, b = g.param("w", (3, 2, 3, 3), "f64"), g.param("b", (3, 1, 1), "f64")
    g.set_outputs([g.sum(g.gelu(g.conv2d(x, w, padding=[1, 1], stride=[2, 1]) + b))])
    fused = _fused(g)
    assert _count(fused) == 1
    feed = {"x": rng.standard_normal((1, 2, 5, 5))}
    params = {"w": rng.standard_normal((3, 2, 3, 3)), "b": rng.standard_normal((3, 1, 1))}
    grads = rlx.run(rlx.grad(fused, ["w", "b", "x"]), {**feed, "d_output": np.array(1.0)}, params)

    def loss(p, f):
        return float(rlx.run(g, f, p)[0])

    eps = 1e-6
    for got, name, is_param in zip(grads, ["w", "b", "x"], [True, True, False]):
        src = params if is_param else feed
        want = np.zeros_like(src[name])
        for idx in np.ndindex(src[name].shape):
            hi, lo = {k: v.copy() for k, v in src.items()}, {k: v.copy() for k, v in src.items()}
            hi[name][idx] += eps
            lo[name][idx] -= eps
            if is_param:
                want[idx] = (loss(hi, feed) - loss(lo, feed)) / (2 * eps)
            else:
                want[idx] = (loss(params, hi) - loss(params, lo)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("dtype", ["f64", "f32", "f16"])
@pytest.mark.parametrize("act", ["silu", "gelu", None])
def test_fused_kernel_is_bitwise_its_decomposition(dtype, act):
    """The kernel (conv into the slot, bias and activation in place) computes what the unfused chain computes;
    in f16 what the chain computes in f32 scratch, rounded once (as every fused op: docs/semantics.md#fused-ops)."""
    rng = np.random.default_rng(1)
    g = rlx.Graph("t")
    x, w, b = g.input("x", (2, 4, 7, 7), dtype), g.param("w", (6, 2, 3, 3), dtype), g.param("b", (6, 1, 1), dtype)
    y = g.conv2d(x, w, padding=[1, 1], groups=2) + b
    g.set_outputs([y if act is None else g.apply("activation", y, kind=act)])
    np_dt = rlx.DType(dtype).numpy
    feed = {"x": rng.standard_normal((2, 4, 7, 7)).astype(np_dt)}
    params = {"w": rng.standard_normal((6, 2, 3, 3)).astype(np_dt), "b": rng.standard_normal((6, 1, 1)).astype(np_dt)}
    fused = _fused(g)
    assert _count(fused) == 1
    if dtype == "f16":  # the same graph in f32 on the same (widened) values, rounded at the end
        g32 = rlx.Graph("t32")
        x32, w32, b32 = g32.input("x", (2, 4, 7, 7), "f32"), g32.param("w", (6, 2, 3, 3), "f32"), g32.param("b", (6, 1, 1), "f32")
        y32 = g32.conv2d(x32, w32, padding=[1, 1], groups=2) + b32
        g32.set_outputs([y32 if act is None else g32.apply("activation", y32, kind=act)])
        widen = {k: v.astype(np.float32) for k, v in {**feed, **params}.items()}
        want = rlx.run(g32, {"x": widen["x"]}, {"w": widen["w"], "b": widen["b"]})[0].astype(np.float16)
    else:
        want = rlx.run(g, feed, params)[0]
    for got in (rlx.run(fused, feed, params)[0], rlx.compile(fused, params=params).run(feed)[0]):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
