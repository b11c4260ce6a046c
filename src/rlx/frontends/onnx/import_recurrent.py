"""ONNX RNN / GRU / LSTM as one rlx ``scan`` node per direction.

The scan's body is one time step: it carries h (LSTM: h and c), reads the recurrence weights
(and bias, peepholes) as broadcast operands and the input projection ``X·Wᵀ + Wb`` (computed
for every step at once, outside the loop) as its per-step operand. So the body runs once per
step, the sequence length may be symbolic, and the graph size does not grow with it. A
reverse direction is a ``reverse=True`` scan (its trajectory rows stay in time order); a
bidirectional layer is two scans whose outputs are concatenated. Y is the carry trajectory
(``save_trajectory``), built only when the model reads Y.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.ir.graph import Graph, Value
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported
from rlx.ir.shape import Shape, TensorType
from rlx.ops.control_flow import make_graph

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}

Activation = Callable[[Value], Value]


def _activation(g: Graph, name: str, alpha: float | None, beta: float | None) -> Activation:
    """ONNX's recurrent activation ``name`` (case-insensitive) as a function building into ``g``."""
    name = name.lower()

    def s(value: float, like: Value) -> Value:
        return g.constant(np.array(value, like.dtype.numpy))

    def need(value: float | None, what: str) -> float:
        if value is None:
            raise OnnxFormatError(f"recurrent activation {name!r} needs activation_{what}")
        return value

    if name in ("tanh", "sigmoid", "relu"):
        return lambda x: g.activation(x, kind=name)
    if name == "leakyrelu":
        a = 0.01 if alpha is None else alpha
        return lambda x: g.where(g.lt(x, s(0.0, x)), x * s(a, x), x)
    if name == "hardsigmoid":
        a, b = 0.2 if alpha is None else alpha, 0.5 if beta is None else beta
        return lambda x: g.maximum(g.minimum(x * s(a, x) + s(b, x), s(1.0, x)), s(0.0, x))
    if name == "affine":
        a, b = need(alpha, "alpha"), need(beta, "beta")
        return lambda x: x * s(a, x) + s(b, x)
    if name == "scaledtanh":
        a, b = need(alpha, "alpha"), need(beta, "beta")
        return lambda x: g.tanh(x * s(b, x)) * s(a, x)
    if name == "softsign":
        return lambda x: x / (g.abs(x) + s(1.0, x))
    if name == "softplus":
        return lambda x: g.log(g.exp(x) + s(1.0, x))
    if name == "elu":
        a = 1.0 if alpha is None else alpha
        return lambda x: g.where(g.gt(x, s(0.0, x)), x, (g.exp(x) - s(1.0, x)) * s(a, x))
    if name == "thresholdedrelu":
        a = 1.0 if alpha is None else alpha
        return lambda x: g.where(g.gt(x, s(a, x)), x, s(0.0, x))
    raise OnnxUnsupported(f"recurrent activation {name!r}")


_TAKES_ALPHA = frozenset({"leakyrelu", "thresholdedrelu", "elu", "affine", "scaledtanh", "hardsigmoid"})
_TAKES_BETA = frozenset({"affine", "scaledtanh", "hardsigmoid"})


def _with_parameters(acts: list[str], attrs: dict) -> list[tuple[str, float | None, float | None]]:
    """(name, alpha, beta) per activation: activation_alpha / _beta are consumed in activation order by
    the activations that take one (as onnxruntime does); None where the list ran out (the default)."""
    alphas, betas = iter(attrs.get("activation_alpha", [])), iter(attrs.get("activation_beta", []))
    return [(a, next(alphas, None) if a.lower() in _TAKES_ALPHA else None,
             next(betas, None) if a.lower() in _TAKES_BETA else None) for a in acts]


