"""Quantisation ops (docs/semantics.md#quantisation): quantize, dequantize, fake_quantize (+ its observer and
backward), the LSQ fake-quant trio, q_matmul and q_conv2d (dequant_matmul, the packed-weight matmul: rlx.ops.dequant).

Conventions shared by the family:

* ``round`` is **half away from zero** (``sign(x)·floor(|x| + 0.5)``), as upstream's kernels.
* Per-channel selection: ``axis = None`` uses one parameter for every element; ``axis = d``
  uses the parameter at the element's coordinate along ``d``. ``q_max(bits) = {8: 127,
  4: 7, 2: 1}``.
* quantize / dequantize take their scales and zero points as **attributes** (float / int
  lists), as upstream and the ``insert_q_dq`` pass do: they are calibration constants, and
  attributes keep the op a pure function of one tensor. The fake-quant ops take learned or
  observed scales as **operands** (``state`` / ``scale`` tensors ``[C]``, ``C = x.shape[axis]``,
  or ``[1]`` per tensor).
* No op writes into an operand. Upstream's EMA fake-quant overwrites its state operand in
  place; rlx splits that into ``fake_quantize(x, state)`` (uses the EMA scale) and
  ``observer_update(x, state)`` (returns the new state, ``[C]``), which the caller feeds back
  on the next step. Both compute the same scale from the same attributes.
* ``batch_dims`` (ops that reduce over a whole tensor, or take several operands): the first
  ``batch_dims`` axes of every operand are mapped over independently; every operand carries
  them (``vmap`` uses it). Default 0 = the upstream op.
* Autodiff: integer-valued results (quantize, q_matmul, q_conv2d) and observer statistics
  carry no gradient (flag ``no_grad``); fake_quantize uses its straight-through estimator,
  fake_quantize_lsq the LSQ estimator (without the 1/sqrt(N·q_max) gradient scale), and
  dequant_matmul is differentiated in ``x`` with the packed weight frozen.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, normalize_axis
from rlx.ops.common import require_float, require_rank
from rlx.ops.conv import conv2d_reference, conv_out_size
from rlx.ops.cost import conv_macs, last_dim_macs
from rlx.ops.elementwise import round_half_away

QMAX = {8: 127, 4: 7, 2: 1}
STE_KINDS = ("identity", "clipped_identity", "tanh", "hard_tanh")
SCALE_MODES = ("per_batch", "ema", "fixed")
SCALE_FLOOR = 1e-12


# ------------------------------------------------------------------ batch_dims machinery
BATCH_DIMS = AttrSpec("int", default=0, doc="leading axes mapped over independently (vmap); every operand has them")


def split_lead(ins: list[TensorType], nb: int) -> tuple[Shape, list[TensorType]]:
    """Check that every operand starts with the same ``nb`` batch dims; return them and the cores."""
    if nb < 0:
        raise ShapeError(f"batch_dims must be >= 0, got {nb}")
    for t in ins:
        if len(t.shape) < nb:
            raise ShapeError(f"operand {t} has fewer than batch_dims={nb} axes")
    lead = Shape(ins[0].shape[:nb])
    for t in ins[1:]:
        if tuple(t.shape[:nb]) != tuple(lead):
            raise ShapeError(f"batch dims differ: {lead!r} vs {Shape(t.shape[:nb])!r} (batch_dims={nb})")
    return lead, [TensorType(Shape(t.shape[nb:]), t.dtype) for t in ins]


def with_lead(lead: Shape, t: TensorType) -> TensorType:
    return TensorType(Shape((*lead, *t.shape)), t.dtype)


def map_lead(fn, args: list[np.ndarray], nb: int, out: TensorType) -> np.ndarray:
    """Apply the per-example kernel ``fn(args)`` over the ``nb`` leading axes of every operand."""
    if nb == 0:
        return fn(args)
    lead = args[0].shape[:nb]
    result = np.zeros(tuple(out.shape), dtype=out.dtype.numpy if not out.dtype.is_low_precision_float else np.float32)
    for idx in np.ndindex(*lead):
        result[idx] = fn([a[idx] for a in args])
    return result


def batch_lead(ctx, node, operands, batched):
    """Batch rule of a ``batch_dims`` op: give every operand the batch axis, one more batch dim."""
    ins = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    return ctx.graph.append(node.op, ins, {**dict(node.attrs), "batch_dims": node.attrs["batch_dims"] + 1})


def _shift_axis_batch(ctx, node, operands, batched):
    axis = node.attrs["axis"]
    attrs = dict(node.attrs)
    if axis is not None:
        attrs["axis"] = ctx.shift_axis(axis)
    return ctx.graph.append(node.op, [operands[0]], attrs)


# ------------------------------------------------------------------- quantize / dequantize
def _canon_axis(ins, attrs):
    """Store a given axis non-negative (relative to the core, after batch_dims)."""
    if attrs.get("axis") is None:
        return attrs
    nb = attrs.get("batch_dims", 0)
    try:
        return {**attrs, "axis": normalize_axis(attrs["axis"], len(ins[0].shape) - nb)}
    except ShapeError:
        return attrs


def _channels(t: TensorType, axis: int | None) -> tuple[int | None, object]:
    """(normalized axis, channel count) of a per-channel op; per tensor: (None, 1)."""
    if axis is None:
        return None, 1
    a = normalize_axis(axis, len(t.shape))
    return a, t.shape[a]


def _check_qparams(t: TensorType, attrs) -> None:
    scales, zps = attrs["scales"], attrs["zero_points"]
    if not scales:
        raise ShapeError("scales must not be empty")
    if not all(math.isfinite(s) and s > 0 for s in scales):
        raise ShapeError(f"scales must be finite and > 0, got {list(scales)}")
    if zps is not None:
        if len(zps) != len(scales):
            raise ShapeError(f"{len(zps)} zero_points for {len(scales)} scales")
        if not all(-128 <= z <= 127 for z in zps):
            raise ShapeError(f"zero_points must lie in [-128, 127], got {list(zps)}")
    axis, c = _channels(t, attrs["axis"])
    if axis is None:
        if len(scales) != 1:
            raise ShapeError(f"per-tensor quantization (axis=None) takes one scale, got {len(scales)}")
    elif len(scales) != 1 and len(scales) != c:
        raise ShapeError(f"{len(scales)} scales for axis {axis} of size {c} (need 1 or {c})")


def _chan(values, axis: int | None, ndim: int, dtype) -> np.ndarray:
    """A parameter list as an array broadcasting along ``axis`` of an ``ndim`` tensor."""
    arr = np.asarray(values, dtype=dtype)
    if axis is None or arr.size == 1:
        return arr.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = arr.size
    return arr.reshape(shape)


def _work_dtype(a: np.ndarray) -> np.dtype:
    return np.dtype(np.float64) if a.dtype == np.float64 else np.dtype(np.float32)


def _quantize_type(ins, attrs):
    require_float(ins[0], "x")
    if ins[0].dtype.is_complex:
        raise ShapeError("x must be a real float tensor")
    _check_qparams(ins[0], attrs)
    return TensorType(ins[0].shape, DType.I8)


def _quantize_kernel(args, attrs, out):
    x = args[0]
    ct = _work_dtype(x)
    x = x.astype(ct, copy=False)
    inv = (ct.type(1.0) / np.asarray(attrs["scales"], dtype=ct)).astype(ct)
    inv = _chan(inv, attrs["axis"], x.ndim, ct)
    zp = _chan(attrs["zero_points"] or [0] * len(attrs["scales"]), attrs["axis"], x.ndim, ct)
    q = np.clip(round_half_away(x * inv) + zp, -128, 127)
    return np.where(np.isnan(q), 0, q).astype(np.int8)


_QPARAMS = {
    "axis": AttrSpec("int", default=None, doc="channel axis; None = per tensor (stored non-negative)"),
    "scales": AttrSpec("floats", doc="one scale, or one per channel of `axis`; finite and > 0"),
    "zero_points": AttrSpec("ints", default=None, doc="same length as scales, in [-128, 127]; None = all 0"),
}

defop(
    name="quantize", precision="elementwise", family="quant", arity=1, operands=("x",), attrs=_QPARAMS,
    canonicalize=_canon_axis, infer=_quantize_type, kernel=_quantize_kernel,
    flags={"no_grad"}, batch=_shift_axis_batch,
    doc="Affine int8 quantization: q = clip(round(x · (1/scale[c])) + zp[c], -128, 127) -> i8, same dims "
    "(docs/semantics.md#quantisation: multiply by the reciprocal, round half away from zero, add the zero point, saturate; NaN -> 0 "
    "as Rust's saturating cast). Symmetric quantization is zero_points=None. Per tensor (axis=None, one scale) or "
    "per channel along `axis` (one scale per channel, or a single shared one). Scales and zero points are "
    "attributes (calibration constants, as upstream and insert_q_dq). Computed in f32 (f64 for f64 input). "
    "No gradient: the result is integer; for quantization-aware training use fake_quantize.",
)


def _dequantize_type(ins, attrs):
    if not ins[0].dtype.is_int:
        raise ShapeError(f"q must be an integer tensor, got {ins[0].dtype}")
    if not attrs["to"].is_float:
        raise ShapeError(f"to must be a float dtype, got {attrs['to']}")
    _check_qparams(ins[0], attrs)
    return TensorType(ins[0].shape, attrs["to"])


def _dequantize_kernel(args, attrs, out):
    q = args[0]
    ct = np.dtype(np.float64) if out.dtype is DType.F64 else np.dtype(np.float32)
    scale = _chan(attrs["scales"], attrs["axis"], q.ndim, ct)
    zp = _chan(attrs["zero_points"] or [0] * len(attrs["scales"]), attrs["axis"], q.ndim, ct)
    return (q.astype(ct) - zp) * scale


defop(
    name="dequantize", precision="elementwise", family="quant", arity=1, operands=("q",),
    attrs={**_QPARAMS, "to": AttrSpec("dtype", default=DType.F32, doc="float result dtype")},
    canonicalize=_canon_axis, infer=_dequantize_type, kernel=_dequantize_kernel,
    flags={"no_grad"}, batch=_shift_axis_batch,
    doc="Inverse of quantize: x = (q - zp[c]) · scale[c], computed in f32 (f64 when to=f64) from any integer q "
    "(i8 from quantize). Same scale / zero-point / axis attributes as quantize. The result has dtype `to` "
    "(default f32, as upstream's always-F32 Dequantize). No gradient (the operand is integer).",
)


# ------------------------------------------------------------------- fake-quant geometry
def _fq_core(x: TensorType, attrs) -> tuple[Shape, int | None, object]:
    """(batch dims, normalized core axis or None, channel count) of a fake-quant op on x."""
    nb = attrs["batch_dims"]
    lead, (core,) = split_lead([x], nb)
    require_float(core, "x")
    if core.dtype.is_complex:
        raise ShapeError("x must be a real float tensor")
    axis, c = _channels(core, attrs["axis"])
    return lead, axis, c


def _check_param(x: TensorType, p: TensorType, attrs, what: str) -> None:
    lead, _axis, c = _fq_core(x, attrs)
    want = Shape((*lead, c))
    if tuple(p.shape) != tuple(want):
        raise ShapeError(f"{what} must have shape {want!r} (batch dims + one entry per channel), got {p.shape!r}")
    if not p.dtype.is_float:
        raise ShapeError(f"{what} must be a float tensor, got {p.dtype}")


def _check_like_x(x: TensorType, dy: TensorType) -> None:
    if tuple(dy.shape) != tuple(x.shape) or dy.dtype != x.dtype:
        raise ShapeError(f"dy must match x ({x}), got {dy}")


def _reduce_axes(ndim: int, nb: int, axis: int | None) -> tuple[int, ...]:
    return tuple(nb + i for i in range(ndim - nb) if i != axis)


def _bcast_param(p: np.ndarray, nb: int, core_rank: int, axis: int | None) -> np.ndarray:
    """``p [*B, C]`` reshaped to broadcast against ``x [*B, *core]`` along the channel axis."""
    lead = p.shape[:nb]
    return p.reshape(*lead, *[p.shape[nb] if i == axis else 1 for i in range(core_rank)])


def _fq_scale(x: np.ndarray, state: np.ndarray | None, attrs) -> np.ndarray:
    """The scale used by the fake-quant ops, broadcasting against x."""
    nb, axis, mode = attrs["batch_dims"], attrs["axis"], attrs["scale_mode"]
    core_rank = x.ndim - nb
    ct = x.dtype.type
    if mode == "fixed":
        assert state is not None  # the fixed and running modes carry a state operand (checked at build time)
        return np.maximum(_bcast_param(state.astype(x.dtype), nb, core_rank, axis), ct(SCALE_FLOOR))
    amax = np.fmax.reduce(np.abs(x), axis=_reduce_axes(x.ndim, nb, axis), keepdims=True, initial=0.0)
    cur = np.maximum(amax / ct(QMAX[attrs["bits"]]), ct(SCALE_FLOOR))
    if mode == "per_batch":
        return cur
    assert state is not None
    st = _bcast_param(state.astype(x.dtype), nb, core_rank, axis)
    decay = ct(attrs["decay"])
    return np.where(st <= 0, cur, decay * st + (ct(1.0) - decay) * cur)


def _fq_forward(x: np.ndarray, s: np.ndarray, bits: int) -> np.ndarray:
    q = QMAX[bits]
    return np.clip(round_half_away(x / s), -q, q) * s


def _float_args(args):
    ct = _work_dtype(args[0])
    return [a.astype(ct, copy=False) for a in args]


_FQ_ATTRS = {
    "bits": AttrSpec("int", default=8, choices=(2, 4, 8)),
    "axis": AttrSpec("int", default=None, doc="channel axis (of the core, after batch_dims); None = per tensor"),
    "batch_dims": BATCH_DIMS,
}
_FQ_MODE = {
    "scale_mode": AttrSpec("str", default="per_batch", choices=SCALE_MODES,
                           doc="per_batch: from max|x|; ema: EMA of the state operand; fixed: the state operand"),
    "decay": AttrSpec("float", default=0.9, doc="EMA decay (scale_mode='ema')"),
}


def _mode_arity(base: int):
    return lambda attrs: base + (attrs.get("scale_mode", "per_batch") != "per_batch")


# ---------------------------------------------------------------------- fake_quantize
def _fq_type(ins, attrs):
    x = ins[0]
    _fq_core(x, attrs)
    if len(ins) > 1:
        _check_param(x, ins[1], attrs, "state")
    return x


def _fq_kernel(args, attrs, out):
    args = _float_args(args)
    x, state = args[0], (args[1] if len(args) > 1 else None)
    return _fq_forward(x, _fq_scale(x, state, attrs), attrs["bits"])


def _fq_ste(ctx, node, dy):
    """Straight-through estimate of d out / d x applied to ``dy``."""
    if node.attrs["ste"] == "identity":
        return dy
    return _fqb_node(ctx, node, dy, state_at=1)


def _fqb_node(ctx, node, dy, state_at: int):
    """fake_quantize_backward(x, dy[, state]) with ``node``'s x (operand 0), state (operand ``state_at``, if any)
    and attributes."""
    x = ctx.operand(node, 0)
    rest = [ctx.operand(node, state_at)] if len(node.inputs) > state_at else []
    return ctx.graph.append("fake_quantize_backward", [x, dy, *rest], dict(node.attrs))


def _fq_vjp(ctx, node, ct):
    return [_fq_ste(ctx, node, ct)] + [None] * (len(node.inputs) - 1)


def _fq_jvp(ctx, node, tangents):
    return None if tangents[0] is None else _fq_ste(ctx, node, tangents[0])


_STE = {"ste": AttrSpec("str", default="identity", choices=STE_KINDS, doc="straight-through estimator of the gradient")}

defop(
    name="fake_quantize", precision="elementwise", family="quant", arity=_mode_arity(1), operands=("x", "state"),
    attrs={**_FQ_ATTRS, **_STE, **_FQ_MODE},
    canonicalize=_canon_axis, infer=_fq_type, kernel=_fq_kernel,
    vjp=_fq_vjp, jvp=_fq_jvp, batch=batch_lead,
    doc="Symmetric quantize-dequantize for quantization-aware training (zero point 0): "
    "out = clip(round(x / s), -q_max, q_max) · s, q_max = {8: 127, 4: 7, 2: 1}[bits], round half away from zero. "
    "Scale per channel c (or per tensor): per_batch s = max(max|x_c| / q_max, 1e-12) (operand x only); "
    "ema s = cur if state[c] <= 0 else decay·state[c] + (1 - decay)·cur with cur the per_batch scale; "
    "fixed s = max(state[c], 1e-12). The state operand [C] (C = x.shape[axis], [1] per tensor) is only read: "
    "upstream overwrites it in place with the EMA scale; in rlx observer_update (same attributes) returns that "
    "new state and the caller carries it to the next step. Gradient (straight-through, ste): identity passes dy; "
    "clipped_identity / tanh / hard_tanh emit fake_quantize_backward, which uses the same scale as the forward "
    "(upstream recomputes the per-batch scale). The state gets no gradient.",
)


def _obs_type(ins, attrs):
    x = ins[0]
    lead, _axis, c = _fq_core(x, attrs)
    if len(ins) > 1:
        _check_param(x, ins[1], attrs, "state")
    return TensorType(Shape((*lead, c)), x.dtype)


def _obs_kernel(args, attrs, out):
    args = _float_args(args)
    x, state = args[0], (args[1] if len(args) > 1 else None)
    return _fq_scale(x, state, attrs).reshape(tuple(out.shape))  # [*B, 1.., C, 1..] -> [*B, C]


defop(
    name="observer_update", precision="elementwise", family="quant", arity=_mode_arity(1), operands=("x", "state"),
    attrs={**_FQ_ATTRS, **_FQ_MODE},
    canonicalize=_canon_axis, infer=_obs_type, kernel=_obs_kernel,
    flags={"no_grad"}, batch=batch_lead,
    doc="The scale fake_quantize with the same attributes uses, as a tensor [C] (C = x.shape[axis], [1] per "
    "tensor): with scale_mode='ema' it is the new observer state (decay·state + (1 - decay)·max|x_c|/q_max, or "
    "the batch scale while state <= 0). This replaces upstream's in-place write into the state operand: feed "
    "the result back as the next step's state. Observer statistics carry no gradient (no_grad).",
)


# ------------------------------------------------------------- fake_quantize_backward
def _fqb_type(ins, attrs):
    x, dy = ins[0], ins[1]
    _fq_core(x, attrs)
    _check_like_x(x, dy)
    if len(ins) > 2:
        _check_param(x, ins[2], attrs, "state")
    return x


def _fqb_factor(x: np.ndarray, s: np.ndarray, bits: int, ste: str) -> np.ndarray | None:
    q = x.dtype.type(QMAX[bits])
    if ste == "identity":
        return None
    if ste == "clipped_identity":
        return (np.abs(x) <= q * s).astype(x.dtype)
    if ste == "tanh":
        return 1 - np.tanh(x / s) ** 2
    return np.maximum(0, 1 - np.abs(x / (q * s)))


def _fqb_kernel(args, attrs, out):
    args = _float_args(args)
    x, dy, state = args[0], args[1], (args[2] if len(args) > 2 else None)
    f = _fqb_factor(x, _fq_scale(x, state, attrs), attrs["bits"], attrs["ste"])
    return dy if f is None else dy * f


def _fqb_nonlinear(node) -> None:
    if node.attrs["ste"] in ("tanh", "hard_tanh"):
        raise AutodiffError(f"fake_quantize_backward with ste={node.attrs['ste']!r}: no derivative rule in x or state "
                            "(only in dy, where the op is linear)")


def _fqb_vjp(ctx, node, ct):
    out = [None, _fqb_node(ctx, node, ct, state_at=2) if ctx.wants(node, 1) else None] + [None] * (len(node.inputs) - 2)
    for i in range(len(node.inputs)):
        if i != 1 and ctx.wants(node, i):
            _fqb_nonlinear(node)  # identity / clipped_identity: 0 almost everywhere in x and state
            out[i] = ctx.zeros_like(ctx.operand(node, i))
    return out


def _fqb_jvp(ctx, node, tangents):
    if any(t is not None for i, t in enumerate(tangents) if i != 1):
        _fqb_nonlinear(node)
    return None if tangents[1] is None else _fqb_node(ctx, node, tangents[1], state_at=2)


defop(
    name="fake_quantize_backward", precision="elementwise", family="quant", arity=_mode_arity(2), operands=("x", "dy", "state"),
    attrs={**_FQ_ATTRS, **_STE, **_FQ_MODE},
    canonicalize=_canon_axis, infer=_fqb_type, kernel=_fqb_kernel,
    vjp=_fqb_vjp, jvp=_fqb_jvp, batch=batch_lead,
    doc="Straight-through gradient of fake_quantize (same attributes and scale): identity: dy; clipped_identity: "
    "dy·(|x| <= q_max·s); tanh: dy·(1 - tanh²(x/s)); hard_tanh: dy·max(0, 1 - |x/(q_max·s)|). The scale is the "
    "forward's (per_batch / ema / fixed from the state operand), not always the per-batch one as upstream. "
    "Linear in dy (its derivative there is itself); in x and state it is 0 almost everywhere for identity and "
    "clipped_identity, and has no rule for tanh / hard_tanh (AutodiffError).",
)


# ------------------------------------------------------------------------------ LSQ
def _lsq_type(ins, attrs):
    x, scale = ins[0], ins[1]
    _check_param(x, scale, attrs, "scale")
    for extra in ins[2:]:
        _check_like_x(x, extra)
    return x


def _lsq_parts(args, attrs):
    args = _float_args(args)
    x, scale = args[0], args[1]
    nb, axis = attrs["batch_dims"], attrs["axis"]
    s = np.maximum(_bcast_param(scale, nb, x.ndim - nb, axis), x.dtype.type(SCALE_FLOOR))
    return args, x, s, x / s, x.dtype.type(QMAX[attrs["bits"]])


def _lsq_kernel(args, attrs, out):
    _, _x, s, z, q = _lsq_parts(args, attrs)
    return np.clip(round_half_away(z), -q, q) * s


def _lsq_bx_kernel(args, attrs, out):
    args, _, _, z, q = _lsq_parts(args, attrs)
    return args[2] * (np.abs(z) <= q)


def _psi(z: np.ndarray, q) -> np.ndarray:
    return np.where(np.abs(z) <= q, round_half_away(z) - z, np.sign(z) * q)


def _lsq_bs_kernel(args, attrs, out):
    args, x, _, z, q = _lsq_parts(args, attrs)
    nb = attrs["batch_dims"]
    r = np.sum(_psi(z, q) * args[2], axis=_reduce_axes(x.ndim, nb, attrs["axis"]), keepdims=True)
    return r.reshape(tuple(out.shape))


class _LsqGraph:
    """Graph-level pieces of the LSQ rules (primitive ops, so the rules stay differentiable)."""

    def __init__(self, ctx, node):
        g = self.g = ctx.graph
        self.ctx, self.node = ctx, node
        x, scale = ctx.operand(node, 0), ctx.operand(node, 1)
        nb, axis = node.attrs["batch_dims"], node.attrs["axis"]
        core = len(x.shape) - nb
        self.x, self.scale, self.nb = x, scale, nb
        self.red = list(_reduce_axes(len(x.shape), nb, axis))
        bshape = [*scale.shape[:nb], *[scale.shape[nb] if i == axis else 1 for i in range(core)]]
        self.live = g.ge(scale, g.scalar(SCALE_FLOOR, scale.dtype))  # where max(scale, floor) passes gradient
        s = g.maximum(scale, g.scalar(SCALE_FLOOR, scale.dtype))
        self.s_b = ctx.reshape(s, bshape)
        self.z = x / self.s_b
        self.q = float(QMAX[node.attrs["bits"]])
        self.inr = g.le(g.abs(self.z), g.scalar(self.q, x.dtype))

    def bcast(self, p):
        return self.ctx.reshape(p, list(self.s_b.shape))

    def to_param(self, v):
        """Sum an x-shaped value over each channel: the shape of the scale operand."""
        r = self.g.reduce(v, op="sum", axes=self.red, keep_dim=True) if self.red else v
        return self.ctx.reshape(r, list(self.scale.shape))

    def psi(self):
        g, z = self.g, self.z
        zero = g.scalar(0.0, z.dtype)
        sign_q = g.where(g.gt(z, zero), g.scalar(self.q, z.dtype), g.where(g.lt(z, zero), g.scalar(-self.q, z.dtype), zero))
        return g.where(self.inr, g.round(z) - z, sign_q)

    def mask(self, v):
        return self.ctx.where_zero(self.inr, v)


def _lsq_vjp(ctx, node, ct):
    g = ctx.graph
    x, scale = ctx.operands(node)
    dx = g.fake_quantize_lsq_backward_x(x, scale, ct, **dict(node.attrs)) if ctx.wants(node, 0) else None
    ds = g.fake_quantize_lsq_backward_scale(x, scale, ct, **dict(node.attrs)) if ctx.wants(node, 1) else None
    return [dx, ds]


def _lsq_jvp(ctx, node, tangents):
    tx, ts = tangents
    parts = []
    if tx is not None:
        x, scale = ctx.operands(node)
        parts.append(ctx.graph.fake_quantize_lsq_backward_x(x, scale, tx, **dict(node.attrs)))
    if ts is not None:
        lg = _LsqGraph(ctx, node)
        parts.append(lg.psi() * lg.bcast(ctx.where_zero(lg.live, ts)))
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


_LSQ_ATTRS = {"bits": _FQ_ATTRS["bits"], "axis": _FQ_ATTRS["axis"], "batch_dims": BATCH_DIMS}

defop(
    name="fake_quantize_lsq", precision="elementwise", family="quant", arity=2, operands=("x", "scale"), attrs=_LSQ_ATTRS,
    canonicalize=_canon_axis, infer=_lsq_type, kernel=_lsq_kernel,
    vjp=_lsq_vjp, jvp=_lsq_jvp, batch=batch_lead,
    doc="Learned-step-size fake quantization (LSQ): s = max(scale[c], 1e-12), out = clip(round(x/s), -q_max, q_max)·s "
    "(round half away from zero), scale [C] (C = x.shape[axis], [1] per tensor). Gradient = the LSQ estimator: "
    "dx = fake_quantize_lsq_backward_x, dscale = fake_quantize_lsq_backward_scale (no 1/sqrt(N·q_max) gradient "
    "scale, as upstream).",
)


def _lsq_bx_vjp(ctx, node, ct):
    x, scale, _ = ctx.operands(node)
    # piecewise constant in x and scale: their derivative is 0 almost everywhere
    zero = [ctx.zeros_like(v) if ctx.wants(node, i) else None for i, v in enumerate((x, scale))]
    return [*zero, ctx.graph.fake_quantize_lsq_backward_x(x, scale, ct, **dict(node.attrs)) if ctx.wants(node, 2) else None]


def _lsq_bx_jvp(ctx, node, tangents):
    if tangents[2] is None:
        return None
    x, scale, _ = ctx.operands(node)
    return ctx.graph.fake_quantize_lsq_backward_x(x, scale, tangents[2], **dict(node.attrs))


defop(
    name="fake_quantize_lsq_backward_x", precision="elementwise", family="quant", arity=3, operands=("x", "scale", "dy"), attrs=_LSQ_ATTRS,
    canonicalize=_canon_axis, infer=_lsq_type, kernel=_lsq_bx_kernel,
    vjp=_lsq_bx_vjp, jvp=_lsq_bx_jvp, batch=batch_lead,
    doc="LSQ gradient in x: dy·(|x/s| <= q_max), s = max(scale[c], 1e-12). Linear in dy; piecewise constant "
    "(derivative 0 almost everywhere) in x and scale.",
)


def _lsq_bs_type(ins, attrs):
    _lsq_type(ins, attrs)
    return ins[1]


def _lsq_bs_vjp(ctx, node, ct):
    lg = _LsqGraph(ctx, node)
    dy = ctx.operand(node, 2)
    ct_b = lg.bcast(ct)
    out = [None, None, None]
    if ctx.wants(node, 2):
        out[2] = lg.psi() * ct_b
    if ctx.wants(node, 0) or ctx.wants(node, 1):
        inner = lg.mask(ct_b * dy) / lg.s_b  # d psi / dx = -1/s, d psi / ds = z/s inside the range, 0 outside
        if ctx.wants(node, 0):
            out[0] = -inner
        if ctx.wants(node, 1):
            out[1] = ctx.where_zero(lg.live, lg.to_param(inner * lg.z))
    return out


def _lsq_bs_jvp(ctx, node, tangents):
    lg = _LsqGraph(ctx, node)
    tx, ts, tdy = tangents
    dy = ctx.operand(node, 2)
    acc = None
    if tdy is not None:
        acc = lg.psi() * tdy
    if tx is not None or ts is not None:
        d = None
        if tx is not None:
            d = -tx
        if ts is not None:
            term = lg.z * lg.bcast(ctx.where_zero(lg.live, ts))
            d = term if d is None else d + term
        term = lg.mask(dy * d) / lg.s_b
        acc = term if acc is None else acc + term
    return lg.to_param(acc)


defop(
    name="fake_quantize_lsq_backward_scale", precision="elementwise", family="quant",
    arity=3, operands=("x", "scale", "dy"), attrs=_LSQ_ATTRS,
    canonicalize=_canon_axis, infer=_lsq_bs_type, kernel=_lsq_bs_kernel,
    vjp=_lsq_bs_vjp, jvp=_lsq_bs_jvp, batch=batch_lead,
    doc="LSQ gradient in the scale (shape of scale): ds[c] = Σ_{elements of channel c} ψ(x/s)·dy with "
    "ψ(z) = round(z) - z if |z| <= q_max else sign(z)·q_max, s = max(scale[c], 1e-12). Differentiable "
    "(almost everywhere) in all three operands.",
)


# ---------------------------------------------------------------------------- q_matmul
_REQUANT = {
    "x_zp": AttrSpec("int", default=0, doc="zero point of x"),
    "w_zp": AttrSpec("int", default=0, doc="zero point of w"),
    "out_zp": AttrSpec("int", default=0, doc="zero point of the output"),
    "mult": AttrSpec("float", doc="requantization multiplier x_scale·w_scale/out_scale"),
    "batch_dims": BATCH_DIMS,
}


def require_dtype(t: TensorType, dtype: DType, what: str) -> None:
    if t.dtype != dtype:
        raise ShapeError(f"{what} must be {dtype}, got {t.dtype}")


def _requantize(acc: np.ndarray, attrs) -> np.ndarray:
    """i32 accumulator -> i8: clip(round(acc·mult) + out_zp, -128, 127), in f32 like upstream."""
    scaled = acc.astype(np.float32) * np.float32(attrs["mult"])
    return np.clip(round_half_away(scaled) + np.float32(attrs["out_zp"]), -128, 127).astype(np.int8)


def _wrap_i32(acc: np.ndarray) -> np.ndarray:
    return acc.astype(np.int64).astype(np.int32)


def _q_matmul_type(ins, attrs):
    lead, (x, w, b) = split_lead(ins, attrs["batch_dims"])
    for t, what in ((x, "x"), (w, "w")):
        require_dtype(t, DType.I8, what)
        require_rank(t, 2, what)
    require_dtype(b, DType.I32, "bias")
    require_rank(b, 1, "bias")
    if x.shape[1] != w.shape[0]:
        raise ShapeError(f"contracted dims differ: x {x.shape!r} @ w {w.shape!r}")
    if b.shape[0] != w.shape[1]:
        raise ShapeError(f"bias {b.shape!r} must have N = {w.shape[1]} entries")
    return with_lead(lead, TensorType(Shape((x.shape[0], w.shape[1])), DType.I8))


def _q_matmul_one(args, attrs):
    x, w, b = args
    acc = (x.astype(np.int64) - attrs["x_zp"]) @ (w.astype(np.int64) - attrs["w_zp"]) + b.astype(np.int64)
    return _requantize(_wrap_i32(acc), attrs)


defop(
    name="q_matmul", family="quant", arity=3, operands=("x", "w", "bias"), attrs=_REQUANT, macs=last_dim_macs,
    infer=_q_matmul_type, kernel=lambda args, attrs, out: map_lead(lambda a: _q_matmul_one(a, attrs), args, attrs["batch_dims"], out),
    flags={"no_grad", "blas"}, batch=batch_lead,
    doc="Integer matmul: x i8 [M, K], w i8 [K, N], bias i32 [N] -> i8 [M, N]; acc = bias[n] + Σ_k (x - x_zp)(w - w_zp) "
    "accumulated in int32 (wrapping), then out = clip(round(acc·mult) + out_zp, -128, 127) with acc·mult in f32 and "
    "round half away from zero (docs/semantics.md#quantisation). 2-D cores only (batch_dims adds mapped leading axes). No gradient.",
)


# ---------------------------------------------------------------------------- q_conv2d
def _q_conv_canon(ins, attrs):
    nb = attrs["batch_dims"]
    if attrs["kernel_size"] is None and len(ins) > 1 and len(ins[1].shape) == 4 + nb and Shape(ins[1].shape[nb:]).is_static:
        return {**attrs, "kernel_size": tuple(ins[1].shape[nb + 2:])}
    return attrs


def _pair(attrs, key, minimum):
    v = attrs[key]
    if len(v) != 2 or any(e < minimum for e in v):
        raise ShapeError(f"{key} must be two ints >= {minimum}, got {list(v)}")
    return tuple(v)


def _q_conv_type(ins, attrs):
    lead, (x, w, b) = split_lead(ins, attrs["batch_dims"])
    require_dtype(x, DType.I8, "x")
    require_dtype(w, DType.I8, "w")
    require_dtype(b, DType.I32, "bias")
    require_rank(x, 4, "x (NCHW)")
    require_rank(w, 4, "w")
    require_rank(b, 1, "bias")
    n, c, h, wd = x.shape
    if not all(isinstance(d, int) for d in (c, h, wd)) or not w.shape.is_static:
        raise ShapeError("channels, spatial dims and the weight must be static")
    cout, cin_g, kh, kw = w.shape
    if attrs["kernel_size"] is not None and tuple(attrs["kernel_size"]) != (kh, kw):
        raise ShapeError(f"kernel_size {list(attrs['kernel_size'])} does not match the weight {w.shape!r}")
    s, p, d = _pair(attrs, "stride", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    grp = attrs["groups"]
    if grp < 1 or cin_g * grp != c or cout % grp:
        raise ShapeError(f"groups={grp}: need w.shape[1]·groups == C_in ({cin_g}·{grp} vs {c}) and C_out divisible by groups")
    if b.shape[0] != cout:
        raise ShapeError(f"bias {b.shape!r} must have C_out = {cout} entries")
    ho, wo = conv_out_size(h, kh, s[0], p[0], d[0]), conv_out_size(wd, kw, s[1], p[1], d[1])
    if ho < 1 or wo < 1:
        raise ShapeError(f"output spatial size {ho}x{wo} is not positive")
    return with_lead(lead, TensorType(Shape((n, cout, ho, wo)), DType.I8))


def _q_conv_one(args, attrs):
    x, w, b = args
    xs = x.astype(np.int64) - attrs["x_zp"]
    ws = w.astype(np.int64) - attrs["w_zp"]
    acc = conv2d_reference(xs, ws, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"])
    acc = acc + b.astype(np.int64).reshape(1, -1, 1, 1)
    return _requantize(_wrap_i32(acc), attrs)


defop(
    name="q_conv2d", family="quant", arity=3, operands=("x", "w", "bias"), macs=conv_macs,
    attrs={
        "kernel_size": AttrSpec("ints", default=None, doc="[kH, kW]; None = from w"),
        "stride": AttrSpec("ints", default=(1, 1)),
        "padding": AttrSpec("ints", default=(0, 0)),
        "dilation": AttrSpec("ints", default=(1, 1)),
        "groups": AttrSpec("int", default=1),
        **_REQUANT,
    },
    canonicalize=_q_conv_canon, infer=_q_conv_type,
    kernel=lambda args, attrs, out: map_lead(lambda a: _q_conv_one(a, attrs), args, attrs["batch_dims"], out),
    flags={"no_grad", "blas"}, batch=batch_lead,
    doc="Integer NCHW convolution with conv2d geometry (docs/semantics.md#convolution): x i8 [N, Cin, H, W], w i8 [Cout, Cin/groups, kH, "
    "kW], bias i32 [Cout] -> i8 [N, Cout, Ho, Wo]. acc = bias + Σ (x - x_zp)(w - w_zp) in int32 (wrapping); padding "
    "is the real zero (padded taps contribute 0, i.e. x is padded with x_zp, as ONNX QLinearConv); then "
    "clip(round(acc·mult) + out_zp, -128, 127) with round half away from zero. No gradient.",
)
