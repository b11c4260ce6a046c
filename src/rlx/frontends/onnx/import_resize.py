"""ONNX Resize / Upsample converters (static geometry: per-axis interpolation matrices)."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.onnx.common import OnnxError, OnnxUnsupported
from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _ints, _static_shape
from rlx.ir.dtype import DType


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel (coefficient ``a``), elementwise."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _resize_weights(mode: str, ratio: np.ndarray, scale: float, attrs) -> np.ndarray:
    """Interpolation weights [rows, k] of the k neighbours of source coordinates with fractional part ``ratio`` in (0, 1]."""
    a = attrs.get("cubic_coeff_a", -0.75)
    r = ratio[:, None]
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        pick_hi = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": np.zeros_like(ratio, bool),
                   "ceil": np.ones_like(ratio, bool)}[nm] | (ratio == 1.0)
        return np.stack([~pick_hi, pick_hi], axis=1).astype(np.float64)
    antialias = attrs.get("antialias", 0) and scale < 1.0
    if not antialias:
        if mode == "linear":
            return np.concatenate([1.0 - r, r], axis=1)
        return _cubic(np.concatenate([r + 1, r, 1 - r, 2 - r], axis=1), a)
    start = int(np.floor((-1 if mode == "linear" else -2) / scale) + 1)
    args = (np.arange(start, 2 - start)[None, :] - r) * scale
    w = np.clip(1 - np.abs(args), 0, 1) if mode == "linear" else _cubic(args, a)
    return w / w.sum(axis=1, keepdims=True)


def _resize_axis(cx, n_in: int, n_out: int, scale: float, attrs, roi: tuple[float, float] | None):
    """The 1-D resize along one axis as a matrix [n_out, n_in] plus the rows to extrapolate (vectorised:
    the work is the matrix's, bounded by ``LoadLimits.max_constant_elements`` before it is built)."""
    cx.check_elements(n_out * n_in, "the Resize matrix")
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    width = scale * n_in
    if mode not in ("nearest", "linear") and attrs.get("antialias", 0) and scale < 1.0:
        cx.check_elements(n_out * (2 * int(2 / scale) + 4), "the Resize antialias window")
    elif mode == "linear" and attrs.get("antialias", 0) and scale < 1.0:
        cx.check_elements(n_out * (2 * int(1 / scale) + 4), "the Resize antialias window")
    y = np.arange(n_out, dtype=np.float64)
    extrap = np.zeros(n_out, bool)
    if ctm == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(n_out, (hi - lo) * (n_in - 1) / 2) if width == 1 else y * (hi - lo) * (n_in - 1) / (width - 1)
        x = x + lo * (n_in - 1)
        extrap = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = (n_in / 2) * (1 - n_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise OnnxUnsupported(f"Resize coordinate_transformation_mode {ctm!r}")
    if not np.isfinite(x).all():
        raise OnnxError(f"{cx.where}: Resize source coordinates are not finite (scale {scale})")
    m = np.zeros((n_out, n_in))
    rows = np.flatnonzero(~extrap)
    xo = x[rows]
    base = np.floor(xo)
    ratio = np.where(xo == base, 1.0, xo - base)  # an integer coordinate counts as ratio 1 above base - 1
    base = (base - (xo == base)).astype(np.int64)
    w = _resize_weights(mode, ratio, scale, attrs)
    k = w.shape[1]
    pad = -(-k // 2)
    # the k source indices nearest x (ties to the lower one), kept within [-pad, n_in + pad)
    first = np.clip(base - (k // 2 - 1), -pad, n_in + pad - k)
    idx = first[:, None] + np.arange(k)[None, :]
    if attrs.get("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        w = w / w.sum(axis=1, keepdims=True)
    np.add.at(m, (np.broadcast_to(rows[:, None], idx.shape), np.clip(idx, 0, n_in - 1)), w)
    return m, extrap


@converter("Resize")
def _resize(cx, node, ins, attrs):
    if cx.opset < 11:
        raise OnnxUnsupported("Resize-10 (asymmetric, no coordinate modes) is not supported")
    x = ins[0]
    shape = _static_shape(x)
    rank = len(shape)
    axes = [_axis(a, rank) for a in attrs.get("axes", range(rank))]
    roi = np.asarray(cx.static(node.input[1], "roi")).reshape(-1).astype(np.float64) if len(node.input) > 1 and node.input[1] else None
    scales = None
    if len(node.input) > 2 and node.input[2]:
        arr = np.asarray(cx.static(node.input[2], "scales")).reshape(-1)
        scales = arr.astype(np.float64) if arr.size else None
    sizes = _ints(cx, node, 3, None, attrs) if len(node.input) > 3 and node.input[3] else None
    if sizes is not None:
        scale_of = {a: sizes[i] / shape[a] for i, a in enumerate(axes)}
        out = {a: sizes[i] for i, a in enumerate(axes)}
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = min(scale_of.values()) if policy == "not_larger" else max(scale_of.values())
            scale_of = dict.fromkeys(axes, s)
            out = {a: int(s * shape[a] + 0.5) for a in axes}
    elif scales is not None:
        scale_of = {a: float(scales[i]) for i, a in enumerate(axes)}
        out = {a: int(scale_of[a] * shape[a]) for a in axes}
    else:
        raise OnnxUnsupported("Resize needs scales or sizes")
    mode = attrs.get("mode", "nearest")
    if mode == "nearest" and attrs.get("antialias", 0):
        raise OnnxUnsupported("Resize nearest with antialias")
    extrapolation = attrs.get("extrapolation_value", 0.0)
    for a in axes:
        r = None if roi is None else (float(roi[axes.index(a)]), float(roi[axes.index(a) + len(axes)])) if len(roi) == 2 * len(axes) \
            else (float(roi[a]), float(roi[a + rank]))
        if math.isclose(scale_of[a], 1.0) and out[a] == x.shape[a] and (r is None or (math.isclose(r[0], 0) and math.isclose(r[1], 1))):
            continue
        m, extrap = _resize_axis(cx, x.shape[a], out[a], scale_of[a], attrs, r)
        if mode == "nearest":
            idx = np.argmax(m, axis=1).astype(np.int64)
            y = cx.g.gather(x, cx.const(idx), axis=a)
        else:
            xf = _cast(cx, x, DType.F32) if not x.dtype.is_float else x
            y = cx.g.dot_general(xf, cx.const(m.astype(xf.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
            perm = list(range(rank - 1))
            perm.insert(a, rank - 1)
            y = cx.g.transpose(y, perm=perm) if perm != list(range(rank)) else y
            if not x.dtype.is_float:
                y = _cast(cx, cx.g.unary_math(y, kind="round_even"), x.dtype)
        if extrap.any():
            mshape = [1] * rank
            mshape[a] = out[a]
            y = cx.g.where(cx.const(extrap.reshape(mshape)), cx.scalar(extrapolation, y), y)
        x = y
    return x


@converter("Upsample")
def _upsample(cx, node, ins, attrs):
    scales = attrs.get("scales") if cx.opset < 9 else np.asarray(cx.static(node.input[1], "scales")).reshape(-1)
    mode = attrs.get("mode", "nearest")
    fake = {"mode": "linear" if mode in ("linear", "bilinear") else "nearest", "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor"}
    x = ins[0]
    for a, s in enumerate(scales):
        n_out = int(x.shape[a] * float(s))
        if n_out == x.shape[a]:
            continue
        m, _ = _resize_axis(cx, x.shape[a], n_out, float(s), fake, None)
        if fake["mode"] == "nearest":
            x = cx.g.gather(x, cx.const(np.argmax(m, axis=1).astype(np.int64)), axis=a)
        else:
            y = cx.g.dot_general(x, cx.const(m.astype(x.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
            perm = list(range(len(x.shape) - 1))
            perm.insert(a, len(x.shape) - 1)
            x = cx.g.transpose(y, perm=perm)
    return x
