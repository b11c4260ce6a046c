"""Differential testing: random graphs give the same outputs before and after optimize."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rlx
from opt.opt_util import assert_same_outputs
from rlx.opt import default_passes, optimize, unfuse_fused_for_autodiff

M, D = 3, 4
ACTS = ("tanh", "sigmoid", "silu", "gelu", "relu", "neg", "abs", "sin")


class _Builder:
    def __init__(self, data):
        self.d = data
        self.g = rlx.Graph("random")
        self.pool = [self.g.input("x", (M, D)), self.g.input("y", (M, D))]
        self.weights = []
        self.n_params = 0
        self.history = []

    def pick(self, label="v"):
        return self.d.draw(st.sampled_from(self.pool), label=label)

    def param(self, shape):
        if self.weights and self.d.draw(st.booleans(), label="reuse weight"):
            cands = [w for w in self.weights if tuple(w.shape) == shape]
            if cands:
                return self.d.draw(st.sampled_from(cands), label="weight")
        self.n_params += 1
        w = self.g.param(f"p{self.n_params}", shape)
        self.weights.append(w)
        return w

    def push(self, v):
        self.pool.append(v)
        return v

    def step(self):
        g, d = self.g, self.d
        kind = d.draw(st.sampled_from([
            "act", "binary", "bias", "matmul", "linear", "norm", "residual_norm", "softmax", "reduce",
            "transpose2", "reshape2", "repeat", "identity", "const", "swiglu", "swiglu_narrow", "qkv", "where", "dead",
        ]), label="kind")
        if kind == "act":
            return self.push(g.activation(self.pick(), kind=d.draw(st.sampled_from(ACTS))))
        if kind == "binary":
            op = d.draw(st.sampled_from(["add", "sub", "mul", "max", "min"]))
            return self.push(g.binary(self.pick("a"), self.pick("b"), op=op))
        if kind == "bias":
            return self.push(g.add(self.pick(), self.param((D,))))
        if kind == "matmul":
            return self.push(g.tanh(g.matmul(self.pick(), self.param((D, D)))))
        if kind == "linear":
            mm = g.matmul(self.pick(), self.param((D, D)))
            b = self.param((D,))
            h = g.add(b, mm) if d.draw(st.booleans()) else g.add(mm, b)
            if d.draw(st.booleans(), label="mm output"):
                self.push(mm)
            if d.draw(st.booleans(), label="act"):
                h = g.activation(h, kind=d.draw(st.sampled_from(["gelu", "silu", "relu", "tanh"])))
            return self.push(h)
        if kind in ("norm", "residual_norm"):
            x = self.pick()
            if kind == "residual_norm":
                x = g.add(x, self.pick("res"))
                if d.draw(st.booleans(), label="add escapes"):
                    self.push(x)
            op = d.draw(st.sampled_from(["layer_norm", "rms_norm"]))
            y = getattr(g, op)(x, self.param((D,)), self.param((D,)), axis=-1, eps=1e-5)
            if d.draw(st.booleans(), label="flatten"):
                y = g.reshape(g.reshape(y, new_shape=[M * D]), new_shape=[M, D])
            return self.push(y)
        if kind == "softmax":
            return self.push(g.softmax(self.pick(), axis=d.draw(st.sampled_from([0, 1, -1]))))
        if kind == "reduce":
            r = g.reduce(self.pick(), op=d.draw(st.sampled_from(["sum", "mean", "max"])), axes=[1], keep_dim=True)
            return self.push(g.mul(self.pick(), r))
        if kind == "transpose2":
            return self.push(g.transpose(g.tanh(g.transpose(self.pick(), perm=[1, 0])), perm=[1, 0]))
        if kind == "reshape2":
            return self.push(g.reshape(g.reshape(self.pick(), new_shape=[D, M]), new_shape=[M, D]))
        if kind == "repeat" and self.history:
            op, ins, attrs = d.draw(st.sampled_from(self.history), label="repeat")
            return self.push(g.append(op, ins, attrs))
        if kind == "identity":
            v = self.pick()
            v = g.mul(g.add(v, 0.0), 1.0)
            return self.push(g.narrow(g.cast(v, to="f32"), 1, 0, D))
        if kind == "const":
            c = g.constant(np.linspace(-1, 1, D).astype(np.float32))
            c = g.tanh(g.mul(c, 2.0))
            return self.push(g.add(self.pick(), c))
        if kind == "swiglu":
            x = self.pick()
            up = g.matmul(x, self.param((D, D)))
            gate = g.matmul(x, self.param((D, D)))
            s = g.silu(gate)
            y = g.mul(s, up) if d.draw(st.booleans()) else g.mul(up, s)
            if d.draw(st.booleans(), label="gate escapes"):
                self.push(gate)
            return self.push(g.tanh(g.matmul(y, self.param((D, D)))))
        if kind == "swiglu_narrow":
            p = g.matmul(self.pick(), self.param((D, 2 * D)))
            lo, hi = g.narrow(p, 1, 0, D), g.narrow(p, 1, D, D)
            up, gate = (lo, hi) if d.draw(st.booleans(), label="gate high") else (hi, lo)
            return self.push(g.mul(up, g.silu(gate)))
        if kind == "qkv":
            x = self.pick()
            outs = [g.matmul(x, self.param((D, n))) for n in (D, 2, 2)]
            return self.push(g.add(outs[0], g.concat([outs[1], outs[2]], axis=1)))
        if kind == "where":
            c = g.lt(self.pick("a"), self.pick("b"))
            return self.push(g.where(c, self.pick("t"), self.pick("f")))
        # dead branch
        g.exp(self.pick())
        return None

    def build(self):
        n = self.d.draw(st.integers(1, 14), label="steps")
        for _ in range(n):
            before = len(self.g.nodes)
            v = self.step()
            if v is not None and len(self.g.nodes) > before:
                node = v.node
                if node.op not in ("input", "param", "constant"):
                    self.history.append((node.op, node.inputs, dict(node.attrs)))
        k = self.d.draw(st.integers(1, 3), label="n outputs")
        outs = [self.pool[-1]] + [self.pick("out") for _ in range(k - 1)]
        self.g.set_outputs(outs)
        return self.g


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_optimize_preserves_outputs(data):
    g = _Builder(data).build()
    rlx.verify(g)
    backend = data.draw(st.sampled_from([None, "cpu", "cuda", "tpu", "metal"]), label="backend")
    opt, report = optimize(g, backend=backend)
    rlx.verify(opt)
    for op in sorted(report.created):
        event(f"created {op}")
    if len(opt) < len(g):
        event("graph shrank")
    assert report.nodes_before == len(g) and report.nodes_after == len(opt)
    assert_same_outputs(g, opt, rtol=1e-5, atol=1e-5)
    # fused graphs unfuse back to primitives with the same values
    back = unfuse_fused_for_autodiff(opt).graph
    rlx.verify(back)
    assert_same_outputs(g, back, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_each_pass_alone_preserves_outputs(data):
    g = _Builder(data).build()
    for p in default_passes():
        opt, _ = optimize(g, passes=[p])
        assert_same_outputs(g, opt, rtol=1e-5, atol=1e-5)
