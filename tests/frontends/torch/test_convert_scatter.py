"""scatter_reduce / index_reduce / segment_reduce / embedding_bag / put / masked writes / diagonal and strided
scatters (rlx.ops.scatter_reduce, rlx.ops.index_writes): torch eager is the oracle, duplicates, empty groups,
NaN and out-of-range indices included."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn, _x, check  # noqa: E402

REDUCES = ("sum", "prod", "mean", "amax", "amin")
DUP = torch.tensor([[0, 1, 2], [0, 1, 0], [3, 1, 0], [0, 0, 0], [3, 3, 3], [0, 1, 2]])  # row 2 of x never named in col 2


def _all_scatter_reduces(x, index, src):
    return tuple(x.scatter_reduce(0, index, src, r, include_self=s) for r in REDUCES for s in (True, False))


def test_scatter_reduce_every_reduction_include_self_both_ways_with_duplicates():
    check(Fn(lambda x, s: _all_scatter_reduces(x, DUP, s)), _x(5, 3), _x(6, 3, seed=1), rtol=1e-5, atol=1e-5)


def test_scatter_reduce_integers_floor_mean_and_bools():
    xi = torch.tensor([[-7, 3, 5], [2, -9, 4], [1, 1, 1], [0, -1, 8], [6, 6, -6]])
    si = torch.tensor([[-3, 2, 7], [5, -4, -1], [2, 2, 2], [-8, 3, 1], [4, -5, 9], [1, 1, -2]])
    check(Fn(lambda x, s: _all_scatter_reduces(x, DUP, s)), xi, si)
    xb, sb = xi > 0, si > 0
    check(Fn(lambda x, s: tuple(x.scatter_reduce(0, DUP, s, r, include_self=i) for r in ("sum", "prod", "amax", "amin")
                                for i in (True, False))), xb, sb)


def test_scatter_reduce_nan_propagates_and_other_axis():
    src = _x(4, 6, seed=2)
    src[1, 2] = float("nan")
    idx = torch.tensor([[0, 0, 1, 1, 0, 2]] * 4)
    check(Fn(lambda x, s: tuple(x.scatter_reduce(1, idx, s, r, include_self=False) for r in ("amax", "amin", "mean"))),
          _x(4, 3), src)


def test_scatter_reduce_out_of_range_index_raises_at_run_time():
    g, params = rlx.torch.import_module(Fn(lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False)),
                                        (_x(4, 2), torch.tensor([[0, 1], [3, 2]]), _x(2, 2)))
    feed = dict(zip(g.inputs(), [np.zeros((4, 2), np.float32), np.array([[0, 1], [4, 2]]), np.ones((2, 2), np.float32)]))
    with pytest.raises(rlx.RlxError, match="out of range"):
        rlx.run(g, feed, params)


def test_index_reduce_every_reduction_on_a_middle_axis_and_0d():
    index = torch.tensor([0, 2, 0, 3, 0])  # row 1 untouched: keeps x (empty group)

    def fn(x, src, x0, s0):
        out = tuple(x.index_reduce(1, index, src, r, include_self=s) for r in ("prod", "mean", "amax", "amin")
                    for s in (True, False))
        return (*out, x0.index_reduce(0, torch.tensor([0]), s0, "amax", include_self=False))

    check(Fn(fn), _x(2, 4, 3), _x(2, 5, 3, seed=1), torch.tensor(2.0), torch.tensor(-1.5), rtol=1e-5, atol=1e-5)
    xi, si = torch.arange(12).reshape(4, 3) - 5, torch.arange(15).reshape(5, 3) * 3 - 20
    check(Fn(lambda x, s: tuple(x.index_reduce(0, index[:5], s, "mean", include_self=b) for b in (True, False))), xi, si)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "max", "min"])
def test_segment_reduce_lengths_and_offsets_with_empty_segments(reduce):
    data = _x(7, 2)
    lengths = torch.tensor([2, 0, 4, 0, 1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])

    def fn(d, n, o):
        rows = torch.stack([n, n.flip(0)])  # axis 1: one set of segments per row
        return (torch.segment_reduce(d, reduce, lengths=n), torch.segment_reduce(d, reduce, offsets=o, initial=1.5),
                torch.segment_reduce(torch.stack([d, -d]), reduce, lengths=rows, axis=1, initial=-2.0))

    check(Fn(fn), data, lengths, offsets, rtol=1e-5, atol=1e-5)


def test_embedding_bag_modes_weights_padding_and_empty_bags():
    import torch.nn.functional as F

    weight, idx = _x(10, 4), torch.tensor([5, 1, 6, 5, 6, 9, 0, 2])
    offsets, psw = torch.tensor([0, 3, 3, 7]), _x(8, seed=3)  # bag 1 empty

    def fn(w, i, o, p):
        out = tuple(F.embedding_bag(i, w, o, mode=m) for m in ("sum", "mean", "max"))
        out += (F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),)
        out += (F.embedding_bag(i, w, o, mode="mean", padding_idx=5), F.embedding_bag(i, w, o, mode="max", padding_idx=6),
                F.embedding_bag(i, w, o, mode="sum", padding_idx=-1))  # -1: the last row (9)
        return (*out, F.embedding_bag(i, w, o, mode="sum", include_last_offset=True))

    check(Fn(fn), weight, idx, offsets, psw, rtol=1e-5, atol=1e-5)


def test_put_accumulate_both_ways_negative_indices_and_out_of_range():
    index = torch.tensor([[6, -1], [2, 6]])  # flat 6 twice: accumulate adds both

    def fn(x, s):
        return x.put(index, s, accumulate=True), x.put(index[:, :1], s[:, :1])

    check(Fn(fn), _x(3, 3), _x(2, 2, seed=1))
    g, params = rlx.torch.import_module(Fn(lambda x, i, s: x.put(i, s)), (_x(2, 2), torch.tensor([0, 3]), _x(2)))
    feed = dict(zip(g.inputs(), [np.zeros((2, 2), np.float32), np.array([0, 4]), np.ones(2, np.float32)]))
    with pytest.raises(rlx.RlxError, match="out of range"):
        rlx.run(g, feed, params)


def test_masked_scatter_broadcast_mask_and_too_short_source():
    mask = torch.tensor([True, False, True, True, False])

    def fn(x, m, s, m2):
        return x.masked_scatter(m, s), x.masked_scatter(m2, s), x[0].masked_scatter(m2, s)  # the last: x broadcast

    check(Fn(fn), _x(4, 5), mask, _x(30, seed=1), _x(4, 5, seed=2) > 0)
    g, params = rlx.torch.import_module(Fn(lambda x, m, s: x.masked_scatter(m, s)), (_x(4), mask[:4], _x(3)))
    feed = dict(zip(g.inputs(), [np.zeros(4, np.float32), np.ones(4, bool), np.ones(3, np.float32)]))
    with pytest.raises(rlx.RlxError, match="out of range"):  # torch: "Number of elements of source < number of ones"
        rlx.run(g, feed, params)


def test_index_put_bool_mask_row_values_broadcast_and_accumulate():
    mask = torch.tensor([True, True, False, True, False])

    def fn(x, rows, row, m, y, m2):
        a, b, c, d, e = x.clone(), x.clone(), x.clone(), y.clone(), y.clone()
        a[m] = rows
        b[m] = row
        c.index_put_((m,), rows, accumulate=True)
        d[:, m2] = rows[:2, :3].reshape(2, 3, 1)  # a mask after a full slice: values [2, K=3, 1]
        e[:, m2] = 0.5
        return a, b, c, d, e

    m2 = torch.tensor([[True, False], [False, True], [True, False]])
    check(Fn(fn), _x(5, 4), _x(3, 4, seed=1), _x(4, seed=2), mask, _x(2, 3, 2, 4, seed=3), m2)


def test_diagonal_and_as_strided_scatter():
    def fn(x, d0, d1, d2, c, s):
        return (torch.diagonal_scatter(x, d0), torch.diagonal_scatter(x, d1, 2), torch.diagonal_scatter(x, d2, -1),
                torch.diagonal_scatter(c, s, 1, 0, 2), torch.as_strided_scatter(x, c[0, :2, :3], (2, 3), (5, 2), 1))

    check(Fn(fn), _x(4, 5), _x(4, seed=1), _x(3, seed=2), _x(3, seed=3), _x(3, 4, 5, seed=4), _x(4, 3, seed=5))


def test_data_dependent_sizes_are_refused_with_the_reason():
    with pytest.raises(rlx.torch.TorchImportError, match="output size depends on the input's values"):
        rlx.torch.import_module(Fn(torch.nonzero), (_x(4),))


def test_embedding_renorm_scales_only_named_rows_over_the_norm():
    weight, idx = _x(6, 3), torch.tensor([[0, 2], [2, 5]])
    fn = Fn(lambda w, i: (torch.ops.aten.embedding_renorm(w, i, 2.5, 2.0), torch.ops.aten.embedding_renorm(w, i, 3.0, 1.0)))
    check(fn, weight, idx, rtol=1e-5, atol=1e-6)


def test_take_gather_0d_and_empty_index():
    def fn(x, i, x0):
        return (torch.take(x, i), torch.gather(x0, 0, torch.tensor([0, 0])),
                torch.gather(x[0], 0, torch.zeros(2, 0, dtype=torch.long)))

    check(Fn(fn), _x(3, 4), torch.tensor([[0, -1], [11, 5]]), torch.tensor(1.5))
