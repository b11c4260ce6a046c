"""ONNX Conv / ConvTranspose / pooling (MaxPool Indices, MaxUnpool) / Col2Im converters (window geometry, auto_pad)."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.conv3d import conv3d, conv_transpose3d
from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.frontends.onnx.import_shape import pad_value
from rlx.frontends.pool_window import clipped_kernel
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxError,
    OnnxFormatError,
    OnnxUnsupported,
)
from rlx.ir.symbolic import dim_max, known_ge


def _spatial(x: Value, what: str, ranks: tuple[int, ...] = (1, 2)) -> int:
    n = len(x.shape) - 2
    if n not in ranks:
        names = [f"{r}-D" for r in ranks]
        shown = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise OnnxUnsupported(f"{what}: only {shown} spatial inputs are supported (rank {len(x.shape)})")
    return n


def _auto_pads(auto_pad: str, sizes, kernel, strides, dilations) -> list[int]:
    n = len(sizes)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i in range(n):
            out = -(-sizes[i] // strides[i])
            need = (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - sizes[i]
            total = max(need, 0) if isinstance(need, int) else dim_max(need, 0)  # symbolic: depends on size mod stride
            small, big = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return pads
    return [0] * (2 * n)


def _static_pads(fn, *args) -> list:
    """auto_pad pads of sizes that may be symbolic (then the pads may be dim expressions: a stride
    that does not divide the size); an undecidable rule needs the shapes (``NeedsShapes``)."""
    try:
        return fn(*args)
    except ShapeError as exc:
        raise NeedsShapes(f"auto_pad on symbolic sizes: {exc}") from exc


def _to2d(cx, x: Value) -> Value:
    return _reshape(cx, x, [*x.shape[:2], 1, x.shape[2]])


@converter("Conv")
def _conv(cx, node, ins, attrs):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    nsp = _spatial(x, "Conv", (1, 2, 3))
    kernel = list(attrs.get("kernel_shape", _static_shape(w)[2:]))
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    group = attrs.get("group", 1)
    auto = attrs.get("auto_pad", "NOTSET")
    check_window(cx, nsp, kernel, strides, dil, list(attrs.get("pads", [0] * (2 * nsp))))
    pads = list(attrs.get("pads", [0] * (2 * nsp))) if auto in ("NOTSET", "VALID") else \
        _static_pads(_auto_pads, auto, list(x.shape[2:]), kernel, strides, dil)  # explicit pads work on symbolic sizes
    if auto == "VALID":
        pads = [0] * (2 * nsp)
    if nsp == 3:
        y = conv3d(cx.g, x, w, strides, [(pads[i], pads[i + 3]) for i in range(3)], dil, group)
    elif nsp == 1:
        y = _conv2d(cx, _to2d(cx, x), _to2d(cx, w), [1, *strides], [1, *dil], [0, pads[0], 0, pads[1]], group)
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    else:
        y = _conv2d(cx, x, w, strides, dil, pads, group)
    if b is not None:
        y = y + _reshape(cx, b, [1, b.shape[0], *[1] * nsp])
    return y


def _conv2d(cx, x: Value, w: Value, strides, dil, pads, group: int) -> Value:
    """conv2d with ONNX pads [h0, w0, h1, w1]: symmetric ones in the op, others as an explicit zero pad."""
    sym = [pads[0], pads[1]] if pads[0] == pads[2] and pads[1] == pads[3] else [0, 0]
    if not all(isinstance(p, int) for p in pads):  # symbolic (auto_pad) amounts: an explicit zero pad
        sym = [0, 0]
    if sym == [0, 0] and any(isinstance(p, str) or p for p in pads):
        x = pad_value(cx, x, {2: (pads[0], pads[2]), 3: (pads[1], pads[3])})
    return cx.g.conv2d(x, w, stride=strides, padding=sym, dilation=dil, groups=group)


@converter("ConvTranspose")
def _conv_transpose(cx, node, ins, attrs):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    nsp = _spatial(x, "ConvTranspose", (1, 2, 3))
    if nsp == 1:
        x, w = _to2d(cx, x), _to2d(cx, w)
    kernel = list(_static_shape(w)[2:])
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    outpad = list(attrs.get("output_padding", [0] * nsp))
    pads = list(attrs.get("pads", [0] * (2 * nsp)))
    sizes = list(x.shape[2:])[-nsp:]
    auto = attrs.get("auto_pad", "NOTSET")
    check_window(cx, nsp, kernel[-nsp:], strides, dil, pads)
    if len(outpad) != nsp or any(not 0 <= p < max(s, d) for p, s, d in zip(outpad, strides, dil)):
        raise OnnxFormatError(f"output_padding {outpad} must be {nsp} values below the stride or dilation")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = list(attrs["output_shape"])[-nsp:] if "output_shape" in attrs else [sizes[i] * strides[i] for i in range(nsp)]
        pads = [0] * (2 * nsp)
        for i in range(nsp):
            total = strides[i] * (sizes[i] - 1) + outpad[i] + ((kernel[-nsp + i] - 1) * dil[i] + 1) - out_shape[i]
            if total < 0:
                outpad[i] += -total
                total = 0
            if auto == "SAME_UPPER":
                pads[i], pads[i + nsp] = total // 2, total - total // 2
            else:  # SAME_LOWER, or output_shape without auto_pad: the odd one at the start (onnx's reference, onnxruntime)
                pads[i], pads[i + nsp] = total - total // 2, total // 2
    group = attrs.get("group", 1)
    if nsp == 3:
        y = conv_transpose3d(cx.g, x, w, strides, [(pads[i], pads[i + 3]) for i in range(3)], dil, group, outpad)
        return y if b is None else y + _reshape(cx, b, [1, b.shape[0], 1, 1, 1])
    if nsp == 1:
        strides, dil, outpad, pads = [1, *strides], [1, *dil], [0, *outpad], [0, pads[0], 0, pads[1]]
    if pads[0] == pads[2] and pads[1] == pads[3] and not any(outpad):
        y = cx.g.conv_transpose2d(x, w, stride=strides, padding=[pads[0], pads[1]], dilation=dil, groups=group)
    else:  # the full transposed conv, cropped by the pads; output_padding extends the end (zeros past the full result)
        y = cx.g.conv_transpose2d(x, w, stride=strides, padding=[0, 0], dilation=dil, groups=group)
        y = pad_value(cx, y, {2 + i: (-pads[i], outpad[i] - pads[i + 2]) for i in range(2)})
    if b is not None:
        y = y + _reshape(cx, b, [1, b.shape[0], 1, 1])
    if nsp == 1:
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


def check_window(cx, nsp: int, kernel, strides, dil, pads) -> None:
    """Window attributes of a conv / pool: one per spatial axis, positive (pads non-negative), bounded."""
    lim = cx.limits.max_dim
    for name, vals, n, low in (("kernel_shape", kernel, nsp, 1), ("strides", strides, nsp, 1),
                               ("dilations", dil, nsp, 1), ("pads", pads, 2 * nsp, 0)):
        if len(vals) != n or any(not low <= v <= lim for v in vals):
            raise OnnxFormatError(f"{name} {list(vals)} must be {n} values in [{low}, {lim}] for {nsp} spatial axes")


def _pool_geometry(cx, x: Value, attrs, nsp: int):
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nsp))
    dil = list(attrs.get("dilations", [1] * nsp))
    sizes = list(x.shape[2:])
    auto = attrs.get("auto_pad", "NOTSET")
    check_window(cx, nsp, kernel, strides, dil, list(attrs.get("pads", [0] * (2 * nsp))))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _static_pads(_auto_pads, auto, sizes, kernel, strides, dil)
    elif auto == "VALID":
        pads = [0] * (2 * nsp)
    else:
        pads = list(attrs.get("pads", [0] * (2 * nsp)))
    extra = [0] * nsp
    outs = []
    for i in range(nsp):
        span = (kernel[i] - 1) * dil[i] + 1
        total = sizes[i] + pads[i] + pads[i + nsp] - span
        if attrs.get("ceil_mode", 0):
            out = -(-total // strides[i]) + 1
            last = known_ge((out - 1) * strides[i], sizes[i] + pads[i])
            if last is None:
                raise NeedsShapes(f"ceil_mode on symbolic axis {2 + i} ({sizes[i]})")
            if last:
                out -= 1
        else:
            out = total // strides[i] + 1
        if dil[i] == 1:  # a window longer than the padded axis reads only zeros past it (rlx.frontends.pool_window)
            kernel[i] = span = clipped_kernel(kernel[i], sizes[i], pads[i], pads[i + nsp])
        need = (out - 1) * strides[i] + span - (sizes[i] + pads[i] + pads[i + nsp])
        if not attrs.get("ceil_mode", 0):
            extra[i] = 0  # floor mode: the last window fits
        else:
            extra[i] = max(need, 0) if isinstance(need, int) else dim_max(need, 0)
        if known_ge(out, 1) is False:
            raise OnnxFormatError(f"the window (kernel {kernel[i]}, dilation {dil[i]}) is larger than padded axis {2 + i}")
        outs.append(out)
    return kernel, strides, dil, pads, extra, outs


def _pool_separable(cx, node, x: Value, attrs, kernel, strides, dil, pads, extra, outs) -> Value:
    """N-d pooling with dilation as separable per-axis window reductions over constant-index gathers (exact)."""
    nsp = len(kernel)
    kind = node.op_type
    is_max = kind == "MaxPool"
    src = x
    if kind == "LpPool":
        p = attrs.get("p", 2)
        src = cx.g.abs(x) ** cx.scalar(float(p), x) if p != 2 else x * x
    fill = (-np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min) if is_max else 0
    amounts = {2 + i: (pads[i], pads[i + nsp] + extra[i]) for i in range(nsp)}
    y = pad_value(cx, src, amounts, value=fill)
    sizes = _static_shape(x)[2:]
    count = None
    cx.unroll(sum(kernel), "the pooling window taps")
    if kind == "AveragePool":
        full = [sizes[i] + pads[i] + pads[i + nsp] + extra[i] for i in range(nsp)]
        cx.check_elements(math.prod(full), "the AveragePool divisor")
        count = np.zeros(full)
        if attrs.get("count_include_pad", 0):
            count[tuple(slice(0, sizes[i] + pads[i] + pads[i + nsp]) for i in range(nsp))] = 1
        else:
            count[tuple(slice(pads[i], pads[i] + sizes[i]) for i in range(nsp))] = 1
    for i in range(nsp):
        axis = 2 + i
        cx.check_elements(outs[i] * kernel[i], "the pooling window index")
        taps = [np.arange(outs[i]) * strides[i] + k * dil[i] for k in range(kernel[i])]
        acc = None
        for idx in taps:
            part = cx.g.gather(y, cx.const(idx.astype(np.int64)), axis=axis)
            acc = part if acc is None else (cx.g.maximum(acc, part) if is_max else acc + part)
        y = acc
        if count is not None:
            count = sum(np.take(count, idx, axis=i) for idx in taps)
    if count is not None:
        y = y / cx.const(count.astype(x.dtype.numpy))
    if kind == "LpPool":
        p = attrs.get("p", 2)
        y = cx.g.sqrt(y) if p == 2 else y ** cx.scalar(1.0 / p, y)
    return y


@converter("MaxPool", "AveragePool", "LpPool")
def _pool(cx, node, ins, attrs):
    x = ins[0]
    nsp = len(x.shape) - 2
    if nsp < 1:
        raise OnnxUnsupported(f"{node.op_type} on rank {len(x.shape)}")
    kernel, strides, dil, pads, extra, outs = _pool_geometry(cx, x, attrs, nsp)
    if len(node.output) > 1 and node.output[1]:
        return _max_pool_values(cx, node, x, attrs, kernel, strides, dil, pads, extra, outs), \
            _max_pool_indices(cx, x, attrs, kernel, strides, dil, pads, extra, outs)
    return _max_pool_values(cx, node, x, attrs, kernel, strides, dil, pads, extra, outs)


def _max_pool_indices(cx, x: Value, attrs, kernel, strides, dil, pads, extra, outs) -> Value:
    """MaxPool's Indices: per window, the flat index into ``x`` (batch and channel included) of its
    first largest in-bounds element in row-major window order (a later tap wins only when strictly
    larger, so a NaN never wins, unless it comes first); ``storage_order=1`` numbers the spatial
    axes column-major. Taps are compared one by one; which taps are in bounds is known at import."""
    nsp = len(kernel)
    shape = _static_shape(x)
    sizes = shape[2:]
    order = attrs.get("storage_order", 0)
    if order not in (0, 1):
        raise OnnxFormatError(f"storage_order must be 0 or 1, got {order}")
    spatial = np.arange(math.prod(sizes), dtype=np.int64).reshape(sizes, order="F" if order else "C")
    amounts = [(pads[i], pads[i + nsp] + extra[i]) for i in range(nsp)]
    index = np.pad(spatial, amounts)  # padded positions' index is never picked
    inside = np.pad(np.ones(sizes, bool), amounts)
    fill = -np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min
    padded = pad_value(cx, x, {2 + i: a for i, a in enumerate(amounts)}, value=fill)
    cx.unroll(math.prod(kernel), "the MaxPool Indices window taps")
    cx.check_elements(math.prod(outs) * math.prod(kernel), "the MaxPool Indices taps")
    best = best_i = seen = None
    for tap in np.ndindex(*kernel):
        pos = [np.arange(outs[i]) * strides[i] + tap[i] * dil[i] for i in range(nsp)]
        valid = inside[np.ix_(*pos)]
        if not valid.any():
            continue
        v = padded
        for i, p in enumerate(pos):
            v = cx.g.gather(v, cx.const(p.astype(np.int64)), axis=2 + i)
        idx = cx.const(index[np.ix_(*pos)])
        if best is None:
            best, best_i, seen = v, cx.g.expand(idx, target_shape=[*shape[:2], *outs]), valid
            continue
        take = cx.g.gt(v, best)
        if not valid.all():
            take = cx.g.where(cx.const(valid), take, cx.const(np.zeros((), bool)))
        first = valid & ~seen  # the window's first in-bounds tap is taken whatever its value
        if first.any():
            take = cx.g.where(cx.const(first), cx.const(np.ones((), bool)), take)
        best, best_i, seen = cx.g.where(take, v, best), cx.g.where(take, idx, best_i), seen | valid
    plane = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[0], shape[1], *[1] * nsp) * math.prod(sizes)
    return best_i + cx.const(plane)


def _max_pool_values(cx, node, x: Value, attrs, kernel, strides, dil, pads, extra, outs) -> Value:
    nsp = len(kernel)
    if nsp > 2 or any(d != 1 for d in dil):
        return _pool_separable(cx, node, x, attrs, kernel, strides, dil, pads, extra, outs)
    if nsp == 1:
        x = _to2d(cx, x)
        kernel, strides, pads, extra, outs = [1, *kernel], [1, *strides], [0, pads[0], 0, pads[1]], [0, *extra], [1, *outs]
    is_max = node.op_type == "MaxPool"
    lp = node.op_type == "LpPool"
    src = x
    if lp:
        p = attrs.get("p", 2)
        src = cx.g.abs(x) ** cx.scalar(float(p), x) if p != 2 else x * x
    fill = (-np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min) if is_max else 0
    amounts = {2: (pads[0], pads[2] + extra[0]), 3: (pads[1], pads[3] + extra[1])}
    inner = [0, 0]
    if all(isinstance(v, int) for pair in amounts.values() for v in pair) and \
            amounts[2][0] == amounts[2][1] < kernel[0] and amounts[3][0] == amounts[3][1] < kernel[1]:
        inner, amounts = [pads[0], pads[1]], {}  # symmetric: pool2d's own padding (the same fill), no padded copy
    padded = pad_value(cx, src, amounts, value=fill) if any(isinstance(v, str) or v for pair in amounts.values()
                                                                 for v in pair) else src
    y = cx.g.pool2d(padded, kind="max" if is_max else "sum", kernel_size=kernel, stride=strides, padding=inner)
    if tuple(y.shape[2:]) != tuple(outs):
        y = pad_value(cx, y, {2: (0, outs[0] - y.shape[2]), 3: (0, outs[1] - y.shape[3])})
    if node.op_type == "AveragePool" and not x.shape.is_static:
        y = y / _window_counts(cx, x, attrs, kernel, strides, pads, extra, inner, outs)
    elif node.op_type == "AveragePool":
        h, w = _static_shape(x)[2:]
        cx.check_elements((h + pads[0] + pads[2] + extra[0]) * (w + pads[1] + pads[3] + extra[1]), "the AveragePool divisor")
        ones = np.zeros((h + pads[0] + pads[2] + extra[0], w + pads[1] + pads[3] + extra[1]))
        if attrs.get("count_include_pad", 0):
            ones[: h + pads[0] + pads[2], : w + pads[1] + pads[3]] = 1
        else:
            ones[pads[0]: pads[0] + h, pads[1]: pads[1] + w] = 1
        win = np.lib.stride_tricks.sliding_window_view(ones, kernel)[:: strides[0], :: strides[1]].sum(axis=(-2, -1))
        count = win[: outs[0], : outs[1]]
        y = y / cx.const(count.astype(x.dtype.numpy))
    if lp:
        p = attrs.get("p", 2)
        y = cx.g.sqrt(y) if p == 2 else y ** cx.scalar(1.0 / p, y)
    if nsp == 1:
        y = _reshape(cx, y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


def _window_counts(cx, x: Value, attrs, kernel, strides, pads, extra, inner, outs) -> Value:
    """AveragePool's divisor on symbolic sizes: the same windows summed over ones (1 where a position
    counts: the input, and its pads too with count_include_pad; never the ceil_mode extra)."""
    h, w = x.shape[2:]
    if attrs.get("count_include_pad", 0) and not any(extra):
        return cx.const(np.array(kernel[0] * kernel[1], x.dtype.numpy))
    ones = cx.g.expand(cx.const(np.ones((), x.dtype.numpy)), target_shape=[1, 1, h, w])
    if attrs.get("count_include_pad", 0):
        ones = pad_value(cx, ones, {2: (pads[0], pads[2]), 3: (pads[1], pads[3])}, value=1)
        ones = pad_value(cx, ones, {2: (0, extra[0]), 3: (0, extra[1])})
    elif not any(inner):
        ones = pad_value(cx, ones, {2: (pads[0], pads[2] + extra[0]), 3: (pads[1], pads[3] + extra[1])})
    count = cx.g.pool2d(ones, kind="sum", kernel_size=kernel, stride=strides, padding=inner)
    if tuple(count.shape[2:]) != tuple(outs):
        count = pad_value(cx, count, {2: (0, outs[0] - count.shape[2]), 3: (0, outs[1] - count.shape[3])}, value=1)
    return count


@converter("MaxUnpool")
def _max_unpool(cx, node, ins, attrs):
    """Zeros of the unpooled shape, per spatial axis ``(in - 1) * stride + kernel - pads``, with each X
    value written at its flat index (MaxPool's Indices). A given ``output_shape`` (a static operand)
    extends that at the end of each axis with zeros, as onnx's reference and its node cases do (the
    indices keep numbering the unpooled shape)."""
    x, idx = ins[0], ins[1]
    shape = _static_shape(x)
    nsp = len(shape) - 2
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nsp))
    pads = list(attrs.get("pads", [0] * (2 * nsp)))
    check_window(cx, nsp, kernel, strides, [1] * nsp, pads)
    out = shape[:2] + [(shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + nsp] for i in range(nsp)]
    wanted = out
    if len(ins) > 2 and ins[2] is not None:
        wanted = [int(v) for v in cx.static(node.input[2], "output_shape").reshape(-1)]
        if len(wanted) != len(shape) or wanted[:2] != shape[:2] or any(w < o for w, o in zip(wanted, out)):
            raise OnnxFormatError(f"MaxUnpool output_shape {wanted} is not the unpooled shape {out} or larger")
    if tuple(idx.shape) != tuple(shape) or not idx.dtype.is_int:
        raise OnnxFormatError(f"MaxUnpool: indices must be integers of X's shape {shape}, got {idx.dtype}{list(idx.shape)}")
    total = math.prod(out)
    cx.check_elements(total, "the MaxUnpool output")
    zeros = cx.g.expand(cx.const(np.zeros((), x.dtype.numpy)), target_shape=[total])
    flat_i = _reshape(cx, _cast(cx, idx, DType.I64), [math.prod(shape)])
    y = cx.g.scatter_elements(zeros, flat_i, _reshape(cx, x, [math.prod(shape)]), axis=0, reduction="none")
    y = _reshape(cx, y, out)
    return y if wanted == out else pad_value(cx, y, {2 + i: (0, wanted[2 + i] - out[2 + i]) for i in range(nsp)})


@converter("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(cx, node, ins, attrs):
    x = ins[0]
    axes = list(range(2, len(x.shape)))
    if node.op_type == "GlobalLpPool":
        p = attrs.get("p", 2)
        s = cx.g.reduce(cx.g.abs(x) ** cx.scalar(float(p), x), op="sum", axes=axes, keep_dim=True)
        return s ** cx.scalar(1.0 / p, s)
    return cx.g.reduce(x, op="mean" if node.op_type == "GlobalAveragePool" else "max", axes=axes, keep_dim=True)


@converter("Col2Im")
def _col2im(cx, node, ins, attrs):
    x = ins[0]
    image = [int(v) for v in cx.static(node.input[1], "image_shape").reshape(-1)]
    block = [int(v) for v in cx.static(node.input[2], "block_shape").reshape(-1)]
    nd = len(image)
    dil = list(attrs.get("dilations", [1] * nd))
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    strides = list(attrs.get("strides", [1] * nd))
    check_window(cx, nd, block, strides, dil, pads)
    if len(x.shape) != 3 or any(not 1 <= d <= cx.limits.max_dim for d in image):
        raise OnnxFormatError(f"Col2Im needs a rank-3 input and positive image_shape, got {list(x.shape)}, {image}")
    n, ck, length = _static_shape(x)
    kprod = math.prod(block)
    c = ck // kprod
    outs = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    if math.prod(outs) != length:
        raise OnnxError(f"Col2Im: {length} columns, geometry gives {outs}")
    hw = math.prod(image)
    cx.check_elements(n * c * kprod * length + hw, "the Col2Im scatter index")
    # row-major positions: kernel offsets (kprod, nd) and output positions (length, nd)
    kidx = np.indices(block).reshape(nd, -1).T
    lidx = np.indices(outs).reshape(nd, -1).T
    pos = lidx[None, :, :] * np.array(strides) + kidx[:, None, :] * np.array(dil) - np.array(pads[:nd])
    inside = ((pos >= 0) & (pos < np.array(image))).all(axis=-1)
    flat = np.ravel_multi_index(tuple(np.clip(pos, 0, np.array(image) - 1).transpose(2, 0, 1)), image)
    dest = np.where(inside, flat, hw).astype(np.int64)  # hw = a spare slot for taps that land in the padding
    cols = _reshape(cx, x, [n, c, kprod * length])
    idx = cx.const(np.broadcast_to(dest.reshape(1, 1, -1), (n, c, kprod * length)).copy())
    zeros = cx.g.expand(cx.const(np.zeros((), x.dtype.numpy)), target_shape=[n, c, hw + 1])
    out = cx.g.scatter_elements(zeros, idx, cols, axis=2, reduction="add")
    return _reshape(cx, cx.g.narrow(out, axis=2, start=0, length=hw), [n, c, *image])
