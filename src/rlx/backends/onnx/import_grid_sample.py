"""ONNX GridSample (opset 16 names bilinear / bicubic, opset 20 linear / cubic and N-D) and DeformConv, both
built on rlx.backends.grid_sample."""

from __future__ import annotations

import numpy as np

from rlx.backends.grid_sample import grid_sample, sample_points
from rlx.backends.onnx.common import OnnxFormatError, OnnxUnsupported
from rlx.backends.onnx.import_context import converter
from rlx.backends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.dtype import DType

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}


@converter("GridSample")
def _grid_sample(cx, node, ins, attrs):
    x, grid = ins
    xs, gs = _static_shape(x), _static_shape(grid)
    mode = _MODES.get(attrs.get("mode", "linear" if cx.opset >= 20 else "bilinear"))
    padding = attrs.get("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise OnnxUnsupported(f"GridSample mode {attrs.get('mode')!r} / padding_mode {padding!r}")
    if len(xs) < 3 or len(gs) != len(xs) or gs[0] != xs[0] or gs[-1] != len(xs) - 2:
        raise OnnxFormatError(f"GridSample grid {gs} does not fit X {xs}")
    if mode != "nearest" and not x.dtype.is_float:
        raise OnnxUnsupported(f"GridSample {mode} on {x.dtype} (integer interpolation)")
    if not grid.dtype.is_float:
        raise OnnxFormatError(f"GridSample grid must be a float tensor, got {grid.dtype}")
    return grid_sample(cx.g, x, grid, mode=mode, padding=padding, align_corners=bool(attrs.get("align_corners", 0)))


@converter("DeformConv")
def _deform_conv(cx, node, ins, attrs):
    """2-D deformable convolution: every kernel tap of every output pixel is read bilinearly (zeros
    outside) at its offset position, scaled by the mask, then contracted with the weights per group."""
    x, w, offset = ins[0], ins[1], ins[2]
    bias = ins[3] if len(node.input) > 3 and node.input[3] else None
    mask = ins[4] if len(node.input) > 4 and node.input[4] else None
    xs, ws, offs = _static_shape(x), _static_shape(w), _static_shape(offset)
    if len(xs) != 4 or len(ws) != 4 or len(offs) != 4:
        raise OnnxUnsupported(f"DeformConv: only 2-D spatial inputs are supported (X {xs})")
    if not x.dtype.is_float:
        raise OnnxFormatError(f"DeformConv needs a float X, got {x.dtype}")
    n, ch, _h, _w = xs
    oc, cpg, kh, kw = ws
    group, og = attrs.get("group", 1), attrs.get("offset_group", 1)
    (sh, sw), (dh, dw) = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    top, left = attrs.get("pads", [0, 0, 0, 0])[:2]
    oh, ow = offs[2:]
    if ch != cpg * group or oc % group or ch % og or offs[:2] != [n, og * kh * kw * 2]:
        raise OnnxFormatError(f"DeformConv shapes do not fit: X {xs}, W {ws}, offset {offs}, group {group}, offset_group {og}")
    ct = DType.F64 if x.dtype == DType.F64 else DType.F32
    # sampling points [N*og, kh*kw*oh*ow, 2] in pixels: the regular grid plus the offsets
    grid = np.stack(np.meshgrid(np.arange(kh) * dh, np.arange(kw) * dw, np.arange(oh) * sh - top, np.arange(ow) * sw - left,
                                indexing="ij"), axis=0)
    base = np.stack([grid[0] + grid[2], grid[1] + grid[3]], axis=-1)  # [kh, kw, oh, ow, 2]
    off = cx.g.transpose(_reshape(cx, _cast(cx, offset, ct), [n, og, kh, kw, 2, oh, ow]), perm=[0, 1, 2, 3, 5, 6, 4])
    pos = _reshape(cx, off + cx.const(base.astype(ct.numpy)), [n * og, kh * kw * oh * ow, 2])
    cols = sample_points(cx.g, _reshape(cx, x, [n * og, ch // og, *xs[2:]]), pos, mode="linear", padding="zeros", align_corners=True)
    cols = _reshape(cx, cols, [n, og, kh, kw, oh, ow, ch // og])
    if mask is not None:
        cols = cols * _reshape(cx, _cast(cx, mask, ct), [n, og, kh, kw, oh, ow, 1])
    # [group, N*oh*ow, cpg*kh*kw] against the weights [group, oc/group, cpg*kh*kw]
    cols = cx.g.transpose(cols, perm=[0, 4, 5, 1, 6, 2, 3])  # [N, oh, ow, og, C/og, kh, kw]: channel = og * C/og
    cols = cx.g.transpose(_reshape(cx, cols, [n * oh * ow, group, cpg * kh * kw]), perm=[1, 0, 2])
    wt = _reshape(cx, _cast(cx, w, ct), [group, oc // group, cpg * kh * kw])
    y = cx.g.dot_general(cols, wt, lhs_contracting=[2], rhs_contracting=[2], lhs_batch=[0], rhs_batch=[0])  # [group, N*P, oc/g]
    y = cx.g.transpose(_reshape(cx, y, [group, n, oh, ow, oc // group]), perm=[1, 0, 4, 2, 3])
    y = _reshape(cx, y, [n, oc, oh, ow])
    if bias is not None:
        y = y + _reshape(cx, _cast(cx, bias, ct), [1, oc, 1, 1])
    return _cast(cx, y, x.dtype)
