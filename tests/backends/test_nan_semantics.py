"""NaN through max / min on every backend, against the framework a graph comes from.

``binary`` max / min and ``reduce`` / ``pool2d`` max / min propagate NaN (torch.maximum,
torch.amax, F.max_pool2d, ONNX Max and the ONNX reference's ReduceMax); fmax / fmin ignore it
(torch.fmax, np.fmax.reduce, upstream's f32::max). The torch importer maps maximum / minimum /
clamp / amax / max_pool2d to the propagating kinds and fmax / fmin to the ignoring ones. The
oracles are torch, NumPy and the ONNX reference evaluator; each graph runs on the reference
interpreter and the numpy, jax and torch executables.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
F = torch.nn.functional
NAN = np.nan
X = np.array([[1.0, NAN, 3.0, -2.0], [NAN, NAN, -1.0, 0.5], [4.0, 2.0, -0.0, 7.0]], np.float32)
Y = np.array([[NAN, 2.0, 0.0, -3.0], [5.0, NAN, -2.0, NAN], [1.0, 8.0, 0.0, -7.0]], np.float32)
IMG = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5) % 7 - 3
IMG[0, 0, 1, 1] = IMG[0, 1, 3, 4] = IMG[1, 2, 0, 0] = NAN
IMG[1, 0, :2, :2] = NAN  # a window of NaNs only


def _backends():
    yield "reference", lambda g, feed: rlx.run(g, feed)
    for backend in ("numpy", "jax", "torch"):
        if backend == "jax":
            pytest.importorskip("jax")
        yield backend, lambda g, feed, b=backend: rlx.compile(g, backend=b).run(feed)


def _check(g, feed, want):
    for name, run in _backends():
        got = run(g, feed)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"{name}: output {k}")


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def test_binary_max_min_propagate_and_fmax_fmin_ignore_nan():
    g = rlx.Graph("binary")
    x, y = g.input("x", X.shape), g.input("y", Y.shape)
    g.set_outputs([g.maximum(x, y), g.minimum(x, y), g.fmax(x, y), g.fmin(x, y)])
    want = [f(_t(X), _t(Y)).numpy() for f in (torch.maximum, torch.minimum, torch.fmax, torch.fmin)]
    assert np.isnan(want[0]).sum() == 5 and np.isnan(want[2]).sum() == 1  # the oracle really differs
    _check(g, {"x": X, "y": Y}, want)


@pytest.mark.parametrize("axes", [[1], [0], [0, 1]])
def test_reduce_max_min_propagate_and_fmax_fmin_ignore_nan(axes):
    g = rlx.Graph("reduce")
    x = g.input("x", X.shape)
    g.set_outputs([g.reduce(x, op=op, axes=axes, keep_dim=False) for op in ("max", "min", "fmax", "fmin")])
    want = [torch.amax(_t(X), dim=axes).numpy(), torch.amin(_t(X), dim=axes).numpy(),
            np.fmax.reduce(X, axis=tuple(axes)), np.fmin.reduce(X, axis=tuple(axes))]
    _check(g, {"x": X}, want)


def _windows(x, k, s, pad, fill):
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return win.reshape(*win.shape[:4], k * k)


@pytest.mark.parametrize("k,s,pad", [(2, 2, 0), (3, 1, 1), (2, 1, 0)])
def test_pool_max_propagates_and_fmax_ignores_nan(k, s, pad):
    g = rlx.Graph("pool")
    x = g.input("x", IMG.shape)
    geo = {"kernel_size": [k, k], "stride": [s, s], "padding": [pad, pad]}
    g.set_outputs([g.pool2d(x, kind=kind, **geo) for kind in ("max", "min", "fmax", "fmin")])
    want = [F.max_pool2d(_t(IMG), k, s, pad).numpy(), -F.max_pool2d(-_t(IMG), k, s, pad).numpy(),
            np.fmax.reduce(_windows(IMG, k, s, pad, NAN), axis=-1), np.fmin.reduce(_windows(IMG, k, s, pad, NAN), axis=-1)]
    assert np.isnan(want[0]).any() and np.isnan(want[0]).sum() > np.isnan(want[2]).sum()
    _check(g, {"x": IMG}, want)


def test_max_pool_with_indices_matches_torch_on_nan():
    g = rlx.Graph("mpi")
    x = g.input("x", IMG.shape)
    v, i = g.max_pool2d_with_indices(x, kernel_size=[3, 3], stride=[1, 1], padding=[1, 1])
    g.set_outputs([v, i])
    tv, ti = F.max_pool2d(_t(IMG), 3, 1, 1, return_indices=True)
    _check(g, {"x": IMG}, [tv.numpy(), ti.numpy()])


class _Edges(torch.nn.Module):
    def forward(self, x, y):
        return (torch.maximum(x, y), torch.minimum(x, y), torch.fmax(x, y), torch.fmin(x, y), torch.clamp(x, -1.0, 2.0),
                torch.clamp(x, min=y), torch.amax(x, dim=1), torch.amin(x, dim=0), torch.max(x, dim=1).values)


def test_torch_import_maps_each_kind_to_its_nan_rule():
    g, params = rlx.torch.import_module(_Edges(), (_t(X), _t(Y)))
    assert not params
    want = [t.numpy() for t in _Edges()(_t(X), _t(Y))]
    feed = dict(zip(g.inputs(), (X, Y)))
    for name, run in _backends():
        got = run(g, feed)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: output {k}")


class _Pools(torch.nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, 2), F.max_pool2d(x, 3, 1, 1), -F.max_pool2d(-x, 2, 1)


def test_torch_import_max_pool_propagates_nan():
    g, _ = rlx.torch.import_module(_Pools(), (_t(IMG),))
    want = [t.numpy() for t in _Pools()(_t(IMG))]
    _check(g, {next(iter(g.inputs())): IMG}, want)


def test_onnx_reduce_max_min_follow_the_onnx_reference_and_max_pool_torch():
    """ONNX ReduceMax / ReduceMin as the ONNX reference evaluator computes them, MaxPool as torch's
    max_pool2d: NaN propagates. (onnxruntime's ReduceMax and MaxPool skip a NaN unless it comes first
    in the window: order-dependent, so not an oracle; docs/security.md.)"""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from rlx.frontends.onnx import import_model

    def model(nodes, ins, outs):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in ins],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs],
                                  [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])

    reduce = model([helper.make_node("ReduceMax", ["x", "axes"], ["a"], keepdims=0),
                    helper.make_node("ReduceMin", ["x", "axes"], ["b"], keepdims=0)], [("x", X)], "ab")
    want = ReferenceEvaluator(reduce).run(None, {"x": X})
    assert np.isnan(want[0]).sum() == 2  # rows 0 and 1 hold a NaN
    pool = model([helper.make_node("MaxPool", ["img"], ["c"], kernel_shape=[2, 2], strides=[1, 1])], [("img", IMG)], "c")
    for proto, feed, expected in ((reduce, {"x": X}, want), (pool, {"img": IMG}, [F.max_pool2d(_t(IMG), 2, 1).numpy()])):
        g, params = import_model(proto)
        for name, run in _backends():
            got = run(g, {**feed, **params})
            for k, (a, b) in enumerate(zip(got, expected)):
                np.testing.assert_array_equal(a, b, err_msg=f"{name}: output {k}")
