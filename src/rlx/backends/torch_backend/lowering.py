"""The torch lowering table: one function per MIR op, ``fn(args, attrs, out) -> torch.Tensor``.

``args`` are the operands as torch tensors, ``attrs`` the node's canonical attributes and
``out`` its :class:`~rlx.TensorType`. Each function reproduces the op's reference kernel (the
registry docstring is the contract) with torch calls; :mod:`.executable` widens operands
narrower than f32 before a lowering runs (except :data:`NATIVE_LOW_PRECISION`) and casts every
result to the node's dtype, as :func:`rlx.run` does.

Ops without a torch lowering here are covered in one of three other ways (``coverage()``
walks the registry and a test fails for an op in none): fused ops through their registry
decomposition (:data:`DECOMPOSED`); the ops listed in :data:`HOST` run their NumPy reference
kernel on the host (each family with its reason); the HIR blocks are refused (an MIR graph
never holds them). Out-of-range indices raise ``RlxError`` as the reference does (checked
before the torch call, so no device assert is ever reached).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from rlx.backends.lowering_table import LoweringTable
from rlx.backends.torch_backend.lowering_special import logcumsumexp as logcumsumexp_lowering
from rlx.backends.torch_backend.lowering_special import special as special_lowering
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.shape import TensorType
from rlx.ops import rows
from rlx.ops.conv import pool_count, pool_geo
from rlx.ops.kinds import ArrayNamespace
from rlx.ops.kv_attention import check_positions
from rlx.ops.rows import minmax_reduce, reduce_identity

Lowering = Callable[[list[Any], Mapping[str, Any], TensorType], Any]

_TORCH_DTYPES = {
    "f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8, "bool": torch.bool,
    "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64, "c64": torch.complex64, "c128": torch.complex128,
    "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
    "f8e4m3fnuz": torch.float8_e4m3fnuz, "f8e5m2fnuz": torch.float8_e5m2fnuz, "f8e8m0": torch.float8_e8m0fnu,
}
_FROM_TORCH = {dt: DType(name) for name, dt in _TORCH_DTYPES.items()}


class TorchDTypeError(RlxError, TypeError):
    """A graph value has an element type the torch backend cannot hold."""


def torch_dtype(dtype: DType) -> torch.dtype:
    found = _TORCH_DTYPES.get(dtype.value)
    if found is None:
        raise TorchDTypeError(f"torch backend: no torch dtype for {dtype} (torch has no unpacked {dtype} with kernels); "
                              "run this graph with the numpy or jax backend")
    return found


_COMPUTE_DTYPES: dict[DType, torch.dtype] = {}  # memo: compute_dtype runs in every lowering call of every run


def compute_dtype(dtype: DType) -> torch.dtype:
    found = _COMPUTE_DTYPES.get(dtype)
    if found is None:
        found = _COMPUTE_DTYPES[dtype] = torch.float32 if dtype.is_low_precision_float else torch_dtype(dtype)
    return found


def _cast_all(args: list[Any], out: TensorType) -> list[Any]:
    dt = compute_dtype(out.dtype)
    return [a if a.dtype == dt else a.to(dt) for a in args]


def _is_float(a: Any) -> bool:
    return a.dtype.is_floating_point


def _is_int(a: Any) -> bool:
    return not a.dtype.is_floating_point and not a.dtype.is_complex and a.dtype != torch.bool


def _prod_axes(x: Any, axis: tuple[int, ...], keepdims: bool, dtype: Any) -> Any:
    """torch.prod over several axes (it takes one dim at a time)."""
    for a in sorted(axis, reverse=True):
        x = torch.prod(x, dim=a, keepdim=keepdims, dtype=dtype)
    return x


#: The torch array namespace the kinds' formulas run in (rlx.ops.kinds).
def _trunc_div(a, b):
    """Integer division toward zero (never by 0 or -1: rlx.ops.rows.int_div); torch has no division kernel
    for u16 / u32, so those are exact in i64."""
    if a.dtype in (torch.uint16, torch.uint32):
        return torch.div(a.to(torch.int64), b.to(torch.int64), rounding_mode="trunc").to(a.dtype)
    return torch.div(a, b, rounding_mode="trunc")


def _rlx_dtype(t: Any) -> DType:
    found = _FROM_TORCH.get(t.dtype)
    if found is None:
        raise RlxError(f"torch backend: unsupported tensor dtype {t.dtype}")
    return found


TORCH = ArrayNamespace(torch, erf=torch.special.erf, sigmoid=torch.sigmoid, permute=torch.permute, slice_axis=torch.narrow,
                       cast_all=_cast_all, concat=lambda parts, axis: torch.cat(parts, dim=axis),
                       maximum=lambda a, b: torch.maximum(a, torch.as_tensor(b, dtype=a.dtype)), prod=_prod_axes,
                       full_like_shape=lambda shape, value, like: torch.full(shape, value, dtype=like.dtype, device=like.device),
                       rlx_dtype=_rlx_dtype, astype=lambda x, to: x.to(torch_dtype(to)),
                       bitcast=lambda x, to: x.view(torch_dtype(to)),
                       arange_like=lambda n, like: torch.arange(n, device=like.device),
                       trunc_div=_trunc_div, int_power=torch.pow, power=torch.pow,
                       broadcast_arrays=torch.broadcast_tensors)

_HOST_REASONS = {
    "backward": "training kernels: run by the NumPy reference kernel on the host (a torch lowering is future work)",
    "quant": "quantisation kernels with exact integer / byte layouts: the NumPy reference kernel runs on the host",
    "moe": "dequantising grouped / MoE matmuls: the NumPy reference kernel runs on the host",
    "numerics": "solvers, FFT, sampling and top-k with the reference's exact tie and RNG rules: NumPy kernel on the host",
    "splat": "data-dependent tile lists: the NumPy kernels run on the host",
    "control_flow": "bodies are evaluated by the reference interpreter on the host",
    "extension": "custom_fn bodies are evaluated by the reference interpreter on the host",
    "indexing": "cumulative / scatter / arg-reduce with the reference's tie and duplicate rules: NumPy kernel on the host",
    "conv": "transposed convolution and resize: the NumPy reference kernel runs on the host",
    "math_ext": "integer shifts and modulo with the reference's edge rules: the NumPy reference kernel runs on the host",
    "attention": "rope: the NumPy reference kernel runs on the host",
    "sequence": "the NumPy reference kernel runs on the host",
}
TABLE = LoweringTable(
    "torch", TORCH, decompose_families=frozenset({"fused", "sequence"}), host_reasons=_HOST_REASONS,
    default_host_reason="no torch lowering yet: the NumPy reference kernel runs on the host",
    leaf_reasons={"input": "bound by name from exe.run(inputs=...)", "param": "bound once, resident on the device",
                  "result": "an item of its multi-result producer's tuple (operator.getitem)"},
)
LOWERINGS: dict[str, Lowering] = TABLE.lowerings
NATIVE_LOW_PRECISION: set[str] = TABLE.native_low_precision
DECOMPOSED = TABLE.decomposed
REFUSED = TABLE.refused
LEAVES = TABLE.leaves
lowering = TABLE.lowering
host_reason = TABLE.host_reason
coverage = TABLE.coverage


# ------------------------------------------------------------------------------ sources
@lowering("constant")
def _constant(args, attrs, out):
    raise RlxError("torch backend: constants are bound when the module is built")  # never called: see executable


# -------------------------------------------------------------------------- elementwise
#: torch's fused kernels for kinds it has natively (one kernel instead of the row formula's several ops)
_NATIVE: dict[str, Callable[[Any], Any]] = {"gelu": F.gelu, "gelu_approx": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu}


def activate(kind: str | None, x: Any) -> Any:
    """The activation row in torch, or torch's native kernel where it has one; None: identity."""
    native = _NATIVE.get(kind) if kind is not None else None
    if native is not None and _is_float(x):
        return native(x)
    return rows.activate(TORCH, kind, x)


