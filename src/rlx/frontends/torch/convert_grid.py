"""torch converters for grid sampling (``grid_sampler``, ``grid_sampler_2d`` / ``_3d``): rlx.frontends.grid_sample
in torch's order of operations (nearest rounds after the padding, cubic takes its taps from the raw coordinate)."""

from __future__ import annotations

from rlx.frontends.grid_sample import grid_sample
from rlx.frontends.torch.context import _conv

_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


@_conv("aten.grid_sampler.default", "aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default")
def _grid_sampler(cx, node, x, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    mode, padding = _MODES.get(int(interpolation_mode)), _PADDINGS.get(int(padding_mode))
    if mode is None or padding is None:
        raise cx.fail(f"grid_sampler interpolation_mode {interpolation_mode} / padding_mode {padding_mode} unknown")
    if not (x.shape.is_static and grid.shape.is_static):
        raise cx.fail(f"grid_sampler needs static shapes, got {x.shape!r} and {grid.shape!r}")
    return grid_sample(cx.g, x, grid, mode=mode, padding=padding, align_corners=bool(align_corners),
                       coordinate_padding=mode != "cubic", round_first=False)
