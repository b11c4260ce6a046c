"""Model-sized graphs for the planner tests and benchmarks: (graph, inputs, params)."""

from __future__ import annotations

import numpy as np

import rlx


def _rand(rng, shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def transformer(layers=12, batch=2, seq=32, d=64, heads=4, ffn=256, seed=0):
    """Pre-LN decoder: LN -> QKV -> causal attention (bshd views) -> out proj -> residual -> LN -> GELU FFN -> residual."""
    rng = np.random.default_rng(seed)
    g = rlx.Graph(f"transformer{layers}")
    params: dict[str, np.ndarray] = {}

    def param(name, shape, scale=0.05):
        params[name] = _rand(rng, shape, scale)
        return g.param(name, shape)

    hd = d // heads
    x = g.input("x", (batch, seq, d))
    for i in range(layers):
        p = f"l{i}."
        h = g.layer_norm(x, param(p + "ln1.g", (d,), 1.0), param(p + "ln1.b", (d,)))
        q = g.reshape(h @ param(p + "wq", (d, d)) + param(p + "bq", (d,)), new_shape=[batch, seq, heads, hd])
        k = g.reshape(h @ param(p + "wk", (d, d)) + param(p + "bk", (d,)), new_shape=[batch, seq, heads, hd])
        v = g.reshape(h @ param(p + "wv", (d, d)) + param(p + "bv", (d,)), new_shape=[batch, seq, heads, hd])
        a = g.attention(q, k, v, num_heads=heads, head_dim=hd, mask_kind="causal", layout="bshd")
        a = g.reshape(a, new_shape=[batch, seq, d])
        x = x + (a @ param(p + "wo", (d, d)) + param(p + "bo", (d,)))
        h2 = g.layer_norm(x, param(p + "ln2.g", (d,), 1.0), param(p + "ln2.b", (d,)))
        f = g.gelu(h2 @ param(p + "w1", (d, ffn)) + param(p + "c1", (ffn,)))
        x = x + (f @ param(p + "w2", (ffn, d)) + param(p + "c2", (d,)))
    y = g.layer_norm(x, param("lnf.g", (d,), 1.0), param("lnf.b", (d,)))
    g.set_outputs([y])
    return g, {"x": _rand(rng, (batch, seq, d), 1.0)}, params


def resnet(batch=2, size=16, width=8, stages=3, blocks=2, classes=10, seed=1):
    """ResNet-style CNN: stem conv, stages of basic blocks with identity / 1x1-projection skips, GAP, FC."""
    rng = np.random.default_rng(seed)
    g = rlx.Graph("resnet")
    params: dict[str, np.ndarray] = {}

    def conv(x, cin, cout, k, stride, name):
        params[name] = _rand(rng, (cout, cin, k, k), (2.0 / (cin * k * k)) ** 0.5)
        w = g.param(name, (cout, cin, k, k))
        return g.conv2d(x, w, stride=[stride, stride], padding=[k // 2, k // 2])

    x = g.input("x", (batch, 3, size, size))
    h = g.relu(conv(x, 3, width, 3, 1, "stem"))
    c = width
    for s in range(stages):
        cout = width * 2**s
        for b in range(blocks):
            stride = 2 if (b == 0 and s > 0) else 1
            y = g.relu(conv(h, c, cout, 3, stride, f"s{s}b{b}.c1"))
            y = conv(y, cout, cout, 3, 1, f"s{s}b{b}.c2")
            skip = h if (stride == 1 and c == cout) else conv(h, c, cout, 1, stride, f"s{s}b{b}.proj")
            h = g.relu(y + skip)
            c = cout
    pooled = g.reduce(h, op="mean", axes=[2, 3], keep_dim=False)
    params["fc"] = _rand(rng, (c, classes))
    logits = pooled @ g.param("fc", (c, classes))
    g.set_outputs([logits])
    return g, {"x": _rand(rng, (batch, 3, size, size), 1.0)}, params


def unet(batch=1, size=32, cin=3, base=8, depth=3, seed=2):
    """U-Net: conv pairs down with max pools, nearest 2x up, channel concat with the long skips."""
    rng = np.random.default_rng(seed)
    g = rlx.Graph("unet")
    params: dict[str, np.ndarray] = {}

    def conv(x, ci, co, name, k=3):
        params[name] = _rand(rng, (co, ci, k, k), (2.0 / (ci * k * k)) ** 0.5)
        return g.conv2d(x, g.param(name, (co, ci, k, k)), padding=[k // 2, k // 2])

    x = g.input("x", (batch, cin, size, size))
    h, c = x, cin
    skips = []
    for i in range(depth):
        co = base * 2**i
        h = g.relu(conv(h, c, co, f"down{i}.a"))
        h = g.relu(conv(h, co, co, f"down{i}.b"))
        skips.append((h, co))
        h = g.pool2d(h, kind="max", kernel_size=[2, 2])
        c = co
    co = base * 2**depth
    h = g.relu(conv(h, c, co, "mid.a"))
    h = g.relu(conv(h, co, co, "mid.b"))
    c = co
    for i in reversed(range(depth)):
        skip, cs = skips[i]
        h = g.relu(conv(g.resize_nearest_2x(h), c, cs, f"up{i}.a"))
        h = g.concat([h, skip], axis=1)
        h = g.relu(conv(h, 2 * cs, cs, f"up{i}.b"))
        c = cs
    y = conv(h, c, 1, "head", k=1)
    g.set_outputs([g.sigmoid(y)])
    return g, {"x": _rand(rng, (batch, cin, size, size), 1.0)}, params


def training_mlp(batch=64, dims=(128, 256, 256, 256, 10), seed=3):
    """Forward + backward of an MLP with softmax cross-entropy, built by hand from backward ops.

    Outputs: [loss, dW0, db0, dW1, db1, ...]. Activations of the forward pass stay alive
    until the backward pass reads them, as in a real training step.
    """
    rng = np.random.default_rng(seed)
    g = rlx.Graph("train_mlp")
    params: dict[str, np.ndarray] = {}
    x = g.input("x", (batch, dims[0]))
    labels = g.input("labels", (batch,), "i32")
    ws, bs, zs, hs = [], [], [], [x]
    h = x
    n = len(dims) - 1
    for i in range(n):
        params[f"w{i}"] = _rand(rng, (dims[i], dims[i + 1]), (2.0 / dims[i]) ** 0.5)
        params[f"b{i}"] = _rand(rng, (dims[i + 1],), 0.01)
        w, b = g.param(f"w{i}", (dims[i], dims[i + 1])), g.param(f"b{i}", (dims[i + 1],))
        z = h @ w + b
        ws.append(w)
        bs.append(b)
        zs.append(z)
        h = g.relu(z) if i < n - 1 else z
        hs.append(h)
    per_row = g.softmax_cross_entropy(h, labels)
    loss = g.reduce(per_row, op="mean", axes=[0], keep_dim=False)
    d_rows = g.constant(np.full((batch,), 1.0 / batch, np.float32), name="d_rows")
    dz = g.softmax_cross_entropy_backward(h, labels, d_rows)
    grads = []
    for i in reversed(range(n)):
        if i < n - 1:
            dz = g.relu_backward(zs[i], dz)
        dw = g.transpose(hs[i], perm=[1, 0]) @ dz
        db = g.reduce(dz, op="sum", axes=[0], keep_dim=False)
        grads = [dw, db, *grads]
        if i > 0:
            dz = dz @ g.transpose(ws[i], perm=[1, 0])
    g.set_outputs([loss, *grads])
    inputs = {"x": _rand(rng, (batch, dims[0]), 1.0), "labels": rng.integers(0, dims[-1], (batch,)).astype(np.int32)}
    return g, inputs, params


MODELS = {"transformer-12": transformer, "resnet": resnet, "unet": unet, "train-mlp": training_mlp}
