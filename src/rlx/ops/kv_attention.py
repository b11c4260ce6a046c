"""``cached_attention``: one decode step of grouped-query attention over a KV cache, the cache append included.

An LLM decode step spends about 25 nodes per layer on rope and attention over its cache; onnxruntime
runs the whole step as one fused kernel (``com.microsoft.GroupQueryAttention``) that appends to the
cache in place. The op states that step once: its formula is the row
:func:`rlx.ops.rows.cached_attention` (NumPy kernel, torch and jax lowerings), the ONNX exporter writes
GroupQueryAttention for onnxruntime and standard ONNX ops elsewhere. It is an inference op: its
gradient rules refuse (``rlx.AutodiffError``); vmap maps it over ``batch_dims`` leading axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.flags import BLAS, UPDATES_OPERANDS
from rlx.ir.opdef import Dims, defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops import rows
from rlx.ops.common import refuse_rule, require_dim, require_float
from rlx.ops.cost import numel
from rlx.ops.kinds import NUMPY
from rlx.ops.quant import BATCH_DIMS, batch_lead, split_lead, with_lead

ROPE_KINDS = ("interleaved", "half")


def _type(ins: list[TensorType], attrs: Mapping[str, Any]) -> tuple[TensorType, TensorType, TensorType]:
    """(out [B, S, H·D], k_cache, v_cache) after checking every operand against the heads and head_dim."""
    heads, kv, hd = attrs["num_heads"], attrs["kv_heads"], attrs["head_dim"]
    if heads < 1 or kv < 1 or heads % kv:
        raise ShapeError(f"cached_attention: num_heads={heads} and kv_heads={kv} must be >= 1, kv_heads dividing num_heads")
    if hd < 2 or hd % 2:
        raise ShapeError(f"cached_attention: head_dim must be even and >= 2, got {hd}")
    lead, (qkv, kc, vc, pos, cos, sin) = split_lead(ins, attrs["batch_dims"])
    for t, what, rank in ((qkv, "qkv", 3), (kc, "k_cache", 4), (vc, "v_cache", 4), (pos, "pos", 1), (cos, "cos", 2),
                          (sin, "sin", 2)):
        if len(t.shape) != rank:
            raise ShapeError(f"cached_attention: {what} must have rank {rank} (after batch_dims), got {t.shape!r}")
    for t, what in ((qkv, "qkv"), (kc, "k_cache"), (vc, "v_cache"), (cos, "cos"), (sin, "sin")):
        require_float(t, f"cached_attention: {what}")
    if pos.dtype != DType.I64:
        raise ShapeError(f"cached_attention: pos must be i64, got {pos.dtype}")
    b, _, width = qkv.shape
    require_dim(width, (heads + 2 * kv) * hd, "cached_attention: qkv last dim ((num_heads + 2·kv_heads)·head_dim)")
    for t, what in ((kc, "k_cache"), (vc, "v_cache")):
        if t.dtype != qkv.dtype:
            raise ShapeError(f"cached_attention: {what} is {t.dtype}, qkv is {qkv.dtype}")
        for axis, want, name in ((0, b, "batch"), (1, kv, "kv_heads"), (3, hd, "head_dim")):
            require_dim(t.shape[axis], want, f"cached_attention: {what} axis {axis} ({name})")
    require_dim(vc.shape[2], kc.shape[2], "cached_attention: v_cache slots (k_cache's)")
    require_dim(pos.shape[0], b, "cached_attention: pos length (batch)")
    if cos.shape != sin.shape:
        raise ShapeError(f"cached_attention: cos {cos.shape!r} and sin {sin.shape!r} differ")
    require_dim(cos.shape[1], hd // 2, "cached_attention: cos / sin width (head_dim/2)")
    out = TensorType(Shape((*qkv.shape[:2], heads * hd)), qkv.dtype)
    return with_lead(lead, out), with_lead(lead, kc), with_lead(lead, vc)


def check_positions(pos: np.ndarray, s: int, slots: int, table_rows: int) -> None:
    """The run-time bounds: 0 <= pos and pos + S <= both the cache slots and the cos / sin rows."""
    bad = (pos < 0) | (pos + s > min(slots, table_rows))
    if bad.any():
        raise RlxError(f"cached_attention: pos {pos[bad].reshape(-1).tolist()} out of range: need 0 <= pos and pos + S "
                       f"(S={s}) <= the cache slots ({slots}) and the cos / sin rows ({table_rows})")


_ROW = rows.bind(rows.cached_attention, NUMPY)


def _kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out: Any) -> tuple[np.ndarray, ...]:
    """The NumPy reference: the positions checked, then the row."""
    qkv, kc, _, pos, cos, _ = args
    check_positions(pos, qkv.shape[-2], kc.shape[-2], cos.shape[-2])
    return tuple(np.asarray(r) for r in _ROW(args, attrs, out))


def _macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """q·kᵀ and p·v over every cache slot: 2 × the queries' elements (out) × the slots."""
    q, slots = numel(out), ins[1][-2]
    return None if q is None or isinstance(slots, str) else 2 * q * slots


