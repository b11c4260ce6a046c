"""ONNX Resize against onnxruntime: opsets 10-19, every mode / nearest_mode / coordinate transformation,
cubic_coeff_a and exclude_outside, roi (tf_crop_and_resize), antialias, keep_aspect_ratio_policy, scales
or sizes, whole and fractional factors, symbolic batch / channel and (whole-number upscaling) symbolic
spatial sizes. The default suite runs a sample of the grid; ``-m slow`` runs all of it."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
import rlx.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize", "half_pixel_symmetric"]
FACTORS = [(2.0, 2.0), (0.5, 0.5), (1.7, 0.6), (3.0, 1.25), (0.3, 2.5)]
IN_SHAPE = (2, 3, 7, 9)


def _model(opset, attrs, *, scales=None, sizes=None, roi=None, axes=None, dims=IN_SHAPE):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = []
    if opset < 11:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
        inputs = ["x", "scales"]
    else:
        inputs = ["x", "", "", ""]
        if roi is not None:
            inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [len(roi)], roi))
            inputs[1] = "roi"
        elif opset < 13:  # opsets 11-12 need the roi input: an empty one
            inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [0], []))
            inputs[1] = "roi"
        if scales is not None:
            inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
            inputs[2] = "scales"
        elif opset < 13:
            inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [0], []))
            inputs[2] = "scales"
        if sizes is not None:
            inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
            inputs[3] = "sizes"
        while inputs[-1] == "":
            inputs.pop()
    if axes is not None:
        attrs = {**attrs, "axes": axes}
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "resize", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _close(a, b, atol):
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=atol)


def _check(data, shapes=(IN_SHAPE,), atol=2e-5, backends=()):
    """rlx.run vs onnxruntime; where onnxruntime departs from the ONNX spec (fractional scales with
    align_corners / tf_crop_and_resize / nearest: it recomputes the scale from the output length),
    the spec's reference implementation (onnx.reference) decides."""
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    g, params = rlx.onnx.import_model(data)
    for shape in shapes:
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        (got,) = rlx.run(g, {"x": x}, params)
        for backend in backends:  # the compiled backends agree with rlx.run (symbolic sizes bound at run time)
            (other,) = rlx.compile(g, backend=backend).run({"x": x}, params)
            np.testing.assert_allclose(np.asarray(other), got, rtol=1e-5, atol=1e-5, err_msg=backend)
        assert got.shape == want.shape
        if not _close(got, want, atol):
            from onnx.reference import ReferenceEvaluator

            (spec,) = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})
            assert not _close(spec, want, atol), "rlx differs from onnxruntime and the ONNX reference, which agree"
            np.testing.assert_allclose(got, spec, rtol=1e-4, atol=atol)
    return g


def _cases():
    out = []
    for fy, fx in FACTORS:
        spatial = [fy, fx]
        for nm in NEAREST:
            for ctm in CTMS:
                out.append((19, {"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": ctm}, spatial))
        for mode in ("linear", "cubic"):
            for ctm in CTMS:
                out.append((19, {"mode": mode, "coordinate_transformation_mode": ctm}, spatial))
            out.append((18, {"mode": mode, "antialias": 1}, spatial))
        out.append((13, {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, spatial))
        out.append((11, {"mode": "cubic", "cubic_coeff_a": -0.5}, spatial))
        out.append((10, {"mode": "nearest"}, spatial))
        out.append((10, {"mode": "linear"}, spatial))
    return out


CASES = _cases()


def _id(case):
    opset, attrs, f = case
    return f"op{opset}-" + "-".join(str(v) for v in attrs.values()) + f"-{f[0]}x{f[1]}"


def _run_case(opset, attrs, factors, use_sizes):
    roi = None
    if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        roi = [0, 0, 0.1, 0.2, 1, 1, 0.8, 0.95]
        attrs = {**attrs, "extrapolation_value": -3.0}
    if use_sizes and opset >= 11:
        sizes = [IN_SHAPE[0], IN_SHAPE[1], int(IN_SHAPE[2] * factors[0]), int(IN_SHAPE[3] * factors[1])]
        data = _model(opset, attrs, sizes=sizes, roi=roi)
    else:
        data = _model(opset, attrs, scales=[1.0, 1.0, *factors], roi=roi)
    _check(data)


SAMPLE = CASES[::9]


@pytest.mark.parametrize("case", SAMPLE, ids=[_id(c) for c in SAMPLE])
def test_resize_sample_matches_onnxruntime(case):
    _run_case(*case, use_sizes=False)


@pytest.mark.slow
@pytest.mark.parametrize("use_sizes", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_resize_grid_matches_onnxruntime(case, use_sizes):
    _run_case(*case, use_sizes)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_keep_aspect_ratio_policy(policy):
    data = _model(18, {"mode": "linear", "keep_aspect_ratio_policy": policy}, sizes=[10, 20], axes=[2, 3])
    _check(data)


def test_opset_11_empty_roi_and_axes_subset():
    _check(_model(11, {"mode": "linear"}, scales=[1.0, 1.0, 2.0, 0.5]))
    _check(_model(18, {"mode": "cubic"}, scales=[1.5, 0.7], axes=[3, 2]))


@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("nearest", "half_pixel"), ("linear", "half_pixel"),
                                      ("linear", "pytorch_half_pixel"), ("cubic", "asymmetric"), ("cubic", "half_pixel")])
