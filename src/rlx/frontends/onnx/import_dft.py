"""ONNX DFT / STFT converters (constant twiddle matrices) and MelWeightMatrix (a constant)."""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxFormatError,
    OnnxUnsupported,
    rlx_dtype,
)


def _twiddles(k: np.ndarray, t: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2*pi*k*t/length, with the angle reduced mod 2*pi and exact values at quarter turns."""
    m = (k * t) % length
    ang = 2 * np.pi * m / length
    c, s = np.cos(ang), np.sin(ang)
    quarter = (4 * m) % length == 0
    q = (4 * m) // length
    c = np.where(quarter, np.choose(q % 4, [1.0, 0.0, -1.0, 0.0]), c)
    s = np.where(quarter, np.choose(q % 4, [0.0, 1.0, 0.0, -1.0]), s)
    return c, s


def _along(cx, v: Value, m: np.ndarray, axis: int) -> Value:
    """Apply the matrix ``m`` [out, in] along ``axis`` of ``v``."""
    rank = len(v.shape)
    y = cx.g.dot_general(v, cx.const(m.astype(v.dtype.numpy)), lhs_contracting=[axis], rhs_contracting=[1])
    perm = list(range(rank - 1))
    perm.insert(axis, rank - 1)
    return cx.g.transpose(y, perm=perm) if perm != list(range(rank)) else y


@converter("DFT")
def _dft(cx, node, ins, attrs):
    x = ins[0]
    shape = _static_shape(x)
    rank = len(shape)
    if cx.opset >= 20:
        axis = int(cx.static(node.input[2], "axis").reshape(-1)[0]) if len(node.input) > 2 and node.input[2] else -2
    else:
        axis = attrs.get("axis", 1)
    axis %= rank
    if axis == rank - 1:
        raise OnnxUnsupported("DFT along the real / imaginary axis")
    inverse, onesided = attrs.get("inverse", 0), attrs.get("onesided", 0)
    n = shape[axis]
    length = int(cx.static(node.input[1], "dft_length").reshape(-1)[0]) if len(node.input) > 1 and node.input[1] else \
        (2 * (n - 1) if inverse and onesided else n)
    xf = _cast(cx, x, DType.F64)
    re = _reshape(cx, cx.g.narrow(xf, axis=rank - 1, start=0, length=1), shape[:-1])
    im = _reshape(cx, cx.g.narrow(xf, axis=rank - 1, start=1, length=1), shape[:-1]) if shape[-1] == 2 else None
    k = length // 2 + 1
    n_in = min(n, k if inverse and onesided else length)  # samples beyond the transform length are dropped
    if n_in < n:
        re = cx.g.narrow(re, axis=axis, start=0, length=n_in)
        im = cx.g.narrow(im, axis=axis, start=0, length=n_in) if im is not None else None
    if inverse and onesided:
        kk = np.arange(n_in)[None, :]
        t = np.arange(length)[:, None]
        w = np.where((kk == 0) | ((length % 2 == 0) & (kk == length // 2)), 1.0, 2.0) / length
        cos, sin = _twiddles(kk, t, length)
        y = _along(cx, re, w * cos, axis)
        if im is not None:
            y = y - _along(cx, im, w * sin, axis)
        return _cast(cx, _reshape(cx, y, [*y.shape, 1]), x.dtype)
    rows = k if onesided and not inverse else length
    kk = np.arange(rows)[:, None]
    t = np.arange(n_in)[None, :]
    c, s = _twiddles(kk, t, length)
    if inverse:
        c, s = c / length, -s / length
    out_re = _along(cx, re, c, axis)
    out_im = -_along(cx, re, s, axis)
    if im is not None:
        out_re = out_re + _along(cx, im, s, axis)
        out_im = out_im + _along(cx, im, c, axis)
    parts = [_reshape(cx, v, [*v.shape, 1]) for v in (out_re, out_im)]
    return _cast(cx, cx.g.concat(parts, axis=rank - 1), x.dtype)


@converter("STFT")
def _stft(cx, node, ins, attrs):
    """Frames of the signal [B, L, 1|2] (a gather), times the window, each through the DFT matrices (f64)
    -> [B, frames, bins, 2]; frames = 1 + (L - frame_length) // frame_step."""
    x = ins[0]
    shape = _static_shape(x)
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise OnnxUnsupported(f"STFT signal must be [batch, length, 1 or 2], got {shape}")
    step = int(cx.static(node.input[1], "frame_step").reshape(-1)[0])
    window = ins[2] if len(node.input) > 2 and node.input[2] else None
    if len(node.input) > 3 and node.input[3]:
        length = int(cx.static(node.input[3], "frame_length").reshape(-1)[0])
    else:
        length = _static_shape(window)[0] if window is not None else shape[1]
    if step < 1 or not 1 <= length <= shape[1] or (window is not None and _static_shape(window) != [length]):
        raise OnnxFormatError(f"STFT frame_step {step} / frame_length {length} / window do not fit the signal {shape}")
    frames = 1 + (shape[1] - length) // step
    idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    y = cx.g.gather(x, cx.const(idx.astype(np.int64)), axis=1)  # [B, frames, length, 1|2]
    if window is not None:
        y = y * _reshape(cx, _cast(cx, window, x.dtype), [1, 1, length, 1])
    y = _cast(cx, y, DType.F64)
    re = _reshape(cx, cx.g.narrow(y, axis=3, start=0, length=1), [shape[0], frames, length])
    im = _reshape(cx, cx.g.narrow(y, axis=3, start=1, length=1), [shape[0], frames, length]) if shape[-1] == 2 else None
    bins = length // 2 + 1 if attrs.get("onesided", 1) else length
    c, s = _twiddles(np.arange(bins)[:, None], np.arange(length)[None, :], length)
    out_re, out_im = _along(cx, re, c, 2), -_along(cx, re, s, 2)
    if im is not None:
        out_re, out_im = out_re + _along(cx, im, s, 2), out_im + _along(cx, im, c, 2)
    parts = [_reshape(cx, v, [*v.shape, 1]) for v in (out_re, out_im)]
    return _cast(cx, cx.g.concat(parts, axis=3), x.dtype)


def _mel_matrix(num_mel: int, dft_length: int, rate: float, low_hz: float, high_hz: float) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel] triangular filters on the mel scale (mel = 2595 log10(1 + f / 700)),
    with edges at num_mel + 2 points spaced (high - low) / (num_mel + 2) apart in mel (the ONNX reference's
    spacing), rounded down to spectrogram bins."""
    to_mel = lambda f: 2595 * np.log1p(f / 700) / np.log(10)
    low, high = to_mel(low_hz), to_mel(high_hz)
    mel = np.arange(num_mel + 2) * ((high - low) / (num_mel + 2)) + low
    edges = (((dft_length + 1) * (700 * np.expm1(mel / 2595 * np.log(10)))) // rate).astype(np.int64)
    lo, mid, hi = edges[:-2][None, :], edges[1:-1][None, :], edges[2:][None, :]
    j = np.arange(dft_length // 2 + 1)[:, None]
    if edges.max() > dft_length // 2 or edges.min() < 0:
        raise OnnxFormatError(f"MelWeightMatrix: the band edges {edges.tolist()} fall outside the {dft_length // 2 + 1} bins")
    rise = np.where(mid > lo, (j - lo) / np.maximum(mid - lo, 1), 1.0)
    fall = (hi - j) / np.maximum(hi - mid, 1)
    return np.where((j >= lo) & (j <= mid), rise, 0.0) + np.where((j > mid) & (j < hi), fall, 0.0)


@converter("MelWeightMatrix")
def _mel_weight_matrix(cx, node, ins, attrs):
    vals = [np.asarray(cx.static(name, what)).reshape(-1)[0] for name, what in
            zip(node.input, ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"))]
    num_mel, dft_length, rate = int(vals[0]), int(vals[1]), int(vals[2])
    if num_mel < 1 or dft_length < 1 or rate < 1:
        raise OnnxFormatError(f"MelWeightMatrix: num_mel_bins {num_mel}, dft_length {dft_length}, sample_rate {rate} must be positive")
    cx.check_elements((dft_length // 2 + 1) * num_mel, "the MelWeightMatrix")
    to = rlx_dtype(attrs.get("output_datatype", 1), "MelWeightMatrix: ")
    return cx.const(_mel_matrix(num_mel, dft_length, rate, float(vals[3]), float(vals[4])).astype(to.numpy))
