"""The exporter writes the single operators onnxruntime fuses (HardSigmoid / HardSwish, GlobalAveragePool)
where rlx's MIR spells them with primitives, and ONNX MaxPool's symmetric pads import as pool2d's own
padding: the values match onnxruntime on the original model and NumPy, and the re-exported model's
optimized onnxruntime graph is no larger than the original's."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rlx.onnx  # noqa: E402


def _model(nodes, inits, x_shape, out_name="y", opset=18):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _session(proto, optimized=None):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if optimized is not None:
        opts.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _reexport(proto):
    g, params = rlx.onnx.import_model(proto.SerializeToString())
    rlx.verify(g)
    out = rlx.onnx.export(g, params)
    onnx.checker.check_model(out, full_check=True)
    return g, params, out


def _ops(proto):
    return Counter(n.op_type for n in proto.graph.node)


def _hard_sigmoid(x, alpha, beta):
    return np.clip(x * np.float32(alpha) + np.float32(beta), 0, 1)


def test_hard_swish_and_hard_sigmoid_come_back_as_one_node_each():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 4, 3, 3)) * 0.5).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c"], ["hs"]),
             helper.make_node("HardSigmoid", ["hs"], ["y"], alpha=0.3, beta=0.4)]
    model = _model(nodes, {"w": w}, [1, 4, 9, 9])
    g, params, out = _reexport(model)
    ops = _ops(out)
    assert ops["HardSwish"] == 1 and ops["HardSigmoid"] == 1, ops
    assert not ops["Max"] and not ops["Min"] and not ops["Add"], ops
    hsig = next(n for n in out.graph.node if n.op_type == "HardSigmoid")
    attrs = {a.name: a.f for a in hsig.attribute}
    assert np.float32(attrs["alpha"]) == np.float32(0.3) and np.float32(attrs["beta"]) == np.float32(0.4)
    used = {i for n in out.graph.node for i in n.input}
    assert all(t.name in used for t in out.graph.initializer), "the dropped chain's scalars are left out"
    x = (3 * rng.standard_normal((1, 4, 9, 9))).astype(np.float32)
    want = _session(model).run(None, {"x": x})[0]
    got = _session(out).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rlx.run(g, dict(zip(g.inputs(), [x])), params)[0],
                               want, rtol=1e-5, atol=1e-6)


def test_a_chain_whose_inner_value_is_read_elsewhere_stays_primitive():
    """Max(Min(x/6 + 0.5, 1), 0) where x/6 + 0.5 is also an output: no HardSigmoid (the clamp alone is one
    Clip), same values."""
    rlx_g = rlx.Graph("shared")
    x = rlx_g.input("x", (4, 5))
    y = x * rlx_g.constant(np.float32(1 / 6)) + rlx_g.constant(np.float32(0.5))
    hs = rlx_g.maximum(rlx_g.minimum(y, rlx_g.constant(np.float32(1.0))), rlx_g.constant(np.float32(0.0)))
    rlx_g.set_outputs([hs * x, y])
    out = rlx.onnx.export(rlx_g, {})
    ops = _ops(out)
    assert not ops["HardSigmoid"] and not ops["HardSwish"] and ops["Clip"] == 1 and not ops["Max"], ops
    xv = (4 * np.random.default_rng(1).standard_normal((4, 5))).astype(np.float32)
    got = _session(out).run(None, {"x": xv})
    yv = xv * np.float32(1 / 6) + np.float32(0.5)
    np.testing.assert_allclose(got[0], np.clip(yv, 0, 1) * xv, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], yv, rtol=1e-6)


def test_hard_sigmoid_written_by_hand_in_rlx_is_one_node():
    g = rlx.Graph("hsig")
    x = g.input("x", (2, 3, 4))
    one, zero = g.constant(np.float32(1.0)), g.constant(np.float32(0.0))
    z = g.minimum(g.maximum(g.constant(np.float32(0.2)) * x + g.constant(np.float32(0.5)), zero), one)  # Min(Max(...))
    g.set_outputs([z])
    out = rlx.onnx.export(g, {})
    assert _ops(out)["HardSigmoid"] == 1 and len(out.graph.node) == 2, _ops(out)  # + the output Identity
    xv = (5 * np.random.default_rng(2).standard_normal((2, 3, 4))).astype(np.float32)
    np.testing.assert_allclose(_session(out).run(None, {"x": xv})[0], _hard_sigmoid(xv, 0.2, 0.5), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape, axes, keep", [((2, 3, 5, 4), (2, 3), True), ((2, 3, 5, 4), (-1, -2), False),
                                               ((2, 3, 4, 5, 2), (2, 3, 4), True), ((2, 6, 7), (2,), True),
                                               ((2, 3, 5, 4), (1, 2), True)])
def test_mean_over_the_spatial_axes_is_global_average_pool(shape, axes, keep):
    g = rlx.Graph("gap")
    x = g.input("x", shape)
    g.set_outputs([g.reduce(x, op="mean", axes=list(axes), keep_dim=keep)])
    out = rlx.onnx.export(g, {})
    onnx.checker.check_model(out, full_check=True)
    spatial = len(shape) >= 4 and sorted(a % len(shape) for a in axes) == list(range(2, len(shape)))  # rank 3: RMSNorm's mean
    assert (_ops(out)["GlobalAveragePool"] == 1) == spatial and (_ops(out)["ReduceMean"] == 0) == spatial, _ops(out)
    xv = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = xv.astype(np.float64).mean(axis=axes, keepdims=keep)
    got = _session(out).run(None, {"x": xv})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_x_ne_x_is_isnan():
    g = rlx.Graph("isnan")
    x = g.input("x", (6,))
    g.set_outputs([g.ne(x, x)])
    out = rlx.onnx.export(g, {})
    assert _ops(out)["IsNaN"] == 1 and not _ops(out)["Equal"], _ops(out)
    xv = np.array([0.0, np.nan, -np.inf, np.inf, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(_session(out).run(None, {"x": xv})[0], np.isnan(xv))


@pytest.mark.parametrize("source", ["bool", "i64", "f32"])
def test_max_of_a_cast_mask_needs_no_nan_test(source):
    """A max / argmax over a bool or integer mask cast to float (the torch reader's fully-masked-row guard)
    cannot meet NaN: no IsNaN is written. Over a float it is (NaN propagates). Values: NumPy."""
    g = rlx.Graph("mask_max")
    m = g.input("m", (3, 4), source)
    f = g.cast(m, "f32") if source != "f32" else m
    g.set_outputs([g.reduce(f, op="max", axes=[1], keep_dim=True), g.arg_reduce(f, op="argmax", axis=1, keep_dim=False)])
    out = rlx.onnx.export(g, {})
    assert (_ops(out)["IsNaN"] > 0) == (source == "f32"), _ops(out)
    mv = np.array([[0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 1]]).astype({"bool": bool, "i64": np.int64, "f32": np.float32}[source])
    if source == "f32":
        mv[1, 2] = np.nan
    got = _session(out).run(None, {"m": mv})
    fv = mv.astype(np.float32)
    np.testing.assert_array_equal(got[0], np.max(fv, axis=1, keepdims=True))
    np.testing.assert_array_equal(got[1], np.argmax(fv, axis=1))


def _maxpool_model(pads):
    return _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=pads)], {},
                  [1, 2, 9, 8])


@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [1, 0, 1, 0], [0, 1, 1, 2]])
def test_maxpool_pads_import_as_pool2d_padding_when_symmetric(pads):
    model = _maxpool_model(pads)
    g, params, out = _reexport(model)
    pools = [n for n in g.nodes if n.op == "pool2d"]
    assert len(pools) == 1
    symmetric = pads[:2] == pads[2:]
    assert (list(pools[0].attrs["padding"]) == pads[:2]) == symmetric
    assert not any(n.op == "concat" for n in g.nodes) or not symmetric
    x = np.random.default_rng(4).standard_normal((1, 2, 9, 8)).astype(np.float32)
    x[0, 0, 0, 0] = -1e30  # a corner value below every other: padding must never win a window
    want = _session(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(_session(out).run(None, {"x": x})[0], want)
    np.testing.assert_array_equal(rlx.run(g, dict(zip(g.inputs(), [x])), params)[0], want)


def test_average_pool_symmetric_pads_keep_the_in_bounds_count():
    model = _model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])],
                   {}, [1, 2, 5, 5])
    g, params, out = _reexport(model)
    x = np.random.default_rng(5).standard_normal((1, 2, 5, 5)).astype(np.float32)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones((5, 5)), 1)
    win = np.lib.stride_tricks.sliding_window_view
    want = win(padded, (3, 3), axis=(2, 3)).sum(axis=(-2, -1)) / win(ones, (3, 3)).sum(axis=(-2, -1))
    np.testing.assert_allclose(rlx.run(g, dict(zip(g.inputs(), [x])), params)[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_session(out).run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_torch_mobilenet_block_reexport_optimizes_no_larger_than_the_original(tmp_path):
    """A MobileNetV3-style block (conv-BN-hardswish, squeeze-excite with a hard-sigmoid gate, padded max
    pool) through torch.onnx.export: rlx's re-export optimizes in onnxruntime to no more nodes of any
    type than the file torch wrote (but the max pool's NaN term), with fewer layout reorders, and computes the same values."""
    torch = pytest.importorskip("torch")
    from torch import nn

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

        def forward(self, x):
            s = x.mean((2, 3), keepdim=True)
            return x * nn.functional.hardsigmoid(self.b(torch.relu(self.a(s))))

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(), nn.MaxPool2d(3, 2, 1),
                        nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.Hardswish(), SE(16), nn.Conv2d(16, 24, 1),
                        nn.BatchNorm2d(24), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 10)).eval()
    x = torch.randn(1, 3, 32, 32)
    path = tmp_path / "block.onnx"
    torch.onnx.export(net, (x,), str(path), dynamo=False, opset_version=18)
    original = onnx.load(str(path))
    _, _, out = _reexport(original)
    _session(original, tmp_path / "orig.opt.onnx")
    _session(out, tmp_path / "re.opt.onnx")
    same = {"ReduceMean": "GlobalAveragePool", "Flatten": "Reshape"}  # the spatial mean as GAP; Flatten imports as Reshape
    a = Counter(same.get(n.op_type, n.op_type) for n in onnx.load(str(tmp_path / "orig.opt.onnx")).graph.node)
    b = Counter(same.get(n.op_type, n.op_type) for n in onnx.load(str(tmp_path / "re.opt.onnx")).graph.node)
    nan_term = Counter({"Tanh": 1, "Conv": 1})  # the max pool's NaN propagation (docs/semantics.md), torch's file has none
    assert all(b[op] <= a[op] + nan_term[op] for op in b), (a, b)
    assert b["ReorderInput"] < a["ReorderInput"], (a, b)  # the squeeze-excite mean stays in the blocked layout
    with torch.inference_mode():
        want = net(x).numpy()
    got = _session(out).run(None, {out.graph.input[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("act, n_ops", [("Hardswish", {"HardSwish": 1}), ("Hardsigmoid", {"HardSigmoid": 1})])
def test_torch_hard_activations_export_as_one_node(act, n_ops):
    """torch.export writes hardswish as x * clamp(x + 3, 0, 6) / 6 (hardsigmoid without the x): one node each."""
    torch = pytest.importorskip("torch")
    import rlx.torch

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), getattr(torch.nn, act)()).eval()
    x = 4 * torch.randn(1, 3, 6, 6)
    g, params = rlx.torch.import_module(net, (x,))
    out = rlx.onnx.export(g, params)
    onnx.checker.check_model(out, full_check=True)
    ops = _ops(out)
    assert all(ops[k] == v for k, v in n_ops.items()) and not ops["Max"] and not ops["Min"] and not ops["Div"], ops
    with torch.inference_mode():
        want = net(x).numpy()
    np.testing.assert_allclose(_session(out).run(None, {out.graph.input[0].name: x.numpy()})[0], want, rtol=1e-5, atol=1e-6)
