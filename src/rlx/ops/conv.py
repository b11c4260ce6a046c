"""2-D convolution and pooling on NCHW tensors: conv2d, conv_transpose2d, pool2d, resize_nearest_2x.

Geometry attributes are pairs ``[h, w]``. Channels and weights must be static; batch and
spatial dims may be symbolic (output sizes are then floordiv expressions). Kernels are vectorized NumPy (strided window views
plus ``einsum``; conv2d: im2col and a batched matmul; pooling: one whole-image step per window tap), never
loops over pixels.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType, promote_all
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ir.symbolic import known_ge
from rlx.ops.common import compute_dtype, promote_args, require_float, require_rank
from rlx.ops.cost import conv_macs, conv_transpose_macs
from rlx.ops.facts import CONV_WEIGHT
from rlx.ops.kinds import REDUCE_KINDS

POOL_KINDS = ("max", "mean", "sum", "min", "prod", "fmax", "fmin")


def _pair(attrs, key: str, minimum: int) -> tuple[int, int]:
    value = attrs[key]
    if len(value) != 2 or any(v < minimum for v in value):
        raise ShapeError(f"{key} must be two ints >= {minimum}, got {list(value)}")
    return int(value[0]), int(value[1])


def _nchw(x: TensorType, what: str = "x") -> tuple:
    """N, C, H, W of an NCHW operand; C must be static, N, H and W may be symbolic."""
    require_rank(x, 4, f"{what} (NCHW)")
    n, c, h, w = x.shape
    if not isinstance(c, int):
        raise ShapeError(f"{what} {x.shape!r}: the channel dim must be static")
    return n, c, h, w


def _require_positive(ho, wo, detail: str) -> None:
    """Output spatial sizes must be >= 1; for symbolic sizes only when provably < 1 (else the
    sizes bound at run time are re-checked by this rule)."""
    if known_ge(ho, 1) is False or known_ge(wo, 1) is False:
        raise ShapeError(f"output spatial size {ho}x{wo} is not positive ({detail})")


def kernel_size_canon(ins, attrs):
    """kernel_size=None is taken from the weight's trailing dims."""
    if attrs["kernel_size"] is None and len(ins) > 1 and len(ins[1].shape) == 4 and ins[1].shape.is_static:
        return {**attrs, "kernel_size": tuple(ins[1].shape[2:])}
    return attrs


def _weight(ins, attrs) -> tuple[int, int, int, int]:
    w = ins[1]
    require_rank(w, 4, "w")
    if not w.shape.is_static:
        raise ShapeError(f"w {w.shape!r} must be static")
    k = attrs["kernel_size"]
    if k is not None and tuple(k) != tuple(w.shape[2:]):
        raise ShapeError(f"kernel_size {list(k)} does not match the weight's spatial dims {list(w.shape[2:])}")
    return tuple(w.shape)  # type: ignore[return-value]


def _conv_dtype(ins):
    for t, what in zip(ins, ("x", "w")):
        require_float(t, what)
    return promote_all([t.dtype for t in ins])


def conv_out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(x: np.ndarray, k, s, d) -> np.ndarray:
    """[N, C, H, W] (already padded) -> [N, C, Ho, Wo, kH, kW] strided, dilated window view."""
    span = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    v = sliding_window_view(x, span, axis=(2, 3))
    return v[:, :, :: s[0], :: s[1], :: d[0], :: d[1]]


# =============================================================================== autodiff
# VJP / JVP / batch rules of the conv family (contract: rlx.autodiff.rules). Gradients use
# the backward kernels (docs/pipeline.md#autodiff): conv2d -> conv2d_backward_input / _weight, max
# pooling -> max_pool2d_backward, mean / sum pooling -> conv2d_backward_input with a
# constant depthwise kernel. Window taps are read with a depthwise conv2d whose kernel is
# one-hot ("patches", im2col) and written back with its adjoint conv2d_backward_input
# (col2im), so every rule is exact for any stride / padding / dilation / groups.
#
# vmap: every op here is per-sample and per-channel (up to its weight), so a batched
# [B, N, C, H, W] value is folded to 4-D (see Fold): into N when B and N are static, else
# the static one of them into the channels (weights tiled, groups multiplied), because a
# product of a symbol and a size is not expressible. Batched weights go through im2col:
# patches @ per-example weights (matmul batches over B, any B).

def const_like(g, arr, dtype):
    """A constant array in ``dtype``."""
    return g.constant(np.asarray(arr, dtype=compute_dtype(dtype)), dtype=dtype)


def tap_weight(channels: int, k) -> np.ndarray:
    """One-hot depthwise kernel [C·K, 1, kH, kW] (K = kH·kW): channel c·K + t reads tap t
    (row-major window order) of channel c when used with groups = C."""
    kk = k[0] * k[1]
    return np.tile(np.eye(kk).reshape(kk, 1, k[0], k[1]), (channels, 1, 1, 1))


def patches(g, x, k, stride, padding, dilation):
    """im2col of NCHW ``x``: [N, C·K, Ho, Wo], channel c·K + t = tap t of channel c (zero padding)."""
    c = x.shape[1]
    w = const_like(g, tap_weight(c, k), x.dtype)
    return g.conv2d(x, w, kernel_size=list(k), stride=list(stride), padding=list(padding), dilation=list(dilation), groups=c)


