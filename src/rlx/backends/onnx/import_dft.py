"""ONNX DFT converter (constant twiddle matrices)."""

from __future__ import annotations

import numpy as np

from rlx.backends.onnx.common import (
    OnnxUnsupported,
)
from rlx.backends.onnx.import_context import converter
from rlx.backends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


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
