"""The onnxruntime backend: numbers vs ``rlx.run``, the session cache, providers, params, errors, threads."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import rlx
from backends.jax_cases import assert_close
from rlx.backends.ort_backend import session_count
from rlx.backends.session_cache import SESSIONS
from runtime.hammer import hammer


def block():
    g = rlx.Graph("ort_block")
    x = g.input("x", (4, 16))
    h = g.gelu(x @ g.param("w", (16, 32)) + g.param("b", (32,)))
    y = g.layer_norm(h, g.param("gamma", (32,)), g.param("beta", (32,)), axis=-1)
    g.set_outputs([g.softmax(y, axis=-1), g.max(h, axes=[1])])
    return g


def weights(rng):
    return {"w": rng.standard_normal((16, 32)).astype(np.float32), "b": rng.standard_normal(32).astype(np.float32),
            "gamma": rng.standard_normal(32).astype(np.float32), "beta": rng.standard_normal(32).astype(np.float32)}


def test_matches_reference_and_sessions_are_cached():
    rng = np.random.default_rng(0)
    g, params = block(), weights(rng)
    feed = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    before = SESSIONS.builds
    exe = rlx.compile(g, backend="onnxruntime", params=params)
    assert_close(exe.run(feed), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)
    assert SESSIONS.builds == before + 1
    again = rlx.compile(block(), backend="onnxruntime", params=params)  # same fingerprint, same weights
    assert_close(again.run(feed), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)
    assert SESSIONS.builds == before + 1
    other = weights(rng)
    assert_close(exe.run(feed, other), rlx.run(g, feed, other), rtol=1e-4, atol=1e-5)
    assert_close(exe.run(feed), rlx.run(g, feed, other), rtol=1e-4, atol=1e-5)  # they stayed bound
    assert SESSIONS.builds == before + 2


def test_bad_options_feeds_and_indices_raise_rlx_errors():
    g = block()
    with pytest.raises(rlx.RlxError, match="provider"):
        rlx.compile(g, backend="onnxruntime", providers=["NoSuchExecutionProvider"])
    with pytest.raises(rlx.RlxError, match="unknown option"):
        rlx.compile(g, backend="onnxruntime", device="cuda")
    exe = rlx.compile(g, backend="onnxruntime", params=weights(np.random.default_rng(1)), threads=1)
    with pytest.raises(rlx.FeedError):
        exe.run({"x": np.zeros((4, 15), np.float32)})
    t = rlx.Graph("gather")
    t.set_outputs([t.gather(t.input("table", (5, 2)), t.input("i", (3,), "i64"), axis=0)])
    feed = {"table": np.arange(10, dtype=np.float32).reshape(5, 2), "i": np.array([0, 7, 1], np.int64)}
    with pytest.raises(rlx.RlxError, match="out of range"):
        rlx.run(t, feed)
    with pytest.raises(rlx.RlxError):
        rlx.compile(t, backend="onnxruntime").run(feed)


def test_threads_share_one_session():
    rng = np.random.default_rng(2)
    g, params = block(), weights(rng)
    exe = rlx.compile(g, backend="onnxruntime", params=params)
    cases = []
    for _ in range(8):
        feed = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
        cases.append((feed, rlx.run(g, feed, params)[0]))
    assert hammer(lambda c: np.allclose(exe.run(c[0])[0], c[1], rtol=1e-4, atol=1e-5), cases, 25) == []


def test_auto_measures_the_candidates_and_caches_the_choice(monkeypatch):
    from rlx.backends import auto

    g, params = block(), weights(np.random.default_rng(3))
    feed = {"x": np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)}
    names = auto.candidates(g, 1)
    assert "numpy" in names and "onnxruntime" in names
    exe = rlx.compile(g, backend="auto", params=params, device="cpu", threads=1, inputs=feed)
    choice = auto.explain(g, threads=1, inputs=feed)
    assert choice.measured and choice.backend in names and exe.backend == choice.backend.split()[0]  # "numpy jit": numpy
    assert set(choice.medians) | set(choice.dropped) == set(names) and min(choice.medians.values()) == choice.medians[choice.backend]
    assert_close(exe.run(feed), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)

    def no_calibration(*args, **kwargs):
        raise AssertionError("calibrated again")

    monkeypatch.setattr(auto, "calibrate", no_calibration)
    again = rlx.compile(block(), backend="auto", params=params, device="cpu", threads=1, inputs=feed)  # a cache hit
    assert again.backend == exe.backend
    assert_close(again.run(feed), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match="calibrated again"):  # another thread count is another setting
        rlx.compile(g, backend="auto", params=params, device="cpu", threads=2, inputs=feed)


def test_auto_without_params_calibrates_on_zeros_and_returns_an_unbound_executable():
    from rlx.backends import auto

    g = block()
    g.name = "ort_block_unbound"
    g.set_outputs([g.output_ids[0]])
    params = weights(np.random.default_rng(9))
    exe = rlx.compile(g, backend="auto", device="cpu")
    assert auto.explain(g).measured and exe.backend in auto.candidates(g, None)
    feed = {"x": np.ones((4, 16), np.float32)}
    assert_close(exe.run(feed, params), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)
    part = rlx.compile(g, backend="auto", device="cpu", threads=1, params={k: v for k, v in params.items() if k != "b"})
    with pytest.raises(rlx.FeedError):  # the calibration's zeros for "b" are not bound
        part.run(feed)
    assert_close(part.run(feed, {"b": params["b"]}), rlx.run(g, feed, params), rtol=1e-4, atol=1e-5)


def test_auto_candidates_follow_the_documented_rule(monkeypatch):
    pytest.importorskip("torch")
    import torch

    from rlx.backends import auto

    g = block()
    installed = auto._installed
    monkeypatch.setattr(auto, "_installed", lambda name: name not in ("onnxruntime", "openvino") and installed(name))
    threads = torch.get_num_threads()
    jit = ["numpy jit"] if installed("numba") else []  # the block's layer_norm has a compiled kernel
    assert auto.candidates(g, None) == ["torch", "numpy", *jit]  # every op of the block has a torch device lowering
    assert auto.candidates(g, threads) == ["torch", "numpy", *jit]
    assert auto.candidates(g, threads + 1) == ["numpy", *jit]  # torch's thread count is process-wide: not this setting
    host = rlx.Graph("host_op")
    host.set_outputs([host.cumsum(host.input("x", (4,)), axis=0)])  # cumulative runs on the host in torch
    assert auto.candidates(host, None) == ["numpy"]
    sym = rlx.Graph("sym_auto")
    x = sym.input("x", ("n", 4))
    sym.set_outputs([sym.relu(x)])
    exe = rlx.compile(sym, backend="auto", device="cpu")  # symbolic dims, no inputs=: the fixed order
    assert exe.backend == "torch" and not auto.explain(sym).measured
    with pytest.raises(rlx.RlxError, match="only"):
        rlx.compile(g, backend="auto", mode="inductor")
    with pytest.raises(rlx.RlxError, match="device"):
        rlx.compile(g, backend="auto", device="tpu")
    with pytest.raises(rlx.RlxError, match="threads"):
        rlx.compile(g, backend="auto", device="cpu", threads=0)


def test_exported_gelu_is_one_fused_onnxruntime_kernel(tmp_path):
    """The exporter writes GELU in the form onnxruntime's optimizer fuses: the optimized session
    holds one Gelu node and no Erf, and its numbers still match rlx.run."""
    import onnx
    import onnxruntime as ort

    rng = np.random.default_rng(6)
    g = rlx.Graph("gelu_fused")
    x = g.input("x", (8, 16))
    g.set_outputs([g.gelu(x @ g.param("w", (16, 16)) + g.param("b", (16,)))])
    params = {"w": rng.standard_normal((16, 16)).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32)}
    feed = {"x": (4 * rng.standard_normal((8, 16))).astype(np.float32)}
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    opts.log_severity_level = 3
    sess = ort.InferenceSession(rlx.onnx.export(g, params).SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node]
    assert "Gelu" in ops and "Erf" not in ops, ops
    assert_close(sess.run(None, feed), rlx.run(g, feed, params), rtol=1e-5, atol=1e-5)


def test_inference_batchnorm_is_folded_into_the_conv_before_export(tmp_path):
    """torch.export leaves an eval BatchNorm as (conv - mean) * s + beta; onnxruntime does not fold the
    Sub. The backend folds the chain into the conv weight and one bias add first: the optimized session
    holds the convs and nothing else, and the values match torch."""
    torch = pytest.importorskip("torch")
    import onnx
    import onnxruntime as ort

    import rlx.torch
    from rlx.backends.ort_backend import export_for_session

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 16, 1), torch.nn.BatchNorm2d(16))
    for bn in (net[1], net[4]):  # non-trivial running statistics
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-1, 1)
    net.eval()
    x = torch.randn(1, 3, 10, 10)
    g, params = rlx.torch.import_module(net, (x,))
    proto = export_for_session(g, params)
    onnx.checker.check_model(proto, full_check=True)
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ops = {n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node}
    assert not ops & {"Sub", "Mul", "Add", "Div", "Sqrt"}, ops
    with torch.inference_mode():
        want = net(x).numpy()
    exe = rlx.compile(g, backend="onnxruntime", params=params)
    assert_close(exe.run({"x": x.numpy()} if "x" in g.inputs() else dict(zip(g.inputs(), [x.numpy()]))), [want],
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_batchnorm_after_a_concat_is_one_engine_node(tmp_path, threads):
    """DenseNet's pre-activation BatchNorm reads a Concat, not a conv: nothing to fold into, and the three
    elementwise passes (Sub, Mul, Add) cost DenseNet 1.26x of torch's own ONNX file in onnxruntime. The
    export writes the chain as one 1x1 depthwise Conv (its ReLU fused by onnxruntime) for one thread and as one
    BatchNormalization for more (the faster form there, docs/backends.md); values match torch, NaN included on
    onnxruntime (OpenVINO's ReLU drops NaN, docs/backends.md)."""
    torch = pytest.importorskip("torch")
    import onnx

    import rlx.torch
    from rlx.backends.ort_backend import export_for_session

    class PreAct(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 1)
            self.bn, self.out = torch.nn.BatchNorm2d(8), torch.nn.Conv2d(8, 5, 1)

        def forward(self, x):
            return self.out(torch.relu(self.bn(torch.cat([self.a(x), self.b(x)], dim=1))))

    torch.manual_seed(0)
    net = PreAct()
    net.bn.running_mean.uniform_(-1, 1)
    net.bn.running_var.uniform_(0.5, 2)
    net.bn.weight.data.uniform_(0.5, 1.5)
    net.bn.bias.data.uniform_(-1, 1)
    net.eval()
    x = torch.randn(2, 3, 9, 9)
    g, params = rlx.torch.import_module(net, (x,))
    proto = export_for_session(g, params, engine="onnxruntime", threads=threads)
    onnx.checker.check_model(proto, full_check=True)
    ops = _optimized_ops(tmp_path, proto, ())
    depthwise = [n for n in proto.graph.node if n.op_type == "Conv" and any(a.name == "group" and a.i == 8 for a in n.attribute)]
    if threads == 1:
        assert not set(ops) & {"Sub", "Mul", "Add", "BatchNormalization"}, ops
        assert depthwise
    else:
        assert not set(ops) & {"Sub", "Mul", "Add"} and ops.count("BatchNormalization") == 1, ops
        assert not depthwise
    with_nan = x.clone()
    with_nan[1, 2, 4, 4] = float("nan")
    with torch.inference_mode():
        want = {id(xv): net(xv).numpy() for xv in (x, with_nan)}
    assert np.isnan(want[id(with_nan)]).any() and not np.isnan(want[id(with_nan)]).all()  # some outputs, not all
    for backend, inputs in (("onnxruntime", (x, with_nan)), ("openvino", (x,))):
        if backend == "openvino":
            pytest.importorskip("openvino")
        exe = rlx.compile(g, backend=backend, params=params, threads=threads)
        for xv in inputs:
            assert_close(exe.run(dict(zip(g.inputs(), [xv.numpy()]))), [want[id(xv)]], rtol=1e-4, atol=1e-5)


def test_relu6_reaches_the_engine_as_one_clip(tmp_path):
    """ReLU6 imported as max / min is exported as one Clip (onnxruntime fuses it into the Conv; Max + Min
    cost MobileNetV2 2.4x); values, NaN included, match torch / rlx.run."""
    torch = pytest.importorskip("torch")
    import onnx

    import rlx.torch
    from rlx.backends.ort_backend import export_for_session

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU6(), torch.nn.Conv2d(8, 4, 1)).eval()
    x = torch.randn(2, 3, 7, 7) * 4
    g, params = rlx.torch.import_module(net, (x,))
    proto = export_for_session(g, params)
    onnx.checker.check_model(proto, full_check=True)
    ops = [n.op_type for n in proto.graph.node]
    assert "Clip" in ops and "Max" not in ops and "Min" not in ops, ops
    assert "Clip" not in _optimized_ops(tmp_path, proto, ())  # fused into the Conv
    with torch.inference_mode():
        want = net(x).numpy()
    feed = dict(zip(g.inputs(), [x.numpy()]))
    assert_close(rlx.compile(g, backend="onnxruntime", params=params).run(feed), [want], rtol=1e-4, atol=1e-5)
    h = rlx.Graph("relu6_nan")
    v = h.input("v", (4,))
    h.set_outputs([h.minimum(h.maximum(v, 0.0), 6.0)])
    vals = {"v": np.array([np.nan, -1, 3, 9], np.float32)}
    assert [n.op_type for n in export_for_session(h, {}).graph.node if n.op_type != "Identity"] == ["Clip"]
    np.testing.assert_array_equal(rlx.compile(h, backend="onnxruntime").run(vals)[0], rlx.run(h, vals)[0])


