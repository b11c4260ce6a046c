"""Grid sampling (ONNX GridSample and DeformConv's taps, torch ``grid_sampler``) as a composition of MIR ops.

``x`` [N, C, *S] is read at the points of ``grid`` [N, *O, r] (r = len(S); ``grid[..., 0]`` is the
last spatial axis, normalised to [-1, 1]) -> [N, C, *O]. Per axis the normalised coordinate is
unnormalised (``align_corners``: -1 / 1 are the centres of the end pixels, else their outer edges),
then the interpolation taps (1 nearest, 2 linear, 4 cubic: the cubic convolution kernel, a = -0.75) are found from its
floor, their weights from its fractional part, and each tap index is made valid by the padding
mode (``zeros``: the tap reads 0; ``border``: clamped; ``reflection``: mirrored about the border
[lo, hi], repeatedly). Every tap of every point is one row of a single ``gather`` on x laid out
[N·P, C]; the weighted sum over taps follows. So every backend runs it, and it differentiates
through gather / where in the data (the grid gets zero gradient through floor).

``coordinate_padding`` (ONNX) also moves an out-of-range coordinate itself into range before the
taps are taken (border: to the nearest end pixel; reflection: mirrored), and ``nearest`` rounds
before it; torch does the same for nearest / linear but rounds after, and takes cubic taps from the
raw coordinate (``coordinate_padding=False`` for cubic, ``round_first=False``).
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import AttributeSchemaError, ShapeError
from rlx.ir.graph import Graph, Value

MODES = ("nearest", "linear", "cubic")
PADDINGS = ("zeros", "border", "reflection")
CUBIC_A = -0.75


def _c(g: Graph, arr, dtype: DType) -> Value:
    return g.constant(np.asarray(arr, dtype=dtype.numpy))


def _reflect(g: Graph, x: Value, lo: np.ndarray, hi: np.ndarray, ct: DType) -> Value:
    """``x`` mirrored about [lo, hi] until inside (per axis: the last dim of ``x`` broadcasts against lo / hi)."""
    span = hi - lo
    span = np.where(span > 0, span, 1.0)  # a one-pixel align_corners axis: clamped by the caller
    lo_v, hi_v, span_v = _c(g, lo, ct), _c(g, hi, ct), _c(g, span, ct)
    below, above = g.lt(x, lo_v), g.gt(x, hi_v)
    dist = g.where(below, lo_v - x, x - hi_v)
    turns = g.unary_math(dist / span_v, kind="floor")
    rest = dist - turns * span_v
    odd = g.ne(g.binary_ext(turns, g.scalar(2.0, ct), op="mod"), g.scalar(0.0, ct))
    from_lo = g.binary_ext(below, odd, op="bitwise_xor")  # below & even, or (above) & odd: lo + rest
    mirrored = g.where(from_lo, lo_v + rest, hi_v - rest)
    return g.where(g.binary_ext(below, above, op="bitwise_or"), mirrored, x)


def _tap_weights(g: Graph, t: Value, mode: str, ct: DType) -> tuple[np.ndarray, Value]:
    """Tap offsets from floor(x) and their weights [..., k] for the fractional part ``t`` [..., 1]."""
    if mode == "linear":
        return np.array([0, 1]), g.concat([1.0 - t, t], axis=-1)
    a = CUBIC_A
    u = t * _c(g, [1, 1, -1, -1], ct) + _c(g, [1, 0, 1, 2], ct)  # distances |x - tap|: t+1, t, 1-t, 2-t
    near = ((a + 2) * u - (a + 3)) * u * u + 1.0
    far = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
    return np.array([-1, 0, 1, 2]), g.where(g.constant(np.array([False, True, True, False])), near, far)


def _check(mode: str, padding: str, x: Value) -> None:
    if mode not in MODES or padding not in PADDINGS:
        raise AttributeSchemaError(f"grid_sample: mode {mode!r} / padding {padding!r} not in {MODES} / {PADDINGS}")
    if mode != "nearest" and not x.dtype.is_float:
        raise AttributeSchemaError(f"grid_sample: {mode} interpolation needs a float x, got {x.dtype}")


def grid_sample(g: Graph, x: Value, grid: Value, *, mode: str = "linear", padding: str = "zeros",
                align_corners: bool = False, coordinate_padding: bool = True, round_first: bool = True) -> Value:
    """Sample ``x`` [N, C, *S] at ``grid`` [N, *O, len(S)] -> [N, C, *O] (module docstring). Static shapes."""
    _check(mode, padding, x)
    if not (x.shape.is_static and grid.shape.is_static):
        raise ShapeError(f"grid_sample needs static shapes, got x {x.shape!r}, grid {grid.shape!r}")
    xs, gs = [int(d) for d in x.shape], [int(d) for d in grid.shape]
    r = len(xs) - 2
    if r < 1 or len(gs) != r + 2 or gs[0] != xs[0] or gs[-1] != r:
        raise ShapeError(f"grid_sample: grid {gs} does not fit x {xs} (expected [{xs[0]}, *out, {max(r, 0)}])")
    n, ch, sizes, outs = xs[0], xs[1], xs[2:], gs[1:-1]
    ct = DType.F64 if DType.F64 in (x.dtype, grid.dtype) else DType.F32
    m = math.prod(outs)
    d = np.array(sizes, np.float64)
    # coordinates [N, M, r], column i along spatial axis i, unnormalised to pixels
    c = g.reshape(grid if grid.dtype == ct else g.cast(grid, to=ct), new_shape=[n, m, r])
    c = g.gather(c, g.constant(np.arange(r - 1, -1, -1, dtype=np.int64)), axis=2)
    pos = (c + 1.0) / 2.0 * _c(g, d - 1, ct) if align_corners else ((c + 1.0) * _c(g, d, ct) - 1.0) / 2.0
    vals = sample_points(g, x, pos, mode=mode, padding=padding, align_corners=align_corners,
                         coordinate_padding=coordinate_padding, round_first=round_first)
    out = g.reshape(g.transpose(vals, perm=[0, 2, 1]), new_shape=[n, ch, *outs])
    return out if out.dtype == x.dtype else g.cast(out, to=x.dtype)


def sample_points(g: Graph, x: Value, pos: Value, *, mode: str = "linear", padding: str = "zeros",
                  align_corners: bool = False, coordinate_padding: bool = True, round_first: bool = True) -> Value:
    """Sample ``x`` [N, C, *S] at pixel coordinates ``pos`` [N, M, len(S)] (column i along spatial axis i)
    -> [N, M, C] (nearest: x's dtype; else f32, or f64 when x or pos is). ``align_corners`` places the
    borders of border / reflection padding (module docstring)."""
    _check(mode, padding, x)
    xs, ps = [int(d) for d in x.shape], [int(d) for d in pos.shape]
    n, ch, sizes, m, r = xs[0], xs[1], xs[2:], ps[1], len(xs) - 2
    if len(ps) != 3 or ps[0] != n or ps[2] != r:
        raise ShapeError(f"sample_points: points {ps} do not fit x {xs} (expected [{n}, M, {r}])")
    ct = DType.F64 if DType.F64 in (x.dtype, pos.dtype) else DType.F32
    pos = pos if pos.dtype == ct else g.cast(pos, to=ct)
    p = math.prod(sizes)
    d = np.array(sizes, np.float64)
    lo, hi = (np.zeros(r), d - 1) if align_corners else (np.full(r, -0.5), d - 0.5)
    top = _c(g, d - 1, ct)
    if mode == "nearest" and round_first:
        pos = g.unary_math(pos, kind="round_even")
    if coordinate_padding and padding == "border":
        pos = g.where(g.lt(pos, _c(g, lo, ct)), g.scalar(0.0, ct), g.where(g.gt(pos, _c(g, hi, ct)), top, pos))
    elif coordinate_padding and padding == "reflection":
        pos = _reflect(g, pos, lo, hi, ct)
        if not align_corners and not round_first:  # torch keeps the reflected coordinate on the pixel centres
            pos = g.fmin(g.fmax(pos, g.scalar(0.0, ct)), top)
    if mode == "nearest" and not round_first:
        pos = g.unary_math(pos, kind="round_even")

    # taps [N, M, r, k] and weights
    pos = g.reshape(pos, new_shape=[n, m, r, 1])
    if mode == "nearest":
        offs, w = np.array([0]), None
        base = pos
    else:
        base = g.unary_math(pos, kind="floor")
        offs, w = _tap_weights(g, pos - base, mode, ct)
    k = len(offs)
    taps = base + _c(g, offs, ct)
    top4 = _c(g, (d - 1).reshape(r, 1), ct)
    valid = None
    if padding == "zeros":
        valid = g.binary_ext(g.ge(taps, g.scalar(0.0, ct)), g.le(taps, top4), op="bitwise_and")
    elif padding == "reflection":
        taps = _reflect(g, taps, lo.reshape(r, 1), hi.reshape(r, 1), ct)
    taps = g.cast(g.fmin(g.fmax(taps, g.scalar(0.0, ct)), top4), to=DType.I64)  # NaN reads pixel 0

    # combine the axes: flat tap rows [N, M, k**r] into the [N*P, C] table, weights as products
    strides = [math.prod(sizes[i + 1:]) for i in range(r)]
    flat = g.constant((np.arange(n, dtype=np.int64) * p).reshape([n, 1] + [1] * r))
    weight = mask = None
    for i in range(r):
        shape = [n, m] + [k if j == i else 1 for j in range(r)]
        sel = g.constant(np.array([i], np.int64))
        flat = flat + g.reshape(g.gather(taps, sel, axis=2), new_shape=shape) * g.scalar(strides[i], DType.I64)
        if w is not None:
            wi = g.reshape(g.gather(w, sel, axis=2), new_shape=shape)
            weight = wi if weight is None else weight * wi
        if valid is not None:
            vi = g.reshape(g.gather(valid, sel, axis=2), new_shape=shape)
            mask = vi if mask is None else g.binary_ext(mask, vi, op="bitwise_and")
    t = k ** r
    table = g.reshape(g.transpose(g.reshape(x, new_shape=[n, ch, p]), perm=[0, 2, 1]), new_shape=[n * p, ch])
    if w is not None and table.dtype != ct:
        table = g.cast(table, to=ct)
    vals = g.gather(table, g.reshape(flat, new_shape=[n, m, t]), axis=0)  # [N, M, T, C]
    if mask is not None:
        vals = g.where(g.reshape(mask, new_shape=[n, m, t, 1]), vals, g.scalar(0, vals.dtype))
    if weight is not None:
        return g.reduce(vals * g.reshape(weight, new_shape=[n, m, t, 1]), op="sum", axes=[2], keep_dim=False)
    return g.reshape(vals, new_shape=[n, m, ch])
