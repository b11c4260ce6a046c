"""mode / nonzero_static / histogram / hash_tensor / item / resize_ (rlx.ops.selection and the torch reader):
torch eager is the oracle, ties, fills, edges and widths included; the compositions also run on the JAX and
torch backends and export to ONNX (onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn, _x, check  # noqa: E402


def test_mode_tie_rule_smallest_value_last_index():
    ties = torch.tensor([[3.0, 1.0, 1.0, 3.0, 2.0], [2.0, 2.0, 0.0, 0.0, 0.0], [5.0, 4.0, 5.0, 4.0, 7.0]])
    ints = torch.tensor([[2, 2, 1, 1, 3, 3, 3, 0, 0, 0], [-4, 9, 9, -4, 1, 1, 2, 2, 2, -4]])

    def fn(t, i, b):
        return (*torch.mode(t), *torch.mode(t, 0, keepdim=True), *torch.mode(i), *torch.mode(b, 1), *torch.mode(t[0, 0]))

    check(Fn(fn), ties, ints, ints > 1)


def test_nonzero_static_fewer_and_more_than_the_count():
    x = torch.tensor([[[0.0, 1.5], [0.0, 0.0], [-2.0, 3.0]], [[0.0, 0.0], [4.0, 0.0], [0.0, 5.0]]])

    def fn(t):
        return (torch.nonzero_static(t, size=3), torch.nonzero_static(t, size=9, fill_value=-7),
                torch.nonzero_static(t[0, 0, 1], size=2), torch.nonzero_static(t > 1, size=0))

    check(Fn(fn), x)


def test_histogram_bins_range_weight_density_and_edges_tensor():
    x = torch.cat([_x(50), torch.tensor([-1.0, 1.0, 0.25, float("nan")])])
    w = _x(54, seed=1).abs()
    edges = torch.tensor([-4.0, -1.0, 0.0, 0.25, 2.0, 6.0])

    def fn(t, wt, e):
        return (*torch.histogram(t[:50], 7), *torch.histogram(t, 4, range=(-1.0, 1.0), weight=wt),
                *torch.histogram(t[:50], 5, density=True), *torch.histogram(t, e), *torch.histogram(t[50:52], 3))

    check(Fn(fn), x, w, edges, rtol=1e-5, atol=1e-5)


def test_histogramdd_counts_ranges_weights_density_and_edge_tensors():
    pts = torch.cat([_x(60, 3), torch.tensor([[0.0, 0.0, 0.5], [9.0, 0.0, 0.0]])])
    w = _x(62, seed=1).abs()
    e0, e1 = torch.tensor([-5.0, 0.0, 1.0, 6.0]), torch.tensor([-3.0, 3.0])

    def fn(p, wt, a, b):
        hist, edges = torch.histogramdd(p, [3, 2, 4])
        return (hist, *edges, torch.histogramdd(p, [2, 2, 2], range=[-2, 2, -1, 1, 0, 3], weight=wt,
                                                                    density=True).hist,
                torch.histogramdd(p[:, :2], [a, b]).hist)

    check(Fn(fn), pts, w, e0, e1, rtol=1e-5, atol=1e-5)


def test_hash_tensor_xor_of_bit_patterns_over_dims():
    def fn(f, i, b):
        return (torch.hash_tensor(f), torch.hash_tensor(f, dim=1), torch.hash_tensor(f, dim=(0, 2), keepdim=True),
                torch.hash_tensor(i, dim=0), torch.hash_tensor(b))

    check(Fn(fn), _x(3, 5, 2), torch.arange(-6, 6).reshape(3, 4), _x(7) > 0)


def test_item_and_resize():
    def fn(x, i, b, y):
        return torch.tensor(x.item()), torch.tensor(i.item()), torch.tensor(b.item()), y.clone().resize_(3, 4)

    check(Fn(fn), torch.tensor(-2.5), torch.tensor(7), torch.tensor(True), _x(2, 6))


class Composed(torch.nn.Module):
    """One of each composition (scatter / index / segment / bag reductions, mask writes, put, diagonal scatter,
    mode, nonzero_static, histogram) for the backends below."""

    def forward(self, x, idx, src, mask, lengths, bag_idx, offsets):
        values, indices = torch.mode(torch.round(x), 1)
        return (x.scatter_reduce(0, idx, src, "mean", include_self=False), x.scatter_reduce(0, idx, src, "amax"),
                x.masked_scatter(mask, src), values, indices, torch.nonzero_static(mask, size=5),
                x.index_reduce(0, idx[:, 0], src, "prod", include_self=False),
                torch.segment_reduce(src.reshape(9), "max", lengths=lengths, initial=0.5),
                torch.nn.functional.embedding_bag(bag_idx, x, offsets, mode="mean"),
                x.put(idx[0], src[0], accumulate=True), torch.diagonal_scatter(x, src[1, :2], -2),
                *torch.histogram(src, 4))


def _composed():
    args = (_x(4, 3), torch.tensor([[0, 1, 0], [3, 1, 0], [0, 0, 2]]), _x(3, 3, seed=1), _x(4, 3, seed=2) > 0,
            torch.tensor([2, 0, 4, 3]), torch.tensor([3, 1, 1, 0, 2]), torch.tensor([0, 2, 2]))
    with torch.no_grad():
        want = [t.numpy() for t in Composed()(*args)]
    g, params = rlx.torch.import_module(Composed(), args)
    return g, params, dict(zip(g.inputs(), [a.numpy() for a in args])), want


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_compositions_run_on_other_backends(backend):
    pytest.importorskip(backend)
    g, params, feed, want = _composed()
    got = rlx.compile(g, backend=backend).run(feed, params)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-5)


def test_compositions_export_to_onnx():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import rlx.onnx

    g, params, feed, want = _composed()
    proto = rlx.onnx.export(g, params)
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, {n: feed[n] for n in names})
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
