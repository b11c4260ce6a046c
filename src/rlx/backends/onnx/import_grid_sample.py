"""ONNX GridSample converter (opset 16 names bilinear / bicubic, opset 20 linear / cubic and N-D)."""

from __future__ import annotations

from rlx.backends.grid_sample import grid_sample
from rlx.backends.onnx.common import OnnxFormatError, OnnxUnsupported
from rlx.backends.onnx.import_context import converter
from rlx.backends.onnx.import_helpers import _static_shape

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