class _Cell:
    """One direction's step function: attributes shared by every step, activations by position."""

    def __init__(self, kind: str, hidden: int, attrs: dict, direction: int):
        self.kind, self.hidden, self.attrs = kind, hidden, attrs
        n = len(_DEFAULT_ACTIVATIONS[kind])
        nd = 2 if attrs.get("direction", "forward") == "bidirectional" else 1
        acts = list(attrs.get("activations", _DEFAULT_ACTIVATIONS[kind] * nd))
        if len(acts) != n * nd:
            raise OnnxFormatError(f"{kind} needs {n * nd} activations, got {len(acts)}")
        self.acts = _with_parameters(acts, attrs)[direction * n:direction * n + n]
        self.clip = attrs.get("clip")

    def step(self, g: Graph, carries: list[Value], xw: Value, rt: Value, rb: Value | None, p: Value | None) -> list[Value]:
        """The carries after one step, from the carries before, ``X_t·Wᵀ + Wb`` and the recurrence weights."""
        fns = [_activation(g, *a) for a in self.acts]
        f = fns[0]
        hid, h = self.hidden, carries[0]

        def part(v: Value, i: int, n: int = 1) -> Value:
            return g.narrow(v, axis=len(v.shape) - 1, start=i * hid, length=n * hid)

        def clipped(v: Value) -> Value:
            if self.clip is None:
                return v
            c = g.constant(np.array(self.clip, v.dtype.numpy))
            return g.maximum(g.minimum(v, c), g.neg(c))

        def biased(v: Value, i: int, n: int = 1) -> Value:
            return v if rb is None else v + part(rb, i, n)

        if self.kind == "RNN":
            return [f(clipped(biased(xw + g.matmul(h, rt), 0)))]
        if self.kind == "GRU":
            hr = g.matmul(h, part(rt, 0, 2))
            z = f(clipped(biased(part(xw, 0) + part(hr, 0), 0)))
            r = f(clipped(biased(part(xw, 1) + part(hr, 1), 1)))
            if self.attrs.get("linear_before_reset", 0):
                cand = fns[1](clipped(part(xw, 2) + r * biased(g.matmul(h, part(rt, 2)), 2)))
            else:
                cand = fns[1](clipped(biased(part(xw, 2) + g.matmul(r * h, part(rt, 2)), 2)))
            one = g.constant(np.array(1.0, z.dtype.numpy))
            return [(one - z) * cand + z * h]
        c = carries[1]
        pre = biased(xw + g.matmul(h, rt), 0, 4)
        gi, go, gf, gc = (part(pre, i) for i in range(4))
        if p is not None:
            gi, gf = gi + part(p, 0) * c, gf + part(p, 2) * c
        i_ = f(clipped(gi))
        if self.attrs.get("input_forget", 0):
            f_ = g.constant(np.array(1.0, i_.dtype.numpy)) - i_
        else:
            f_ = f(clipped(gf))
        c = f_ * c + i_ * fns[1](clipped(gc))
        if p is not None:
            go = go + part(p, 1) * c
        return [f(clipped(go)) * fns[2](c), c]


def _row(cx: Any, v: Value, d: int) -> Value:
    """``v[d]`` (a direction's slice of an [num_directions, ...] operand)."""
    return cx.g.reshape(cx.g.narrow(v, axis=0, start=d, length=1), new_shape=list(v.shape[1:]))


def _check_lengths(cx: Any, node, seq_lens: Value | None, seq: Any) -> None:
    if seq_lens is None:
        return
    lens = np.asarray(cx.static(node.input[4], "sequence_lens"))
    if not isinstance(seq, int) or not (lens == seq).all():
        raise OnnxUnsupported(f"{node.op_type} with per-batch sequence_lens {lens.reshape(-1)[:8].tolist()} "
                              f"other than the full length {seq}")


