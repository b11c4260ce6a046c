"""ONNX RNN / GRU / LSTM converters (unrolled over the static sequence length)."""

from __future__ import annotations

import numpy as np

from rlx.backends.onnx.common import (
    OnnxUnsupported,
)
from rlx.backends.onnx.import_context import converter
from rlx.backends.onnx.import_helpers import _reshape, _static_shape
from rlx.ir.graph import Value


def _rnn_activation(cx, name: str, x: Value, alpha: float | None, beta: float | None) -> Value:
    name = name.lower()
    if name in ("tanh", "sigmoid", "relu"):
        return cx.g.activation(x, kind=name)
    if name == "leakyrelu":
        return cx.g.where(cx.g.lt(x, cx.scalar(0.0, x)), x * cx.scalar(alpha if alpha is not None else 0.01, x), x)
    if name == "hardsigmoid":
        y = x * cx.scalar(alpha if alpha is not None else 0.2, x) + cx.scalar(beta if beta is not None else 0.5, x)
        return cx.g.maximum(cx.g.minimum(y, cx.scalar(1.0, x)), cx.scalar(0.0, x))
    if name == "affine":
        return x * cx.scalar(alpha, x) + cx.scalar(beta, x)
    if name == "scaledtanh":
        return cx.g.tanh(x * cx.scalar(beta, x)) * cx.scalar(alpha, x)
    if name == "softsign":
        return x / (cx.g.abs(x) + cx.scalar(1.0, x))
    if name == "softplus":
        return cx.g.log(cx.g.exp(x) + cx.scalar(1.0, x))
    if name == "elu":
        return cx.g.where(cx.g.gt(x, cx.scalar(0.0, x)), x, (cx.g.exp(x) - cx.scalar(1.0, x)) * cx.scalar(alpha or 1.0, x))
    if name == "thresholdedrelu":
        return cx.g.where(cx.g.gt(x, cx.scalar(alpha if alpha is not None else 1.0, x)), x, cx.scalar(0.0, x))
    raise OnnxUnsupported(f"recurrent activation {name!r}")