def _batch(ctx: Any, node: Any, operands: list[Any], batched: list[bool]) -> tuple[Any, ...]:
    """vmap: every operand given the batch axis, one more batch dim (all three results)."""
    return ctx.graph.results(batch_lead(ctx, node, operands, batched))


_NO_GRAD = refuse_rule("an inference op (a KV-cache decode step): it has no gradient; differentiate attention and rope")

defop(
    name="cached_attention", family="attention", arity=6,
    operands=("qkv", "k_cache", "v_cache", "pos", "cos", "sin"),
    attrs={
        "num_heads": AttrSpec("int", doc="H, the query heads"),
        "kv_heads": AttrSpec("int", doc="KV, the key / value heads (divides num_heads)"),
        "head_dim": AttrSpec("int", doc="D, even"),
        "scale": AttrSpec("float", default=None, doc="score multiplier; None = head_dim**-0.5"),
        "rope": AttrSpec("str", default="interleaved", choices=ROPE_KINDS,
                         doc="rotated pairs: (2j, 2j+1) (llama.cpp's normal rope) or (j, j + D/2) (NeoX)"),
        "batch_dims": BATCH_DIMS,
    },
    infer=_type, kernel=_kernel, vjp=_NO_GRAD, jvp=_NO_GRAD, batch=_batch, macs=_macs, flags={BLAS, UPDATES_OPERANDS},
    doc="One decode step of grouped-query attention over a KV cache. Operands: qkv [B, S, (H + 2·KV)·D] "
    "(per token the H query heads, then the KV key heads, then the KV value heads, not yet rotated); "
    "k_cache, v_cache [B, KV, C, D] in qkv's float dtype; pos i64 [B], the slots already filled per row "
    "(token i is at position pos + i); cos, sin [P, D/2], row t the rotary angles of position t. "
    "q and k are rotated at their positions (rope='interleaved' pairs lanes (2j, 2j+1), 'half' pairs "
    "(j, j + D/2); a' = a·cos[t, j] - b·sin[t, j], b' = b·cos[t, j] + a·sin[t, j]); the new caches are "
    "the caches with slot pos + i of each row replaced by token i's rotated key / its value, every other "
    "slot unchanged; query head h of token i (kv head h // (H/KV)) attends to slots 0 .. pos + i of the "
    "new caches: softmax over them of scale·q·k (scale None: D**-0.5), the weighted sum of v rows, heads "
    "concatenated. Results (out [B, S, H·D] in qkv's dtype, k_cache_new, v_cache_new). pos < 0, "
    "pos + S > C or pos + S > P is an RlxError at run time. Not differentiable (AutodiffError); "
    "batch_dims leading axes on every operand are mapped over (vmap). Exported for onnxruntime, where both "
    "caches are graph inputs and both cache results graph outputs, it is one GroupQueryAttention node, which "
    "appends in place when a present output is bound to its cache's buffer (and leaves zeros in slots >= pos + S "
    "when unbound): the onnxruntime backend binds them, to the caller's array with inplace_outputs, else to a "
    "copy made for the call.",
)
