"""cached_attention (a KV-cache decode step) to ONNX.

For ``engine="onnxruntime"`` (f32 / f16) it is one ``com.microsoft.GroupQueryAttention`` node: packed
query, the caches as past_key / past_value and present_key / present_value as the op's cache results,
with nothing between them, so a caller that binds a present output to its past input's buffer gets the
append in place (onnxruntime's shared-buffer mode). seqlens_k is pos + S - 1 and the total length the
largest pos + S (int32); onnxruntime rejects positions past the cos / sin rows itself. Unbound, the
present outputs hold the op's caches on slots < pos + S and zeros after them (GroupQueryAttention copies
only the filled slots); bound in place, the later slots are the caller's, unchanged, as the op defines.
So this form is written only where a caller can bind them: both caches are graph inputs and both cache
results graph outputs (the onnxruntime backend binds them, :func:`rlx.backends.ort_backend.updated_inputs`).
GroupQueryAttention takes several new tokens with a past only for batch 1: B > 1 with S > 1 (and f64) is
exported as below.

Any other engine gets standard ONNX: the cos / sin rows Gathered at pos + i, the rotation, the new rows
placed into the caches by GatherElements of the token at each slot and a Where over the written slots,
and grouped attention as MatMul / Softmax of the queries viewed [B, KV, H/KV, S, D] against the
caches' kv heads, the causal slot mask Range(C) <= pos + i. It does not check the positions: a slot
past the cache is not written (onnxruntime's Gather rejects a row past the tables).
"""

from __future__ import annotations

import numpy as np

from rlx.backends.onnx.export_quant import MS_DOMAIN
from rlx.backends.onnx.exporter import Exporter, _in_dtype, exporter
from rlx.ir.dtype import DType
from rlx.ir.graph import Node
from rlx.ir.onnx_format import OnnxUnsupported, onnx_dtype
from rlx.ops.rows import MASK_FILL, cached_attention_scale

#: the element types onnxruntime's GroupQueryAttention CPU kernel takes
GQA_DTYPES = frozenset({DType.F32, DType.F16})


@exporter("cached_attention")
def _cached_attention(ex: Exporter, node: Node, ins: list[str]) -> list[str]:
    if node.attrs["batch_dims"]:
        raise OnnxUnsupported(f"node %{node.id} (cached_attention): batch_dims={node.attrs['batch_dims']} (a vmapped "
                              "decode step) has no ONNX form; export the unbatched graph")
    b, s = node.shape[0], node.shape[1]
    if ex.engine == "onnxruntime" and node.dtype in GQA_DTYPES and (s == 1 or b == 1) and _bindable(ex, node):  # GQA's own limits
        return _group_query_attention(ex, node, ins)
    return _decomposed(ex, node, ins)


def _bindable(ex: Exporter, node: Node) -> bool:
    """Both caches are graph inputs and both cache results graph outputs: a caller can bind each present output
    to its past buffer (see the module doc)."""
    outputs = set(ex.g.output_ids)
    return all(ex.g.node(node.inputs[r]).op == "input" and node.id + r in outputs for r in (1, 2))


def _positions_end(ex: Exporter, pos: str, s: int) -> str:
    """pos + S, int64 [B]."""
    return ex.node("Add", [pos, ex.const(np.array(s, np.int64))])


