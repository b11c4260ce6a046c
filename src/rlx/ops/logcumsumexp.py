"""``logcumsumexp``: the running log-sum-exp along one axis (torch.logcumsumexp), a scan of ``logaddexp``.

A scan rather than ``m + log(cumsum(exp(x - m)))``: one shift ``m`` for the whole axis underflows the
terms far below it (``[-1000, 0]`` would give ``-inf`` first), the scan is exact per step. ``-inf``
terms contribute nothing, ``+inf`` saturates, NaN propagates (``np.logaddexp``'s rules, torch's too).
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ops.common import along_axis
from rlx.ops.indexing import _canon_axis, _shifted


def _type(ins, attrs):
    t = ins[0]
    if not t.dtype.is_float:
        raise ShapeError(f"logcumsumexp needs a float operand, got {t.dtype}")
    along_axis(t, attrs, "logcumsumexp")
    return t


def _kernel(args, attrs, out):
    x = args[0]
    axis = attrs["axis"] % x.ndim
    if attrs["reverse"]:
        x = np.flip(x, axis)
    with np.errstate(invalid="ignore"):
        r = np.logaddexp.accumulate(x, axis=axis, dtype=x.dtype) if x.shape[axis] else x.copy()
    return np.flip(r, axis) if attrs["reverse"] else r


def _log_parts(g, v):
    """(log max(v, 0), log max(-v, 0)): a signed value as two log-magnitudes (-inf where that sign is absent)."""
    zero = g.scalar(0.0, v.dtype)
    return g.activation(g.maximum(v, zero), kind="log"), g.activation(g.maximum(-v, zero), kind="log")


def _scan(g, v, attrs, reverse):
    return g.append("logcumsumexp", [v], {**dict(attrs), "reverse": reverse})


def _vjp(ctx, node, ct):
    """dx_i = sum over the outputs j that include x_i of ct_j exp(x_i - y_j): the opposite scan of
    log|ct| - y, split by the sign of ct, so no exponential overflows."""
    g, x, y = ctx.graph, ctx.operand(node, 0), ctx.output(node)
    back = not node.attrs["reverse"]
    pos, neg = _log_parts(g, ct)
    grad = (g.activation(_scan(g, pos - y, node.attrs, back) + x, kind="exp")
            - g.activation(_scan(g, neg - y, node.attrs, back) + x, kind="exp"))
    return [grad]


def _jvp(ctx, node, tangents):
    """dy_j = sum over the inputs i in y_j of t_i exp(x_i - y_j): the same scan of log|t| + x, by sign."""
    g, x, y = ctx.graph, ctx.operand(node, 0), ctx.output(node)
    pos, neg = _log_parts(g, tangents[0])
    fwd = node.attrs["reverse"]
    return (g.activation(_scan(g, pos + x, node.attrs, fwd) - y, kind="exp")
            - g.activation(_scan(g, neg + x, node.attrs, fwd) - y, kind="exp"))


defop(
    name="logcumsumexp", precision="reduction", family="special", arity=1, operands=("x",),
    attrs={"axis": AttrSpec("int", default=-1), "reverse": AttrSpec("bool", default=False)},
    canonicalize=_canon_axis, infer=_type, kernel=_kernel, vjp=_vjp, jvp=_jvp, batch=_shifted,
    doc="Running log(sum(exp(x))) along `axis` (torch.logcumsumexp), a scan of logaddexp: exact per step, -inf "
    "terms add nothing, +inf saturates, NaN propagates; reverse runs from the end. Floats only, rank >= 1. "
    "Gradient: the opposite scan of log|ct| - y split by the sign of ct (no overflow); tangent likewise.",
)
