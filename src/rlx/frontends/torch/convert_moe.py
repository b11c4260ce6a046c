"""torch converters for grouped (mixture-of-experts) matmuls: ``aten._grouped_mm`` and the custom op
transformers registers for its default experts path on CPU (``transformers::grouped_mm_fallback``, whose
Python kernel loops over ``offs.tolist()`` and so cannot be traced or decomposed).

Both compute, for rows sorted by expert with cumulative group ends ``offs`` [E], ``out[s] = x[s] @ w[e(s)]``
with ``e(s)`` the number of ends <= s: one rlx ``grouped_matmul``. Rows past the last end (tokens routed to
no expert) are zero, as the fallback's zero-initialised output leaves them.
"""

from __future__ import annotations

from rlx.frontends.torch.context import _conv, _fill_like
from rlx.ir.dtype import DType


@_conv("transformers.grouped_mm_fallback.default", "aten._grouped_mm.default")
def _grouped_mm(cx, node, x, w, offs=None, bias=None, out_dtype=None):
    g = cx.g
    if offs is None or len(x.shape) != 2 or len(w.shape) != 3:
        raise cx.fail("only the 2-D input x 3-D weight form with offs (rows grouped by expert) is supported")
    if bias is not None:
        raise cx.fail("grouped_mm with a bias is not supported")
    experts = cx.static(w.shape[0], "number of experts")
    first = g.narrow(x, axis=1, start=0, length=1)  # [S, 1]: the row positions, symbolic S included
    ones = _fill_like(cx, first, 1, DType.I64)
    pos = g.cumulative(ones, op="sum", axis=0) - cx.scalar(1, DType.I64)  # [S, 1]
    ends = g.reshape(cx.cast(offs, DType.I64), new_shape=[1, experts])
    group = g.reduce(cx.cast(g.ge(pos, ends), DType.I64), op="sum", axes=[1], keep_dim=False)  # [S]
    last = cx.scalar(experts - 1, DType.I64)
    out = g.grouped_matmul(cx.cast(x, w.dtype), w, g.binary(group, last, op="min"))
    routed = g.reshape(g.le(group, last), new_shape=[-1, 1])
    return cx.cast(g.where(routed, out, cx.scalar(0, out.dtype)), cx.out_dtype())