def test_symbolic_sizes_one_graph(mode, ctm):
    """Symbolic batch / channel with static spatial sizes, and symbolic spatial sizes upscaled by whole factors."""
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    both = ("numpy", "onnxruntime")
    _check(_model(13, attrs, scales=[1.0, 1.0, 3.0, 1.5], dims=["n", "c", 7, 9]), [(1, 2, 7, 9), (3, 1, 7, 9)], backends=both)
    g = _check(_model(13, attrs, scales=[1.0, 1.0, 2.0, 3.0], dims=["n", 3, "h", "w"]), [(1, 3, 5, 4), (2, 3, 8, 1)],
               backends=both)
    assert not g.outputs[0].shape.is_static


def test_symbolic_spatial_sizes_from_shape():
    """torch's ``interpolate(size=...)`` exports sizes computed from Shape: whole-number multiples stay symbolic."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Mul", ["s", "k"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")]
    k = helper.make_tensor("k", TensorProto.INT64, [4], [1, 1, 2, 2])
    graph = helper.make_graph(nodes, "r", [x], [y], initializer=[k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    _check(model.SerializeToString(), [(1, 3, 4, 5), (2, 3, 6, 3)])


def test_integer_input_linear_rounds():
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 1.5, 0.6])
    graph = helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")], "r", [x], [y],
                              initializer=[scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data = model.SerializeToString()
    xv = np.arange(20, dtype=np.uint8).reshape(1, 1, 4, 5) * 11
    (want,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": xv})
    g, params = rlx.onnx.import_model(data)
    (got,) = rlx.run(g, {"x": xv}, params)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1




def _to_size_of_model(attrs, opset=18):
    """Resize x [n, 3, h, w] to the spatial size of ``like`` [n, 1, H, W] (sizes from Shape: U-Net / FPN skips)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    like = helper.make_tensor_value_info("like", TensorProto.FLOAT, ["n", 1, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["sx"], end=2), helper.make_node("Shape", ["like"], ["sl"], start=2),
             helper.make_node("Concat", ["sx", "sl"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)]
    graph = helper.make_graph(nodes, "r", [x, like], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


RUNTIME = [{"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": ctm}
           for nm in NEAREST for ctm in ("asymmetric", "half_pixel")] + \
          [{"mode": m, "coordinate_transformation_mode": ctm} for m in ("linear", "cubic")
           for ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")] + \
          [{"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}]


@pytest.mark.parametrize("attrs", RUNTIME, ids=lambda a: "-".join(str(v) for v in a.values()))
def test_symbolic_sizes_from_another_tensor(attrs):
    """One graph, coordinates computed at run time: up, down and mixed factors at three size pairs."""
    data = _to_size_of_model(attrs)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    g, params = rlx.onnx.import_model(data)
    exes = {b: rlx.compile(g, backend=b) for b in ("numpy", "onnxruntime")}
    for xs, ls in [((1, 3, 4, 6), (1, 1, 8, 3)), ((2, 3, 7, 5), (2, 1, 3, 11)), ((1, 3, 5, 5), (1, 1, 5, 5))]:
        feed = {"x": np.random.default_rng(xs[2]).standard_normal(xs).astype(np.float32), "like": np.zeros(ls, np.float32)}
        (want,) = sess.run(None, feed)
        (got,) = rlx.run(g, feed, params)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=str((xs, ls)))
        for backend, exe in exes.items():
            np.testing.assert_allclose(np.asarray(exe.run(feed, params)[0]), got, rtol=1e-5, atol=1e-5, err_msg=backend)


def test_fractional_scales_of_symbolic_sizes():
    _check(_model(13, {"mode": "linear"}, scales=[1.0, 1.0, 1.5, 0.5], dims=["n", 3, "h", "w"]), [(1, 3, 4, 6), (2, 3, 7, 5)])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_9_on_symbolic_sizes(mode):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 1.5])
    graph = helper.make_graph([helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)], "u", [x], [y], initializer=[scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 8
    _check(model.SerializeToString(), [(1, 2, 3, 4), (2, 2, 5, 3)], backends=("numpy",))
