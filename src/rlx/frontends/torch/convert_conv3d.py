"""torch converters for 3-D convolution and pooling, and adaptive max pooling with its indices (1-D to 3-D).

rlx's window ops are 2-D (conv2d, conv_transpose2d, pool2d): convolutions go through :mod:`rlx.frontends.conv3d`
(constant gathers around one 2-D conv); average pooling is separable (depth, then height x width); adaptive
max pooling gathers each window into a row. Every backend, autodiff and the ONNX exporter run the result as is.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from rlx.frontends.conv3d import conv3d, conv_transpose3d, pad_zeros
from rlx.frontends.torch.context import _conv, _Ctx, _reshape, _target_name
from rlx.frontends.torch.convert_nn import _adaptive_windows, _pair, _unbatched
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


def _pad(cx: _Ctx, x: Value, axis: int, lo: int, hi: int) -> Value:
    return pad_zeros(cx.g, x, axis, lo, hi)


def _index(cx: _Ctx, idx: np.ndarray) -> Value:
    return cx.g.constant(np.ascontiguousarray(idx, dtype=np.int64).reshape(-1))


def _conv3d_pads(padding: Any, k: list[int], d: list[int]) -> list[tuple[int, int]]:
    if padding == "valid":
        return [(0, 0)] * 3
    if padding == "same":  # stride 1; torch puts the odd extra element at the end
        total = [di * (ki - 1) for di, ki in zip(d, k)]
        return [(t // 2, t - t // 2) for t in total]
    return [(p, p) for p in _pair(padding, 3)]


def conv_nd(cx: _Ctx, x: Value, w: Value, b: Value | None, stride: Any, padding: Any, dilation: Any, groups: int,
            transposed: bool, output_padding: Any) -> Value:
    """3-D convolution (batched or not, any dtype torch allows) with its bias."""
    if not x.dtype.is_float:  # integer convolution: exact in f64 at these magnitudes
        b = None if b is None else cx.cast(b, DType.F64)
        y = conv_nd(cx, cx.cast(x, DType.F64), cx.cast(w, DType.F64), b, stride, padding, dilation, groups, transposed,
                    output_padding)
        return cx.cast(y, x.dtype)
    x, added = _unbatched(cx, x, 3)
    s, d = _pair(stride, 3), _pair(dilation, 3)
    if transposed:
        y = conv_transpose3d(cx.g, x, w, s, [(p, p) for p in _pair(padding, 3)], d, int(groups), _pair(output_padding, 3))
    else:
        k = [cx.static(v, "kernel size") for v in w.shape[2:]]
        y = conv3d(cx.g, x, w, s, _conv3d_pads(padding, k, d), d, int(groups))
    if b is not None:
        y = y + _reshape(cx, b, [b.shape[0], 1, 1, 1])
    return _reshape(cx, y, cx.out_shape()) if added else y


@_conv("aten.conv3d.default", "aten.conv3d.padding")
def _conv3d(cx, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return conv_nd(cx, x, w, b, stride, padding, dilation, groups, False, 0)


@_conv("aten.conv_transpose3d.input")
def _conv_transpose3d(cx, node, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return conv_nd(cx, x, w, b, stride, padding, dilation, groups, True, output_padding)


# ---------------------------------------------------------------------------------- pooling
@_conv("aten.avg_pool3d.default")
def _avg_pool3d(cx, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    """Window sums, separable (a [kD, 1] sum pool over [N, C, D, H*W], then [kH, kW] over [N, C*Dout, H, W]),
    divided by torch's count: the product of the per-axis counts (windows clipped to the padded extent, or to
    the input without count_include_pad), or divisor_override. ceil_mode's extra windows read zeros appended
    at the end of each axis."""
    if not x.dtype.is_float:  # torch truncates integer averages: exact in f64 at these sizes
        y = _avg_pool3d(cx, node, cx.cast(x, DType.F64), kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)
        return cx.cast(cx.g.unary_math(y, kind="trunc"), x.dtype)
    x, added = _unbatched(cx, x, 3)
    k = _pair(kernel_size, 3)
    s = _pair(stride, 3) if stride else k
    p = _pair(padding, 3)
    out = [int(v) for v in cx.out_shape()[-3:]]
    counts = []
    for i in range(3):
        size = cx.static(x.shape[2 + i], "pooled size")
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], size + p[i])
        counts.append(end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0))
        x = _pad(cx, x, 2 + i, 0, (out[i] - 1) * s[i] + k[i] - (size + 2 * p[i]))
    n, c, depth, h, w = x.shape
    c = cx.static(c, "channels")
    y = cx.g.pool2d(_reshape(cx, x, [n, c, depth, h * w]), kind="sum", kernel_size=[k[0], 1], stride=[s[0], 1],
                    padding=[p[0], 0])
    y = cx.g.pool2d(_reshape(cx, y, [n, c * out[0], h, w]), kind="sum", kernel_size=k[1:], stride=s[1:], padding=p[1:])
    y = _reshape(cx, y, [n, c, *out])
    if divisor_override is not None:
        count = np.full(out, divisor_override)
    else:
        count = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
    y = cx.g.binary(y, cx.g.constant(count.astype(x.dtype.numpy)), op="div")
    return _reshape(cx, y, cx.out_shape()) if added else y


def adaptive_sizes(cx: _Ctx, x: Value, output_size: Any, spatial: int) -> tuple[list[int], list[int]]:
    """(input sizes, output sizes) of the last ``spatial`` axes; None in ``output_size`` keeps the input size."""
    sizes = [cx.static(v, "spatial dim") for v in x.shape[-spatial:]]
    out = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * spatial
    out = out * spatial if len(out) == 1 else out
    return sizes, [size if o is None else int(o) for size, o in zip(sizes, out)]


@_conv("aten._adaptive_avg_pool3d.default", "aten.adaptive_avg_pool3d.default")
def _adaptive_avg_pool3d(cx, node, x, output_size):
    """A box mean is the mean over each axis in turn: torch's adaptive windows axis by axis."""
    sizes, out = adaptive_sizes(cx, x, output_size, 3)
    rank = len(x.shape)
    y = x
    for i, (size, o) in enumerate(zip(sizes, out)):
        axis = rank - 3 + i
        if size == o:
            continue
        parts = [cx.g.mean(cx.g.narrow(y, axis, lo, hi - lo), axes=[axis], keep_dim=True)
                 for lo, hi in _adaptive_windows(size, o)]
        y = parts[0] if len(parts) == 1 else cx.g.concat(parts, axis=axis)
    return y


