"""cdist / pdist (every p, both of cdist's Euclidean forms), bilinear (aten._trilinear) and torch's chunked
linear_cross_entropy custom ops, imported from torch; torch eager is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from frontends.torch.helpers import Fn, _x, check  # noqa: E402

TOL = {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
def test_cdist_every_p_with_broadcast_batches(p):
    x1, x2 = _x(2, 1, 4, 3), _x(3, 5, 3, seed=1)
    x1[..., 0, :] = x2[0, 0]  # a zero distance
    check(Fn(lambda a, b: torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")), x1, x2, **TOL)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "use_mm_for_euclid_dist_if_necessary"])
def test_cdist_matrix_product_form(mode):
    x1, x2 = _x(30, 4), _x(7, 4, seed=1)  # > 25 rows: the default mode uses the product form too
    x2[0] = x1[3]  # torch's product form is not exactly 0 here; rlx computes it the same way
    check(Fn(lambda a, b: torch.cdist(a, b, compute_mode=mode)), x1, x2, **TOL)


@pytest.mark.parametrize("p", [1.0, 2.0, float("inf"), 0.0])
def test_pdist(p):
    check(Fn(lambda x: F.pdist(x, p)), _x(6, 3), **TOL)


def test_bilinear_batched_and_integer():
    check(Fn(lambda a, b, w, bias: F.bilinear(a, b, w, bias)), _x(2, 3, 4), _x(2, 3, 5, seed=1), _x(6, 4, 5, seed=2),
          _x(6, seed=3), **TOL)
    gen = torch.Generator().manual_seed(0)
    a, b, w = (torch.randint(-4, 4, shape, generator=gen) for shape in ((3, 2), (3, 3), (4, 2, 3)))
    check(Fn(lambda a, b, w: F.bilinear(a, b, w)), a, b, w)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_chunked_linear_cross_entropy(reduction):
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    options = LinearCrossEntropyOptions(batch_chunk_size=2)
    target = torch.tensor([0, 3, 1, 2, 3])
    check(Fn(lambda x, w, b, t, cw: F.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction=reduction,
                                                           ignore_index=1, options=options)),
          _x(5, 3), _x(4, 3, seed=1), _x(4, seed=2), target, _x(4, seed=3).abs(), **TOL)