@lowering("activation")
def _activation(args, attrs, out):
    """The row, with torch's native gelu / silu kernels as overrides."""
    native = _NATIVE.get(attrs["kind"])
    if native is None:
        return rows.activation(TORCH, args, attrs, out)
    (x,) = _cast_all(args, out)
    return native(x) if _is_float(x) else rows.activate(TORCH, attrs["kind"], x)


lowering("bitcast", native_low_precision=True)(TABLE.row("bitcast"))


# ------------------------------------------------------------------------------- linalg
@lowering("matmul", native_low_precision=True)
def _matmul(args, attrs, out):
    dt = torch_dtype(out.dtype)
    a, b = (t if t.dtype == dt else t.to(dt) for t in args)
    return torch.matmul(a, b)


@lowering("dot_general", native_low_precision=True)
def _dot_general(args, attrs, out):
    dt = torch_dtype(out.dtype)
    a, b = (t if t.dtype == dt else t.to(dt) for t in args)
    lc = [int(x) % a.ndim for x in attrs["lhs_contracting"]]
    rc = [int(x) % b.ndim for x in attrs["rhs_contracting"]]
    lb = [int(x) % a.ndim for x in attrs["lhs_batch"]]
    rb = [int(x) % b.ndim for x in attrs["rhs_batch"]]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [""] * a.ndim
    ra = [""] * b.ndim
    for i, j in zip(lb, rb):
        la[i] = ra[j] = next(letters)
    for i, j in zip(lc, rc):
        la[i] = ra[j] = next(letters)
    for i in range(a.ndim):
        la[i] = la[i] or next(letters)
    for j in range(b.ndim):
        ra[j] = ra[j] or next(letters)
    free_a = [la[i] for i in range(a.ndim) if i not in lb and i not in lc]
    free_b = [ra[j] for j in range(b.ndim) if j not in rb and j not in rc]
    spec = f"{''.join(la)},{''.join(ra)}->{''.join([la[i] for i in lb] + free_a + free_b)}"
    return torch.einsum(spec, a, b)


