"""ONNX Resize / Upsample converters (static geometry: per-axis interpolation matrices)."""

from __future__ import annotations

import math

import numpy as np

from rlx.backends.onnx.common import (
    OnnxUnsupported,
)
from rlx.backends.onnx.import_context import converter
from rlx.backends.onnx.import_helpers import _axis, _cast, _ints, _static_shape
from rlx.ir.dtype import DType


def _resize_weights(mode: str, ratio: float, scale: float, attrs) -> np.ndarray:
    """Interpolation weights of the neighbours of a source coordinate with fractional part ``ratio`` in (0, 1]."""
    a = attrs.get("cubic_coeff_a", -0.75)
    if mode == "nearest":
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        pick_hi = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False, "ceil": True}[nm]
        return np.array([0.0, 1.0]) if pick_hi else np.array([1.0, 0.0])
    antialias = attrs.get("antialias", 0) and scale < 1.0
    if mode == "linear":
        if not antialias:
            return np.array([1.0 - ratio, ratio])
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        w = np.clip(1 - np.abs(args), 0, 1)
        return w / w.sum()

    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x**3 - (a + 3) * x**2 + 1
        if x < 2:
            return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
        return 0.0

    if not antialias:
        return np.array([kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)])
    start = int(np.floor(-2 / scale) + 1)
    w = np.array([kernel(scale * (i - ratio)) for i in range(start, 2 - start)])
    return w / w.sum()



def _resize_axis(n_in: int, n_out: int, scale: float, attrs, roi: tuple[float, float] | None):
    """The 1-D resize along one axis as a matrix [n_out, n_in] plus the rows to extrapolate."""
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    width = scale * n_in
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
    m = np.zeros((n_out, n_in))
    for row in range(n_out):
        if extrap[row]:
            continue
        xo = float(x[row])
        base = math.floor(xo)
        ratio = 1.0 if xo == base else xo - base
        w = _resize_weights(mode, ratio, scale, attrs)
        k = len(w)
        pad = -(-k // 2)
        cands = sorted(range(base - k - 1, base + k + 2), key=lambda i: (abs(xo - i), i))
        cands = [i for i in cands if -pad <= i < n_in + pad][:k]
        idx = np.array(sorted(cands))
        if attrs.get("exclude_outside", 0):
            w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
            w = w / w.sum()
        np.add.at(m[row], np.clip(idx, 0, n_in - 1), w)
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
        m, extrap = _resize_axis(x.shape[a], out[a], scale_of[a], attrs, r)
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
        m, _ = _resize_axis(x.shape[a], n_out, float(s), fake, None)
        if fake["mode"] == "nearest":
            x = cx.g.gather(x, cx.const(np.argmax(m, axis=1).astype(np.int64)), axis=a)
        else:
            y = cx.g.dot_general(x, cx.const(m.astype(x.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
            perm = list(range(len(x.shape) - 1))
            perm.insert(a, len(x.shape) - 1)
            x = cx.g.transpose(y, perm=perm)
    return x
