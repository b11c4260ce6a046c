"""ONNX GridSample (opset 16 names bilinear / bicubic, opset 20 linear / cubic and N-D), DeformConv and RoiAlign:
converters that sample an image at computed points (the first two on rlx.frontends.grid_sample)."""

from __future__ import annotations

import numpy as np

from rlx.frontends.grid_sample import grid_sample, sample_points
from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported

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


def _roi_axis(start: float, size: float, bins: int, grid: int, n: int) -> tuple[np.ndarray, ...]:
    """Per axis of one ROI: for bins x samples, the low / high source index and their weights (0 outside [-1, n])."""
    at = start + np.arange(bins)[:, None] * (size / bins) + (np.arange(grid)[None, :] + 0.5) * (size / bins) / grid
    inside = (at >= -1.0) & (at <= n)
    at = np.maximum(at, 0.0)
    low = np.floor(at).astype(np.int64)
    edge = low >= n - 1
    low = np.where(edge, n - 1, low)
    high = np.where(edge, n - 1, low + 1)
    frac = np.where(edge, 0.0, at - low)
    return low, high, np.where(inside, 1.0 - frac, 0.0), np.where(inside, frac, 0.0)


@converter("RoiAlign")
def _roi_align(cx, node, ins, attrs):
    """Per ROI and output bin, the mean (or max) of a grid of bilinear samples. The ROIs and their batch
    indices must be known when the graph is built (import_runnable specialises on them): the sample
    positions and weights are computed then, and the graph is one gather of the four corners plus the
    weighted reduction."""
    x = ins[0]
    shape = _static_shape(x)
    if len(shape) != 4 or not x.dtype.is_float:
        raise OnnxFormatError(f"RoiAlign needs a float [N, C, H, W] input, got {x.dtype} {shape}")
    rois = np.asarray(cx.static(node.input[1], "rois"), np.float64)
    batch = np.asarray(cx.static(node.input[2], "batch_indices")).reshape(-1).astype(np.int64)
    n, ch, h, w = shape
    if rois.ndim != 2 or rois.shape[1] != 4 or rois.shape[0] != batch.size or ((batch < 0) | (batch >= n)).any():
        raise OnnxFormatError(f"RoiAlign rois {list(rois.shape)} / batch_indices {batch.tolist()} do not fit X {shape}")
    oh, ow = attrs.get("output_height", 1), attrs.get("output_width", 1)
    ratio, scale, mode = attrs.get("sampling_ratio", 0), attrs.get("spatial_scale", 1.0), attrs.get("mode", "avg")
    half = attrs.get("coordinate_transformation_mode", "half_pixel" if cx.opset >= 16 else "output_half_pixel") == "half_pixel"
    if mode not in ("avg", "max"):
        raise OnnxUnsupported(f"RoiAlign mode {mode!r}")
    per_roi = []
    for (x0, y0, x1, y1), b in zip(rois * scale - (0.5 if half else 0.0), batch):
        rw, rh = (x1 - x0, y1 - y0) if half else (max(x1 - x0, 1.0), max(y1 - y0, 1.0))
        gh, gw = (ratio, ratio) if ratio > 0 else (int(np.ceil(rh / oh)), int(np.ceil(rw / ow)))
        ylo, yhi, wylo, wyhi = _roi_axis(y0, rh, oh, gh, h)  # [oh, gh]
        xlo, xhi, wxlo, wxhi = _roi_axis(x0, rw, ow, gw, w)  # [ow, gw]
        yy = [v[:, None, :, None] for v in (ylo, yhi, wylo, wyhi)]  # [oh, 1, gh, 1]
        xx = [v[None, :, None, :] for v in (xlo, xhi, wxlo, wxhi)]  # [1, ow, 1, gw]
        idx = np.stack([yy[a] * w + xx[c] for a in (0, 1) for c in (0, 1)], axis=-1) + b * h * w
        wt = np.stack([yy[2 + a] * xx[2 + c] for a in (0, 1) for c in (0, 1)], axis=-1)
        per_roi.append((idx.reshape(oh * ow, -1, 4), wt.reshape(oh * ow, -1, 4), max(gh * gw, 1)))
    r, samples = len(per_roi), max(max(i.shape[1] for i, _, _ in per_roi), 1)
    cx.check_elements(r * oh * ow * samples * 4 * ch, "the RoiAlign samples")
    idx = np.zeros((r, oh * ow, samples, 4), np.int64)
    wt = np.zeros((r, oh * ow, samples, 4))
    real = np.zeros((r, 1, samples, 1), bool)  # samples beyond this ROI's grid are padding
    for k, (i, wk, count) in enumerate(per_roi):
        idx[k, :, : i.shape[1]], wt[k, :, : i.shape[1]] = i, wk / count if mode == "avg" else wk
        real[k, :, : i.shape[1]] = True
    ct = DType.F64 if x.dtype == DType.F64 else DType.F32
    table = _cast(cx, _reshape(cx, cx.g.transpose(x, perm=[0, 2, 3, 1]), [n * h * w, ch]), ct)
    vals = cx.g.gather(table, cx.const(idx), axis=0) * cx.const(wt[..., None].astype(ct.numpy))  # [R, P, S, 4, C]
    if mode == "avg":
        y = cx.g.reduce(vals, op="sum", axes=[2, 3], keep_dim=False)
    else:  # the largest weighted corner of any sample (onnxruntime's and the reference's max)
        y = cx.g.reduce(vals, op="max", axes=[3], keep_dim=False)
        y = cx.g.reduce(cx.g.where(cx.const(real), y, cx.scalar(-np.inf, y)), op="max", axes=[2], keep_dim=False)
    y = cx.g.transpose(_reshape(cx, y, [r, oh, ow, ch]), perm=[0, 3, 1, 2])
    return _cast(cx, y, x.dtype)
