"""Convolution and pooling forms torch accepts beyond batched float NCHW: unbatched inputs, ceil_mode max
pooling, integer average pooling; torch eager is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from frontends.torch.helpers import Fn, _x, check  # noqa: E402


def test_unbatched_convolutions():
    check(Fn(lambda x, w: F.conv1d(x, w, padding=1)), _x(3, 9), _x(4, 3, 3, seed=1), rtol=1e-5, atol=1e-5)
    check(Fn(lambda x, w: F.conv2d(x, w, stride=2)), _x(3, 7, 6), _x(4, 3, 3, 3, seed=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (3, 7, 9)])
def test_max_pool_ceil_mode(shape):
    check(Fn(lambda x: tuple(F.max_pool2d(x, k, s, p, ceil_mode=True) for k, s, p in ((3, 2, 0), (2, 2, 1), (3, 3, 1)))),
          _x(*shape))


def test_unbatched_adaptive_and_average_pooling():
    check(Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 2))), _x(3, 7, 5), rtol=1e-5)
    check(Fn(lambda x: F.adaptive_max_pool2d(x, (2, 4))), _x(3, 7, 8))
    check(Fn(lambda x: F.avg_pool2d(x, 2, 1)), _x(3, 5, 6), rtol=1e-5)


def test_integer_average_pooling_truncates():
    x = torch.randint(-50, 50, (1, 2, 5, 6), generator=torch.Generator().manual_seed(0))
    check(Fn(lambda t: F.avg_pool2d(t, 2, 2, padding=1)), x)


@pytest.mark.parametrize("as_bool", [True, False])
def test_attention_fully_masked_query_rows_give_zero(as_bool):
    m = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    mask = m if as_bool else torch.where(m, 0.0, float("-inf"))
    q = _x(2, 2, 3, 4)
    check(Fn(lambda t, k: F.scaled_dot_product_attention(t, k, k, attn_mask=mask)), q, _x(2, 2, 3, 4, seed=1),
          rtol=1e-5, atol=1e-6)


def test_max_pool_indices():
    check(Fn(lambda x, y: (*F.max_pool2d(x, 3, 2, 1, return_indices=True), *F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
                           *F.max_pool2d(y, 2, 2, ceil_mode=True, return_indices=True))), _x(2, 3, 8, 9), _x(3, 7, 5))


def test_avg_pool_ceil_mode():
    geometry = ((3, 2, 0), (2, 2, 1), (3, 2, 1))
    check(Fn(lambda x: tuple(F.avg_pool2d(x, k, s, p, ceil_mode=True, count_include_pad=inc) for k, s, p in geometry
                             for inc in (True, False))), _x(2, 3, 8, 9), rtol=1e-5, atol=1e-6)
    check(Fn(lambda x: tuple(F.avg_pool2d(x, k, s, p, ceil_mode=True, divisor_override=5) for k, s, p in geometry)),
          _x(3, 7, 6), rtol=1e-5, atol=1e-6)


def test_tensor_unfold_windows():
    check(Fn(lambda x: (x.unfold(1, 3, 2), x.unfold(-1, 2, 1), x.unfold(0, 2, 3))), _x(5, 7, 4))


def test_as_strided_views_of_contiguous_input():
    check(Fn(lambda x: (torch.as_strided(x, (3, 2), (1, 4)), torch.as_strided(x, (2, 2, 2), (6, 1, 3), 1))), _x(4, 3))


def test_conv_transpose1d_integer_conv_and_column_stack():
    check(Fn(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1)), _x(2, 3, 6), _x(3, 4, 3, seed=1),
          rtol=1e-5, atol=1e-5)
    xi = torch.randint(-5, 5, (1, 2, 5, 5), generator=torch.Generator().manual_seed(0))
    check(Fn(lambda x, w: F.conv2d(x, w, padding=1)), xi, torch.randint(-3, 3, (3, 2, 3, 3), generator=torch.Generator().manual_seed(1)))
    check(Fn(lambda a, b: torch.column_stack((a, b, a))), _x(4), _x(4, 2, seed=1))
