"""``cached_attention``: the NumPy kernel against torch (SDPA with the kv heads repeated, rope written in
torch), its run-time errors, and every place it runs: onnxruntime's GroupQueryAttention (in place through
an IO binding too), the standard-ONNX form on onnxruntime and OpenVINO, the torch and jax backends."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
F = torch.nn.functional

NAMES = ("qkv", "k_cache", "v_cache", "pos", "cos", "sin")


def make_feed(b, s, c, p, heads, kv, hd, pos, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    angles = np.arange(p)[:, None] * (10000.0 ** (-np.arange(0, hd, 2) / hd))[None]
    return {
        "qkv": r.standard_normal((b, s, (heads + 2 * kv) * hd)).astype(dtype),
        "k_cache": r.standard_normal((b, kv, c, hd)).astype(dtype),
        "v_cache": r.standard_normal((b, kv, c, hd)).astype(dtype),
        "pos": np.asarray(pos, np.int64),
        "cos": np.cos(angles).astype(dtype),
        "sin": np.sin(angles).astype(dtype),
    }


def make_graph(feed, **attrs):
    g = rlx.Graph("decode_step")
    ins = [g.input(n, feed[n].shape, rlx.DType.of(feed[n].dtype)) for n in NAMES]
    g.set_outputs(list(g.cached_attention(*ins, **attrs)))
    rlx.verify(g)
    return g


def torch_oracle(feed, heads, kv, hd, scale=None, rope="interleaved"):
    """float64 torch: rope at each row's positions, index_copy into the caches, SDPA per row over slots
    0 .. pos + S - 1 with a causal bottom-right mask and the kv heads repeated to the query heads."""
    qkv, kc, vc, cos, sin = (torch.from_numpy(feed[n].astype(np.float64)) for n in ("qkv", "k_cache", "v_cache", "cos", "sin"))
    kc, vc = kc.clone(), vc.clone()
    b_, s_, _ = qkv.shape
    x = qkv.view(b_, s_, heads + 2 * kv, hd)

    def rotate(t, c, s):
        if rope == "interleaved":
            pair = torch.view_as_complex(t.reshape(*t.shape[:-1], hd // 2, 2).contiguous())
            return torch.view_as_real(pair * torch.complex(c, s)).reshape(t.shape)
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return torch.cat([a * c - b * s, b * c + a * s], -1)

    outs = []
    for b in range(b_):
        at = torch.arange(s_) + int(feed["pos"][b])
        c, s = cos[at][:, None], sin[at][:, None]  # [S, 1, D/2]
        q = rotate(x[b, :, :heads], c, s).transpose(0, 1)  # [H, S, D]
        kc[b].index_copy_(1, at, rotate(x[b, :, heads:heads + kv], c, s).transpose(0, 1))
        vc[b].index_copy_(1, at, x[b, :, heads + kv:].transpose(0, 1))
        end = int(at[-1]) + 1
        keys = kc[b, :, :end].repeat_interleave(heads // kv, 0)
        values = vc[b, :, :end].repeat_interleave(heads // kv, 0)
        keep = torch.arange(end)[None, :] <= at[:, None]
        o = F.scaled_dot_product_attention(q, keys, values, attn_mask=keep, scale=scale)
        outs.append(o.transpose(0, 1).reshape(s_, heads * hd))
    return [t.numpy() for t in (torch.stack(outs), kc, vc)]


GEOMETRIES = [  # (B, S, C, P, H, KV, pos): S = 1 and S > 1, H/KV 1 and 3, pos 0 and C - S
    (2, 1, 8, 8, 3, 3, [0, 5]),
    (2, 1, 8, 10, 6, 2, [7, 2]),
    (2, 3, 8, 8, 3, 1, [5, 0]),
    (1, 4, 6, 6, 6, 2, [2]),
]


@pytest.mark.parametrize("rope", ["interleaved", "half"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda geo: f"b{geo[0]}s{geo[1]}h{geo[4]}kv{geo[5]}")
def test_kernel_matches_torch(geo, rope):
    b, s, c, p, heads, kv, pos = geo
    hd = 8
    feed = make_feed(b, s, c, p, heads, kv, hd, pos, np.float64, seed=sum(pos) + heads)
    attrs = dict(num_heads=heads, kv_heads=kv, head_dim=hd, rope=rope)
    got = rlx.run(make_graph(feed, **attrs), feed)
    for a, w in zip(got, torch_oracle(feed, heads, kv, hd, rope=rope)):
        np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12)


def test_f16_and_scale():
    feed = make_feed(2, 2, 8, 8, 4, 2, 8, [6, 1], np.float16, seed=3)
    got = rlx.run(make_graph(feed, num_heads=4, kv_heads=2, head_dim=8, scale=0.25), feed)
    assert [a.dtype for a in got] == [np.float16] * 3
    for a, w in zip(got, torch_oracle(feed, 4, 2, 8, scale=0.25)):
        np.testing.assert_allclose(a.astype(np.float64), w, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("pos,p,what", [([-1, 0], 8, r"\[-1\]"), ([0, 7], 8, r"\[7\]"), ([0, 6], 7, r"\[6\]")])
def test_positions_out_of_range_raise(pos, p, what):
    feed = make_feed(2, 2, 8, p, 2, 1, 4, pos)
    with pytest.raises(rlx.RlxError, match=f"cached_attention: pos {what}"):
        rlx.run(make_graph(feed, num_heads=2, kv_heads=1, head_dim=4), feed)


def test_not_differentiable():
    feed = make_feed(1, 1, 4, 4, 2, 1, 4, [1], np.float64)
    g = rlx.Graph("loss")
    ins = [g.input(n, feed[n].shape, rlx.DType.of(feed[n].dtype)) for n in NAMES]
    out, _, _ = g.cached_attention(*ins, num_heads=2, kv_heads=1, head_dim=4)
    g.set_outputs([g.sum(out)])
    with pytest.raises(rlx.AutodiffError, match="cached_attention"):
        rlx.grad_with_loss(g, wrt=["qkv"])


# ------------------------------------------------------------------------------------- onnx
def _session(proto):
    ort = pytest.importorskip("onnxruntime")
    return ort, ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def _in_order(proto, feed):
    return {i.name: feed[i.name] for i in proto.graph.input}


@pytest.mark.parametrize("rope", ["interleaved", "half"])
@pytest.mark.parametrize("b,s,pos", [(1, 1, [5]), (2, 1, [0, 15]), (1, 3, [13])])
def test_onnxruntime_group_query_attention(b, s, pos, rope):
    """One GroupQueryAttention node; the output and the filled cache slots as the kernel (later slots: zeros,
    onnxruntime copies only the filled ones unless the present output is bound to the past buffer)."""
    pytest.importorskip("onnx")
    feed = make_feed(b, s, 16, 20, 6, 2, 16, pos, seed=b + s)
    g = make_graph(feed, num_heads=6, kv_heads=2, head_dim=16, rope=rope)
    proto = rlx.onnx.export(g, engine="onnxruntime")
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops["GroupQueryAttention"] == 1 and ops["Softmax"] == 0 and ops["Reshape"] == 0, ops
    gqa = next(n for n in proto.graph.node if n.op_type == "GroupQueryAttention")
    assert list(gqa.input[:5]) == ["qkv", "", "", "k_cache", "v_cache"]  # the caches straight into past_key / value
    _, sess = _session(proto)
    got = sess.run(None, _in_order(proto, feed))
    want = rlx.run(g, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    for a, w in zip(got[1:], want[1:]):
        for row in range(b):
            end = pos[row] + s
            np.testing.assert_allclose(a[row, :, :end], w[row, :, :end], rtol=1e-6, atol=1e-6)
            assert not a[row, :, end:].any()


def test_onnxruntime_appends_in_place_through_io_binding(tmp_path):
    """Present bound to the past buffer: slot p written there, the others untouched. In onnxruntime's
    optimized graph the GroupQueryAttention outputs are the graph's outputs (the exporter's output
    Identity nodes are gone), so the bound buffer is the kernel's own present buffer."""
    onnx = pytest.importorskip("onnx")
    p = 9
    feed = make_feed(1, 1, 16, 16, 4, 2, 16, [p], seed=11)
    g = make_graph(feed, num_heads=4, kv_heads=2, head_dim=16)
    proto = rlx.onnx.export(g, engine="onnxruntime")
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    sess = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(options.optimized_model_filepath)
    gqa = [n for n in optimized.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == 1 and list(gqa[0].output) == [o.name for o in optimized.graph.output]
    want = rlx.run(g, feed)
    k_buf, v_buf = feed["k_cache"].copy(), feed["v_cache"].copy()
    binding = sess.io_binding()
    for name, arr in _in_order(proto, {**feed, "k_cache": k_buf, "v_cache": v_buf}).items():
        binding.bind_cpu_input(name, arr)
    out_name, k_name, v_name = (o.name for o in proto.graph.output)
    binding.bind_output(out_name)
    binding.bind_ortvalue_output(k_name, ort.OrtValue.ortvalue_from_numpy(k_buf))
    binding.bind_ortvalue_output(v_name, ort.OrtValue.ortvalue_from_numpy(v_buf))
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(binding.get_outputs()[0].numpy(), want[0], rtol=1e-5, atol=1e-5)
    for buf, before, after in ((k_buf, feed["k_cache"], want[1]), (v_buf, feed["v_cache"], want[2])):
        np.testing.assert_allclose(buf[:, :, p], after[:, :, p], rtol=1e-6, atol=1e-6)  # slot p written in place
        others = np.arange(16) != p
        np.testing.assert_array_equal(buf[:, :, others], before[:, :, others])


@pytest.mark.parametrize("rope", ["interleaved", "half"])
@pytest.mark.parametrize("engine", [None, "onnxruntime"])
def test_standard_onnx_form_on_onnxruntime(engine, rope):
    """The default engine, and onnxruntime where GroupQueryAttention cannot (B > 1 with S > 1; f64): standard ops."""
    pytest.importorskip("onnx")
    for b, s, pos, dtype in ((2, 3, [0, 5], np.float32), (2, 1, [7, 3], np.float64)):
        feed = make_feed(b, s, 8, 9, 6, 2, 8, pos, dtype, seed=s)
        g = make_graph(feed, num_heads=6, kv_heads=2, head_dim=8, rope=rope)
        proto = rlx.onnx.export(g, engine=engine)
        assert all(n.domain == "" for n in proto.graph.node)
        _, sess = _session(proto)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        for a, w in zip(sess.run(None, _in_order(proto, feed)), rlx.run(g, feed)):
            np.testing.assert_allclose(a, w, rtol=tol, atol=tol)


def test_standard_onnx_form_on_openvino():
    pytest.importorskip("openvino")
    feed = make_feed(2, 2, 8, 8, 4, 2, 8, [6, 0], seed=5)
    g = make_graph(feed, num_heads=4, kv_heads=2, head_dim=8, rope="half")
    got = rlx.compile(g, backend="openvino", threads=1).run(feed)
    for a, w in zip(got, rlx.run(g, feed)):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------- backends
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_backends_match_the_kernel(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    feed = make_feed(2, 2, 8, 8, 6, 2, 8, [6, 1], seed=9)
    g = make_graph(feed, num_heads=6, kv_heads=2, head_dim=8, rope="interleaved")
    got = rlx.compile(g, backend=backend).run(inputs=feed)
    for a, w in zip(got, rlx.run(g, feed)):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


def test_vmapped_step_runs_every_backend_row():
    """vmap adds a batch_dims axis; the row maps it (the batched decode steps equal a loop over them)."""
    feeds = [make_feed(1, 1, 6, 6, 2, 1, 4, [k], np.float64, seed=k) for k in range(3)]
    g = make_graph(feeds[0], num_heads=2, kv_heads=1, head_dim=4)
    vg = rlx.vmap(g, {n: 0 for n in NAMES})
    rlx.verify(vg)
    stacked = {n: np.stack([f[n] for f in feeds]) for n in NAMES}
    want = [np.stack(r) for r in zip(*(rlx.run(g, f) for f in feeds))]
    for got in (rlx.run(vg, stacked), rlx.compile(vg, backend="torch").run(inputs=stacked)):
        for a, w in zip(got, want):
            np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_backends_raise_on_positions_out_of_range(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    feed = make_feed(2, 2, 8, 7, 2, 1, 4, [0, 6])  # 6 + 2 > 7 cos / sin rows
    exe = rlx.compile(make_graph(feed, num_heads=2, kv_heads=1, head_dim=4), backend=backend)
    with pytest.raises(rlx.RlxError, match="cached_attention"):
        exe.run(inputs=feed)


def test_onnxruntime_backend_keeps_the_later_slots():
    """Through ``rlx.compile(backend="onnxruntime")`` the cache results are the op's on every slot (the backend binds
    GroupQueryAttention's present outputs to a copy of the caches made for the call): the caller's arrays are
    untouched; with ``inplace_outputs`` (and the IO binding) the caches are written in place and returned."""
    pytest.importorskip("onnxruntime")
    feed = make_feed(1, 1, 16, 20, 6, 2, 16, [5], seed=4)
    g = make_graph(feed, num_heads=6, kv_heads=2, head_dim=16)
    want = rlx.run(g, feed)
    before = {k: v.copy() for k, v in feed.items()}
    got = rlx.compile(g, backend="onnxruntime").run(inputs=feed)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)
    for name in feed:
        np.testing.assert_array_equal(feed[name], before[name])
    exe = rlx.compile(g, backend="onnxruntime", bind_inputs=True, inplace_outputs={1: "k_cache", 2: "v_cache"})
    got = exe.run(inputs=feed)
    assert got[1] is feed["k_cache"] and got[2] is feed["v_cache"]
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


def test_caches_no_caller_can_bind_get_the_standard_form():
    """A cache computed in the graph, or a cache result that is not a graph output, cannot share GroupQueryAttention's
    past / present buffer: the onnxruntime export writes the standard form, exact on every slot."""
    pytest.importorskip("onnxruntime")
    feed = make_feed(1, 1, 16, 20, 6, 2, 16, [5], seed=6)
    g = rlx.Graph("computed_cache")
    ins = [g.input(n, feed[n].shape, rlx.DType.of(feed[n].dtype)) for n in NAMES]
    out, k_new, v_new = g.cached_attention(ins[0], ins[1] * 1.0, *ins[2:], num_heads=6, kv_heads=2, head_dim=16)
    g.set_outputs([out, g.sum(k_new, axes=[2]), v_new])
    rlx.verify(g)
    proto = rlx.onnx.export(g, engine="onnxruntime")
    assert not any(n.op_type == "GroupQueryAttention" for n in proto.graph.node)
    for a, w in zip(rlx.compile(g, backend="onnxruntime").run(inputs=feed), rlx.run(g, feed)):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)
