"""Math the MIR composes (log1p, atan2, float floor division, sort, histc, any / all ...): torch eager is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from frontends.torch.helpers import Fn, _x, check, run_both  # noqa: E402

EDGES = torch.tensor([0.0, -0.0, 1e-8, -1e-8, 1e-3, -0.5, -1.0, -2.0, 5.0, 80.0, float("inf"), float("-inf"), float("nan")])


def test_log1p_expm1_accurate_near_zero_and_at_the_ends():
    check(Fn(lambda t: (torch.log1p(t), torch.expm1(t))), EDGES, rtol=2e-6, atol=0)


def test_atan2_every_quadrant_axes_and_infinities():
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 1e-30, 3.0, float("inf"), float("-inf"), float("nan")])
    y, x = torch.meshgrid(vals, vals, indexing="ij")
    check(Fn(torch.atan2), y.contiguous(), x.contiguous(), rtol=2e-6, atol=1e-7)


def test_hypot_no_overflow():
    a = torch.tensor([3.0, 1e30, 0.0, float("inf"), 1e-30, -4.0])
    b = torch.tensor([4.0, 1e30, 0.0, float("nan"), 1e-30, 0.0])
    check(Fn(torch.hypot), a, b, rtol=2e-6)


def test_float_rounding_division_matches_torch():
    def fn(a, b):
        return (torch.floor_divide(a, b), torch.remainder(a, b), torch.fmod(a, b), torch.div(a, b, rounding_mode="floor"),
                torch.div(a, b, rounding_mode="trunc"))

    a = torch.cat([_x(40), torch.tensor([5.0, -5.0, 0.0, 7.5, -7.5, 1.0])])
    b = torch.cat([_x(40, seed=1), torch.tensor([0.0, 2.5, -3.0, -2.5, 2.5, float("inf")])])
    check(Fn(fn), a, b, rtol=1e-6, atol=1e-6)


def test_round_half_to_even_with_decimals():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 1.2345, 15.0, 25.0, -35.0, 0.125])
    check(Fn(lambda t: tuple(torch.round(t, decimals=d) for d in (0, 2, -1))), x)


def test_any_all():
    x = (_x(3, 4, 5) > 2.0).float() * _x(3, 4, 5, seed=2)
    check(Fn(lambda t: tuple(fn(t) if dims is None else fn(t, dim=dims, keepdim=True)
                             for fn in (torch.any, torch.all) for dims in (None, 1, (0, 2)))), x)


def test_reductions_of_a_0d_tensor():
    check(Fn(lambda t: (t.sum(0), t.mean(-1), t.amax(0), torch.any(t, 0))), torch.tensor(2.5))


def test_sort_and_argsort_with_nan_and_stable_ties():
    x = torch.tensor([[3.0, float("nan"), 1.0, 3.0, -2.0, 1.0], [0.0, 0.0, 5.0, -1.0, 2.0, 0.0]])
    check(Fn(lambda t: tuple(r for d in (False, True) for r in (*torch.sort(t, dim=1, descending=d, stable=True),
                                                                torch.argsort(t, dim=0, descending=d, stable=True),
                                                                *torch.sort(t > 1, stable=True)))), x)


def test_histc_counts():
    check(Fn(lambda t: (torch.histc(t, bins=7), torch.histc(t, bins=5, min=1.0, max=1.0))), _x(200))
    x = torch.cat([_x(200), torch.tensor([2.0, -2.0, float("nan")])])
    check(Fn(lambda t: torch.histc(t, bins=7, min=-2.0, max=2.0)), x)


def test_isnan_family():
    fns = (torch.isnan, torch.isinf, torch.isfinite, torch.isposinf, torch.isneginf)
    check(Fn(lambda t, i: (*(fn(t) for fn in fns), torch.isfinite(i), torch.isnan(i))), EDGES, torch.arange(5))


def test_empty_is_refilled_like_torch_programs_do():
    def fn(t):
        buf = torch.empty(t.shape[0], 3)
        buf.fill_(2.0)
        return buf * t[:, None] + torch.empty_like(t).zero_()[:, None]

    check(Fn(fn), _x(4))


def test_empty_gives_zeros():
    ref, compiled = run_both(Fn(lambda t: torch.empty_like(t) * 0 + t), _x(3))
    assert ref[0].shape == (3,) and compiled[0].shape == (3,)


def test_log_and_exp_bases():
    x = torch.tensor([0.0, 1e-3, 0.5, 1.0, 2.0, 1000.0, -1.0, float("inf"), -20.0])
    check(Fn(lambda t: (torch.log2(t), torch.log10(t), torch.exp2(t))), x, rtol=2e-6)


def test_copysign_and_ldexp():
    a = torch.tensor([1.0, -2.0, 3.0, 0.0, -0.0, float("inf")])
    b = torch.tensor([-1.0, 2.0, -0.0, -5.0, 0.0, -1.0])
    check(Fn(torch.copysign), a, b)
    check(Fn(torch.ldexp), a, torch.tensor([0, 3, -2, 1, 0, 1]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.bool])
def test_bitwise_on_integers(dtype):
    a = torch.tensor([0, 1, 5, 12, 7, 3]).to(dtype)
    b = torch.tensor([1, 3, 1, 10, 0, 2]).to(dtype)
    ops = [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor, torch.logical_xor]
    if dtype is not torch.bool:
        ops += [torch.bitwise_left_shift, torch.bitwise_right_shift]
    check(Fn(lambda x, y: (*(fn(x, y) for fn in ops), torch.bitwise_not(x))), a, b)


def test_max_min_with_indices_first_extreme():
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [float("nan"), 0.0, 5.0, 5.0], [-1.0, -1.0, -4.0, -4.0]])
    check(Fn(lambda t: torch.max(t, dim=1)), x)
    check(Fn(lambda t: torch.min(t, dim=0, keepdim=True)), x)


def test_diagonal():
    cases = [(0, (0, 1)), (1, (0, 1)), (-2, (2, 0)), (5, (1, 2))]
    check(Fn(lambda t: tuple(torch.diagonal(t, offset, *dims) * 2 for offset, dims in cases)), _x(3, 4, 5))


def test_addmv_addbmm():
    check(Fn(lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2.0)), _x(3), _x(3, 4, seed=1), _x(4, seed=2), rtol=1e-5)
    check(Fn(lambda s, a, b: torch.addbmm(s, a, b)), _x(3, 5), _x(2, 3, 4, seed=1), _x(2, 4, 5, seed=2), rtol=1e-5, atol=1e-5)


def test_safe_softmax_zero_on_fully_masked_rows():
    x = torch.tensor([[1.0, float("-inf"), 2.0], [float("-inf")] * 3])
    check(Fn(lambda t: torch.ops.aten._safe_softmax(t, -1)), x)
    check(Fn(lambda t: torch.softmax(t, 0)), torch.tensor(3.0))


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_global_and_along_a_dim(name):
    fn = getattr(torch, name)
    x = torch.tensor([[3.0, 1.0, 4.0, 1.5, 5.0], [2.0, float("nan"), 7.0, 1.0, float("nan")], [0.5, -1.0, 2.5, 9.0, 6.0]])
    clean = torch.tensor([[3.0, 1.0, 4.0, 1.5, 5.0], [0.5, -1.0, 2.5, 9.0, 6.0]])
    check(Fn(lambda t, c, i: (fn(t), fn(c), *fn(t, dim=1), *fn(t, dim=0, keepdim=True), *fn(i, dim=1))),
          x, clean, torch.tensor([[4, 1, 3, 2], [9, 8, 7, 6]]))


def test_outer_float_power_and_sign_of_bool():
    check(Fn(torch.outer), _x(3), _x(4, seed=1))
    check(Fn(torch.float_power), _x(5).abs(), _x(5, seed=1))
    check(Fn(torch.sign), torch.tensor([True, False]))


def test_cummax_cummin_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan")], [0.0, -1.0, 0.0, 4.0, 4.0, -2.0, 1.0]])
    i = torch.tensor([[2, 2, 1, 5], [0, 3, 3, -1]])
    check(Fn(lambda t, k: (*torch.cummax(t, 1), *torch.cummin(t, 1), *torch.cummax(t, 0), *torch.cummin(k, 1))), x, i)


def test_kthvalue():
    x = torch.tensor([[3.0, 1.0, float("nan"), 2.0, 0.5], [9.0, -1.0, 4.0, 7.0, 5.0]])
    check(Fn(lambda t: (*torch.kthvalue(t, 2, 1), *torch.kthvalue(t, 5, 1, keepdim=True), *torch.kthvalue(t, 1, 0))), x)


def test_searchsorted_bucketize_isin():
    seq = torch.tensor([[-1.0, 0.0, 0.0, 2.0, 4.0], [1.0, 3.0, 5.0, 7.0, 9.0]])
    v = torch.tensor([[0.0, float("nan"), 2.5], [9.0, 0.0, 5.0]])
    check(Fn(lambda s, x: (torch.searchsorted(s, x), torch.searchsorted(s, x, right=True), torch.bucketize(x, s[1]),
                           torch.isin(x, s[1]))), seq, v)


def test_signbit_angle_isreal():
    check(Fn(lambda t, i: (torch.signbit(t), torch.angle(t), torch.isreal(t), torch.signbit(i), torch.angle(i))),
          torch.tensor([1.0, -2.0, 0.0, -0.0, float("-inf"), float("nan")]), torch.tensor([3, -1, 0]))


def test_lgamma_series_reflection_and_poles():
    x = torch.tensor([0.5, 1.0, 2.0, 3.7, 30.0, 1e-4, 0.3, -0.5, -2.5, -7.25, 0.0, -3.0, float("inf"), float("-inf")])
    check(Fn(torch.lgamma), torch.cat([x, _x(20)]), rtol=2e-6, atol=1e-6)


def test_digamma_positive_negative_and_poles():
    x = torch.tensor([0.5, 1.0, 2.0, 1e-3, 7.3, 1e5, -0.5, -2.25, -7.75, 0.0, -0.0, -3.0, float("inf")])
    check(Fn(lambda t, i: (torch.digamma(t), torch.polygamma(0, t), torch.digamma(i))), torch.cat([x, _x(20)]),
          torch.arange(-2, 4), rtol=2e-6, atol=1e-6)


def test_erfc():
    check(Fn(torch.erfc), torch.tensor([-3.0, -0.5, 0.0, 0.3, 1.0, 2.5, 4.0, float("inf"), float("nan")]), rtol=1e-5, atol=1e-7)


def test_polygamma_orders():
    x = torch.cat([torch.tensor([0.1, 0.5, 1.0, 3.3, 25.0, -0.5, -2.7, -8.4]), _x(12)])
    check(Fn(lambda t: tuple(torch.polygamma(n, t) for n in (1, 2, 3))), x, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_fft_family(norm):
    def fn(x):
        spec = torch.fft.rfft(x, norm=norm)
        return (spec, torch.fft.irfft(spec, n=7, norm=norm), torch.fft.fft2(x.to(torch.complex64), norm=norm),
                torch.fft.ifft(x, norm=norm), torch.fft.irfftn(torch.fft.rfftn(x, norm=norm), s=x.shape, norm=norm))

    check(Fn(fn), _x(3, 7), rtol=1e-5, atol=1e-5)