def _group_query_attention(ex: Exporter, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    qkv, k_cache, v_cache, pos = ins[:4]
    cos, sin = (ex.cast(ins[i], _in_dtype(ex, node, i), node.dtype) for i in (4, 5))  # GQA: the tables in q's type
    end = _positions_end(ex, pos, node.shape[1])
    i32 = onnx_dtype(DType.I32)
    seqlens = ex.node("Cast", [ex.node("Sub", [end, ex.const(np.array(1, np.int64))])], to=i32)
    total = ex.node("Cast", [ex.node("ReduceMax", [end], keepdims=0)], to=i32)
    return ex.node("GroupQueryAttention", [qkv, "", "", k_cache, v_cache, seqlens, total, cos, sin], n_out=3,
                   domain=MS_DOMAIN, num_heads=a["num_heads"], kv_num_heads=a["kv_heads"],
                   scale=float(cached_attention_scale(a)), do_rotary=1,
                   rotary_interleaved=int(a["rope"] == "interleaved"))


def _rotate(ex: Exporter, x: str, c: str, s: str, hd: int, interleaved: bool) -> str:
    """x [B, S, N, D] rotated by the rows c, s [B, S, 1, D/2] (the op's pairs)."""
    def lanes(start: int, end: int, step: int) -> str:
        return ex.node("Slice", [x, ex.ints([start]), ex.ints([end]), ex.ints([-1]), ex.ints([step])])

    a, b = (lanes(0, hd, 2), lanes(1, hd, 2)) if interleaved else (lanes(0, hd // 2, 1), lanes(hd // 2, hd, 1))
    ya = ex.node("Sub", [ex.node("Mul", [a, c]), ex.node("Mul", [b, s])])
    yb = ex.node("Add", [ex.node("Mul", [b, c]), ex.node("Mul", [a, s])])
    if not interleaved:
        return ex.node("Concat", [ya, yb], axis=-1)
    pairs = ex.node("Concat", [ex.node("Unsqueeze", [ya, ex.ints([-1])]), ex.node("Unsqueeze", [yb, ex.ints([-1])])], axis=-1)
    return ex.node("Reshape", [pairs, ex.ints([0, 0, 0, hd])])


def _decomposed(ex: Exporter, node: Node, ins: list[str]) -> list[str]:
    a, dt = node.attrs, node.dtype
    heads, kv, hd = a["num_heads"], a["kv_heads"], a["head_dim"]
    qkv, k_cache, v_cache, pos = ins[:4]
    cos, sin = (ex.cast(ins[i], _in_dtype(ex, node, i), dt) for i in (4, 5))
    s, slots = node.shape[1], ex.g.node(node.inputs[1]).shape[2]
    t = ex.node("Add", [ex.node("Unsqueeze", [pos, ex.ints([1])]), ex.const(np.arange(s, dtype=np.int64))])  # [B, S]
    c, sn = (ex.node("Unsqueeze", [ex.node("Gather", [tab, t], axis=0), ex.ints([2])]) for tab in (cos, sin))
    x = ex.node("Reshape", [qkv, ex.ints([0, 0, heads + 2 * kv, hd])])

    def head_range(start: int, end: int) -> str:
        return ex.node("Slice", [x, ex.ints([start]), ex.ints([end]), ex.ints([2])])

    interleaved = a["rope"] == "interleaved"
    q = _rotate(ex, head_range(0, heads), c, sn, hd, interleaved)
    k = _rotate(ex, head_range(heads, heads + kv), c, sn, hd, interleaved)
    # slot j of row b holds token j - pos[b] where 0 <= j - pos[b] < S
    token = ex.node("Sub", [ex.const(np.arange(slots, dtype=np.int64)), ex.node("Unsqueeze", [pos, ex.ints([1])])])  # [B, C]
    written = ex.node("And", [ex.node("GreaterOrEqual", [token, ex.const(np.array(0, np.int64))]),
                              ex.node("Less", [token, ex.const(np.array(s, np.int64))])])
    index = ex.node("Unsqueeze", [ex.node("Where", [written, token, ex.const(np.array(0, np.int64))]), ex.ints([1, 3])])
    written = ex.node("Unsqueeze", [written, ex.ints([1, 3])])  # [B, 1, C, 1]

    def append(new: str, cache: str) -> str:
        rows = ex.node("Transpose", [new], perm=[0, 2, 1, 3])  # [B, KV, S, D]
        at = ex.node("Expand", [index, ex.node("Shape", [cache])])
        return ex.node("Where", [written, ex.node("GatherElements", [rows, at], axis=2), cache])

    k_new, v_new = append(k, k_cache), append(head_range(heads + kv, heads + 2 * kv), v_cache)
    qg = ex.node("Transpose", [ex.node("Reshape", [q, ex.ints([0, 0, kv, heads // kv, hd])])], perm=[0, 2, 3, 1, 4])
    kt = ex.node("Transpose", [ex.node("Unsqueeze", [k_new, ex.ints([2])])], perm=[0, 1, 2, 4, 3])  # [B, KV, 1, D, C]
    scores = ex.node("Mul", [ex.node("MatMul", [qg, kt]), ex.scalar(cached_attention_scale(a), dt)])
    keep = ex.node("LessOrEqual", [ex.const(np.arange(slots, dtype=np.int64)), ex.node("Unsqueeze", [t, ex.ints([2])])])
    keep = ex.node("Unsqueeze", [keep, ex.ints([1, 2])])  # [B, 1, 1, S, C]
    p = ex.node("Softmax", [ex.node("Where", [keep, scores, ex.scalar(MASK_FILL, dt)])], axis=-1)
    o = ex.node("MatMul", [p, ex.node("Unsqueeze", [v_new, ex.ints([2])])])  # [B, KV, G, S, D]
    out = ex.node("Reshape", [ex.node("Transpose", [o], perm=[0, 3, 1, 2, 4]), ex.ints([0, 0, heads * hd])])
    return [out, k_new, v_new]
