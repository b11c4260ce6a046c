"""Grid sampling (rlx.frontends.grid_sample): ONNX GridSample vs onnxruntime and onnx.reference, torch's
grid_sampler through rlx.torch.import_program vs torch.nn.functional.grid_sample.

Grids reach well outside [-1, 1] (several reflections), on 2-D and 3-D spatial inputs."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx.frontends.onnx import import_model  # noqa: E402

MODES = ["nearest", "linear", "cubic"]
PADDINGS = ["zeros", "border", "reflection"]


def _model(xs, gs, opset, dtype=TensorProto.FLOAT, **attrs):
    node = helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)
    graph = helper.make_graph([node], "gs", [helper.make_tensor_value_info("x", dtype, xs),
                                              helper.make_tensor_value_info("g", TensorProto.FLOAT, gs)],
                              [helper.make_tensor_value_info("y", dtype, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _inputs(r, seed, lo=-2.5, hi=2.5):
    rng = np.random.default_rng(seed)
    xs, gs = ([2, 3, 4, 5], [2, 3, 6, 2]) if r == 2 else ([2, 2, 3, 4, 5], [2, 2, 3, 4, 3])
    return rng.standard_normal(xs).astype(np.float32), rng.uniform(lo, hi, gs).astype(np.float32)


def _rlx(model, x, g):
    graph, params = import_model(model)
    (got,) = rlx.run(graph, {"x": x, "g": g}, params)
    return got


def _ort(model, x, g):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x, "g": g})[0]


@pytest.mark.parametrize("r,mode,padding,align", [c for c in itertools.product([2, 3], MODES, PADDINGS, [0, 1])
                                                   # onnxruntime: cubic 4-D only; its cubic border clamps taps only (torch's way)
                                                   if c[1] != "cubic" or (c[0] == 2 and c[2] != "border")])
def test_onnx_grid_sample_matches_onnxruntime(r, mode, padding, align):
    x, g = _inputs(r, seed=zlib.crc32(repr((r, mode, padding, align)).encode()))
    m = _model(list(x.shape), list(g.shape), 20, mode=mode, padding_mode=padding, align_corners=align)
    got = _rlx(m, x, g)
    assert got.shape == (x.shape[0], x.shape[1], *g.shape[1:-1]) and got.dtype == np.float32
    np.testing.assert_allclose(got, _ort(m, x, g), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("r,padding,align", list(itertools.product([2, 3], PADDINGS, [0, 1])))
def test_onnx_grid_sample_cubic_matches_onnx_reference(r, padding, align):
    """Cubic in 3-D and cubic border (the coordinate itself is clamped first): the ONNX reference evaluator."""
    x, g = _inputs(r, seed=7 + r + 3 * align, lo=-1.8, hi=1.8)
    if r == 3:
        x, g = x[:1, :1], g[:1, :2, :2]
    m = _model(list(x.shape), list(g.shape), 20, mode="cubic", padding_mode=padding, align_corners=align)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x, "g": g})
    np.testing.assert_allclose(_rlx(m, x, g), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_onnx_grid_sample_opset16_names(mode):
    x, g = _inputs(2, seed=3)
    m = _model(list(x.shape), list(g.shape), 16, mode=mode, padding_mode="reflection", align_corners=1)
    np.testing.assert_allclose(_rlx(m, x, g), _ort(m, x, g), rtol=1e-5, atol=1e-5)


def test_onnx_grid_sample_default_is_linear_zeros_and_inside_points_are_exact():
    """Grid points on pixel centres return the pixels; points far outside read zeros."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    cols, rows = np.meshgrid((2 * np.arange(4) + 1) / 4 - 1, (2 * np.arange(3) + 1) / 3 - 1)
    g = np.stack([cols, rows], axis=-1)[None].astype(np.float32)
    g = np.concatenate([g, np.full((1, 1, 4, 2), 5.0, np.float32)], axis=1)
    got = _rlx(_model([1, 2, 3, 4], list(g.shape), 20), x, g)
    np.testing.assert_allclose(got[:, :, :3], x, rtol=1e-6, atol=1e-6)
    assert (got[:, :, 3] == 0).all()


def test_onnx_grid_sample_nearest_rounds_half_to_even():
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    # align_corners: x = (n + 1) * 2 -> n for 0.5, 1.5, 2.5 and 3.5
    n = (np.array([0.5, 1.5, 2.5, 3.5]) / 2 - 1).astype(np.float32)
    g = np.stack([n, np.zeros_like(n)], axis=-1).reshape(1, 1, 4, 2)
    got = _rlx(_model([1, 1, 1, 5], [1, 1, 4, 2], 20, mode="nearest", align_corners=1), x, g)
    np.testing.assert_array_equal(got.reshape(-1), [0, 2, 2, 4])


def test_onnx_grid_sample_nearest_on_integers():
    x = np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4)
    g = np.random.default_rng(1).uniform(-1.5, 1.5, (1, 2, 5, 2)).astype(np.float32)
    m = _model([1, 2, 3, 4], [1, 2, 5, 2], 20, dtype=TensorProto.INT32, mode="nearest", padding_mode="border")
    got = _rlx(m, x, g)
    assert got.dtype == np.int32
    as_float = _model([1, 2, 3, 4], [1, 2, 5, 2], 20, mode="nearest", padding_mode="border")  # onnxruntime: float only
    np.testing.assert_array_equal(got, _ort(as_float, x.astype(np.float32), g))