def col2im(g, cols, input_shape, k, stride, padding, dilation):
    """Adjoint of :func:`patches`: [N, C·K, Ho, Wo] summed back into ``input_shape`` [N, C, H, W]."""
    c = input_shape[1]
    w = const_like(g, tap_weight(c, k), cols.dtype)
    return g.conv2d_backward_input(cols, w, input_shape=list(input_shape), kernel_size=list(k), stride=list(stride),
                                   padding=list(padding), dilation=list(dilation), groups=c)


class Fold:
    """A batched NCHW value [B, N, C, H, W] as a 4-D [M, F·C, H, W] for per-sample, per-channel ops.

    mode "n": M = B·N, F = 1 (B and N static); "b": M = B, F = N (N static); "t": M = N,
    F = B (B static; the value is transposed to [N, B, C, H, W] first). Symbolic B and N
    together are an AutodiffError (B·N is not expressible).
    """

    def __init__(self, ctx, n):
        from rlx.ir.errors import AutodiffError

        self.ctx, self.b, self.n = ctx, ctx.batch_size, n
        if isinstance(self.b, int) and isinstance(n, int):
            self.mode, self.f, self.m = "n", 1, self.b * n
        elif isinstance(n, int):
            self.mode, self.f, self.m = "b", n, self.b
        elif isinstance(self.b, int):
            self.mode, self.f, self.m = "t", self.b, n
        else:
            raise AutodiffError(f"vmap of a conv-family op: batch size {self.b!r} and per-example batch dim {n!r} are both "
                                "symbolic; one of them must be static")

    def fold(self, v):
        _, _, c, h, w = v.shape
        if self.mode == "t":
            v = self.ctx.graph.transpose(v, perm=[1, 0, 2, 3, 4])
        return self.ctx.reshape(v, [self.m, self.f * c, h, w])

    def unfold(self, v):
        _, fc, h, w = v.shape
        c = fc // self.f
        if self.mode == "t":
            return self.ctx.graph.transpose(self.ctx.reshape(v, [self.n, self.b, c, h, w]), perm=[1, 0, 2, 3, 4])
        return self.ctx.reshape(v, [self.b, self.n, c, h, w])

    def shape(self, per_example) -> list:
        """The folded 4-D shape of a per-example [N, C, H, W] shape."""
        return [self.m, self.f * per_example[1], *per_example[2:]]

    def tile(self, w):
        """A weight [O, I, kH, kW] repeated F times along O (for groups·F)."""
        if self.f == 1:
            return w
        g = self.ctx.graph
        t = g.expand(self.ctx.reshape(w, [1, *w.shape]), target_shape=[self.f, *w.shape])
        return self.ctx.reshape(t, [self.f * w.shape[0], *w.shape[1:]])


def batched_ops(ctx, operands, batched):
    """Every operand with the batch axis (unbatched ones broadcast to it)."""
    return [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]


def fold_channelwise(ctx, node, operands, batched, **attrs):
    """Batch rule of a per-sample, per-channel op without weights: fold, apply, unfold."""
    ops = batched_ops(ctx, operands, batched)
    f = Fold(ctx, ops[0].shape[1])
    out = ctx.graph.append(node.op, [f.fold(v) for v in ops], {**dict(node.attrs), **attrs})
    unfolded = [f.unfold(v) for v in ctx.graph.results(out)]  # one per result
    return tuple(unfolded) if node.extra_types else unfolded[0]


def _sum_parts(parts):
    present = [p for p in parts if p is not None]
    if not present:
        return None
    out = present[0]
    for p in present[1:]:
        out = out + p
    return out


def conv_geo(attrs) -> dict:
    return {k: list(attrs[k]) for k in ("kernel_size", "stride", "padding", "dilation")} | {"groups": attrs["groups"]}


def bilinear_jvp(ctx, node, tangents):
    """JVP of an op bilinear in (x, w), e.g. conv2d / conv_transpose2d: op(tx, w) + op(x, tw)."""
    g = ctx.graph
    x, w = ctx.operands(node)
    tx, tw = tangents
    return _sum_parts([None if tx is None else g.append(node.op, [tx, w], node.attrs),
                       None if tw is None else g.append(node.op, [x, tw], node.attrs)])


# ---------------------------------------------------------------------- conv2d rules
def _conv2d_vjp(ctx, node, ct):
    g = ctx.graph
    x, w = ctx.operands(node)
    geo = conv_geo(node.attrs)
    dx = g.conv2d_backward_input(ct, w, input_shape=list(x.shape), **geo) if ctx.wants(node, 0) else None
    dw = g.conv2d_backward_weight(x, ct, weight_shape=list(w.shape), **geo) if ctx.wants(node, 1) else None
    return [dx, dw]