def adaptive_max_with_indices(cx: _Ctx, x: Value, output_size: Any, spatial: int) -> tuple[Value, Value]:
    """torch's adaptive max pooling (values, i64 indices into the flattened spatial plane). Each output cell's
    window is gathered into a row of taps (short rows repeat their last tap); the value is the row's max, its
    index the first tap equal to it, or the last NaN tap when the window holds a NaN (torch's CPU kernel)."""
    x, added = _unbatched(cx, x, spatial)
    sizes, out = adaptive_sizes(cx, x, output_size, spatial)
    lead = list(x.shape[:2])
    flat = _reshape(cx, x, [*lead, math.prod(sizes)])
    windows = [_adaptive_windows(size, o) for size, o in zip(sizes, out)]
    cells = []  # per output cell (row-major), its window's flat plane positions in row-major window order
    for cell in np.ndindex(*out):
        ranges = [range(*axis[i]) for axis, i in zip(windows, cell)]
        cells.append([int(np.ravel_multi_index(pos, sizes)) for pos in itertools.product(*ranges)])
    width = max(len(row) for row in cells)
    table = np.array([row + [row[-1]] * (width - len(row)) for row in cells], dtype=np.int64)
    q = len(cells)
    taps = _reshape(cx, cx.g.gather(flat, _index(cx, table), axis=2), [*lead, q, width])
    rows = cx.g.expand(cx.g.constant(table), target_shape=[*lead, q, width])
    values, index = _window_max(cx, taps, rows)
    shape = [*(x.shape[1:2] if added else lead), *out]
    return _reshape(cx, values, shape), _reshape(cx, index, shape)