def test_onnx_grid_sample_float16():
    x, g = _inputs(2, seed=11)
    m = _model(list(x.shape), list(g.shape), 20, dtype=TensorProto.FLOAT16, mode="linear")
    got = _rlx(m, x.astype(np.float16), g)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, _ort(m, x.astype(np.float16), g), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("r,mode,padding,align", [c for c in itertools.product([2, 3], ["nearest", "bilinear", "bicubic"],
                                                                              PADDINGS, [False, True])
                                                   if c[0] == 2 or c[1] != "bicubic"])
def test_torch_grid_sample_matches_torch(r, mode, padding, align):
    torch = pytest.importorskip("torch")
    import rlx.torch

    class Sample(torch.nn.Module):
        def forward(self, x, g):
            return torch.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)

    x, g = (torch.from_numpy(a) for a in _inputs(r, seed=zlib.crc32(repr((r, mode, padding, align)).encode())))
    module = Sample()
    graph, params = rlx.torch.import_program(torch.export.export(module, (x, g)))
    (got,) = rlx.run(graph, {"x": x.numpy(), "g": g.numpy()}, params)
    np.testing.assert_allclose(got, module(x, g).numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("backend", ["torch", "jax", "onnxruntime"])
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_runs_on_every_backend(backend, mode):
    """The composition uses plain MIR ops: each executable backend matches onnxruntime's GridSample."""
    pytest.importorskip({"onnxruntime": "onnxruntime"}.get(backend, backend))
    x, g = _inputs(2, seed=21, lo=-3.5, hi=3.5)
    m = _model(list(x.shape), list(g.shape), 20, mode=mode, padding_mode="reflection")
    graph, params = import_model(m)
    out = rlx.compile(graph, backend=backend).run(inputs={"x": x, "g": g}, params=params)
    np.testing.assert_allclose(np.asarray(out[0]), _ort(m, x, g), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("group,offset_group,stride,dilation,pads,with_mask", [
    (1, 1, 1, 1, 0, False), (2, 1, 1, 1, 1, True), (1, 2, 2, 1, 1, True), (2, 2, 1, 2, 2, False)])
def test_onnx_deform_conv_matches_onnx_reference(group, offset_group, stride, dilation, pads, with_mask):
    rng = np.random.default_rng(group * 10 + offset_group + stride + dilation)
    n, c, h, w, oc, k = 2, 4, 5, 6, 6, 3
    oh = (h + 2 * pads - (k - 1) * dilation - 1) // stride + 1
    ow = (w + 2 * pads - (k - 1) * dilation - 1) // stride + 1
    feeds = {"x": rng.standard_normal((n, c, h, w)), "w": rng.standard_normal((oc, c // group, k, k)),
             "off": rng.uniform(-2.5, 2.5, (n, offset_group * 2 * k * k, oh, ow)), "b": rng.standard_normal(oc)}
    if with_mask:
        feeds["m"] = rng.uniform(0, 1, (n, offset_group * k * k, oh, ow))
    feeds = {key: v.astype(np.float32) for key, v in feeds.items()}
    node = helper.make_node("DeformConv", list(feeds), ["y"], group=group, offset_group=offset_group, strides=[stride] * 2,
                            dilations=[dilation] * 2, pads=[pads] * 4)
    inputs = [helper.make_tensor_value_info(key, TensorProto.FLOAT, list(v.shape)) for key, v in feeds.items()]
    graph = helper.make_graph([node], "dc", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    g, params = import_model(m)
    (got,) = rlx.run(g, feeds, params)
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    assert got.shape == (n, oc, oh, ow)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode,ctm,ratio,scale", [("avg", "half_pixel", 0, 1.0), ("avg", "output_half_pixel", 2, 0.5),
                                                 ("max", "half_pixel", 2, 1.0), ("max", "output_half_pixel", 0, 0.25)])
def test_onnx_roi_align_matches_onnxruntime(mode, ctm, ratio, scale):
    """ROIs of varied sizes, some reaching outside the image; fed at run time (import_runnable specialises on them)."""
    from rlx.frontends.onnx import import_runnable

    rng = np.random.default_rng(ratio + int(4 * scale))
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    lo = rng.uniform(-3, 8, (5, 2)) / scale
    rois = np.concatenate([lo, lo + rng.uniform(0.3, 9, (5, 2)) / scale], axis=1).astype(np.float32)  # x1, y1, x2, y2
    feeds = {"x": x, "rois": rois, "b": np.array([0, 1, 1, 0, 1], np.int64)}
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode=mode, coordinate_transformation_mode=ctm,
                            output_height=3, output_width=4, sampling_ratio=ratio, spatial_scale=scale)
    elem = {"x": TensorProto.FLOAT, "rois": TensorProto.FLOAT, "b": TensorProto.INT64}
    graph = helper.make_graph([node], "ra", [helper.make_tensor_value_info(k, elem[k], list(v.shape)) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    (got,) = import_runnable(m).run(feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert got.shape == (5, 3, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-5)
