"""JAX lowerings of the quantisation (rlx.ops.quant) and numerics (rlx.ops.numerics) families.

Same contract as :mod:`rlx.backends.jax.lowering`. Ops with ``batch_dims`` map their
per-example lowering over the leading axes with ``jax.vmap``. Ops in :data:`HOST` run
their NumPy reference kernel on the host through ``jax.pure_callback`` inside the jitted
program, each for the reason given there (exact by construction, but a device-to-host
round trip; not differentiable by jax, sharding replicates them).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlx.backends.jax.index_checks import checked_index
from rlx.backends.jax.table import JNP, jnp_dtype, lowering
from rlx.ir.dtype import DType
from rlx.ops.kinds import ACTIVATION_KINDS

QMAX = {8: 127, 4: 7, 2: 1}
SCALE_FLOOR = 1e-12

HOST: dict[str, str] = {
    "sample": "token sampling reproduces upstream's Philox4x32-10 stream bit for bit (u64 seed, counter layout); "
    "the NumPy kernel is that definition, so it runs on the host rather than a second RNG implementation",
    "q_conv2d": "int8 convolution with int32 wrap-around accumulation: XLA has no portable integer convolution "
    "(cuDNN int8 paths need special layouts and do not wrap), so the exact NumPy kernel runs on the host",
    "dequant_matmul": "packed int4 / fp8 (upstream's non-OCP e4m3 decoder) weight layouts are decoded by the NumPy "
    "kernel on the host; a device decoder is future work",
    **dict.fromkeys(
        ("gaussian_splat_prepare", "gaussian_splat_rasterize"),
        "the packed prepare buffer holds data-dependent tile lists (variable-length per-tile depth sorts), which XLA's "
        "static shapes cannot express; the NumPy stages run on the host (render and its derivatives run on device, "
        "lowering_splat)"),
}


def _vmap_lead(fn, args: list[Any], nb: int) -> Any:
    """``fn(args)`` mapped over the first ``nb`` axes of every operand."""
    for _ in range(nb):
        fn = jax.vmap(fn)
    return fn(*args)


def _work(args: list[Any]) -> list[Any]:
    """Fake-quant operands in f32, or f64 when x is f64 (the reference's work dtype)."""
    ct = jnp.float64 if args[0].dtype == jnp.float64 else jnp.float32
    return [a.astype(ct) for a in args]


def round_half_away(x):
    return ACTIVATION_KINDS["round"].fn(JNP, x)


def _chan(values, axis: int | None, ndim: int, dtype) -> Any:
    arr = np.asarray(values, dtype=dtype)
    if axis is None or arr.size == 1:
        return jnp.asarray(arr.reshape(()))
    shape = [1] * ndim
    shape[axis % ndim] = arr.size
    return jnp.asarray(arr.reshape(shape))


# -------------------------------------------------------------------------- quantize
@lowering("quantize")
def _quantize(args, attrs, out):
    x = args[0]
    ct = np.float64 if x.dtype == jnp.float64 else np.float32
    x = x.astype(ct)
    inv = (ct(1.0) / np.asarray(attrs["scales"], dtype=ct)).astype(ct)
    zp = attrs["zero_points"] or [0] * len(attrs["scales"])
    q = jnp.clip(round_half_away(x * _chan(inv, attrs["axis"], x.ndim, ct)) + _chan(zp, attrs["axis"], x.ndim, ct), -128, 127)
    return jnp.where(jnp.isnan(q), jnp.zeros((), q.dtype), q).astype(jnp.int8)


@lowering("dequantize")
def _dequantize(args, attrs, out):
    q = args[0]
    ct = np.float64 if out.dtype is DType.F64 else np.float32
    zp = attrs["zero_points"] or [0] * len(attrs["scales"])
    return (q.astype(ct) - _chan(zp, attrs["axis"], q.ndim, ct)) * _chan(attrs["scales"], attrs["axis"], q.ndim, ct)


# ------------------------------------------------------------------------ fake quant
def _red_axes(ndim: int, nb: int, axis: int | None) -> tuple[int, ...]:
    return tuple(nb + i for i in range(ndim - nb) if i != axis)


def _bcast_param(p, nb: int, core_rank: int, axis: int | None):
    return jnp.reshape(p, (*p.shape[:nb], *[p.shape[nb] if i == axis else 1 for i in range(core_rank)]))


def _fq_scale(x, state, attrs):
    nb, axis, mode = attrs["batch_dims"], attrs["axis"], attrs["scale_mode"]
    core = x.ndim - nb
    floor = jnp.asarray(SCALE_FLOOR, x.dtype)
    if mode == "fixed":
        return jnp.maximum(_bcast_param(state, nb, core, axis), floor)
    red = _red_axes(x.ndim, nb, axis)
    ax = jnp.abs(x)
    ax = jnp.where(jnp.isnan(ax), jnp.zeros((), x.dtype), ax)  # np.fmax.reduce(initial=0) skips NaN
    amax = jnp.max(ax, axis=red, keepdims=True, initial=0.0) if red else ax
    cur = jnp.maximum(amax / jnp.asarray(QMAX[attrs["bits"]], x.dtype), floor)
    if mode == "per_batch":
        return cur
    st = _bcast_param(state, nb, core, axis)
    decay = jnp.asarray(attrs["decay"], x.dtype)
    return jnp.where(st <= 0, cur, decay * st + (1 - decay) * cur)


@lowering("fake_quantize")
def _fake_quantize(args, attrs, out):
    args = _work(args)
    x, state = args[0], (args[1] if len(args) > 1 else None)
    s = _fq_scale(x, state, attrs)
    q = QMAX[attrs["bits"]]
    return jnp.clip(round_half_away(x / s), -q, q) * s


@lowering("observer_update")
def _observer_update(args, attrs, out):
    args = _work(args)
    x, state = args[0], (args[1] if len(args) > 1 else None)
    return jnp.reshape(jnp.broadcast_to(_fq_scale(x, state, attrs), _scale_shape(x, attrs)), tuple(out.shape))


def _scale_shape(x, attrs) -> tuple[int, ...]:
    nb, axis = attrs["batch_dims"], attrs["axis"]
    return (*x.shape[:nb], *[x.shape[nb + i] if i == axis else 1 for i in range(x.ndim - nb)])


@lowering("fake_quantize_backward")
def _fake_quantize_backward(args, attrs, out):
    args = _work(args)
    x, dy, state = args[0], args[1], (args[2] if len(args) > 2 else None)
    ste = attrs["ste"]
    if ste == "identity":
        return dy
    s = _fq_scale(x, state, attrs)
    q = jnp.asarray(QMAX[attrs["bits"]], x.dtype)
    if ste == "clipped_identity":
        f = (jnp.abs(x) <= q * s).astype(x.dtype)
    elif ste == "tanh":
        f = 1 - jnp.tanh(x / s) ** 2
    else:
        f = jnp.maximum(0, 1 - jnp.abs(x / (q * s)))
    return dy * f


def _lsq_parts(args, attrs):
    args = _work(args)
    x, scale = args[0], args[1]
    nb, axis = attrs["batch_dims"], attrs["axis"]
    s = jnp.maximum(_bcast_param(scale, nb, x.ndim - nb, axis), jnp.asarray(SCALE_FLOOR, x.dtype))
    return args, x, s, x / s, jnp.asarray(QMAX[attrs["bits"]], x.dtype)


@lowering("fake_quantize_lsq")
def _lsq(args, attrs, out):
    _, _, s, z, q = _lsq_parts(args, attrs)
    return jnp.clip(round_half_away(z), -q, q) * s


@lowering("fake_quantize_lsq_backward_x")
def _lsq_bx(args, attrs, out):
    args, _, _, z, q = _lsq_parts(args, attrs)
    return args[2] * (jnp.abs(z) <= q)


@lowering("fake_quantize_lsq_backward_scale")
def _lsq_bs(args, attrs, out):
    args, x, _, z, q = _lsq_parts(args, attrs)
    psi = jnp.where(jnp.abs(z) <= q, round_half_away(z) - z, jnp.sign(z) * q)
    red = _red_axes(x.ndim, attrs["batch_dims"], attrs["axis"])
    r = jnp.sum(psi * args[2], axis=red, keepdims=True) if red else psi * args[2]
    return jnp.reshape(r, tuple(out.shape))


# --------------------------------------------------------------------------- q_matmul
def _requantize(acc, attrs):
    scaled = acc.astype(jnp.float32) * jnp.float32(attrs["mult"])
    return jnp.clip(round_half_away(scaled) + jnp.float32(attrs["out_zp"]), -128, 127).astype(jnp.int8)


@lowering("q_matmul")
def _q_matmul(args, attrs, out):
    def one(x, w, b):
        xs = x.astype(jnp.int32) - attrs["x_zp"]
        ws = w.astype(jnp.int32) - attrs["w_zp"]
        acc = jnp.matmul(xs, ws, preferred_element_type=jnp.int32) + b.astype(jnp.int32)  # int32 wraps, as the reference
        return _requantize(acc, attrs)

    return _vmap_lead(one, list(args), attrs["batch_dims"])


# ----------------------------------------------------------------------------- numerics
@lowering("fft")
def _fft(args, attrs, out):
    x, axis = args[0], attrs["axis"]
    if x.shape[axis] == 0:
        return x
    fn = jnp.fft.ifft if attrs["inverse"] else jnp.fft.fft
    wide = jax.dtypes.canonicalize_dtype(jnp.complex128)  # the reference computes in c128: do so when x64 is on
    return fn(x.astype(wide), axis=axis, norm=attrs["norm"]).astype(jnp_dtype(out.dtype))


def _solve(args, attrs, out):
    a, b = args
    vector = b.ndim == a.ndim - 1
    x = jnp.linalg.solve(a, b[..., None] if vector else b)
    return x[..., 0] if vector else x


LOWERING_NOTES = {
    "dense_solve": "a singular A gives inf / NaN instead of RlxError (no host round trip to raise)",
}
lowering("dense_solve", "batched_dense_solve")(_solve)


@lowering("top_k")
def _top_k(args, attrs, out):
    """top_k values or indices (output attr); the integer branch needs no negation, so unsigned ints are exact."""
    x, axis, k = args[0], attrs["axis"] % args[0].ndim, attrs["k"]
    largest = attrs["largest"]
    if jnp.issubdtype(x.dtype, jnp.floating):
        key = jnp.where(jnp.isnan(x), jnp.asarray(np.inf, x.dtype), x)
        order = jnp.argsort(-key if largest else key, axis=axis, stable=True)
    elif largest:  # stable descending without negating (no overflow): argsort of the flipped array, reversed
        n = x.shape[axis]
        order = n - 1 - jnp.flip(jnp.argsort(jnp.flip(x, axis), axis=axis, stable=True), axis)
    else:
        order = jnp.argsort(x, axis=axis, stable=True)
    idx = jax.lax.slice_in_dim(order, 0, k, axis=axis)
    if attrs["output"] == "both":
        return jnp.take_along_axis(x, idx, axis=axis), idx.astype(jnp_dtype(out[1].dtype))
    if attrs["output"] == "indices":
        return idx.astype(jnp_dtype(out.dtype))
    return jnp.take_along_axis(x, idx, axis=axis)


@lowering("split")
def _split(args, attrs, out):
    """One result per piece (a one-piece split is a one-result node: the input itself)."""
    cuts = np.cumsum(attrs["sizes"])[:-1].tolist()
    pieces = jnp.split(args[0], cuts, axis=attrs["axis"])
    return tuple(pieces) if len(pieces) > 1 else pieces[0]


@lowering("scatter_add")
def _scatter_add(args, attrs, out):
    rows = attrs["num_rows"]
    upd, idx = args
    idx = checked_index(idx, rows, "scatter_add")  # outside the vmap: one check for every batch

    def one(upd, idx):
        return jnp.zeros((rows, *upd.shape[1:]), upd.dtype).at[idx].add(upd, mode="drop")

    return _vmap_lead(one, [upd, idx], attrs["batch_dims"])


@lowering("complex_norm_sq")
def _complex_norm_sq(args, attrs, out):
    z = args[0]
    re, im = jnp.real(z).astype(jnp.float32), jnp.imag(z).astype(jnp.float32)
    return re**2 + im**2


@lowering("complex_norm_sq_backward")
def _complex_norm_sq_backward(args, attrs, out):
    z, g = args
    return g.astype(jnp.float32) * z


@lowering("conjugate")
def _conjugate(args, attrs, out):
    return jnp.conj(args[0])


_WIDE = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.uint64))


