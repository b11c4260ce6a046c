"""logcumsumexp imported from torch: stable for prefixes far below the axis maximum, infinities and NaN as
torch gives them; torch eager is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from frontends.torch.helpers import Fn, _x, check  # noqa: E402


def test_logcumsumexp_extremes_and_axes():
    x = _x(3, 5, 4)
    x[0, :, 0] = torch.tensor([-1000.0, 0.0, 50.0, -3.0, 2.0])  # one shift for the axis would give -inf first
    x[1, :, 1] = torch.tensor([-float("inf"), -float("inf"), 1.0, float("inf"), 2.0])
    x[2, :, 2] = torch.tensor([1.0, float("nan"), 2.0, 3.0, 4.0])
    check(Fn(lambda t: (torch.logcumsumexp(t, 1), torch.logcumsumexp(t, -1))), x, rtol=1e-5, atol=1e-5)


def test_mode_smallest_most_frequent_value_at_its_last_index():
    x = torch.tensor([[1.0, 2, 2, 1, 3], [5, 4, 3, 2, 1], [float("nan")] * 5, [float("nan"), 1, 1, float("nan"), 0]])
    check(Fn(lambda t: (*torch.mode(t, 1), *torch.mode(t.t(), 0, keepdim=True))), x)
    gen = torch.Generator().manual_seed(0)
    check(Fn(lambda t: (*torch.mode(t, 0), *torch.mode(t > 0, -1))), torch.randint(-2, 3, (6, 4), generator=gen))