def _direction(cx: Any, node, cell: _Cell, x: Value, d: int, ops: dict[str, Value | None], reverse: bool,
               trajectory: bool) -> tuple[Value | None, Value, Value | None]:
    """One direction as one scan: (Y [seq, batch, H] or None, final h, final c or None)."""
    g, kind, hid = cx.g, cell.kind, cell.hidden
    seq, batch = x.shape[0], x.shape[1]
    gates = _GATES[kind]
    w, r, b = _row(cx, ops["w"], d), _row(cx, ops["r"], d), ops["b"]
    xw = g.matmul(x, g.transpose(w, perm=[1, 0]))
    rb = None
    if b is not None:
        bd = _row(cx, b, d)
        xw = xw + g.narrow(bd, axis=0, start=0, length=gates * hid)
        rb = g.narrow(bd, axis=0, start=gates * hid, length=gates * hid)
    rt = g.transpose(r, perm=[1, 0])
    zeros = g.expand(cx.const(np.zeros((1, hid), x.dtype.numpy)), target_shape=[batch, hid])
    carries = [_row(cx, ops[k], d) if ops[k] is not None else zeros for k in (["h0", "c0"] if kind == "LSTM" else ["h0"])]
    p = _row(cx, ops["p"], d) if ops.get("p") is not None else None
    bcasts = [v for v in (rt, rb, p) if v is not None]
    xt = TensorType(Shape(list(xw.shape)[1:]), xw.dtype)
    sig = [*[(f"c{k}", c.type) for k, c in enumerate(carries)], *[(f"b{k}", v.type) for k, v in enumerate(bcasts)], ("xw", xt)]
    nc = len(carries)

    def body(h: Graph, vals: list[Value]) -> Sequence[Value]:
        bs = iter(vals[nc:-1])  # rt, then rb and p when present
        rt_, rb_, p_ = next(bs), next(bs) if rb is not None else None, next(bs) if p is not None else None
        return cell.step(h, vals[:nc], vals[-1], rt_, rb_, p_)

    step = make_graph(f"{kind.lower()}_step", sig, body)
    out = g.scan(*carries, *bcasts, xw, body=step, length=seq, num_carries=nc, num_bcast=len(bcasts),
                 num_xs=1, save_trajectory=trajectory, reverse=reverse)
    outs = list(out) if isinstance(out, tuple) else [out]
    if not trajectory:
        return None, outs[0], outs[1] if len(outs) > 1 else None
    last = 0 if reverse else seq - 1
    finals = [cx.g.reshape(g.narrow(o, axis=0, start=last, length=1), new_shape=[batch, hid]) for o in outs]
    return outs[0], finals[0], finals[1] if len(finals) > 1 else None


@converter("RNN", "GRU", "LSTM")
def _recurrent(cx, node, ins, attrs):
    kind = node.op_type
    opt = [*ins, *[None] * (8 - len(ins))]  # optional operands absent at the end read as None
    x, layout = ins[0], attrs.get("layout", 0)
    if len(x.shape) != 3:
        raise OnnxFormatError(f"{kind} input X must have rank 3, got {x.shape!r}")
    seq_major = [1, 0, 2]
    if layout:
        x = cx.g.transpose(x, perm=seq_major)
    state = [opt[5], opt[6] if kind == "LSTM" else None]
    if layout:  # initial states are [batch, num_directions, hidden]
        state = [cx.g.transpose(v, perm=seq_major) if v is not None else None for v in state]
    ops = {"w": ins[1], "r": ins[2], "b": opt[3], "h0": state[0], "c0": state[1], "p": opt[7] if kind == "LSTM" else None}
    _check_lengths(cx, node, opt[4], x.shape[0])
    hidden = attrs.get("hidden_size")
    if hidden is None:
        hidden = int(ins[2].shape[-1])
    if not isinstance(hidden, int) or hidden <= 0:
        raise OnnxFormatError(f"{kind} hidden_size must be a positive int, got {hidden!r}")
    cx.check_elements(hidden, f"the {kind} zero state")  # built at import before the weights' shapes are checked
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise OnnxFormatError(f"{kind} direction {direction!r}")
    nd = 2 if direction == "bidirectional" else 1
    trajectory = bool(node.output) and bool(node.output[0])
    ys, hs, cs = [], [], []
    for d in range(nd):
        cell = _Cell(kind, hidden, attrs, d)
        y, h, c = _direction(cx, node, cell, x, d, ops, direction == "reverse" or d == 1, trajectory)
        ys.append(y)
        hs.append(cx.g.reshape(h, new_shape=[1, *h.shape]))
        cs.append(cx.g.reshape(c, new_shape=[1, *c.shape]) if c is not None else None)

    def stacked(vals: list[Value], axis: int) -> Value:
        return vals[0] if len(vals) == 1 else cx.g.concat(vals, axis=axis)

    y = None
    if trajectory:
        y = stacked([cx.g.reshape(v, new_shape=[v.shape[0], 1, *v.shape[1:]]) for v in ys], 1)  # [seq, nd, batch, H]
        if layout:
            y = cx.g.transpose(y, perm=[2, 0, 1, 3])
    yh = stacked(hs, 0)
    yc = stacked(cs, 0) if kind == "LSTM" else None
    if layout:
        yh = cx.g.transpose(yh, perm=seq_major)
        yc = cx.g.transpose(yc, perm=seq_major) if yc is not None else None
    return [y, yh, yc] if kind == "LSTM" else [y, yh]