def _skip_layer_norm_block():
    """x + r -> layer_norm: the pattern onnxruntime's SkipLayerNormFusion rewrites into one kernel."""
    g = rlx.Graph("skip_ln")
    x, r = g.input("x", (2, 8, 32)), g.input("r", (2, 8, 32))
    g.set_outputs([g.layer_norm(x + r, g.param("gamma", (32,)), g.param("beta", (32,)), axis=-1)])
    rng = np.random.default_rng(7)
    params = {"gamma": rng.standard_normal(32).astype(np.float32), "beta": rng.standard_normal(32).astype(np.float32)}
    feed = {k: rng.standard_normal((2, 8, 32)).astype(np.float32) for k in ("x", "r")}
    return g, params, feed


def _optimized_ops(tmp_path, proto, disabled):
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / f"opt{len(disabled)}.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled))
    return [n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node]


def test_cpu_sessions_skip_the_slow_fusions(tmp_path, monkeypatch):
    """onnxruntime fuses Add + LayerNormalization into SkipLayerNormalization by default, slower on the
    CPU (benchmarks/ort_fusions.py); the backend's CPU sessions pass SLOW_CPU_FUSIONS, under which the
    pair stays unfused, and the numbers still match rlx.run. disabled_optimizers=() keeps the fusion."""
    import onnxruntime as ort

    from rlx.backends.ort_backend import SLOW_CPU_FUSIONS

    g, params, feed = _skip_layer_norm_block()
    proto = rlx.onnx.export(g, params)
    assert "SkipLayerNormalization" in _optimized_ops(tmp_path, proto, ())
    assert _optimized_ops(tmp_path, proto, SLOW_CPU_FUSIONS) == ["Add", "LayerNormalization"]
    seen = []
    real = ort.InferenceSession

    def recording(*args, **kwargs):
        seen.append(tuple(kwargs.get("disabled_optimizers") or ()))
        return real(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    exe = rlx.compile(g, backend="onnxruntime", params=params)
    assert exe.disabled_optimizers == SLOW_CPU_FUSIONS
    assert_close(exe.run(feed), rlx.run(g, feed, params), rtol=1e-5, atol=1e-5)
    keep = rlx.compile(g, backend="onnxruntime", params=params, disabled_optimizers=())
    assert_close(keep.run(feed), rlx.run(g, feed, params), rtol=1e-5, atol=1e-5)
    assert seen == [SLOW_CPU_FUSIONS, ()]  # two sessions: the settings are part of the cache key


def test_session_config_entries_reach_the_session_and_key_the_cache():
    g, params, feed = _skip_layer_norm_block()
    before = SESSIONS.builds
    exe = rlx.compile(g, backend="onnxruntime", params=params, config={"session.intra_op.allow_spinning": "0"})
    assert_close(exe.run(feed), rlx.run(g, feed, params), rtol=1e-5, atol=1e-5)
    assert exe._session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    spinning = rlx.compile(g, backend="onnxruntime", params=params, config={"session.intra_op.allow_spinning": "1"})
    spinning.run(feed)
    assert spinning._session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert SESSIONS.builds == before + 2
    with pytest.raises(rlx.RlxError, match="config"):
        rlx.compile(g, backend="onnxruntime", config={"session.intra_op.allow_spinning": 0})
    with pytest.raises(rlx.RlxError, match="disabled_optimizers"):
        rlx.compile(g, backend="onnxruntime", disabled_optimizers="SkipLayerNormFusion")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="reads RSS from /proc")