@lowering("fused_matmul_bias_act", native_low_precision=True)
def _fused_matmul_bias_act(args, attrs, out):
    x, w, b = args
    dt = compute_dtype(out.dtype)
    y = _matmul([x, w], {}, out).to(dt)
    return activate(attrs["activation"], torch.add(y, b.to(dt)))


# ---------------------------------------------------------------------------- reduction
def _numpy_dtype(x: Any) -> Any:
    return _rlx_dtype(x).numpy


@lowering("softmax")
def _softmax(args, attrs, out):
    """torch's fused kernel, overriding the softmax row where every score is finite (a row with a
    non-finite max follows the row)."""
    x = args[0]
    axis = int(attrs["axis"]) % max(x.ndim, 1)
    if x.ndim and x.shape[axis] and _is_float(x):
        fast = torch.softmax(x, dim=axis)
        if bool(torch.isfinite(x).all()):
            return fast
    return rows.softmax_of(TORCH, x, axis)


@lowering("gather")
def _gather(args, attrs, out):
    table, idx = args
    axis = attrs["axis"] % table.ndim
    flat = rows.checked_index(TORCH, idx, table.shape[axis], "gather", axis).reshape(-1).to(torch.int64)
    picked = torch.index_select(table, axis, flat)
    return picked.reshape(*table.shape[:axis], *idx.shape, *table.shape[axis + 1:])


# ------------------------------------------------------------------------ normalization
@lowering("layer_norm")
def _layer_norm(args, attrs, out):
    """torch.layer_norm (the C binding: no Python wrapper per call) over the last axis; the row otherwise."""
    x, gamma, beta = args
    dt = compute_dtype(out.dtype)
    if x.dtype is dt and gamma.dtype is dt and beta.dtype is dt and dt.is_floating_point and attrs["axis"] in (-1, x.ndim - 1):
        return torch.layer_norm(x, (x.shape[-1],), gamma, beta, attrs["eps"])  # the common case, nothing to cast first
    x, gamma, beta = _cast_all(args, out)
    axis = attrs["axis"] % x.ndim
    if axis == x.ndim - 1 and _is_float(x):
        return torch.layer_norm(x, (x.shape[-1],), gamma, beta, attrs["eps"])
    return rows.layer_norm_of(TORCH, x, gamma, beta, axis, attrs["eps"])


# layer_norm2d and rms_norm are the table's default rows (rlx.ops.rows)


@lowering("group_norm")
def _group_norm(args, attrs, out):
    """F.group_norm, overriding the group-norm row."""
    x, gamma, beta = _cast_all(args, out)
    return F.group_norm(x, attrs["num_groups"], gamma, beta, attrs["eps"])


