"""The OpenVINO backend: numbers vs ``rlx.run`` and onnxruntime on real ops and real models, f32 precision,
threads, the shared bounded session cache, params, errors, concurrent callers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino")
pytest.importorskip("onnx")

import rlx
from backends.jax_cases import assert_close
from rlx.backends.openvino_backend import session_count
from rlx.backends.session_cache import SESSIONS
from runtime.hammer import hammer


def block():
    g = rlx.Graph("ov_block")
    x = g.input("x", (4, 16))
    h = g.gelu(x @ g.param("w", (16, 32)) + g.param("b", (32,)))
    y = g.layer_norm(h, g.param("gamma", (32,)), g.param("beta", (32,)), axis=-1)
    g.set_outputs([g.softmax(y, axis=-1), g.max(h, axes=[1]), g.arg_reduce(h, op="argmax", axis=1),
                   g.compare(h, y, op="gt"), g.cast(h * 10.0, to="i32")])
    return g


def weights(rng):
    return {"w": rng.standard_normal((16, 32)).astype(np.float32), "b": rng.standard_normal(32).astype(np.float32),
            "gamma": rng.standard_normal(32).astype(np.float32), "beta": rng.standard_normal(32).astype(np.float32)}


def _exact(got, want):
    """float outputs close, the others (indices, masks, integer casts) equal, dtypes and shapes equal."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        else:
            assert (a != b).sum() <= (1 if a.dtype.kind == "i" and a.ndim > 1 else 0), (a, b)  # a cast at a .5 boundary


def test_matches_reference_and_onnxruntime_and_sessions_are_cached():
    rng = np.random.default_rng(0)
    g, params = block(), weights(rng)
    feed = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    before = SESSIONS.builds
    exe = rlx.compile(g, backend="openvino", params=params, threads=1)
    want = rlx.run(g, feed, params)
    _exact(exe.run(feed), want)
    if __import__("importlib").util.find_spec("onnxruntime"):
        assert_close(exe.run(feed)[:2], rlx.compile(g, backend="onnxruntime", params=params).run(feed)[:2], rtol=1e-4, atol=1e-5)
        before += 1
    assert SESSIONS.builds == before + 1 and session_count() >= 1
    again = rlx.compile(block(), backend="openvino", params=params, threads=1)  # same fingerprint, weights, settings
    _exact(again(**feed), want)
    assert SESSIONS.builds == before + 1
    other = weights(rng)
    _exact(exe.run(feed, other), rlx.run(g, feed, other))
    _exact(exe.run(feed), rlx.run(g, feed, other))  # they stayed bound
    assert SESSIONS.builds == before + 2
    first = exe.run(feed)[0]
    exe.run({"x": feed["x"] + 1})
    _exact([first], [rlx.run(g, feed, other)[0]])  # an earlier result is not overwritten by the next call


def test_f32_precision_and_threads_reach_the_compiled_model():
    g, params = block(), weights(np.random.default_rng(1))
    exe = rlx.compile(g, backend="openvino", params=params, threads=1)
    compiled = exe.session().compiled
    assert str(compiled.get_property("INFERENCE_PRECISION_HINT")) in ("f32", "<Type: 'float32'>")
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    plugin = rlx.compile(g, backend="openvino", params=params, precision=None)  # the plugin's choice, another session
    assert plugin.session() is not exe.session()


def test_bad_options_and_feeds_raise_rlx_errors():
    g = block()
    for bad in ({"threads": 0}, {"threads": "2"}, {"device": "NPU9"}, {"precision": "f8"}, {"config": {1: 2}}):
        with pytest.raises(rlx.RlxError):
            rlx.compile(g, backend="openvino", **bad)
    with pytest.raises(rlx.RlxError, match="unknown option"):
        rlx.compile(g, backend="openvino", providers=["CPUExecutionProvider"])
    exe = rlx.compile(g, backend="openvino", params=weights(np.random.default_rng(1)), threads=1)
    with pytest.raises(rlx.FeedError):
        exe.run({"x": np.zeros((4, 15), np.float32)})
    with pytest.raises(rlx.FeedError):
        exe.run({"x": np.zeros((4, 16), np.float32)}, {"w": np.zeros((3, 3), np.float32)})