def test_sessions_are_evicted_and_memory_stays_bounded():
    """40 run(params=...) calls with new 2 MB weights each: at most `size` sessions stay, the evicted ones
    are freed (RSS grows by a few MB; without eviction it grew ~200 MB), and every result is x @ w."""
    g = rlx.Graph("ort_evict")
    x = g.input("x", (1, 512))
    g.set_outputs([x @ g.param("w", (512, 1024))])
    rng = np.random.default_rng(8)
    feed = {"x": rng.standard_normal((1, 512)).astype(np.float32)}
    size = SESSIONS.size
    SESSIONS.resize(3)
    try:
        exe = rlx.compile(g, backend="onnxruntime", threads=1)
        evicted = SESSIONS.evictions
        for i in range(40):
            w = rng.standard_normal((512, 1024)).astype(np.float32)
            np.testing.assert_allclose(exe.run(feed, {"w": w})[0], feed["x"].astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
            if i == 5:
                base = _rss_mb()
        assert SESSIONS.count() <= 3 and session_count() <= 3
        assert SESSIONS.evictions - evicted >= 37
        assert _rss_mb() - base < 40, "evicted sessions were not freed"
    finally:
        SESSIONS.resize(size)


def test_session_cache_is_a_bounded_lru():
    from rlx.backends.session_cache import SessionCache

    cache = SessionCache(2)
    built = []

    def build(k):
        return lambda: built.append(k) or f"session {k}"

    assert cache.get(("a", 1), build(1)) == "session 1"
    cache.get(("a", 2), build(2))
    assert cache.get(("a", 1), build(1)) == "session 1" and built == [1, 2]  # a hit, and 1 is now the most recent
    cache.get(("b", 3), build(3))  # evicts 2, the least recently used
    assert (cache.count(), cache.count("a"), cache.count("b"), cache.evictions) == (2, 1, 1, 1)
    cache.get(("a", 2), build(2))
    assert built == [1, 2, 3, 2] and cache.builds == 4
    cache.resize(1)
    assert cache.count() == 1 and cache.evictions == 3
    for bad in (0, -1, 1.5, True, "8"):
        with pytest.raises(rlx.RlxError, match="positive int"):
            SessionCache(bad)


def test_matmuls_sharing_an_activation_are_merged():
    """q / k / v linears with biases and a gate / up pair without: one matmul (+ one bias add) and one split
    each; a weight also read elsewhere stays a param; the numbers equal a NumPy float64 evaluation."""
    from rlx.backends.engine_rewrites import merge_parallel_matmuls
    from rlx.ir.verify import verify

    rng = np.random.default_rng(10)
    g = rlx.Graph("merge")
    x = g.input("x", (2, 5, 8))
    names = ("wq", "wk", "wv", "wg", "wu")
    w = {n: rng.standard_normal((8, 6 if n in ("wq", "wk", "wv") else 12)).astype(np.float32) for n in names}
    b = {f"b{n[1]}": rng.standard_normal(6).astype(np.float32) for n in ("wq", "wk", "wv")}
    q, k, v = (x @ g.param(n, (8, 6)) + g.param(f"b{n[1]}", (6,)) for n in ("wq", "wk", "wv"))
    wg = g.param("wg", (8, 12))
    h = g.relu(x)
    gate, up = h @ wg, h @ g.param("wu", (8, 12))
    g.set_outputs([g.softmax(g.matmul(q, g.transpose(k, perm=[0, 2, 1])), axis=-1) @ v, g.relu(gate) * up, wg * 2.0])
    params = {**w, **b}
    merged, bound = merge_parallel_matmuls(g, params)
    verify(merged)
    assert [n.op for n in merged.nodes].count("matmul") == 2 + 2 and [n.op for n in merged.nodes].count("split") == 2
    assert "wg" in bound and not {"wq", "wk", "wv", "wu", "bq", "bk", "bv"} & set(bound)
    feed = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32)}
    xd = feed["x"].astype(np.float64)
    qd, kd, vd = (xd @ w[n] + b[f"b{n[1]}"] for n in ("wq", "wk", "wv"))
    s = qd @ kd.transpose(0, 2, 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    hd = np.maximum(xd, 0)
    want = [a.astype(np.float32) for a in ((p / p.sum(-1, keepdims=True)) @ vd, np.maximum(hd @ w["wg"], 0) * (hd @ w["wu"]),
                                           w["wg"] * 2.0)]
    assert_close(rlx.run(merged, feed, bound), want, rtol=1e-4, atol=1e-5)
    assert_close(rlx.compile(g, backend="onnxruntime", params=params).run(feed), want, rtol=1e-4, atol=1e-5)
    assert merge_parallel_matmuls(merged, bound)[0] is merged  # nothing left to merge


def test_engine_export_drops_identities_of_the_bound_weights():
    """A fully-masked-row guard under a bound mask that masks nothing (where(all false, 0, x)) and a bias of
    zeros reach the engine as nothing (rlx.opt.cleanup.simplify with the folded weights' values)."""
    from rlx.backends.ort_backend import export_for_session

    g = rlx.Graph("guarded")
    x = g.input("x", (2, 3))
    guard, zeros = g.param("guard", (2, 1), "bool"), g.param("zeros", (1, 3))
    g.set_outputs([g.where(guard, g.constant(np.float32(0)), g.exp(x) + zeros)])
    params = {"guard": np.zeros((2, 1), bool), "zeros": np.zeros((1, 3), np.float32)}
    ops = [n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node]
    assert ops == ["Exp", "Identity"], ops
    xv = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(rlx.compile(g, backend="onnxruntime", params=params).run({"x": xv})[0], np.exp(xv), rtol=1e-6)


def test_engine_export_of_an_embedding_with_a_padding_row_is_one_gather():
    """The torch reader keeps torch's padding-row gradient rule (a Where over a gradient stop); the
    engine never differentiates, so it gets the Gather alone (simplify with keep_gradients=False). torch is the
    oracle."""
    torch = pytest.importorskip("torch")
    import rlx.torch
    from rlx.backends.ort_backend import export_for_session

    torch.manual_seed(0)
    emb = torch.nn.Embedding(9, 5, padding_idx=0).eval()
    ids = torch.tensor([[0, 4, 8], [2, 0, 0]])
    g, params = rlx.torch.import_module(emb, (ids,))
    ops = [n.op_type for n in export_for_session(g, params, engine="onnxruntime").graph.node]
    assert ops == ["Gather", "Identity"], ops  # + the output copy
    got = rlx.compile(g, backend="onnxruntime", params=params).run({next(iter(g.inputs())): ids.numpy()})[0]
    np.testing.assert_array_equal(got, emb(ids).detach().numpy())