def _window_max(cx: _Ctx, taps: Value, where: Value) -> tuple[Value, Value]:
    """(max, index) over the last axis of ``taps`` [N, C, Q, K], the index read from ``where`` (same shape) at
    the first maximal tap, or at the last NaN tap of a window holding a NaN (torch's CPU max-pool kernels:
    ``val > max || isnan(val)`` replaces the running maximum)."""
    values = cx.g.max(taps, axes=[3], keep_dim=False)
    local = cx.g.arg_reduce(taps, op="argmax", axis=3, keep_dim=True)
    if taps.dtype.is_float:
        nan = cx.g.ne(taps, taps)
        last_nan = cx.g.arg_reduce(cx.cast(nan, DType.I32), op="argmax", axis=3, keep_dim=True, select_last=True)
        local = cx.g.where(cx.g.max(cx.cast(nan, DType.I32), axes=[3], keep_dim=True), last_nan, local)
    index = cx.g.gather_elements(where, local, axis=3)
    return values, _reshape(cx, index, values.shape)


@_conv("aten.fractional_max_pool2d.default", "aten.fractional_max_pool3d.default")
def _fractional_max_pool(cx, node, x, kernel_size, output_size, random_samples):
    """Fractional max pooling with its ``random_samples`` given (torch draws them with aten.rand when the caller
    does not; that form stays random). Per plane and axis, window i starts at
    trunc((i + u) * alpha) - trunc(u * alpha), alpha = (size - k) / (out - 1), the last at size - k (torch's
    interval rule, in the input's float type); 2-D reads u for the width from sample 0, 3-D in axis order."""
    spatial = len(kernel_size)
    x, added = _unbatched(cx, x, spatial)
    if len(random_samples.shape) == 2:
        random_samples = _reshape(cx, random_samples, [1, *random_samples.shape])
    k = [int(v) for v in kernel_size]
    sizes = [cx.static(v, "spatial dim") for v in x.shape[2:]]
    out = [int(v) for v in output_size]
    lead = list(x.shape[:2])
    dtype = x.dtype
    flat_index = None
    stride = 1
    for axis in reversed(range(spatial)):
        sample_slot = (spatial - 1 - axis) if spatial == 2 else axis
        u = cx.g.narrow(cx.cast(random_samples, dtype), axis=2, start=sample_slot, length=1)  # [N, C, 1]
        last = cx.g.constant(np.full([1, 1, 1], sizes[axis] - k[axis], dtype=np.int64))
        if out[axis] > 1:
            alpha = cx.scalar((sizes[axis] - k[axis]) / (out[axis] - 1), dtype)
            steps = cx.g.constant(np.arange(out[axis] - 1, dtype=dtype.numpy).reshape(1, 1, -1))
            first = cx.g.unary_math((steps + u) * alpha, kind="trunc") - cx.g.unary_math(u * alpha, kind="trunc")
            starts = cx.g.concat([cx.cast(first, DType.I64), cx.g.expand(last, target_shape=[*lead, 1])], axis=2)
        else:
            starts = cx.g.expand(last, target_shape=[*lead, 1])
        # position of tap (cell, offset) on this axis, laid out [N, C, cells..., offsets...] over all axes
        shape = [*lead] + [out[a] if a == axis else 1 for a in range(spatial)] + [1] * spatial
        pos = _reshape(cx, starts, shape) + cx.g.constant(
            np.arange(k[axis], dtype=np.int64).reshape([1, 1] + [1] * spatial + [k[axis] if a == axis else 1
                                                                                 for a in range(spatial)]))
        term = pos * cx.scalar(stride, DType.I64)
        flat_index = term if flat_index is None else flat_index + term
        stride *= sizes[axis]
    q, kk = math.prod(out), math.prod(k)
    where = _reshape(cx, cx.g.expand(flat_index, target_shape=[*lead, *out, *k]), [*lead, q, kk])
    flat = _reshape(cx, x, [*lead, math.prod(sizes)])
    taps = _reshape(cx, cx.g.gather_elements(flat, _reshape(cx, where, [*lead, q * kk]), axis=2), [*lead, q, kk])
    values, index = _window_max(cx, taps, where)
    shape = [*(x.shape[1:2] if added else lead), *out]
    return _reshape(cx, values, shape), _reshape(cx, index, shape)


@_conv("aten.adaptive_max_pool3d.default")
def _adaptive_max_pool3d(cx, node, x, output_size):
    return adaptive_max_with_indices(cx, x, output_size, 3)


def wants_indices(node: Any) -> bool:
    """Whether a (values, indices) node's indices are read."""
    return any(_target_name(u.target) == "operator.getitem" and u.args[1] == 1 for u in node.users)