@converter("RNN", "GRU", "LSTM")
def _recurrent(cx, node, ins, attrs):
    kind = node.op_type
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    x, w, r = ins[0], ins[1], ins[2]
    get = lambda i: ins[i] if len(ins) > i and ins[i] is not None else None
    b, seq_lens, h0 = get(3), get(4), get(5)
    c0, peep = (get(6), get(7)) if kind == "LSTM" else (None, None)
    if seq_lens is not None:
        lens = cx.static(node.input[4], "sequence_lens")
        if not (np.asarray(lens) == (x.shape[1] if not attrs.get("layout", 0) else x.shape[0])).all():
            raise OnnxUnsupported(f"{kind} with per-batch sequence_lens shorter than the sequence")
    layout = attrs.get("layout", 0)
    if layout:
        x = cx.g.transpose(x, perm=[1, 0, 2])
    seq, batch, _ = _static_shape(x)
    hidden = attrs["hidden_size"]
    direction = attrs.get("direction", "forward")
    nd = 2 if direction == "bidirectional" else 1
    cx.unroll(seq * nd * 16, f"{kind} over {seq} steps")
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = list(attrs.get("activations", defaults * nd))
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    clip = attrs.get("clip")
    ys, hs, cs = [], [], []
    for d in range(nd):
        reverse = direction == "reverse" or d == 1
        na = len(defaults)
        fns = []
        for j in range(na):
            k = d * na + j
            fns.append((acts[k], alphas[k] if k < len(alphas) else None, betas[k] if k < len(betas) else None))

        def act(j, v, fns=fns):
            name, al, be = fns[j]
            return _rnn_activation(cx, name, v, al, be)

        wd = _reshape(cx, cx.g.narrow(w, axis=0, start=d, length=1), list(w.shape[1:]))
        rd = _reshape(cx, cx.g.narrow(r, axis=0, start=d, length=1), list(r.shape[1:]))
        wt, rt = cx.g.transpose(wd, perm=[1, 0]), cx.g.transpose(rd, perm=[1, 0])
        if b is not None:
            bd = _reshape(cx, cx.g.narrow(b, axis=0, start=d, length=1), [b.shape[1]])
            wb = cx.g.narrow(bd, axis=0, start=0, length=gates * hidden)
            rb = cx.g.narrow(bd, axis=0, start=gates * hidden, length=gates * hidden)
        else:
            wb = rb = cx.const(np.zeros(gates * hidden, x.dtype.numpy))
        h = _reshape(cx, cx.g.narrow(h0, axis=0, start=d, length=1), [batch, hidden]) if h0 is not None else \
            cx.const(np.zeros((batch, hidden), x.dtype.numpy))
        c = _reshape(cx, cx.g.narrow(c0, axis=0, start=d, length=1), [batch, hidden]) if c0 is not None else \
            cx.const(np.zeros((batch, hidden), x.dtype.numpy))
        pd = _reshape(cx, cx.g.narrow(peep, axis=0, start=d, length=1), [3 * hidden]) if peep is not None else None

        def part(v, i):
            return cx.g.narrow(v, axis=-1 if len(v.shape) > 1 else 0, start=i * hidden, length=hidden) if len(v.shape) > 1 else \
                cx.g.narrow(v, axis=0, start=i * hidden, length=hidden)

        def clipped(v):
            if clip is None:
                return v
            return cx.g.maximum(cx.g.minimum(v, cx.scalar(clip, v)), cx.scalar(-clip, v))

        outs = [None] * seq
        for step in (range(seq - 1, -1, -1) if reverse else range(seq)):
            xt = _reshape(cx, cx.g.narrow(x, axis=0, start=step, length=1), [batch, x.shape[2]])
            xw = cx.g.matmul(xt, wt) + wb
            if kind == "RNN":
                h = act(0, clipped(xw + cx.g.matmul(h, rt) + rb))
            elif kind == "GRU":
                hr = cx.g.matmul(h, cx.g.narrow(rt, axis=1, start=0, length=2 * hidden))
                z = act(0, clipped(part(xw, 0) + part(hr, 0) + part(rb, 0)))
                rr = act(0, clipped(part(xw, 1) + part(hr, 1) + part(rb, 1)))
                rh = cx.g.narrow(rt, axis=1, start=2 * hidden, length=hidden)
                if attrs.get("linear_before_reset", 0):
                    hh = act(1, clipped(part(xw, 2) + rr * (cx.g.matmul(h, rh) + part(rb, 2))))
                else:
                    hh = act(1, clipped(part(xw, 2) + cx.g.matmul(rr * h, rh) + part(rb, 2)))
                h = (cx.scalar(1.0, z) - z) * hh + z * h
            else:
                pre = xw + cx.g.matmul(h, rt) + rb
                gi, go, gf, gc = (part(pre, i) for i in range(4))
                if pd is not None:
                    gi = gi + part(pd, 0) * c
                    gf = gf + part(pd, 2) * c
                i_ = act(0, clipped(gi))
                f_ = act(0, clipped(gf))
                if attrs.get("input_forget", 0):
                    f_ = cx.scalar(1.0, i_) - i_
                c = f_ * c + i_ * act(1, clipped(gc))
                if pd is not None:
                    go = go + part(pd, 1) * c
                o_ = act(0, clipped(go))
                h = o_ * act(2, c)
            outs[step] = h
        ys.append(cx.g.concat([_reshape(cx, o, [1, 1, batch, hidden]) for o in outs], axis=0))
        hs.append(_reshape(cx, h, [1, batch, hidden]))
        cs.append(_reshape(cx, c, [1, batch, hidden]))
    y = cx.g.concat(ys, axis=1) if nd > 1 else ys[0]
    yh = cx.g.concat(hs, axis=0) if nd > 1 else hs[0]
    yc = cx.g.concat(cs, axis=0) if nd > 1 else cs[0]
    if layout:
        y = cx.g.transpose(y, perm=[2, 0, 1, 3])
        yh, yc = cx.g.transpose(yh, perm=[1, 0, 2]), cx.g.transpose(yc, perm=[1, 0, 2])
    return [y, yh, yc] if kind == "LSTM" else [y, yh]