def test_non_contiguous_and_list_feeds_take_the_checked_path():
    g, params = block(), weights(np.random.default_rng(4))
    exe = rlx.compile(g, backend="openvino", params=params, threads=1)
    x = np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32).T  # a transposed view
    _exact(exe.run({"x": x}), rlx.run(g, {"x": np.ascontiguousarray(x)}, params))
    _exact(exe.run({"x": x.tolist()}), rlx.run(g, {"x": np.ascontiguousarray(x)}, params))


def test_threads_get_their_own_requests():
    rng = np.random.default_rng(2)
    g, params = block(), weights(rng)
    exe = rlx.compile(g, backend="openvino", params=params, threads=1)
    cases = []
    for _ in range(8):
        feed = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
        cases.append((feed, rlx.run(g, feed, params)[0]))
    assert hammer(lambda c: np.allclose(exe.run(c[0])[0], c[1], rtol=1e-4, atol=1e-5), cases, 25) == []


def test_conv_net_matches_torch():
    """A real conv net (conv / BatchNorm / ReLU / max pool / residual / global pool / linear) imported from torch."""
    torch = pytest.importorskip("torch")
    import rlx.torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                            torch.nn.ReLU(), torch.nn.MaxPool2d(2))
            self.body = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU())
            self.head = torch.nn.Linear(16, 10)

        def forward(self, x):
            y = self.stem(x)
            return self.head((y + self.body(y)).mean(dim=(2, 3)))

    net = Net()
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    net.eval()
    x = torch.randn(2, 3, 16, 16)
    g, params = rlx.torch.import_module(net, (x,))
    with torch.inference_mode():
        want = net(x).numpy()
    got = rlx.compile(g, backend="openvino", params=params, threads=1).run(dict(zip(g.inputs(), [x.numpy()])))
    assert_close(got, [want], rtol=1e-4, atol=1e-5)


def test_bert_matches_torch():
    """transformers' BertModel (random init, 2 layers, attention mask with padding) vs torch."""
    pytest.importorskip("transformers")
    from models.zoo import ZOO, torchvision_without_compiled_ops
    from models.zoo_check import import_entry, rel_error, torch_outputs

    torchvision_without_compiled_ops()
    m = import_entry(next(e for e in ZOO if e.name == "bert"))
    want = torch_outputs(m)
    got = rlx.compile(m.graph, backend="openvino", params=m.params, threads=1).run(m.feed)
    assert [o.shape for o in got] == [w.shape for w in want]
    assert max(rel_error(o, w) for o, w in zip(got, want)) < 1e-4


def test_symbolic_dims_scalar_inputs_and_integer_indices():
    g = rlx.Graph("ov_sym")
    x = g.input("x", ("n", 4))
    g.set_outputs([g.relu(x) * 2.0, g.sum(x, axes=[1])])
    exe = rlx.compile(g, backend="openvino")
    for n in (1, 3, 5):  # one compiled model, dynamic in n
        feed = {"x": np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)}
        _exact(exe.run(feed), rlx.run(g, feed))
    t = rlx.Graph("ov_emb")
    ids, s = t.input("ids", (2, 3), "i64"), t.input("s", (), "f32")
    t.set_outputs([t.gather(t.param("tab", (10, 4)), ids, axis=0) * s])
    tab = np.random.default_rng(6).standard_normal((10, 4)).astype(np.float32)
    exe = rlx.compile(t, backend="openvino", params={"tab": tab})
    for scale in (np.array(2.0, np.float32), np.float32(-1.5)):  # a 0-d array (fast path) and a NumPy scalar
        feed = {"ids": np.array([[0, 9, 3], [1, 2, 3]]), "s": scale}
        _exact(exe.run(feed), rlx.run(t, feed, {"tab": tab}))
