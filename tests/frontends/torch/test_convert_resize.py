"""torch's interpolate / upsample in every mode and size the reader converts: torch eager is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from frontends.torch.helpers import Fn, check  # noqa: E402

X4 = torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(0))

CASES = [
    ("nearest", None, {"size": (9, 4)}),
    ("nearest", None, {"scale_factor": 2}),  # the one-op 2x path
    ("nearest", None, {"scale_factor": 1.7}),
    ("nearest-exact", None, {"size": (3, 11)}),
    ("bilinear", False, {"size": (8, 13)}),
    ("bilinear", True, {"size": (8, 4)}),
    ("bilinear", False, {"scale_factor": 0.6}),
    ("bicubic", False, {"size": (11, 6)}),
    ("bicubic", True, {"size": (4, 9)}),
    ("area", None, {"size": (2, 3)}),
]


def test_interpolate_2d_every_mode():
    check(Fn(lambda t: tuple(F.interpolate(t, mode=mode, align_corners=align, **kw) for mode, align, kw in CASES)), X4,
          rtol=1e-5, atol=2e-6)


def test_antialiased_resize():
    check(Fn(lambda t: tuple(F.interpolate(t, size=size, mode=mode, antialias=True) for mode in ("bilinear", "bicubic")
                             for size in ((2, 3), (9, 12)))), X4, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode, shape, size", [("linear", (2, 3, 7), (12,)), ("nearest", (2, 3, 7), (4,)),
                                               ("trilinear", (1, 2, 3, 4, 5), (5, 2, 7)), ("nearest", (1, 2, 3, 4, 5), (2, 6, 3))])
def test_interpolate_1d_3d(mode, shape, size):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    align = False if "linear" in mode else None
    check(Fn(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align)), x, rtol=1e-5, atol=2e-6)
