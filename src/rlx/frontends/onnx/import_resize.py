"""ONNX Resize / Upsample converters (static geometry: per-axis interpolation matrices)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _axis, _cast, _reshape
from rlx.frontends.onnx.import_shape import pad_value
from rlx.frontends.onnx.import_symbolic import iota, materialize
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import OnnxError, OnnxUnsupported
from rlx.ir.symbolic import floordiv


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
        lo, hi = np.float32(roi[0]), np.float32(roi[1])  # in f32, as the roi tensor (onnxruntime and the spec agree)
        yf, n1 = y.astype(np.float32), np.float32(n_in - 1)
        x = np.full(n_out, (hi - lo) * n1 / 2) if width == 1 else yf * (hi - lo) * n1 / np.float32(width - 1)
        x = (x + lo * n1).astype(np.float64)
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
    halves = np.round(x * 2) / 2  # a coordinate that is a whole / half number up to rounding is one (nearest's ties)
    x = np.where(np.abs(x - halves) <= 1e-9 * np.maximum(1.0, np.abs(x)), halves, x)
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


def _roi_of(roi: np.ndarray | None, axes: list[int], rank: int, a: int) -> tuple[float, float] | None:
    """The (start, end) roi of axis ``a``: roi lists every axis, or only ``axes`` (opset 18); empty is none."""
    if roi is None or roi.size == 0:
        return None
    if len(roi) == 2 * len(axes):
        return float(roi[axes.index(a)]), float(roi[axes.index(a) + len(axes)])
    if len(roi) == 2 * rank:
        return float(roi[a]), float(roi[a + rank])
    raise OnnxError(f"Resize roi has {len(roi)} values, expected {2 * len(axes)} or {2 * rank}")


@converter("Resize")
def _resize(cx, node, ins, attrs):
    x = ins[0]
    shape = list(x.shape)
    rank = len(shape)
    if cx.opset < 11:  # Resize-10: X and scales; asymmetric coordinates (as Upsample)
        attrs = {"mode": attrs.get("mode", "nearest"), "coordinate_transformation_mode": "asymmetric",
                 "nearest_mode": "floor"}
        names = [node.input[0], "", node.input[1], ""]
    else:
        names = list(node.input) + [""] * (4 - len(node.input))
    axes = [_axis(a, rank) for a in attrs.get("axes", range(rank))]
    roi = np.asarray(cx.static(names[1], "roi")).reshape(-1).astype(np.float64) if names[1] else None
    scales = None
    if names[2]:
        arr = np.asarray(cx.static(names[2], "scales")).reshape(-1)
        scales = arr.astype(np.float64) if arr.size else None
    sizes = cx.sizes(names[3], "sizes") if names[3] else None
    if (sizes is not None and len(sizes) != len(axes)) or (scales is not None and len(scales) != len(axes)):
        raise OnnxError(f"Resize needs one scale / size per resized axis ({len(axes)})")
    if sizes is not None:
        scale_of = {a: _ratio(sizes[i], shape[a]) for i, a in enumerate(axes)}
        out = {a: sizes[i] for i, a in enumerate(axes)}
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            if any(not isinstance(shape[a], int) or not isinstance(out[a], int) for a in axes):
                raise NeedsShapes(f"Resize keep_aspect_ratio_policy={policy!r} on symbolic sizes")
            s = min(scale_of.values()) if policy == "not_larger" else max(scale_of.values())
            scale_of = dict.fromkeys(axes, s)
            out = {a: int(s * shape[a] + 0.5) for a in axes}
    elif scales is not None:
        scale_of = {a: float(scales[i]) for i, a in enumerate(axes)}
        out = {a: _scaled(scale_of[a], shape[a]) for a in axes}
    else:
        raise OnnxUnsupported("Resize needs scales or sizes")
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise OnnxUnsupported(f"Resize mode {mode!r}")
    extrapolation = attrs.get("extrapolation_value", 0.0)
    for a in axes:
        r = _roi_of(roi, axes, rank, a)
        if out[a] == x.shape[a] and (scale_of[a] is None or math.isclose(scale_of[a], 1.0)) and \
                (r is None or attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize"
                 or (math.isclose(r[0], 0) and math.isclose(r[1], 1))):
            continue
        if not isinstance(x.shape[a], int) or not isinstance(out[a], int):
            x = resize_symbolic_axis(cx, x, a, out[a], scale_of[a], attrs)
            continue
        axis_attrs = attrs
        if cx.opset < 11 and scale_of[a] < 1:  # Resize-10 nearest rounds down-sampled coordinates up (onnxruntime)
            axis_attrs = {**attrs, "nearest_mode": "ceil"}
        m, extrap = _resize_axis(cx, x.shape[a], out[a], scale_of[a], axis_attrs, r)
        if mode == "nearest":
            idx = np.argmax(m, axis=1).astype(np.int64)
            y = cx.g.gather(x, cx.const(idx), axis=a)
        else:
            y = _contract(cx, x, a, m)
        if extrap.any():
            mshape = [1] * rank
            mshape[a] = out[a]
            y = cx.g.where(cx.const(extrap.reshape(mshape)), cx.scalar(extrapolation, y), y)
        x = y
    return x


def _ratio(size, n) -> float | None:
    """sizes / input size as a float scale; a symbolic pair gives its whole-number ratio, else None."""
    if isinstance(size, int) and isinstance(n, int):
        return size / n if n else math.inf
    q = floordiv(size, n)
    return float(q) if isinstance(q, int) and q * n == size else None


def _scaled(scale: float, n):
    """floor(scale * n): an int for a static n, a dim for a whole-number scale of a symbolic one."""
    if isinstance(n, int):
        return int(scale * n)
    if scale == int(scale):
        return int(scale) * n
    ratio = Fraction(scale).limit_denominator(256)
    if float(ratio) == float(np.float32(scale)) or float(ratio) == scale:  # floor(p/q * n) as a dim
        return floordiv(ratio.numerator * n, ratio.denominator)
    raise NeedsShapes(f"Resize by {scale} of a symbolic size {n}")


def _contract(cx, x: Value, a: int, m: np.ndarray) -> Value:
    """x with axis ``a`` mapped through the matrix m [n_out, n_in] (integer inputs rounded back, half to even)."""
    rank = len(x.shape)
    xf = _cast(cx, x, DType.F32) if not x.dtype.is_float else x
    y = cx.g.dot_general(xf, cx.const(m.astype(xf.dtype.numpy)), lhs_contracting=[a], rhs_contracting=[1])
    perm = list(range(rank - 1))
    perm.insert(a, rank - 1)
    y = cx.g.transpose(y, perm=perm) if perm != list(range(rank)) else y
    if not x.dtype.is_float:
        y = _cast(cx, cx.g.unary_math(y, kind="round_even"), x.dtype)
    return y


def resize_symbolic_axis(cx, x: Value, a: int, n_out, scale: float | None, attrs) -> Value:
    """Upscaling a symbolic axis by a whole factor k: output ``k*q + j`` reads source ``q + c_j`` for a phase
    offset ``c_j`` that does not depend on q (half_pixel, pytorch_half_pixel, half_pixel_symmetric and
    asymmetric coordinates), so each phase is a fixed weighted sum of shifted copies of x (edge-clamped),
    and the k phases interleave. Other geometries need the sizes (``NeedsShapes``)."""
    n = x.shape[a]
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    mode = attrs.get("mode", "nearest")
    k = None if scale is None or scale != int(scale) else int(scale)
    if k is None or k < 1 or n_out != k * n or ctm not in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric",
                                                          "asymmetric") or (attrs.get("exclude_outside", 0) and mode == "cubic"):
        return resize_runtime_axis(cx, x, a, n_out, scale, attrs)
    mode = attrs.get("mode", "nearest")
    phase = np.arange(k, dtype=np.float64)
    c = phase / k if ctm == "asymmetric" else (phase + 0.5) / k - 0.5
    base = np.floor(c)
    ratio = np.where(c == base, 1.0, c - base)
    base = (base - (c == base)).astype(np.int64)
    w = _resize_weights(mode, ratio, float(k), attrs)
    taps = w.shape[1]
    first = base - (taps // 2 - 1)
    lo, hi = int(max(-first.min(), 0)), int(max((first + taps - 1).max(), 0))
    src = x if x.dtype.is_float or mode == "nearest" else _cast(cx, x, DType.F32)
    padded = pad_value(cx, src, {a: (lo, hi)}, mode="edge") if lo or hi else src
    shifted: dict[int, Value] = {}

    def view(o: int) -> Value:
        if o not in shifted:
            shifted[o] = padded if (lo, hi) == (0, 0) else cx.g.narrow(padded, axis=a, start=lo + o, length=n)
        return shifted[o]

    phases = []
    for j in range(k):
        acc = None
        for t in range(taps):
            if w[j, t] == 0:
                continue
            term = view(int(first[j] + t))
            if mode != "nearest":
                term = term * cx.scalar(float(w[j, t]), term) if w[j, t] != 1 else term
            acc = term if acc is None else acc + term
        phases.append(acc)
    if mode != "nearest" and not x.dtype.is_float:
        phases = [_cast(cx, cx.g.unary_math(p, kind="round_even"), x.dtype) for p in phases]
    if k == 1:
        return phases[0]
    inter = list(x.shape)
    inter.insert(a + 1, 1)
    stacked = cx.g.concat([_reshape(cx, p, inter) for p in phases], axis=a + 1)
    out = list(x.shape)
    out[a] = n_out
    return _reshape(cx, stacked, out)


@converter("Upsample")
def _upsample(cx, node, ins, attrs):
    scales = attrs.get("scales") if cx.opset < 9 else np.asarray(cx.static(node.input[1], "scales")).reshape(-1)
    mode = attrs.get("mode", "nearest")
    fake = {"mode": "linear" if mode in ("linear", "bilinear") else "nearest", "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor"}
    x = ins[0]
    for a, s in enumerate(scales):
        n_out = _scaled(float(s), x.shape[a])
        if n_out == x.shape[a]:
            continue
        if not isinstance(x.shape[a], int):  # a symbolic axis: as Resize-10 (asymmetric coordinates)
            x = resize_symbolic_axis(cx, x, a, n_out, float(s), fake)
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


_ROUND = {"round_prefer_floor": ("ceil", -0.5), "round_prefer_ceil": ("floor", 0.5), "floor": ("floor", 0.0),
          "ceil": ("ceil", 0.0)}


def resize_runtime_axis(cx, x: Value, a: int, n_out, scale: float | None, attrs) -> Value:
    """Resizing axis ``a`` where its sizes are symbolic and the geometry is not a whole-number upscale
    (``interpolate(size=skip.shape[-2:])`` of U-Nets / FPNs): the source coordinate of every output
    position is computed at run time from the sizes (the same formulas as :func:`_resize_axis`), then
    the neighbours are gathered (clamped to the axis, as the spec's edge padding) and weighted.
    Antialiased downscaling and tf_crop_and_resize need static sizes (``NeedsShapes``)."""
    n = x.shape[a]
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize" or (attrs.get("antialias", 0) and mode != "nearest" and (scale is None or scale < 1)):
        raise NeedsShapes(f"Resize of symbolic axis {a} ({n} -> {n_out}) with {ctm}"
                          f"{' and antialias' if attrs.get('antialias', 0) else ''}")
    f32 = DType.F32

    def size(d) -> Value:
        return _cast(cx, _reshape(cx, materialize(cx, [d]), []), f32)

    def num(v: float) -> Value:
        return cx.const(np.array(v, np.float32))

    n_f, m_f = size(n), size(n_out)
    s = num(scale) if scale is not None else m_f / n_f
    y = _cast(cx, iota(cx, n_out), f32)
    half = num(0.5)
    if ctm == "asymmetric":
        src = y / s
    elif ctm == "align_corners":
        width = s * n_f
        src = cx.g.where(cx.g.eq(width, num(1.0)), num(0.0), y * (n_f - num(1.0)) / (width - num(1.0)))
    else:
        src = (y + half) / s - half
        if ctm == "pytorch_half_pixel":
            src = cx.g.where(cx.g.gt(s * n_f, num(1.0)), src, num(-0.5))
        elif ctm == "half_pixel_symmetric":
            src = src + n_f * half * (num(1.0) - m_f / (s * n_f))
        elif ctm != "half_pixel":
            raise OnnxUnsupported(f"Resize coordinate_transformation_mode {ctm!r}")
    last = n_f - num(1.0)
    shape = [1] * len(x.shape)
    shape[a] = n_out

    table = x if mode == "nearest" or x.dtype.is_float else _cast(cx, x, f32)

    def take(pos: Value) -> Value:  # the table at float positions (whole numbers), clamped to the axis
        idx = _cast(cx, cx.g.minimum(cx.g.maximum(pos, num(0.0)), last), DType.I64)
        return cx.g.gather(table, idx, axis=a)

    def along(w: Value) -> Value:
        return _reshape(cx, w, shape)

    if mode == "nearest":
        kind, shift = _ROUND[attrs.get("nearest_mode", "round_prefer_floor")]
        return take(cx.g.unary_math(src + num(shift), kind=kind) if shift else cx.g.unary_math(src, kind=kind))
    if mode == "linear":
        pos = cx.g.minimum(cx.g.maximum(src, num(0.0)), last)
        lo = cx.g.unary_math(pos, kind="floor")
        r = along(pos - lo)
        y_ = take(lo) * (num(1.0) - r) + take(lo + num(1.0)) * r
    else:
        coeff = float(attrs.get("cubic_coeff_a", -0.75))
        lo = cx.g.unary_math(src, kind="floor")
        r = src - lo
        terms, weights = [], []
        for t, dist in zip((-1.0, 0.0, 1.0, 2.0), (r + num(1.0), r, num(1.0) - r, num(2.0) - r)):
            d = cx.g.abs(dist)
            near = ((num(coeff + 2) * d - num(coeff + 3)) * d * d) + num(1.0)
            far = ((num(coeff) * d - num(5 * coeff)) * d + num(8 * coeff)) * d - num(4 * coeff)
            w = cx.g.where(cx.g.le(d, num(1.0)), near, far)
            pos = lo + num(t)
            if attrs.get("exclude_outside", 0):
                w = cx.g.where(cx.g.ge(pos, num(0.0)), cx.g.where(cx.g.le(pos, last), w, num(0.0)), num(0.0))
            weights.append(w)
            terms.append(pos)
        total = weights[0] + weights[1] + weights[2] + weights[3] if attrs.get("exclude_outside", 0) else None
        y_ = None
        for pos, w in zip(terms, weights):
            part = take(pos) * along(w / total if total is not None else w)
            y_ = part if y_ is None else y_ + part
    if not x.dtype.is_float:
        y_ = _cast(cx, cx.g.unary_math(y_, kind="round_even"), x.dtype)
    return y_
