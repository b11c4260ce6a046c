"""Backward ops emitted by autodiff (docs/semantics.md#backward-ops): gradient kernels of activations,
pooling, convolution, cross-entropy, attention, normalisations, RoPE and gather (the last five in
:mod:`rlx.ops.backward_layers`, which shares this module's helpers).

Data operands are float tensors; the result dtype is their promotion (as for the forward
ops, which promote too). An op whose output shape cannot be derived from its operands
carries it as an attribute (``input_shape``, ``weight_shape``, ``table_shape``), because
``verify`` re-derives every node's type from its rule. Attributes mirror the forward op's
(same names, defaults and canonical forms). Rlx's resolutions of upstream quirks:

* normalisation backward ops normalise over the ``axis`` attribute (any axis, not only
  the last one as upstream's kernels do); group norm accepts ``[N, C, *spatial]``;
* ``attention_backward`` honours ``score_scale``, ``attn_logit_softcap``, ``window`` and
  ``layout`` exactly as the forward ``attention`` does (upstream ignores scale and cap);
* index operands (labels, gather indices) are integer tensors; a label outside ``[0, C)``
  or a gather index outside ``[-n, n)`` (negative ones wrap, as ``gather``) is a run-time
  RlxError;
* ``gather_backward`` counts indices by ``indices.size`` (upstream reads
  ``indices.shape[axis]``, which crashes for 1-D indices with axis > 0).
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.flags import BLAS
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import promote_args, require_dim, require_float, require_rank
from rlx.ops.conv import (
    CONV_ATTRS,
    WINDOW_ATTRS,
    Fold,
    col2im,
    conv_geo,
    conv_out_size,
    first_max_mask,
    fold_channelwise,
    patches,
    select_taps,
)
from rlx.ops.cost import conv_transpose_macs, conv_weight_grad_macs
from rlx.ops.elementwise import ACTIVATIONS, times_derivative
from rlx.ops.kinds import NUMPY

_FAMILY = "backward"


# --------------------------------------------------------------------------- type helpers
def _data_type(ins: list[TensorType], names: tuple[str, ...], same_shape: bool = True) -> TensorType:
    """Float data operands (with ``same_shape``, all of the first one's shape): the first
    operand's shape with the promoted dtype of them all."""
    for t, name in zip(ins, names):
        require_float(t, name)
        if same_shape and t.shape != ins[0].shape:
            raise ShapeError(f"{name} has shape {t.shape!r}, expected {ins[0].shape!r} (like {names[0]})")
    return TensorType(ins[0].shape, promote_all([t.dtype for t in ins]))


def _require_index(t: TensorType, what: str) -> None:
    if not t.dtype.is_int:
        raise ShapeError(f"{what} must be an integer tensor, got {t.dtype}")


def _check_indices(idx: np.ndarray, n: int, what: str, wrap: bool = False) -> np.ndarray:
    """Integer indices as int64 in ``[0, n)``; with ``wrap``, ``[-n, 0)`` counts from the end."""
    idx = idx.astype(np.int64, copy=False)
    low = -n if wrap else 0
    bad = (idx < low) | (idx >= n)
    if bad.any():
        raise RlxError(f"{what}: index {int(idx[bad].flat[0])} is out of range [{low}, {n})")
    return idx % n if wrap and n else idx


def _pair(values: tuple[int, ...] | None, what: str, minimum: int) -> tuple[int, int]:
    if values is None or len(values) != 2 or any(v < minimum for v in values):
        raise ShapeError(f"{what} must be two ints >= {minimum}, got {values!r}")
    return values[0], values[1]




def _geometry(attrs, kernel=None) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding, dilation) pairs. Pooling has no dilation; stride None means
    the kernel size; kernel_size None means ``kernel`` (the weight's spatial dims)."""
    k = _pair(attrs["kernel_size"] if attrs["kernel_size"] is not None else kernel, "kernel_size", 1)
    s = _pair(attrs["stride"] if attrs["stride"] is not None else k, "stride", 1)
    p = _pair(attrs["padding"], "padding", 0)
    d = _pair(attrs.get("dilation", (1, 1)), "dilation", 1)
    return k, s, p, d


def _spatial_out(x_shape: Shape, attrs, what: str, kernel=None) -> tuple[object, object]:
    """Output spatial dims of the forward window sweep over x (symbolic dims carried through)."""
    k, s, p, d = _geometry(attrs, kernel)
    out = []
    for i in range(2):
        size = x_shape[2 + i]
        if not isinstance(size, int):
            out.append(size)
            continue
        extent = conv_out_size(size, k[i], s[i], p[i], d[i])
        if extent < 1:
            raise ShapeError(f"{what}: window {k[i]} (dilation {d[i]}) does not fit axis {2 + i} of size {size} with padding {p[i]}")
        out.append(extent)
    return tuple(out)


# ------------------------------------------------------------------------- window helpers
def _windows(shape: tuple[int, ...], out_hw: tuple[int, int], attrs, kernel=None):
    """Padded spatial size and, per kernel tap ``(kh, kw)``, the strided slices it reads.

    A tap reads ``xp[:, :, hs, ws]`` of the zero-padded input ``xp`` (``[N, C, Hp, Wp]``),
    one element per output position, so forward and adjoint are both slice arithmetic.
    """
    k, s, p, d = _geometry(attrs, kernel)
    padded = tuple(max(shape[2 + i] + 2 * p[i], (out_hw[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1) for i in range(2))
    taps = []
    for kh in range(k[0]):
        for kw in range(k[1]):
            hs = slice(kh * d[0], kh * d[0] + (out_hw[0] - 1) * s[0] + 1, s[0])
            ws = slice(kw * d[1], kw * d[1] + (out_hw[1] - 1) * s[1] + 1, s[1])
            taps.append((kh, kw, hs, ws))
    return padded, taps


def _pad(x: np.ndarray, padded: tuple[int, int], p: tuple[int, int], value: float = 0.0) -> np.ndarray:
    widths = [(0, 0), (0, 0)] + [(p[i], padded[i] - x.shape[2 + i] - p[i]) for i in range(2)]
    return np.pad(x, widths, constant_values=value)


def _crop(xp: np.ndarray, shape: tuple[int, ...], p: tuple[int, int]) -> np.ndarray:
    return xp[:, :, p[0] : p[0] + shape[2], p[1] : p[1] + shape[3]]


# ================================================================== autodiff rule helpers
# Rules of the backward ops (contract: rlx.autodiff.rules), so that reverse-over-reverse,
# forward-over-reverse (hvp) and vmap of gradients work. Most backward ops are linear in dy
# and their rules emit the forward op or the other backward op (conv, pooling, rope). Ops
# whose derivative in the primal operands is a long formula (normalisations, activations,
# cross-entropy, attention) get *composite* rules: the op is rebuilt from primitive MIR ops
# in a small decomposition graph, which rlx.grad / rlx.jvp / rlx.vmap transform with the
# primitives' own rules, and the result is inlined. The decomposition is only used by the
# derivative graphs; the forward keeps the fused backward kernel.
def _decomposition(build, operands, attrs, dtype, per_example: tuple[bool, ...] | None = None, ctx=None):
    """A graph with inputs a0, a1, … (the operands' types, minus the batch axis where
    ``per_example[i]``) and one output: ``build(g, inputs, attrs)`` cast to ``dtype``. A build
    flagged ``needs_transforms`` also gets the rule context (its body transforms) as ``ctx=``."""
    from rlx.ir.graph import Graph

    g = Graph("decomposition")
    ins = []
    for i, v in enumerate(operands):
        shape = list(v.shape[1:]) if per_example and per_example[i] else list(v.shape)
        ins.append(g.input(f"a{i}", shape, v.dtype))
    out = build(g, ins, attrs, ctx=ctx) if getattr(build, "needs_transforms", False) else build(g, ins, attrs)
    g.set_outputs([out if out.dtype == dtype else g.cast(out, to=dtype)])
    return g


def _inline(g, sub, feeds: dict) -> list:
    """Copy ``sub``'s nodes into ``g`` with its inputs bound to ``feeds`` (name -> Value); its outputs."""
    env: dict[int, object] = {}
    for node in sub.nodes:
        if node.op in ("input", "param"):
            env[node.id] = feeds[node.attrs["name"]]
        else:
            env[node.id] = g.append(node.op, [env[i] for i in node.inputs], dict(node.attrs))
    return [env[i] for i in sub.output_ids]


def _reaches_output(sub, name: str) -> bool:
    """Does input ``name`` reach the output of ``sub`` through float values?"""
    live = set()
    for node in sub.nodes:
        if (node.op == "input" and node.attrs["name"] == name) or (
                node.dtype.is_float and any(i in live for i in node.inputs)):
            live.add(node.id)
    return any(i in live for i in sub.output_ids)


def _composite_vjp(build):
    def vjp(ctx, node, ct):
        ops = ctx.operands(node)
        sub = _decomposition(build, ops, node.attrs, node.dtype, ctx=ctx)
        wanted = [i for i, v in enumerate(ops) if v.dtype.is_float and ctx.wants(node, i)]
        names = [f"a{i}" for i in wanted if _reaches_output(sub, f"a{i}")]
        grads = {}
        if names:
            bwd = ctx.grad(sub, names, seed="ct")
            grads = dict(zip(names, _inline(ctx.graph, bwd, {**{f"a{i}": v for i, v in enumerate(ops)}, "ct": ct})))
        # an operand the op is locally constant in (a step, a straight-through) gets explicit zeros
        return [grads.get(f"a{i}", ctx.zeros_like(ops[i])) if i in wanted else None for i in range(len(ops))]
    return vjp


def _composite_jvp(build):
    def jvp(ctx, node, tangents):
        ops = ctx.operands(node)
        sub = _decomposition(build, ops, node.attrs, node.dtype, ctx=ctx)
        names = [f"a{i}" for i, t in enumerate(tangents) if t is not None and _reaches_output(sub, f"a{i}")]
        if not names:
            return None
        fwd = ctx.jvp(sub, names)
        feeds = {f"a{i}": v for i, v in enumerate(ops)}
        for i, (v, t) in enumerate(zip(ops, tangents)):
            if f"a{i}" in names:
                feeds[f"t_a{i}"] = ctx.broadcast_like(ctx.cast(t, v.dtype), v)
        return _inline(ctx.graph, fwd, feeds)[1]
    return jvp


def _composite_batch(build):
    def batch(ctx, node, operands, batched):
        sub = _decomposition(build, operands, node.attrs, node.dtype, tuple(batched), ctx=ctx)
        vg = ctx.vmap(sub, {f"a{i}": 0 if b else None for i, b in enumerate(batched)}, batch_size=ctx.batch_size)
        out = _inline(ctx.graph, vg, {f"a{i}": v for i, v in enumerate(operands)})[0]
        return out if len(out.shape) == len(node.shape) + 1 else ctx.materialize(out)
    return batch


def _composite(build) -> dict:
    """vjp / jvp / batch rules of an op from its primitive decomposition ``build(g, operands, attrs)``."""
    return {"vjp": _composite_vjp(build), "jvp": _composite_jvp(build), "batch": _composite_batch(build)}


def _scalar(g, value: float, like):
    return g.scalar(float(value), like.dtype)


# ------------------------------------------------------------------ activation backward
def _act_grad(kind: str, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dy·act'(x): the kind's row (rlx.ops.kinds) evaluated in the NumPy namespace."""
    row = ACTIVATIONS[kind]
    return row.vjp(NUMPY, x, row.forward(NUMPY, x), dy)


def _relu_grad(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return np.where(x > 0, dy, 0.0)


def _relu_backward_prims(g, ops, attrs):
    x, dy = ops
    return g.where(g.gt(x, _scalar(g, 0.0, x)), dy, _scalar(g, 0.0, dy))


def _activation_backward_prims(g, ops, attrs):
    """dy·act'(x) with the activation rules' own primitive derivative (same guards as the kernel)."""
    x, dy = ops
    return times_derivative(g, attrs["kind"], x, g.activation(x, kind=attrs["kind"]), dy)


defop(
    name="relu_backward", precision="elementwise", family=_FAMILY, arity=2, operands=("x", "dy"),
    infer=lambda ins, attrs: _data_type(ins, ("x", "dy")),
    kernel=lambda args, attrs, out: _relu_grad(*promote_args(args, out.dtype)),
    **_composite(_relu_backward_prims),
    doc="Gradient of relu: dy where x > 0, else 0 (the derivative at 0 is 0). x and dy: float, same shape; "
    "result dtype: their promotion.",
)

defop(
    name="activation_backward", precision="elementwise", family=_FAMILY, arity=2, operands=("x", "dy"),
    attrs={"kind": AttrSpec("str", choices=tuple(ACTIVATIONS))},
    infer=lambda ins, attrs: _data_type(ins, ("x", "dy")),
    kernel=lambda args, attrs, out: _act_grad(attrs["kind"], *promote_args(args, out.dtype)),
    **_composite(_activation_backward_prims),
    doc="dy·act'(x) for every activation kind (docs/semantics.md#activations): gelu uses the exact "
    "Φ(x) + x·φ(x); sqrt and rsqrt give 0 where sqrt(x) <= 0; abs gives sign(x) (0 at 0); "
    "round is the straight-through identity; relu gives 0 at 0. x and dy: real floats of one "
    "shape; result dtype: their promotion.",
)


# ---------------------------------------------------------------------- max pool backward
def _max_pool_backward_type(ins, attrs):
    x = _data_type(ins, ("x", "dy"), same_shape=False)
    dy = ins[1]
    require_rank(x, 4, "x")
    require_rank(dy, 4, "dy")
    k, _, p, _ = _geometry(attrs)
    if p[0] >= k[0] or p[1] >= k[1]:
        raise ShapeError(f"padding {list(p)} must be smaller than kernel_size {list(k)}, as for pool2d")
    want = Shape((*x.shape[:2], *_spatial_out(x.shape, attrs, "max_pool2d_backward")))
    if dy.shape != want:
        raise ShapeError(f"dy must have the pooled shape {want!r}, got {dy.shape!r}")
    return x


def _max_pool_backward_kernel(args, attrs, out):
    x, dy = promote_args(args, out.dtype)
    _, _, p, _ = _geometry(attrs)
    padded, taps = _windows(x.shape, dy.shape[2:], attrs)
    valid = _pad(np.ones(x.shape[2:], bool)[None, None], padded, p, value=False)
    xp = _pad(x, padded, p, value=-np.inf)
    vals = np.stack([xp[:, :, hs, ws] for _, _, hs, ws in taps])  # [taps, N, C, Ho, Wo]
    ok = np.stack([np.broadcast_to(valid[:, :, hs, ws], dy.shape) for _, _, hs, ws in taps])
    best = np.where(ok, vals, -np.inf).max(axis=0)
    winner = ok & (vals == best)  # the first in-bounds maximum in row-major window order wins
    first = winner.argmax(axis=0)
    nan_tap = ok & np.isnan(vals)  # a window with a NaN: its last NaN tap takes dy (torch, max_pool2d_with_indices)
    has_nan = nan_tap.any(axis=0)
    first = np.where(has_nan, len(taps) - 1 - nan_tap[::-1].argmax(axis=0), first)
    gated = np.where(winner.any(axis=0) | has_nan, dy, 0.0)
    dxp = np.zeros(xp.shape, dtype=dy.dtype)
    for t, (_, _, hs, ws) in enumerate(taps):
        dxp[:, :, hs, ws] += np.where(first == t, gated, 0.0)
    return _crop(dxp, x.shape, p)


def _window(attrs) -> dict:
    return {k: list(attrs[k]) for k in ("kernel_size", "stride", "padding")}


def _pool_canon(ins, attrs):
    return attrs if attrs["stride"] is not None else {**attrs, "stride": attrs["kernel_size"]}


def _max_pool_backward_vjp(ctx, node, ct):
    """Linear in dy: its transpose reads ct at each window's winning tap. The winners are
    piecewise constant in x, so x gets no gradient (zero almost everywhere)."""
    g = ctx.graph
    x = ctx.operand(node, 0)
    y = g.pool2d(x, kind="max", **_window(node.attrs))
    dx = ctx.zeros_like(x) if ctx.wants(node, 0) else None
    return [dx, select_taps(ctx, first_max_mask(ctx, x, y, node.attrs), ct, node.attrs)]


def _max_pool_backward_jvp(ctx, node, tangents):
    return None if tangents[1] is None else ctx.graph.append(node.op, [ctx.operand(node, 0), tangents[1]], node.attrs)


defop(
    name="max_pool2d_backward", precision="data_movement", family=_FAMILY, arity=2, operands=("x", "dy"), attrs=WINDOW_ATTRS,
    canonicalize=_pool_canon, infer=_max_pool_backward_type, kernel=_max_pool_backward_kernel,
    vjp=_max_pool_backward_vjp, jvp=_max_pool_backward_jvp, batch=fold_channelwise,
    doc="Gradient of 2-D max pooling (x [N,C,H,W], dy [N,C,Ho,Wo] → x.shape). Each window's "
    "argmax is recomputed over in-bounds elements in row-major window order; the first "
    "maximum wins ties and receives dy of that window; overlapping windows accumulate. "
    "Padding never wins (it must be smaller than the kernel); in a window holding a NaN the "
    "last NaN takes dy (torch's max_pool2d index, max_pool2d_with_indices). Ho = floor((H + 2p − k)/s) + 1; stride defaults "
    "to kernel_size, as in pool2d.",
)


# ------------------------------------------------------------------------ conv backward
def _conv_check(x_shape: Shape, w_shape: Shape, dy_shape: Shape, attrs, what: str) -> None:
    """The forward conv2d geometry relating x, w and dy; raise ShapeError on any mismatch."""
    for shape, name in ((x_shape, "input"), (w_shape, "weight"), (dy_shape, "dy")):
        if len(shape) != 4:
            raise ShapeError(f"{what}: {name} must have rank 4, got {shape!r}")
    k, _, _, _ = _geometry(attrs, tuple(w_shape[2:]))
    groups = attrs["groups"]
    if groups < 1:
        raise ShapeError(f"{what}: groups must be >= 1, got {groups}")
    require_dim(tuple(w_shape[2:]), k, f"{what}: weight kernel dims vs kernel_size")
    cout, cin_g = w_shape[0], w_shape[1]
    if isinstance(cout, int) and cout % groups:
        raise ShapeError(f"{what}: output channels {cout} not divisible by groups {groups}")
    if isinstance(cin_g, int):
        require_dim(x_shape[1], cin_g * groups, f"{what}: input channels (weight.shape[1]·groups)")
    require_dim(dy_shape[0], x_shape[0], f"{what}: dy batch")
    require_dim(dy_shape[1], cout, f"{what}: dy channels")
    require_dim(tuple(dy_shape[2:]), _spatial_out(x_shape, attrs, what, k), f"{what}: dy spatial dims")


def _conv_backward_input_type(ins, attrs):
    dy = _data_type(ins, ("dy", "w"), same_shape=False)
    x_shape = Shape(attrs["input_shape"])
    _conv_check(x_shape, ins[1].shape, dy.shape, attrs, "conv2d_backward_input")
    return TensorType(x_shape, dy.dtype)


def _conv_backward_weight_type(ins, attrs):
    x = _data_type(ins, ("x", "dy"), same_shape=False)
    w_shape = Shape(attrs["weight_shape"])
    _conv_check(x.shape, w_shape, ins[1].shape, attrs, "conv2d_backward_weight")
    return TensorType(w_shape, x.dtype)


def _grouped(a: np.ndarray, groups: int) -> np.ndarray:
    """[N, C, H, W] → [N, G, C/G, H, W]."""
    n, c, h, w = a.shape
    return a.reshape(n, groups, c // groups, h, w)


def _conv_backward_input_kernel(args, attrs, out):
    dy, w = promote_args(args, out.dtype)
    x_shape, groups = tuple(out.shape), attrs["groups"]
    _, _, p, _ = _geometry(attrs, w.shape[2:])
    padded, taps = _windows(x_shape, dy.shape[2:], attrs, w.shape[2:])
    wg = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])  # [G, O/G, C/G, kH, kW]
    dyg = _grouped(dy, groups)
    dxp = np.zeros((*x_shape[:2], *padded), dtype=dy.dtype)
    for kh, kw, hs, ws in taps:
        tap = np.einsum("ngohw,goc->ngchw", dyg, wg[..., kh, kw])
        dxp[:, :, hs, ws] += tap.reshape(x_shape[0], x_shape[1], *dy.shape[2:])
    return _crop(dxp, x_shape, p)


def _conv_backward_weight_kernel(args, attrs, out):
    x, dy = promote_args(args, out.dtype)
    groups, kernel = attrs["groups"], tuple(out.shape[2:])
    _, _, p, _ = _geometry(attrs, kernel)
    padded, taps = _windows(x.shape, dy.shape[2:], attrs, kernel)
    xp = _pad(x, padded, p)
    dyg = _grouped(dy, groups)
    dw = np.zeros(tuple(out.shape), dtype=x.dtype)
    for kh, kw, hs, ws in taps:
        tap = np.einsum("ngchw,ngohw->goc", _grouped(xp[:, :, hs, ws], groups), dyg)
        dw[:, :, kh, kw] = tap.reshape(dw.shape[0], dw.shape[1])
    return dw


_CONV_DOC = (" Geometry attributes are those of the forward conv2d (cross-correlation, symmetric "
             "zero padding, groups split channels contiguously); kernel_size defaults to the "
             "weight's spatial dims. Result dtype: promotion of both operands.")


def _conv_kernel_canon(weight_dims):
    """Builders store kernel_size explicitly, read from the weight's trailing dims."""
    def canon(ins, attrs):
        if attrs["kernel_size"] is not None:
            return attrs
        dims = weight_dims(ins, attrs)
        return {**attrs, "kernel_size": tuple(dims[2:])} if len(dims) == 4 else attrs
    return canon


def _geo4(a):
    return a["kernel_size"], a["stride"], a["padding"], a["dilation"]


def _bilinear_jvp(ctx, node, tangents):
    """Both conv backward ops are bilinear in their two operands."""
    g = ctx.graph
    u, v = ctx.operands(node)
    tu, tv = tangents
    parts = [None if tu is None else g.append(node.op, [tu, v], node.attrs),
             None if tv is None else g.append(node.op, [u, tv], node.attrs)]
    present = [q for q in parts if q is not None]
    return present[0] if len(present) == 1 else present[0] + present[1]


def _conv_input_vjp(ctx, node, ct):
    """<ct, Bi(dy, w)> = <conv2d(ct, w), dy>: d dy = conv2d(ct, w); d w = conv2d_backward_weight(ct, dy)."""
    g = ctx.graph
    dy, w = ctx.operands(node)
    geo = conv_geo(node.attrs)
    ddy = g.conv2d(ct, w, **geo) if ctx.wants(node, 0) else None
    dw = g.conv2d_backward_weight(ct, dy, weight_shape=list(w.shape), **geo) if ctx.wants(node, 1) else None
    return [ddy, dw]


def _conv_weight_vjp(ctx, node, ct):
    """<ct, Bw(x, dy)> = <conv2d(x, ct), dy>: d x = conv2d_backward_input(dy, ct); d dy = conv2d(x, ct)."""
    g = ctx.graph
    x, dy = ctx.operands(node)
    geo = conv_geo(node.attrs)
    dx = g.conv2d_backward_input(dy, ct, input_shape=list(x.shape), **geo) if ctx.wants(node, 0) else None
    ddy = g.conv2d(x, ct, **geo) if ctx.wants(node, 1) else None
    return [dx, ddy]


def _lead(ctx, v, batched: bool):
    """``v`` with a leading batch axis: its own, or a broadcastable 1."""
    return v if batched else ctx.reshape(v, [1, *v.shape])


def _conv_input_batch(ctx, node, operands, batched):
    g = ctx.graph
    dy, w = operands
    a = node.attrs
    xs = list(a["input_shape"])
    if not batched[1]:
        f = Fold(ctx, dy.shape[1])
        out = g.append(node.op, [f.fold(dy), f.tile(w)], {**dict(a), "groups": a["groups"] * f.f, "input_shape": f.shape(xs)})
        return f.unfold(out)
    # per-example weights: columns wᵀ·dy per group (matmul over B), then col2im
    b = ctx.batch_size
    cout, cin_g, kh, kw = w.shape[1:]
    groups, kk = a["groups"], kh * kw
    dyb = _lead(ctx, dy, batched[0])
    n, _, ho, wo = dyb.shape[1:]
    dym = ctx.reshape(dyb, [dyb.shape[0], n, groups, cout // groups, ho * wo])
    wm = ctx.transpose_last2(ctx.reshape(w, [b, 1, groups, cout // groups, cin_g * kk]))
    cols = ctx.reshape(g.matmul(wm, dym), [b, n, xs[1] * kk, ho, wo])
    f = Fold(ctx, n)
    return f.unfold(col2im(g, f.fold(cols), f.shape(xs), *_geo4(a)))


def _conv_weight_batch(ctx, node, operands, batched):
    """Per-example weight gradients: im2col of x, then dy @ colsᵀ summed over N."""
    g = ctx.graph
    x, dy = operands
    a = node.attrs
    cout, cin_g, kh, kw = a["weight_shape"]
    groups, kk = a["groups"], kh * kw
    if batched[0]:
        f = Fold(ctx, x.shape[1])
        cols = f.unfold(patches(g, f.fold(x), *_geo4(a)))
    else:
        cols = _lead(ctx, patches(g, x, *_geo4(a)), False)
    n, _, ho, wo = cols.shape[1:]
    cols = ctx.reshape(cols, [cols.shape[0], n, groups, cin_g * kk, ho * wo])
    dyb = _lead(ctx, dy, batched[1])
    dym = ctx.reshape(dyb, [dyb.shape[0], n, groups, cout // groups, ho * wo])
    dw = g.reduce(g.matmul(dym, ctx.transpose_last2(cols)), op="sum", axes=[1])  # [B, G, Cout/G, Cin/G·K]
    return ctx.reshape(dw, [ctx.batch_size, cout, cin_g, kh, kw])


defop(
    name="conv2d_backward_input", precision="compute", family=_FAMILY, arity=2, operands=("dy", "w"), flags={BLAS},
    macs=conv_transpose_macs,
    attrs={**CONV_ATTRS, "input_shape": AttrSpec("dims", doc="shape of the forward input x [N, Cin, H, W]")},
    canonicalize=_conv_kernel_canon(lambda ins, attrs: ins[1].shape),
    infer=_conv_backward_input_type, kernel=_conv_backward_input_kernel,
    vjp=_conv_input_vjp, jvp=_bilinear_jvp, batch=_conv_input_batch,
    doc="Gradient of conv2d with respect to its input x: the exact adjoint of the forward "
    "conv (dy [N,Cout,Ho,Wo], w [Cout,Cin/G,kH,kW] → input_shape). Input rows and columns "
    "the forward never reads get 0." + _CONV_DOC,
)

defop(
    name="conv2d_backward_weight", precision="compute", family=_FAMILY, arity=2, operands=("x", "dy"), flags={BLAS},
    macs=conv_weight_grad_macs,
    attrs={**CONV_ATTRS, "weight_shape": AttrSpec("dims", doc="shape of the forward weight [Cout, Cin/G, kH, kW]")},
    canonicalize=_conv_kernel_canon(lambda ins, attrs: attrs["weight_shape"]),
    infer=_conv_backward_weight_type, kernel=_conv_backward_weight_kernel,
    vjp=_conv_weight_vjp, jvp=_bilinear_jvp, batch=_conv_weight_batch,
    doc="Gradient of conv2d with respect to its weight: dw[co,ci,kh,kw] = Σ_{n,ho,wo} "
    "x[n, g(co)·Cin/G + ci, ho·s + kh·d − p, wo·s + kw·d − p]·dy[n,co,ho,wo] (x outside "
    "the image is 0); output weight_shape." + _CONV_DOC,
)