# ---------------------------------------------------------------------------- attention
@lowering("attention")
def _attention(args, attrs, out):
    """torch's fused scaled_dot_product_attention, overriding the attention row whenever every query row
    keeps a key (the masked scores then weigh exactly 0 either way); otherwise, and under a soft-cap or a
    custom mask (rows may keep nothing: the row then averages them), the row."""
    kind = attrs["mask_kind"]
    lay = rows.Layout(args[0].ndim, attrs["layout"])
    q, k, v = (lay.to_bhsd(TORCH, a, attrs["num_heads"], attrs["head_dim"]) for a in _cast_all(list(args[:3]), out))
    mask = args[3] if len(args) > 3 else None
    sq, sk = q.shape[-2], k.shape[-2]
    fused = attrs["attn_logit_softcap"] is None and _is_float(q) and kind in ("none", "bias", "causal", "sliding_window") and sk >= sq
    if not fused:
        return lay.from_bhsd(TORCH, rows.attention_core(TORCH, q, k, v, attrs, mask))
    scale = rows.attention_scale(attrs)
    if kind == "causal" and sq == sk:
        return lay.from_bhsd(TORCH, F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale))
    attn_mask = mask.to(q.dtype) if kind == "bias" else rows.keep_mask(TORCH, attrs, sq, sk, mask, q)
    return lay.from_bhsd(TORCH, F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale))


# --------------------------------------------------------------------------------- conv
def _pair(v) -> tuple[int, int]:
    return int(v[0]), int(v[1])


@lowering("conv2d", native_low_precision=True)
def _conv2d(args, attrs, out):
    dt = torch_dtype(out.dtype)
    x, w = (t if t.dtype == dt else t.to(dt) for t in args)
    if _is_int(x):
        raise RlxError("torch backend: integer conv2d is not lowered")
    return F.conv2d(x, w, None, _pair(attrs["stride"]), _pair(attrs["padding"]), _pair(attrs["dilation"]), attrs["groups"])


@lowering("fused_conv2d_bias_act", native_low_precision=True)
def _fused_conv2d_bias_act(args, attrs, out):
    """F.conv2d with its bias, then the activation: the ATen pattern Inductor fuses itself."""
    dt = torch_dtype(out.dtype)
    x, w, *b = (t if t.dtype == dt else t.to(dt) for t in args)
    y = F.conv2d(x, w, b[0] if b else None, _pair(attrs["stride"]), _pair(attrs["padding"]), _pair(attrs["dilation"]),
                 attrs["groups"])
    return activate(attrs["activation"], y)


def _windows(x, k, s, p, fill):
    """[N, C, OH, OW, kh*kw]: every pooling window, the padding filled with ``fill``."""
    padded = F.pad(x, (p[1], p[1], p[0], p[0]), value=fill) if any(p) else x
    w = padded.unfold(2, k[0], s[0]).unfold(3, k[1], s[1])
    return w.reshape(*w.shape[:4], k[0] * k[1])


@lowering("pool2d")
def _pool2d(args, attrs, out):
    x, kind = args[0], attrs["kind"]
    k, s, p = pool_geo(attrs)
    if kind in ("max", "min", "fmax", "fmin"):
        ident = reduce_identity(kind, _numpy_dtype(x))
        high = kind in ("max", "fmax")
        if x.dtype == torch.bool:
            return (torch.any if high else torch.all)(_windows(x, k, s, p, bool(ident)), dim=-1)
        if not _is_float(x):
            return (torch.amax if high else torch.amin)(_windows(x, k, s, p, int(ident)), dim=-1)
        if kind == "max" and all(2 * p[i] <= k[i] for i in range(2)):
            return F.max_pool2d(x, k, s, p)  # the fused kernel (NaN propagates, as the reference's max)
        fill = math.nan if kind in ("fmax", "fmin") else float(ident)  # fmax skips NaN padding
        return minmax_reduce(TORCH, _windows(x, k, s, p, fill), (4,), False, kind)
    if kind == "prod":
        return torch.prod(_windows(x, k, s, p, 1), dim=-1)
    total = torch.sum(_windows(x, k, s, p, 0), dim=-1)
    if kind == "sum":
        return total
    if attrs["count_include_pad"]:
        return total / (k[0] * k[1])
    return total / torch.as_tensor(pool_count(x.shape, attrs), dtype=total.dtype, device=total.device)


@lowering("cached_attention")
def _cached_attention(args, attrs, out):
    """The row, after the kernel's position check (pos read on the host: one sync per decode step)."""
    qkv, kc, _, pos, cos, _ = args
    check_positions(pos.cpu().numpy(), qkv.shape[-2], kc.shape[-2], cos.shape[-2])
    return rows.cached_attention(TORCH, list(args), attrs, out)


lowering("special")(special_lowering)  # torch.special calls (rlx.backends.torch_backend.lowering_special)
lowering("logcumsumexp")(logcumsumexp_lowering)
from rlx.backends.torch_backend.lowering_linalg import register as _register_linalg  # noqa: E402  (linalg family, complex parts)

_register_linalg(lowering)
