"""ONNX reductions along axes: Reduce*, ArgMax / ArgMin, the Softmax family, CumSum, TopK and the losses."""

from __future__ import annotations

import math

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _axis, _broadcast_to, _cast, _ints, _reshape, _static_shape
from rlx.frontends.onnx.import_symbolic import iota
from rlx.ir.dtype import DType
from rlx.ir.graph import Value


def _reduce_axes(cx, node, ins, attrs, from_input_since: int) -> list[int] | None:
    if cx.opset >= from_input_since:
        axes = _ints(cx, node, 1, None, attrs)
    else:
        axes = attrs.get("axes")
    rank = len(ins[0].shape)
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({_axis(a, rank) for a in axes})


def _reduce_generic(cx, node, ins, attrs, op: str, since: int = 18):
    x = ins[0]
    axes = _reduce_axes(cx, node, ins, attrs, since)
    keep = bool(attrs.get("keepdims", 1))
    if axes is None:
        return x, None, keep
    return x, axes, keep


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}


@converter(*_REDUCE, "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce(cx, node, ins, attrs):
    x, axes, keep = _reduce_generic(cx, node, ins, attrs, "", 13 if node.op_type == "ReduceSum" else 18)
    kind = node.op_type
    if axes is None:
        if kind in ("ReduceL1",):
            return cx.g.abs(x)
        if kind == "ReduceL2":
            return cx.g.abs(x)
        if kind == "ReduceSumSquare":
            return x * x
        if kind == "ReduceLogSum":
            return cx.g.log(x)
        return x
    if kind in _REDUCE:
        op = _REDUCE[kind]
        if op == "mean" and not x.dtype.is_float:
            y = cx.g.reduce(x, op="sum", axes=axes, keep_dim=keep)
            return cx.g.div(y, cx.scalar(math.prod(x.shape[a] for a in axes), y))
        return cx.g.reduce(x, op=op, axes=axes, keep_dim=keep)
    if kind == "ReduceL1":
        return cx.g.reduce(cx.g.abs(x), op="sum", axes=axes, keep_dim=keep)
    if kind == "ReduceL2":
        y = cx.g.reduce(x * x, op="sum", axes=axes, keep_dim=keep)
        return _cast(cx, cx.g.sqrt(_cast(cx, y, DType.F32) if not y.dtype.is_float else y), x.dtype)
    if kind == "ReduceSumSquare":
        return cx.g.reduce(x * x, op="sum", axes=axes, keep_dim=keep)
    if kind == "ReduceLogSum":
        return cx.g.log(cx.g.reduce(x, op="sum", axes=axes, keep_dim=keep))
    # ReduceLogSumExp, stabilised by the max
    m = cx.g.reduce(x, op="max", axes=axes, keep_dim=True)
    m = cx.g.where(cx.g.eq(cx.g.abs(m), cx.scalar(np.inf, m)), cx.scalar(0.0, m), m)
    s = cx.g.log(cx.g.reduce(cx.g.exp(x - m), op="sum", axes=axes, keep_dim=True)) + m
    return s if keep else _reshape(cx, s, [d for i, d in enumerate(x.shape) if i not in axes])


@converter("ArgMax", "ArgMin")
def _argreduce(cx, node, ins, attrs):
    return cx.g.arg_reduce(ins[0], op=node.op_type.lower(), axis=attrs.get("axis", 0), keep_dim=bool(attrs.get("keepdims", 1)),
                           select_last=bool(attrs.get("select_last_index", 0)))


def _coerced(cx, node, x: Value, attrs, fn):
    """Softmax-family semantics: opset >= 13 acts on one axis; older opsets flatten to 2-D at axis."""
    rank = len(x.shape)
    if cx.opset >= 13:
        return fn(x, _axis(attrs.get("axis", -1), rank))
    axis = _axis(attrs.get("axis", 1), rank) if rank else 0
    shape = list(x.shape)
    flat = _reshape(cx, x, [math.prod(shape[:axis]), math.prod(shape[axis:])])
    return _reshape(cx, fn(flat, 1), shape)


@converter("Softmax")
def _softmax(cx, node, ins, attrs):
    return _coerced(cx, node, ins[0], attrs, lambda v, a: cx.g.softmax(v, axis=a))


def _log_softmax(cx, v: Value, a: int) -> Value:
    m = cx.g.reduce(v, op="max", axes=[a], keep_dim=True)
    d = v - m
    return d - cx.g.log(cx.g.reduce(cx.g.exp(d), op="sum", axes=[a], keep_dim=True))


@converter("LogSoftmax")
def _logsoftmax(cx, node, ins, attrs):
    return _coerced(cx, node, ins[0], attrs, lambda v, a: _log_softmax(cx, v, a))


@converter("Hardmax")
def _hardmax(cx, node, ins, attrs):
    def fn(v, a):
        idx = cx.g.arg_reduce(v, op="argmax", axis=a, keep_dim=True)
        shape = [1] * len(v.shape)
        shape[a] = v.shape[a]
        hit = cx.g.eq(idx, _reshape(cx, iota(cx, v.shape[a]), shape))
        return cx.g.cast(hit, to=v.dtype)

    return _coerced(cx, node, ins[0], attrs, fn)


@converter("CumSum", "CumProd")
def _cumsum(cx, node, ins, attrs):
    axis = int(cx.static(node.input[1], "axis").reshape(-1)[0])
    return cx.g.cumulative(ins[0], op="sum" if node.op_type == "CumSum" else "prod", axis=axis,
                           exclusive=bool(attrs.get("exclusive", 0)), reverse=bool(attrs.get("reverse", 0)))


@converter("TopK")
def _topk(cx, node, ins, attrs):
    x = ins[0]
    k = int(cx.static(node.input[1], "K").reshape(-1)[0]) if cx.opset >= 10 else attrs["k"]
    axis = attrs.get("axis", -1)
    # sorted=0 leaves the order unspecified, so top_k's sorted order (ties: lower index first) satisfies it
    largest = bool(attrs.get("largest", 1))
    return cx.g.top_k(x, k=k, axis=axis, largest=largest, output="both")  # one node: (values, indices)


@converter("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _nll(cx, node, ins, attrs):
    x, target = ins[0], ins[1]
    weight = ins[2] if len(ins) > 2 else None
    reduction = attrs.get("reduction", "mean")
    ignore = attrs.get("ignore_index")
    log_prob = None
    if node.op_type == "SoftmaxCrossEntropyLoss":
        log_prob = _log_softmax(cx, x, 1)
        x = log_prob
    shape = _static_shape(x)
    n = shape[0]
    t = _cast(cx, target, DType.I64)
    if ignore is not None:
        ign = cx.g.eq(t, cx.scalar(ignore, t))
        t_safe = cx.g.where(ign, cx.scalar(0, t), t)
    else:
        ign, t_safe = None, t
    t_exp = _reshape(cx, t_safe, [n, 1, *shape[2:]])
    picked = _reshape(cx, cx.g.gather_elements(x, t_exp, axis=1), [n, *shape[2:]])
    loss = -picked
    w = None
    if weight is not None:
        w = cx.g.gather(weight, t_safe, axis=0)
    if ign is not None:
        zero = cx.scalar(0.0, loss)
        w = cx.g.where(ign, zero, w if w is not None else cx.scalar(1.0, loss))
        w = _broadcast_to(cx, w, list(loss.shape))
    if w is not None:
        loss = loss * w
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = cx.g.reduce(loss, op="sum", axes=None, keep_dim=False)
    elif w is not None:
        out = cx.g.reduce(loss, op="sum", axes=None) / cx.g.reduce(w, op="sum", axes=None)
    else:
        out = cx.g.reduce(loss, op="mean", axes=None)
    return [out, log_prob] if node.op_type == "SoftmaxCrossEntropyLoss" else out
