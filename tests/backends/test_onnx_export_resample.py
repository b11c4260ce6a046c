"""Constant-index gathers leave the ONNX exporter as Slice / Concat (strided slices, flips, rolls, the identity)
and the interpolation taps of ``F.interpolate`` as one Resize (rlx.backends.onnx.export_resample): the exported
model has no Gather left there, and onnxruntime and OpenVINO on it give torch's values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import rlx.onnx  # noqa: E402
from rlx.backends.onnx.export_resample import linear_matrix  # noqa: E402

F = torch.nn.functional


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _export(fn, x: np.ndarray):
    """(ONNX model of ``fn`` imported through rlx, torch's output)."""
    mod = _Fn(fn).eval()
    xt = torch.from_numpy(x)
    g, params = rlx.torch.import_module(mod, (xt,))
    with torch.no_grad():
        want = mod(xt).numpy()
    return g, params, rlx.onnx.export(g, params), want


def _ort(proto, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _ops(proto) -> Counter:
    return Counter(n.op_type for n in proto.graph.node)


def _x(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("size", "align"), [((8, 8), False), ((7, 5), False), ((3, 2), False), ((9, 6), True),
                                             ((4, 10), False), ((1, 1), False)])
def test_bilinear_interpolate_is_one_resize(size, align):
    x = _x((2, 3, 4, 5))
    _, _, proto, want = _export(lambda t: F.interpolate(t, size=size, mode="bilinear", align_corners=align), x)
    ops = _ops(proto)
    assert ops["Resize"] == 1 and ops["Gather"] == 0 and ops["Mul"] == 0, ops
    np.testing.assert_allclose(_ort(proto, x), want, rtol=1e-5, atol=1e-5)


def test_one_axis_resize_and_a_following_add():
    # only H changes (W's taps are the identity); the sum after it is a plain Add
    x = _x((1, 2, 3, 6))
    _, _, proto, want = _export(lambda t: F.interpolate(t, size=(5, 6), mode="bilinear") + 1.0, x)
    ops = _ops(proto)
    assert ops["Resize"] == 1 and ops["Gather"] == 0, ops
    np.testing.assert_allclose(_ort(proto, x), want, rtol=1e-5, atol=1e-5)


def test_linear_matrix_matches_onnxruntime_resize():
    # the matrix the exporter compares against is ONNX's: onnxruntime's Resize of the identity gives it back
    from onnx import TensorProto, helper

    for n_in, n_out in ((4, 8), (5, 3), (6, 6), (3, 7), (2, 1)):
        for mode in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
            node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="linear", coordinate_transformation_mode=mode)
            g = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, n_in, n_in])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  initializer=[helper.make_tensor("s", TensorProto.INT64, [4], [1, 1, n_out, n_in])])
            proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
            got = _ort(proto, np.eye(n_in, dtype=np.float32)[None, None])[0, 0]  # [n_out, n_in]: row r = weights of output r
            np.testing.assert_allclose(got, linear_matrix(n_in, n_out, mode), atol=1e-6, err_msg=f"{n_in}->{n_out} {mode}")


@pytest.mark.parametrize(("name", "fn", "slices", "concats"), [
    ("stride2", lambda t: t[:, :, 1::2, ::2], 2, 0),
    ("flip", lambda t: torch.flip(t, dims=[3]), 1, 0),
    ("roll", lambda t: torch.roll(t, shifts=(2, -1), dims=(2, 3)), 4, 2),
])
def test_constant_index_gathers_become_slices(name, fn, slices, concats):
    from rlx.backends.ort_backend import export_for_session

    x = _x((2, 3, 8, 6))
    g, params, _, want = _export(fn, x)
    proto = export_for_session(g, params)  # the engine path: a roll's index arithmetic folded to a constant first
    ops = _ops(proto)
    if not any(n.op == "gather" for n in g.nodes):
        pytest.skip(f"{name}: the importer wrote no gather")
    assert ops["Gather"] == 0 and ops["Slice"] >= slices and ops["Concat"] >= concats, ops
    np.testing.assert_array_equal(_ort(proto, x), want)


def test_other_gathers_and_sums_stay_gathers():
    # a permutation that is not a rotation, and taps whose weights are not any Resize's: values still exact
    perm = np.array([3, 0, 2, 1, 5, 4], np.int64)
    g = rlx.Graph("g")
    x = g.input("x", (1, 2, 6, 6))
    a = g.gather(x, g.constant(perm), axis=3)
    w = g.constant(np.full((1, 1, 6, 1), 0.3, np.float32))
    b = g.gather(x, g.constant(perm), axis=2) * w + g.gather(x, g.constant(perm[::-1].copy()), axis=2) * w
    g.set_outputs([a, b])
    proto = rlx.onnx.export(g, {})
    assert _ops(proto)["Gather"] == 3 and _ops(proto)["Resize"] == 0
    xv = _x((1, 2, 6, 6))
    opts = ort.SessionOptions()
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": xv})
    np.testing.assert_array_equal(got[0], xv[..., perm])
    np.testing.assert_allclose(got[1], 0.3 * xv[:, :, perm] + 0.3 * xv[:, :, perm[::-1]], rtol=1e-6)


def test_engines_run_the_resize_like_torch():
    # the engine backends' export path (BatchNorm folding, weight folding) keeps the Resize; both engines agree with torch
    x = _x((1, 4, 6, 6))
    conv = torch.nn.Conv2d(4, 4, 3, padding=1).eval()
    g, params, _, want = _export(lambda t: F.interpolate(conv(t), scale_factor=2, mode="bilinear"), x)
    backends = ["onnxruntime"]
    try:
        import openvino  # noqa: F401
        backends.append("openvino")
    except ImportError:
        pass
    for backend in backends:
        got = rlx.compile(g, backend=backend, params=params, threads=1).run({"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=backend)


def test_float64_keeps_its_gathers():
    # onnxruntime's CPU Resize has no float64 kernel: the taps stay gathers there, and run
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4))
    _, _, proto, want = _export(lambda t: F.interpolate(t, size=(6, 8), mode="bilinear"), x)
    assert _ops(proto)["Resize"] == 0 and _ops(proto)["Gather"] > 0
    np.testing.assert_allclose(_ort(proto, x), want, rtol=1e-12, atol=1e-12)
