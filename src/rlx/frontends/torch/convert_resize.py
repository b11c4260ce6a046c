"""torch converters for ``upsample_*`` / ``interpolate``: nearest (and nearest-exact), (bi/tri)linear, bicubic
and the antialiased bilinear / bicubic, at any static size, with torch's source-index rules.

Each resized axis is separable: the output position ``i`` reads ``k`` input positions ``idx[i, :]`` with
weights ``w[i, :]`` (computed here in float32 as torch does, from the sizes alone); one gather per tap
and a weighted sum along that axis. The exact 2x nearest case keeps the single ``resize_nearest_2x`` op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.frontends.torch.context import _conv, _Ctx
from rlx.ir.graph import Value

_F32 = np.float32


def _scale(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> float:
    """torch's area_pixel_compute_scale: the source step per output position."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor is not None and factor > 0 else n_in / n_out


def _nearest_taps(n_in: int, n_out: int, factor: float | None, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    scale = _F32(_scale(n_in, n_out, False, factor))
    i = np.arange(n_out, dtype=_F32)
    src = np.floor((i + _F32(0.5)) * scale if exact else i * scale).astype(np.int64)
    return np.minimum(src, n_in - 1)[:, None], np.ones((n_out, 1))


def _linear_taps(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> tuple[np.ndarray, np.ndarray]:
    scale = _F32(_scale(n_in, n_out, align_corners, factor))
    i = np.arange(n_out, dtype=_F32)
    src = scale * i if align_corners else np.maximum(scale * (i + _F32(0.5)) - _F32(0.5), _F32(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    lam = np.clip(src - i0.astype(_F32), 0, 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _cubic_taps(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> tuple[np.ndarray, np.ndarray]:
    scale = _F32(_scale(n_in, n_out, align_corners, factor))
    i = np.arange(n_out, dtype=_F32)
    src = scale * i if align_corners else scale * (i + _F32(0.5)) - _F32(0.5)
    i0 = np.floor(src).astype(np.int64)
    t = (src - np.floor(src)).astype(_F32)
    idx = np.clip(i0[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
    w = _cubic(np.stack([t + 1, t, 1 - t, 2 - t], 1).astype(_F32), -0.75)
    return idx, w


def _aa_taps(n_in: int, n_out: int, align_corners: bool, factor: float | None, cubic: bool) -> tuple[np.ndarray, np.ndarray]:
    """Antialiased taps: the filter (linear, or cubic with a = -0.5) stretched by the downscale factor."""
    scale = _scale(n_in, n_out, align_corners, factor)
    support = (2.0 if cubic else 1.0) * (scale if scale >= 1.0 else 1.0)
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    width = math.ceil(support) * 2 + 1
    idx = np.zeros((n_out, width), np.int64)
    w = np.zeros((n_out, width))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        size = min(int(center + support + 0.5), n_in) - lo
        x = (np.arange(size) + lo - center + 0.5) * inv
        f = _cubic(x, -0.5) if cubic else np.clip(1 - np.abs(x), 0, None)
        total = f.sum()
        idx[i, :size] = np.arange(lo, lo + size)
        w[i, :size] = f / total if total != 0 else f
    return idx, w


def _resample(cx: _Ctx, x: Value, axis: int, idx: np.ndarray, w: np.ndarray) -> Value:
    """sum_k w[:, k] * x[..., idx[:, k], ...] along ``axis`` (one gather per tap)."""
    g, dtype = cx.g, x.dtype
    rank = len(x.shape)
    shape = [1] * rank
    shape[axis] = idx.shape[0]
    out = None
    for k in range(idx.shape[1]):
        if not np.any(w[:, k]):
            continue
        tap = g.gather(x, g.constant(idx[:, k].astype(np.int64)), axis=axis)
        if not np.all(w[:, k] == 1):
            tap = tap * g.constant(w[:, k].astype(dtype.numpy).reshape(shape))
        out = tap if out is None else out + tap
    return out if out is not None else tap * cx.scalar(0, dtype)


def _factors(scales: Any, n: int) -> list[float | None]:
    if scales is None:
        return [None] * n
    if isinstance(scales, (int, float)):
        return [float(scales)] * n
    return [None if s is None else float(s) for s in scales]


def _upsample(cx: _Ctx, x: Value, mode: str, align_corners: bool, scales: Sequence[float | None]) -> Value:
    out_shape = cx.static_out_shape()
    spatial = len(out_shape) - 2
    for d in range(spatial):
        axis = 2 + d
        n_in = cx.static(x.shape[axis], "resized axis size")
        n_out = out_shape[axis]
        if n_in == n_out and mode.startswith("nearest") and scales[d] in (None, 1.0):
            continue
        if mode == "nearest":
            taps = _nearest_taps(n_in, n_out, scales[d], exact=False)
        elif mode == "nearest-exact":
            taps = _nearest_taps(n_in, n_out, scales[d], exact=True)
        elif mode == "linear":
            taps = _linear_taps(n_in, n_out, align_corners, scales[d])
        elif mode == "cubic":
            taps = _cubic_taps(n_in, n_out, align_corners, scales[d])
        else:
            taps = _aa_taps(n_in, n_out, align_corners, scales[d], cubic=mode == "cubic-aa")
        x = _resample(cx, x, axis, *taps)
    return x


def _nearest(exact: bool):
    mode = "nearest-exact" if exact else "nearest"

    def vec(cx, node, x, output_size=None, scale_factors=None):
        n, c, *rest = x.shape
        if not exact and len(rest) == 2 and all(isinstance(d, int) for d in rest) and \
                cx.out_shape() == (n, c, 2 * rest[0], 2 * rest[1]) and scale_factors in (None, [2.0, 2.0], (2.0, 2.0)):
            return cx.g.resize_nearest_2x(x)
        return _upsample(cx, x, mode, False, _factors(scale_factors, len(rest)))

    def default(cx, node, x, output_size, *scales):
        return vec(cx, node, x, output_size, list(scales) if scales else None)

    return vec, default


for _dims in ("1d", "2d", "3d"):
    for _exact, _prefix in ((False, "upsample_nearest"), (True, "_upsample_nearest_exact")):
        _vec, _default = _nearest(_exact)
        _conv(f"aten.{_prefix}{_dims}.vec")(_vec)
        _conv(f"aten.{_prefix}{_dims}.default")(_default)


def _interp(mode: str):
    def vec(cx, node, x, output_size, align_corners, scale_factors=None):
        return _upsample(cx, x, mode, bool(align_corners), _factors(scale_factors, len(x.shape) - 2))

    def default(cx, node, x, output_size, align_corners, *scales):
        return _upsample(cx, x, mode, bool(align_corners), _factors(list(scales) or None, len(x.shape) - 2))

    return vec, default


for _name, _mode in (("upsample_linear1d", "linear"), ("upsample_bilinear2d", "linear"), ("upsample_trilinear3d", "linear"),
                     ("upsample_bicubic2d", "cubic"), ("_upsample_bilinear2d_aa", "linear-aa"),
                     ("_upsample_bicubic2d_aa", "cubic-aa")):
    _vec, _default = _interp(_mode)
    _conv(f"aten.{_name}.vec")(_vec)
    _conv(f"aten.{_name}.default")(_default)
