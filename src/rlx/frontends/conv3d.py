"""3-D convolution (and its transpose) as a composition of MIR ops, for every reader (torch, ONNX).

rlx's window ops are 2-D, so the depth axis is handled with constant gathers: ``conv3d`` gathers each output
depth's kernel taps into the channels of ONE conv2d over ``[N*Dout, G*kD*C/G, H, W]`` (weight
``[O, kD*C/G, kH, kW]``); ``conv_transpose3d`` runs one conv_transpose2d over ``[N*D, Cin, H, W]`` giving every
(input depth, kernel tap) plane, and output depth ``z`` sums the planes with ``i*s + t*d - p == z`` (a gather
with a zero plane for the short rows, then a sum). So every backend, autodiff and the ONNX exporter run it.
Channels, depth and kernel must be static; the batch, height and width may be symbolic, and so may the
height / width pads (ONNX ``auto_pad`` SAME on symbolic sizes: explicit zeros then).
Pads are (before, after) per spatial axis, as ONNX writes them; torch's symmetric ``padding`` p is (p, p).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.symbolic import is_symbolic

__all__ = ["conv3d", "conv_transpose3d", "pad_zeros"]


def _static(v: object, what: str) -> int:
    if not isinstance(v, int):
        raise ShapeError(f"3-D convolution: the {what} must be static, got {v!r}")
    return v


def pad_zeros(g: Graph, x: Value, axis: int, lo: Any, hi: Any) -> Value:
    """``x`` with ``lo`` / ``hi`` zero rows before / after on ``axis`` (none for an amount <= 0; a symbolic
    amount is a size >= 0)."""
    def zeros(n: Any) -> Value:
        shape = list(x.shape)
        shape[axis] = n
        return g.expand(g.constant(np.zeros((), dtype=x.dtype.numpy)), target_shape=shape)

    def some(n: Any) -> bool:
        return is_symbolic(n) or n > 0

    parts = ([zeros(lo)] if some(lo) else []) + [x] + ([zeros(hi)] if some(hi) else [])
    return x if len(parts) == 1 else g.concat(parts, axis=axis)


def _crop_or_pad(g: Graph, x: Value, axis: int, lo: int, hi: int) -> Value:
    """``x`` on ``axis`` extended by ``lo`` / ``hi`` zero rows, or cropped by a negative amount."""
    if lo < 0 or hi < 0:
        n = x.shape[axis]
        x = g.narrow(x, axis=axis, start=max(-lo, 0), length=n + min(lo, 0) + min(hi, 0))
    return pad_zeros(g, x, axis, lo, hi)


def _native(pads: Sequence[tuple[Any, Any]]) -> bool:
    """Can a 2-D window op take these (height, width) pads as its symmetric ``padding``?"""
    return all(isinstance(lo, int) and lo == hi for lo, hi in pads)


def _index(g: Graph, idx: np.ndarray) -> Value:
    return g.constant(np.ascontiguousarray(idx, dtype=np.int64).reshape(-1))


def conv3d(g: Graph, x: Value, w: Value, stride: Sequence[int], pads: Sequence[tuple[int, int]],
           dilation: Sequence[int], groups: int) -> Value:
    """NCDHW cross-correlation without bias; ``pads`` is (before, after) zero padding per spatial axis."""
    s, d = list(stride), list(dilation)
    k = [_static(v, "kernel size") for v in w.shape[2:]]
    x = pad_zeros(g, x, 2, *(_static(p, "depth padding") for p in pads[0]))
    hw = [pads[1][0], pads[2][0]]
    if not _native(pads[1:]):  # asymmetric or symbolic: explicit zeros, conv2d unpadded
        x = pad_zeros(g, pad_zeros(g, x, 3, *pads[1]), 4, *pads[2])
        hw = [0, 0]
    n, c, depth, h, wd = x.shape
    c, depth = _static(c, "channel count"), _static(depth, "depth")
    dout = (depth - d[0] * (k[0] - 1) - 1) // s[0] + 1
    if dout < 1:
        raise ShapeError(f"conv3d: the kernel (depth {k[0]}, dilation {d[0]}) is larger than the padded depth {depth}")
    taps = np.arange(dout)[:, None] * s[0] + np.arange(k[0])[None, :] * d[0]
    cols = g.gather(x, _index(g, taps), axis=2)  # [N, C, Dout*kD, H, W]
    cols = g.reshape(cols, new_shape=[n, groups, c // groups, dout, k[0], h, wd])
    cols = g.reshape(g.transpose(cols, perm=[0, 3, 1, 4, 2, 5, 6]), new_shape=[n * dout, c * k[0], h, wd])
    o = w.shape[0]
    w2 = g.reshape(g.transpose(w, perm=[0, 2, 1, 3, 4]), new_shape=[o, k[0] * w.shape[1], k[1], k[2]])
    y = g.conv2d(cols, w2, stride=s[1:], padding=hw, dilation=d[1:], groups=groups)  # [N*Dout, O, Ho, Wo]
    y = g.reshape(y, new_shape=[n, dout, o, *y.shape[2:]])
    return g.transpose(y, perm=[0, 2, 1, 3, 4])


def conv_transpose3d(g: Graph, x: Value, w: Value, stride: Sequence[int], pads: Sequence[tuple[int, int]],
                     dilation: Sequence[int], groups: int, output_padding: Sequence[int]) -> Value:
    """Transposed NCDHW convolution without bias: input depth i through kernel tap t lands on output depth
    i*s + t*d - pads[0][0]; ``pads`` crop (before, after) the full result per spatial axis and ``output_padding``
    extends its end (zeros past the full result)."""
    s, d, op = list(stride), list(dilation), list(output_padding)
    n, cin, depth, h, wd = x.shape
    depth = _static(depth, "depth")
    (lo, hi), hw = (_static(p, "depth padding") for p in pads[0]), pads[1:]
    kd, og = _static(w.shape[2], "kernel depth"), w.shape[1]
    xs = g.reshape(g.transpose(x, perm=[0, 2, 1, 3, 4]), new_shape=[n * depth, cin, h, wd])
    w2 = g.reshape(g.transpose(w, perm=[0, 2, 1, 3, 4]), new_shape=[w.shape[0], kd * og, *w.shape[3:]])
    native = _native(hw) and all(o < max(si, di) for o, si, di in zip(op[1:], s[1:], d[1:]))
    planes = g.conv_transpose2d(xs, w2, stride=s[1:], padding=[hw[0][0], hw[1][0]] if native else [0, 0],
                                dilation=d[1:], groups=groups, output_padding=op[1:] if native else [0, 0])
    if not native:  # [N*D, G*kD*O/G, Ho, Wo]: the full planes, cropped by the pads, extended by output_padding
        for axis, (before, after), extra in zip((2, 3), hw, op[1:]):
            planes = _crop_or_pad(g, planes, axis, -before, extra - after)
    ho, wo = planes.shape[2:]
    planes = g.reshape(planes, new_shape=[n, depth, groups, kd, og, ho, wo])
    planes = g.reshape(g.transpose(planes, perm=[0, 2, 4, 1, 3, 5, 6]), new_shape=[n, groups * og, depth * kd, ho, wo])
    dout = (depth - 1) * s[0] - lo - hi + d[0] * (kd - 1) + op[0] + 1
    if dout < 1:
        raise ShapeError(f"conv_transpose3d: depth padding ({lo}, {hi}) leaves no output depth")
    sources: list[list[int]] = [[] for _ in range(dout)]
    for i in range(depth):
        for t in range(kd):
            z = i * s[0] + t * d[0] - lo
            if 0 <= z < dout:
                sources[z].append(i * kd + t)
    width = max(1, max(len(src) for src in sources))
    zero = depth * kd  # the zero plane appended below
    table = np.array([src + [zero] * (width - len(src)) for src in sources])
    y = g.gather(pad_zeros(g, planes, 2, 0, 1), _index(g, table), axis=2)  # [N, O, Dout*M, Ho, Wo]
    if width == 1:
        return y
    return g.reduce(g.reshape(y, new_shape=[n, groups * og, dout, width, ho, wo]), op="sum", axes=[3], keep_dim=False)