def host_lowering(name: str):
    """A lowering that runs the op's NumPy reference kernel on the host (jax.pure_callback)."""
    from rlx.ir.opdef import get_op
    from rlx.runtime.reference import eval_node

    class _Node:  # the attributes eval_node reads
        def __init__(self, attrs):
            self.op, self.attrs, self.id = name, attrs, -1

    def lower(args, attrs, out):
        # 64-bit values cross the callback boundary as uint32 pairs: jax runs the callback on an XLA
        # thread where the executable's scoped x64 mode is off and would truncate f64 / i64 to 32 bits.
        wide = [a.dtype in _WIDE for a in args]
        sent = [jax.lax.bitcast_convert_type(a, jnp.uint32) if w else a for a, w in zip(args, wide)]
        kinds = [np.dtype(a.dtype) for a in args]
        out_np = out.dtype.numpy
        out_wide = out_np in _WIDE
        shape = jax.ShapeDtypeStruct((*out.shape, 2) if out_wide else tuple(out.shape), jnp.uint32 if out_wide else jnp_dtype(out.dtype))

        def kernel(*arrays):
            vals = [np.ascontiguousarray(a).view(k).reshape(a.shape[:-1]) if w else np.asarray(a) for a, w, k in zip(arrays, wide, kinds)]
            r = eval_node(_Node(attrs), vals, out)
            return np.ascontiguousarray(r).view(np.uint32).reshape(shape.shape) if out_wide else r

        r = jax.pure_callback(kernel, shape, *sent)
        return jax.lax.bitcast_convert_type(r, out_np) if out_wide else r

    get_op(name)  # fail early for a misspelt name
    return lower


for _name in HOST:
    lowering(_name)(host_lowering(_name))