def _conv2d_batch(ctx, node, operands, batched):
    g = ctx.graph
    x, w = operands
    a = node.attrs
    if not batched[1]:
        f = Fold(ctx, x.shape[1])
        y = g.conv2d(f.fold(x), f.tile(w), **{**conv_geo(a), "groups": a["groups"] * f.f})
        return f.unfold(y)
    # per-example weights: im2col, then a batched matmul with the weights
    b = ctx.batch_size
    cout, cin_g, kh, kw = w.shape[1:]
    groups, kk = a["groups"], kh * kw
    ho, wo = node.shape[2:]
    geo = (a["kernel_size"], a["stride"], a["padding"], a["dilation"])
    if batched[0]:
        f = Fold(ctx, x.shape[1])
        cols = f.unfold(patches(g, f.fold(x), *geo))  # [B, N, C·K, Ho, Wo]
        lead = [b, x.shape[1]]
    else:
        cols = patches(g, x, *geo)  # [N, C·K, Ho, Wo]
        lead = [x.shape[0]]
    cols = ctx.reshape(cols, [*lead, groups, cin_g * kk, ho * wo])
    wm = ctx.reshape(w, [b, 1, groups, cout // groups, cin_g * kk])
    y = g.matmul(wm, cols)  # [B, N, G, Cout/G, Ho·Wo]
    return ctx.reshape(y, [b, node.shape[0], cout, ho, wo])


# ------------------------------------------------------------- conv_transpose2d rules
def zero_pad_end(ctx, v, axis: int, extra: int):
    """``v`` with ``extra`` zero rows appended along ``axis`` (2 or 3); the batch dim may be symbolic."""
    if extra <= 0:
        return v
    g = ctx.graph
    shape = list(v.shape)
    shape[axis] = extra
    if all(isinstance(d, int) for d in shape):
        zeros = const_like(g, np.zeros(shape), v.dtype)
    else:  # broadcast a [1, ...] zero block to the symbolic batch dim through where(cond, z, z)
        z = const_like(g, np.zeros([1, *shape[1:]]), v.dtype)
        cond = g.cast(g.reduce(v, op="sum", axes=[axis], keep_dim=True), to="bool")
        zeros = g.where(cond, z, z)
    return g.concat([v, zeros], axis=axis)


def _conv_t_vjp(ctx, node, ct):
    """conv_transpose2d is the adjoint of conv2d(·, w) with the same geometry, so
    dx = conv2d(ct, w) (cropped to x's size) and dw = conv2d_backward_weight(ct, x)
    (x padded with zero rows where conv2d(ct) would be larger than x)."""
    g = ctx.graph
    x, w = ctx.operands(node)
    a = node.attrs
    geo = conv_geo(a)
    k, s, p, d = a["kernel_size"], a["stride"], a["padding"], a["dilation"]
    fwd = [conv_out_size(node.shape[2 + i], k[i], s[i], p[i], d[i]) for i in range(2)]
    dx = dw = None
    if ctx.wants(node, 0):
        dx = g.conv2d(ct, w, **geo)
        for i in range(2):
            if fwd[i] != x.shape[2 + i]:
                dx = g.narrow(dx, axis=2 + i, start=0, length=x.shape[2 + i])
    if ctx.wants(node, 1):
        xe = x
        for i in range(2):
            xe = zero_pad_end(ctx, xe, 2 + i, fwd[i] - x.shape[2 + i])
        dw = g.conv2d_backward_weight(ct, xe, weight_shape=list(w.shape), **geo)
    return [dx, dw]


def _conv_t_batch(ctx, node, operands, batched):
    g = ctx.graph
    x, w = operands
    a = node.attrs
    if not batched[1]:
        f = Fold(ctx, x.shape[1])
        y = g.append("conv_transpose2d", [f.fold(x), f.tile(w)], {**dict(a), "groups": a["groups"] * f.f})
        return f.unfold(y)
    # per-example weights: columns = wᵀ·x per group (matmul over B), then col2im by a
    # conv_transpose2d with the one-hot tap kernel
    b = ctx.batch_size
    cin, cout_g, kh, kw = w.shape[1:]
    groups, kk = a["groups"], kh * kw
    cin_g = cin // groups
    xb = x if batched[0] else ctx.reshape(x, [1, *x.shape])
    n, _, h, wd = xb.shape[1:]
    xm = ctx.reshape(xb, [xb.shape[0], n, groups, cin_g, h * wd])
    wm = ctx.transpose_last2(ctx.reshape(w, [b, 1, groups, cin_g, cout_g * kk]))
    cols = g.matmul(wm, xm)  # [B, N, G, Cout/G·K, H·W]
    cout = cout_g * groups
    cols = ctx.reshape(cols, [b, n, cout * kk, h, wd])
    f = Fold(ctx, n)
    ones = const_like(g, tap_weight(f.f * cout, (kh, kw)), cols.dtype)
    y = g.append("conv_transpose2d", [f.fold(cols), ones], {**dict(a), "groups": f.f * cout})
    return f.unfold(y)


# ------------------------------------------------------------------------ pool2d rules
def pool_geo(attrs):
    k = tuple(attrs["kernel_size"])
    s = tuple(attrs["stride"]) if attrs["stride"] is not None else k
    return k, s, tuple(attrs["padding"])


def pool_valid(x_shape, attrs) -> np.ndarray:
    """bool [1, 1, K, Ho, Wo]: which window taps fall inside the (unpadded) image."""
    k, s, p = pool_geo(attrs)
    ones = np.ones((1, 1, *x_shape[2:]))
    cols = conv2d_reference(ones, tap_weight(1, k), s, p, (1, 1), 1)
    return (cols > 0.5).reshape(1, 1, *cols.shape[1:])


def pool_count(x_shape, attrs) -> np.ndarray:
    """float64 [Ho, Wo] (a fresh copy): how many taps of each window fall inside the image (the divisor of mean
    with count_include_pad=False, for the kernel, the derivatives and the jax / torch lowerings)."""
    k, s, p = pool_geo(attrs)
    return _pool_count(tuple(int(d) for d in x_shape[2:]), tuple(map(int, k)), tuple(map(int, s)), tuple(map(int, p))).copy()


@functools.lru_cache(maxsize=64)
def _pool_count(hw: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...]) -> np.ndarray:
    return pool_valid((1, 1, *hw), {"kernel_size": k, "stride": s, "padding": p}).sum(axis=2, dtype=np.float64)[0, 0]


def pool_taps(ctx, v, attrs):
    """The window taps of NCHW ``v``: [N, C, K, Ho, Wo] (zero where a tap is padding)."""
    k, s, p = pool_geo(attrs)
    cols = patches(ctx.graph, v, k, s, p, (1, 1))
    return ctx.reshape(cols, [v.shape[0], v.shape[1], k[0] * k[1], *cols.shape[2:]])


def first_max_mask(ctx, x, y, attrs):
    """bool [N, C, K, Ho, Wo]: the first in-bounds tap (row-major window order) equal to the
    window's max ``y``, the tap max_pool2d_backward routes the gradient to (none if y is NaN)."""
    g = ctx.graph
    taps = pool_taps(ctx, x, attrs)
    valid = g.constant(pool_valid(x.shape, attrs))
    hit = g.mul(g.eq(taps, ctx.reshape(y, [y.shape[0], y.shape[1], 1, *y.shape[2:]])), valid)
    count = g.cumulative(g.cast(hit, to=x.dtype), op="sum", axis=2)
    return g.mul(hit, g.eq(count, g.scalar(1.0, x.dtype)))


def select_taps(ctx, mask, t, attrs):
    """Σ over window taps of ``t``'s taps where ``mask``: [N, C, Ho, Wo] (linear in t)."""
    return ctx.graph.reduce(ctx.where_zero(mask, pool_taps(ctx, t, attrs)), op="sum", axes=[2])


def _prod_others(ctx, x, attrs):
    """[N, C, K, Ho, Wo]: product of a window's other in-bounds taps (exact at zeros)."""
    g = ctx.graph
    k, _, _ = pool_geo(attrs)
    kk = k[0] * k[1]
    one = g.scalar(1.0, x.dtype)
    taps = g.where(g.constant(pool_valid(x.shape, attrs)), pool_taps(ctx, x, attrs), one)
    n, c, _, ho, wo = taps.shape
    taps = ctx.reshape(taps, [n, c, 1, kk, ho, wo])
    eye = g.constant(np.eye(kk, dtype=bool).reshape(1, 1, kk, kk, 1, 1))
    return g.reduce(g.where(eye, one, taps), op="prod", axes=[3])


def _pool_mean_scale(ctx, x, u, attrs):
    g = ctx.graph
    k, _, _ = pool_geo(attrs)
    if attrs["count_include_pad"]:
        return u * g.scalar(1.0 / (k[0] * k[1]), u.dtype)
    count = pool_count(x.shape, attrs)  # [Ho, Wo]
    return u / const_like(g, count, u.dtype)


def _pool_vjp(ctx, node, ct):
    g = ctx.graph
    x = ctx.operand(node, 0)
    a, kind = node.attrs, node.attrs["kind"]
    k, s, p = pool_geo(a)
    win = {"kernel_size": list(k), "stride": list(s), "padding": list(p)}
    if kind in ("max", "fmax"):
        return [g.max_pool2d_backward(x, ct, **win)]
    if kind in ("min", "fmin"):  # min = -max(-x): same first-winner rule on -x
        return [g.max_pool2d_backward(g.neg(x), ct, **win)]
    if kind == "prod":
        u = _prod_others(ctx, x, a) * ctx.reshape(ct, [ct.shape[0], ct.shape[1], 1, *ct.shape[2:]])
        u = ctx.reshape(u, [x.shape[0], x.shape[1] * k[0] * k[1], *ct.shape[2:]])
        return [col2im(g, u, list(x.shape), k, s, p, (1, 1))]
    u = _pool_mean_scale(ctx, x, ct, a) if kind == "mean" else ct
    ones = const_like(g, np.ones((x.shape[1], 1, *k)), u.dtype)
    return [g.conv2d_backward_input(u, ones, input_shape=list(x.shape), dilation=[1, 1], groups=x.shape[1], **win)]


def _pool_jvp(ctx, node, tangents):
    g = ctx.graph
    (t,) = tangents
    x, y = ctx.operand(node, 0), ctx.output(node)
    kind = node.attrs["kind"]
    if kind in ("sum", "mean"):
        return g.append("pool2d", [t], node.attrs)
    if kind in ("max", "fmax"):
        return select_taps(ctx, first_max_mask(ctx, x, y, node.attrs), t, node.attrs)
    if kind in ("min", "fmin"):
        return select_taps(ctx, first_max_mask(ctx, g.neg(x), g.neg(y), node.attrs), t, node.attrs)
    return g.reduce(_prod_others(ctx, x, node.attrs) * pool_taps(ctx, t, node.attrs), op="sum", axes=[2])


# ------------------------------------------------------------------- resize rules
def _resize_vjp(ctx, node, ct):
    return [ctx.graph.pool2d(ct, kind="sum", kernel_size=[2, 2], stride=[2, 2])]


# ----------------------------------------------------------------------------- conv2d
def _conv2d_type(ins, attrs):
    dtype = _conv_dtype(ins)
    n, c, h, w = _nchw(ins[0])
    cout, cin_g, kh, kw = _weight(ins, attrs)
    s, p, d = _pair(attrs, "stride", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    g = attrs["groups"]
    if g < 1 or cin_g * g != c or cout % g:
        raise ShapeError(f"groups={g}: need w.shape[1] * groups == C_in ({cin_g} * {g} vs {c}) and C_out {cout} divisible by groups")
    ho, wo = conv_out_size(h, kh, s[0], p[0], d[0]), conv_out_size(w, kw, s[1], p[1], d[1])
    _require_positive(ho, wo, f"input {h}x{w}, kernel {kh}x{kw}, dilation {list(d)}, padding {list(p)}")
    return TensorType(Shape((n, cout, ho, wo)), dtype)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int,
                     out: np.ndarray | None = None) -> np.ndarray:
    """Grouped, strided, dilated cross-correlation: im2col (a copy of the window view) then one
    batched matmul per group, written into ``out`` (C-contiguous [N, Cout, Ho, Wo]) when given.

    A depthwise conv (one input channel per group) accumulates its kH·kW taps instead (a matmul
    with one output row per group would be G tiny GEMMs). An einsum over the window view with
    the group index in both operands never reaches BLAS (about 10x slower on a ResNet layer)."""
    n = x.shape[0]
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2)) if any(padding) else x
    view = _windows(xp, (kh, kw), stride, dilation)  # [N, C, Ho, Wo, kH, kW]
    ho, wo = view.shape[2:4]
    dtype = np.result_type(x, w)
    if out is None:
        out = np.empty((n, cout, ho, wo), dtype)
    if cin_g == 1 and cout == groups:
        return _depthwise(xp, view, w.astype(dtype, copy=False), stride, dilation, out)
    if kh == kw == 1:  # pointwise: the (strided) input is its own im2col, a view when contiguous
        cols = np.ascontiguousarray(view[..., 0, 0], dtype=dtype).reshape(n, groups, cin_g, ho * wo)
    else:
        cols = view.reshape(n, groups, cin_g, ho, wo, kh, kw).transpose(0, 1, 2, 5, 6, 3, 4)
        cols = np.ascontiguousarray(cols, dtype=dtype).reshape(n, groups, cin_g * kh * kw, ho * wo)
    wg = w.astype(dtype, copy=False).reshape(groups, cout // groups, cin_g * kh * kw)
    np.matmul(wg, cols, out=out.reshape(n, groups, cout // groups, ho * wo))
    return out


def _depthwise(xp: np.ndarray, view: np.ndarray, w: np.ndarray, stride, dilation, out: np.ndarray) -> np.ndarray:
    """out[n, c] = sum over taps t (row-major) of x_tap_t[n, c] * w[c, t], one multiply and one add per tap.

    Narrow outputs (Wo < 32) run channels-last, where the innermost loop is over the channels rather
    than over a short row; the taps are summed in the same order either way (same values)."""
    c, k = w.shape[0], w.shape[2] * w.shape[3]
    kw, taps = w.shape[3], w.reshape(c, k)
    n, _, ho, wo = out.shape
    last = wo < 32
    if last:
        xt = np.ascontiguousarray(xp.transpose(0, 2, 3, 1))
        s, d = stride, dilation
        acc = np.empty((n, ho, wo, c), out.dtype)

        def tap(t: int) -> np.ndarray:
            i, j = (t // kw) * d[0], (t % kw) * d[1]
            return xt[:, i:i + (ho - 1) * s[0] + 1:s[0], j:j + (wo - 1) * s[1] + 1:s[1], :]
    else:
        acc = out

        def tap(t: int) -> np.ndarray:
            return view[..., t // kw, t % kw]
    tmp = np.empty_like(acc)
    for t in range(k):
        wt = taps[:, t] if last else taps[:, t].reshape(-1, 1, 1)
        np.multiply(tap(t), wt, out=acc if t == 0 else tmp)
        if t:
            acc += tmp
    if last:
        out[...] = acc.transpose(0, 3, 1, 2)
    return out


def _conv2d_kernel(args, attrs, out_type, out=None):
    x, w = promote_args(args, out_type.dtype)
    return conv2d_reference(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"], out=out)


CONV_ATTRS = {
    "kernel_size": AttrSpec("ints", default=None, doc="[kH, kW]; None = from the weight (stored explicit); must match it"),
    "stride": AttrSpec("ints", default=(1, 1)),
    "padding": AttrSpec("ints", default=(0, 0), doc="symmetric zero padding [pH, pW]"),
    "dilation": AttrSpec("ints", default=(1, 1)),
    "groups": AttrSpec("int", default=1),
}

defop(
    name="conv2d", macs=conv_macs, precision="compute", family="conv", arity=2, operands=("x", "w"),
    attrs=CONV_ATTRS,
    canonicalize=kernel_size_canon, infer=_conv2d_type, kernel=_conv2d_kernel, kernel_into=_conv2d_kernel, flags={"blas", CONV_WEIGHT},
    vjp=_conv2d_vjp, jvp=bilinear_jvp, batch=_conv2d_batch,
    doc="NCHW cross-correlation = torch.nn.functional.conv2d without bias: x [N, Cin, H, W], "
    "w [Cout, Cin/groups, kH, kW] -> [N, Cout, Hout, Wout], Hout = (H + 2pH - dH(kH-1) - 1) // sH + 1. "
    "Symmetric zero padding. kernel_size defaults to w's spatial dims and must match them (upstream trusts it). "
    "A non-positive output size is a ShapeError (upstream clamps it to 1). Float operands, dtypes promoted.",
)


# ------------------------------------------------------------------- conv_transpose2d
def _conv_t_type(ins, attrs):
    dtype = _conv_dtype(ins)
    n, c, h, w = _nchw(ins[0])
    cin, cout_g, kh, kw = _weight(ins, attrs)
    s, p, d = _pair(attrs, "stride", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    op = _pair(attrs, "output_padding", 0)
    g = attrs["groups"]
    if cin != c or g < 1 or c % g:
        raise ShapeError(f"groups={g}: need w.shape[0] == C_in ({cin} vs {c}) and C_in divisible by groups")
    for i in range(2):
        if op[i] >= max(s[i], d[i]):
            raise ShapeError(f"output_padding {list(op)} must be smaller than stride {list(s)} or dilation {list(d)}")
    ho = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    wo = (w - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    _require_positive(ho, wo, f"padding {list(p)} too large")
    return TensorType(Shape((n, cout_g * g, ho, wo)), dtype)


def _conv_t_kernel(args, attrs, out):
    """Scatter form, one vectorized step per kernel tap: out[iy*s + ky*d - p] += x[iy] * w[ky]."""
    x, w = promote_args(args, out.dtype)
    s, p, d, g = attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    ho, wo = out.shape[2], out.shape[3]
    full_h = max((h - 1) * s[0] + d[0] * (kh - 1) + 1, p[0] + ho)
    full_w = max((wd - 1) * s[1] + d[1] * (kw - 1) + 1, p[1] + wo)
    full = np.zeros((n, g, cout_g, full_h, full_w), dtype=np.result_type(x, w))
    xg = x.reshape(n, g, cin // g, h, wd)
    wg = w.reshape(g, cin // g, cout_g, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("ngchw,gco->ngohw", xg, wg[..., ky, kx], optimize=True)
            y0, x0 = ky * d[0], kx * d[1]
            full[..., y0 : y0 + (h - 1) * s[0] + 1 : s[0], x0 : x0 + (wd - 1) * s[1] + 1 : s[1]] += contrib
    return full[..., p[0] : p[0] + ho, p[1] : p[1] + wo].reshape(n, g * cout_g, ho, wo)


defop(
    name="conv_transpose2d", macs=conv_transpose_macs, precision="compute", family="conv", arity=2, operands=("x", "w"),
    attrs={**CONV_ATTRS, "output_padding": AttrSpec("ints", default=(0, 0))},
    canonicalize=kernel_size_canon, infer=_conv_t_type, kernel=_conv_t_kernel, flags={"blas"},
    vjp=_conv_t_vjp, jvp=bilinear_jvp, batch=_conv_t_batch,
    doc="torch.nn.functional.conv_transpose2d without bias: x [N, Cin, H, W], w [Cin, Cout/groups, kH, kW] -> "
    "[N, Cout, Hout, Wout], Hout = (H-1)sH - 2pH + dH(kH-1) + opH + 1. Input pixel (iy, ix) adds x*w at "
    "(iy*s + ky*d - p, ix*s + kx*d - p); output_padding only grows the output and must be smaller than stride "
    "or dilation (torch's rule). kernel_size as in conv2d. Float operands, dtypes promoted.",
)


# ----------------------------------------------------------------------------- pool2d
#: the window attributes of pool2d, max_pool2d_with_indices and the pooling backward ops
WINDOW_ATTRS = {
    "kernel_size": AttrSpec("ints", doc="[kH, kW]"),
    "stride": AttrSpec("ints", default=None, doc="[sH, sW]; None = kernel_size (stored explicit)"),
    "padding": AttrSpec("ints", default=(0, 0), doc="symmetric padding [pH, pW], smaller than kernel_size"),
}


def _pool_canon(ins, attrs):
    if attrs["stride"] is None:
        return {**attrs, "stride": attrs["kernel_size"]}
    return attrs


def _pool_type(ins, attrs):
    x, kind = ins[0], attrs["kind"]
    n, c, h, w = _nchw(x)
    if x.dtype.is_bool or x.dtype.is_complex:
        raise ShapeError(f"pooling is not defined on {x.dtype}")
    if kind == "mean":
        require_float(x, "mean pool input")
    k = _pair(attrs, "kernel_size", 1)
    s = _pair(attrs, "stride", 1) if attrs["stride"] is not None else k
    p = _pair(attrs, "padding", 0)
    if p[0] >= k[0] or p[1] >= k[1]:
        raise ShapeError(f"padding {list(p)} must be smaller than kernel_size {list(k)} (a window could be all padding)")
    ho, wo = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    _require_positive(ho, wo, f"input {h}x{w}, kernel {list(k)}, padding {list(p)}")
    return TensorType(Shape((n, c, ho, wo)), x.dtype)


def _pool_fill(kind: str, dtype: np.dtype):
    """Padding value that never changes the window result (the reduction's identity)."""
    if kind in ("sum", "mean"):
        return 0
    if kind == "prod":
        return 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if kind in ("max", "fmax") else info.max
    if kind in ("fmax", "fmin"):
        return np.nan  # np.fmax / np.fmin skip NaN, so NaN padding never wins
    return -np.inf if kind == "max" else np.inf


def _pool_kernel(args, attrs, out):
    x, kind = args[0], attrs["kind"]
    k, p = attrs["kernel_size"], attrs["padding"]
    s = attrs["stride"] if attrs["stride"] is not None else k
    pads = ((0, 0), (0, 0), (p[0],) * 2, (p[1],) * 2)
    win = _windows(np.pad(x, pads, constant_values=_pool_fill(kind, x.dtype)), k, s, (1, 1))
    total = _fold_taps(_POOL_UFUNCS[kind], win)
    if kind != "mean":
        return total
    if attrs["count_include_pad"]:
        return total / (k[0] * k[1])
    return total / pool_count(x.shape, attrs).astype(total.dtype)


_POOL_UFUNCS = {"max": np.maximum, "min": np.minimum, "fmax": np.fmax, "fmin": np.fmin, "sum": np.add, "mean": np.add,
                "prod": np.multiply}


def _fold_taps(ufunc, win: np.ndarray) -> np.ndarray:
    """``ufunc`` folded over the window taps in row-major order, one whole-image step per tap (a
    ``ufunc.reduce`` over the two window axes of the strided view is about 20x slower)."""
    kh, kw = win.shape[-2:]
    res = win[..., 0, 0].copy()
    for t in range(1, kh * kw):
        ufunc(res, win[..., t // kw, t % kw], out=res)
    return res


defop(
    name="pool2d", work="input", precision="data_movement", family="conv", arity=1, operands=("x",),
    attrs={
        "kind": AttrSpec("str", choices=POOL_KINDS), **WINDOW_ATTRS,
        "count_include_pad": AttrSpec("bool", default=True, doc="mean divides by kH*kW (True) or by the in-bounds count"),
    },
    canonicalize=_pool_canon, infer=_pool_type, kernel=_pool_kernel, flags={"reduction"},
    vjp=_pool_vjp, jvp=_pool_jvp, batch=fold_channelwise,
    keeps_grid=lambda attrs, rank, protected, copies_only: (  # NCHW windows over axes 2, 3 select an element
        not copies_only and REDUCE_KINDS[attrs["kind"]].selects and all(ax < 2 for ax in protected)),
    doc="NCHW pooling (no dilation): windows start at ho*s - p; Hout = (H + 2p - k) // s + 1. max / min / sum / "
    "prod reduce the in-bounds elements only (padding never wins); upstream's kernel computes a plain sum for "
    "sum, min and prod, rlx computes each as named. max / min propagate NaN (torch max_pool2d); fmax / fmin "
    "ignore it (np.fmax, upstream's kernel). mean divides by kH*kW "
    "(count_include_pad=True, upstream's choice) or, with count_include_pad=False, by the number of in-bounds "
    "elements (torch / ONNX default). padding must be smaller than kernel_size, so no window is all padding. "
    "Integer inputs are allowed except for mean.",
)


# ---------------------------------------------------------------- max_pool2d_with_indices
def max_pool_with_indices(xp, x, attrs):
    """(values, indices) of a 2-D max pool for the array namespace ``xp`` (NumPy for the kernel, jax.numpy
    for the JAX lowering: one formula). A window's value is its largest in-bounds element (pool2d's max);
    its index is that element's ``h * W + w`` in the input plane (torch's convention), the first in
    row-major window order on ties. A window holding a NaN gives NaN at its last NaN tap (torch's CPU
    kernel: a NaN replaces the running maximum)."""
    k, s, p = pool_geo(attrs)
    h, w = x.shape[2:]
    ho, wo = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    padded = xp.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    rows, cols = np.arange(ho)[:, None] * s[0] - p[0], np.arange(wo)[None, :] * s[1] - p[1]
    taps, valid, index = [], [], []
    for kh in range(k[0]):
        for kw in range(k[1]):
            taps.append(padded[:, :, kh:kh + s[0] * (ho - 1) + 1:s[0], kw:kw + s[1] * (wo - 1) + 1:s[1]])
            r, q = rows + kh, cols + kw
            valid.append((r >= 0) & (r < h) & (q >= 0) & (q < w))
            index.append(r * w + q)
    vals = xp.stack(taps)  # [K, N, C, Ho, Wo]
    inside = np.stack(valid)[:, None, None]  # [K, 1, 1, Ho, Wo]
    is_float = np.dtype(x.dtype).kind == "f"
    usable = inside & ~xp.isnan(vals) if is_float else xp.broadcast_to(inside, vals.shape)
    low = -np.inf if is_float else np.iinfo(np.dtype(x.dtype)).min
    best = xp.max(xp.where(usable, vals, xp.asarray(low, vals.dtype)), axis=0)
    seen = xp.any(usable, axis=0)
    hit = xp.where(seen[None], usable & (vals == best[None]), xp.broadcast_to(inside, vals.shape))
    first = xp.argmax(hit, axis=0)  # the first True tap
    values = xp.where(seen, best, xp.asarray(np.nan if is_float else 0, vals.dtype))
    if is_float:
        nan_tap = inside & xp.isnan(vals)
        has_nan = xp.any(nan_tap, axis=0)
        first = xp.where(has_nan, len(taps) - 1 - xp.argmax(xp.flip(nan_tap, axis=0), axis=0), first)
        values = xp.where(has_nan, xp.asarray(np.nan, vals.dtype), values)
    idx = xp.take_along_axis(xp.broadcast_to(xp.asarray(np.stack(index)[:, None, None]), vals.shape), first[None], axis=0)[0]
    return values, idx.astype(np.int64)


def _mpi_type(ins, attrs):
    values = _pool_type(ins, {**attrs, "kind": "max"})
    return values, TensorType(values.shape, DType.I64)


def _mpi_window(node) -> dict:
    k, s, p = pool_geo(node.attrs)
    return {"kernel_size": list(k), "stride": list(s), "padding": list(p)}


def _mpi_vjp(ctx, node, cts):
    ct = cts[0]  # the indices carry no cotangent
    return [None if ct is None else ctx.graph.max_pool2d_backward(ctx.operand(node, 0), ct, **_mpi_window(node))]


def _mpi_jvp(ctx, node, tangents):
    g, t = ctx.graph, tangents[0]
    idx = ctx.outputs(node)[1]
    n, c, ho, wo = idx.shape
    flat = ctx.reshape(t, [t.shape[0], t.shape[1], t.shape[2] * t.shape[3]])
    picked = g.gather_elements(flat, ctx.reshape(idx, [n, c, ho * wo]), axis=2)
    return ctx.reshape(picked, [n, c, ho, wo]), None


defop(
    name="max_pool2d_with_indices", family="conv", arity=1, operands=("x",),
    attrs=WINDOW_ATTRS,
    canonicalize=_pool_canon, infer=_mpi_type, kernel=lambda args, attrs, out: max_pool_with_indices(np, args[0], attrs),
    vjp=_mpi_vjp, jvp=_mpi_jvp, batch=fold_channelwise, flags={"reduction"},
    doc="NCHW max pool as one node with two results (values, indices): values as pool2d(kind='max') (NaN "
    "propagates: a window with a NaN gives NaN, its index the last NaN tap, as torch; padding never wins); "
    "indices i64, each value's h * W + w in its input plane (torch's "
    "max_pool2d(return_indices=True); ONNX MaxPool's Indices less the plane offset), the first in "
    "row-major window order on ties. VJP of the values as pool2d max (max_pool2d_backward); the indices "
    "carry none.",
)


# ---------------------------------------------------------------------- resize_nearest_2x
def _resize_type(ins, attrs):
    require_rank(ins[0], 4, "x (NCHW)")
    n, c, h, w = ins[0].shape
    return TensorType(Shape((n, c, 2 * h, 2 * w)), ins[0].dtype)


def _resize_decompose(g, operands, attrs):
    """The common-IR body (upstream's LowerResizeNearest2x): each pixel repeated into a 2 x 2
    block by a broadcast over two new unit axes and a reshape."""
    x = g.value(operands[0])
    n, c, h, w = x.shape
    blocks = g.expand(g.reshape(x, (n, c, h, 1, w, 1)), target_shape=[n, c, h, 2, w, 2])
    return g.reshape(blocks, (n, c, 2 * h, 2 * w))


defop(
    name="resize_nearest_2x", work="none", precision="data_movement", family="conv", arity=1, operands=("x",),
    infer=_resize_type, decompose=_resize_decompose,
    kernel=lambda args, attrs, out: args[0].repeat(2, axis=2).repeat(2, axis=3),
    vjp=_resize_vjp, jvp=lambda ctx, node, tangents: ctx.graph.resize_nearest_2x(tangents[0]), batch=fold_channelwise,
    doc="2x nearest-neighbour upsampling of NCHW: [N, C, H, W] -> [N, C, 2H, 2W], x.repeat(2, 2).repeat(2, 3) "
    "(= torch interpolate(scale_factor=2, mode='nearest')). H and W may be symbolic (2*H). Decomposes (for "
    "backends that do not claim it) to reshape, expand, reshape.",
)
