"""The torch backend (``rlx.compile(g, backend="torch")``): parity with ``rlx.run`` over every op
case of the registry, the coverage walk, edge semantics (NaN, empty, out-of-range indices),
narrow floats, symbolic dims, params on the device, training, threads and ``torch.compile``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
from backends.jax_cases import assert_close, f32_variant  # noqa: E402
from opcases import collect  # noqa: E402
from rlx.backends.torch_backend import DECOMPOSED, LOWERINGS, REFUSED, TorchExecutable, coverage  # noqa: E402
from runtime.hammer import hammer  # noqa: E402

CASES = collect().cases
DEVICE_OPS = set(LOWERINGS) | DECOMPOSED


def _check(cases, variant) -> None:
    failures = []
    for case in cases:
        g, inputs, params = variant(case)
        try:
            want = rlx.run(g, inputs, params)
        except rlx.RlxError as exc:  # the reference refuses: the backend must refuse too
            with pytest.raises(rlx.RlxError):
                rlx.compile(g, backend="torch").run(inputs, params)
            del exc
            continue
        try:
            assert_close(rlx.compile(g, backend="torch").run(inputs, params), want)
        except (AssertionError, rlx.RlxError) as exc:
            failures.append(f"{case.id}: {str(exc).strip()[:400]}")
    assert not failures, f"{len(failures)} case(s) differ from rlx.run:\n" + "\n".join(failures)


def test_parity_float32_device_ops():
    _check([c for c in CASES if c.op in DEVICE_OPS], f32_variant)


def test_parity_as_written_device_ops():
    """The cases as written (mostly float64, integer and bool operands): dtypes kept exactly."""
    def as_written(case):
        g, _ = case.graph()
        return (g, *case.split_feed())

    _check([c for c in CASES if c.op in DEVICE_OPS], as_written)


def test_parity_host_ops_sample():
    _check([c for c in CASES if c.op not in DEVICE_OPS][::6], f32_variant)


def test_every_op_lowered_decomposed_hosted_or_refused():
    table = coverage()
    missing = sorted(op.name for op in rlx.all_ops() if op.name not in table)
    assert not missing, f"ops the torch backend does not cover: {missing}"
    for name in DECOMPOSED:
        assert rlx.get_op(name).decompose is not None
    assert not set(LOWERINGS) & set(REFUSED)
    for name, how in table.items():
        assert how in ("lowered", "decomposed", "leaf") or len(how) > 30, f"{name}: {how} needs a reason"
    # the ops real models spend their time in have device lowerings
    for name in ("matmul", "binary", "activation", "softmax", "layer_norm", "attention", "conv2d", "pool2d", "reduce"):
        assert table[name] == "lowered"


def _graph(build, **leaves):
    g = rlx.Graph("t")
    vals = {n: g.input(n, shape, dtype) for n, (shape, dtype) in leaves.items()}
    g.set_outputs(list(build(g, **vals)))
    return g


def test_nan_empty_and_out_of_range_match_the_reference():
    g = _graph(lambda g, x, y: [g.maximum(x, y), g.softmax(x, axis=-1), g.max(x, axes=[1]), g.exp(x)],
               x=((2, 3), "f32"), y=((2, 3), "f32"))
    feed = {"x": np.array([[np.nan, 1, 2], [np.inf, -np.inf, 0]], np.float32), "y": np.array([[0, np.nan, 5], [1, 1, 1]], np.float32)}
    assert_close(rlx.compile(g, backend="torch").run(feed), rlx.run(g, feed))
    e = _graph(lambda g, x: [g.sum(x, axes=[0]), g.max(x, axes=[0]), g.relu(x)], x=((0, 4), "f32"))
    empty = {"x": np.zeros((0, 4), np.float32)}
    assert_close(rlx.compile(e, backend="torch").run(empty), rlx.run(e, empty))
    t = _graph(lambda g, table, i: [g.gather(table, i, axis=0)], table=((5, 2), "f32"), i=((3,), "i32"))
    exe = rlx.compile(t, backend="torch")
    ok = {"table": np.arange(10, dtype=np.float32).reshape(5, 2), "i": np.array([4, -1, 0], np.int32)}
    assert_close(exe.run(ok), rlx.run(t, ok))
    bad = {**ok, "i": np.array([0, 5, 1], np.int32)}
    with pytest.raises(rlx.RlxError, match="out of range"):
        rlx.run(t, bad)
    with pytest.raises(rlx.RlxError, match="out of range"):
        exe.run(bad)


def test_narrow_floats_round_like_the_reference():
    g = _graph(lambda g, x, w: [g.gelu(x @ w), g.cast(g.tanh(x), to="f32")], x=((4, 8), "bf16"), w=((8, 8), "bf16"))
    rng = np.random.default_rng(0)
    feed = {k: rng.standard_normal((4, 8) if k == "x" else (8, 8)).astype(rlx.bf16.numpy) for k in ("x", "w")}
    got, want = rlx.compile(g, backend="torch").run(feed), rlx.run(g, feed)
    assert got[0].dtype == want[0].dtype
    np.testing.assert_allclose(got[0].astype(np.float32), want[0].astype(np.float32), rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(got[1], want[1])


def test_symbolic_batch_builds_one_module_per_size_and_params_stay_on_device():
    g = rlx.Graph("dyn")
    x = g.input("x", ("batch", 16))
    g.set_outputs([g.relu(x @ g.param("w", (16, 4))) + 1.0, x])
    rng = np.random.default_rng(1)
    W = rng.standard_normal((16, 4)).astype(np.float32)
    exe = rlx.compile(g, backend="torch", params={"w": W}, device="cpu")
    assert isinstance(exe, TorchExecutable) and exe._params["w"].device.type == "cpu"
    for b in (3, 5, 3):
        feed = {"x": rng.standard_normal((b, 16)).astype(np.float32)}
        got = exe.run(feed)
        assert_close(got, rlx.run(g, feed, {"w": W}))
        got[1][0, 0] = 123.0  # a pass-through output is a copy, never the caller's array
        assert feed["x"][0, 0] != 123.0
    assert len(exe._modules) == 2
    with pytest.raises(rlx.FeedError):
        exe.run({"x": np.zeros((2, 15), np.float32)})
    with pytest.raises(rlx.RlxError, match="mode"):
        rlx.compile(g, backend="torch", mode="fast")


def test_static_fast_path_follows_set_params_and_odd_input_layouts():
    """The per-run fast path (all params bound, plain inputs) uses the params bound last, accepts
    non-contiguous and read-only arrays, returns fresh results, and copies pass-through outputs."""
    rng = np.random.default_rng(4)
    g = rlx.Graph("fast")
    x = g.input("x", (6, 8))
    g.set_outputs([g.layer_norm(x @ g.param("w", (8, 8)), g.param("g", (8,)), g.param("b", (8,))), x])
    p1 = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("w", (8, 8)), ("g", (8,)), ("b", (8,)))}
    p2 = {k: v + 1.0 for k, v in p1.items()}
    exe = rlx.compile(g, backend="torch", params=p1)
    wide = rng.standard_normal((6, 16)).astype(np.float32)
    frozen = rng.standard_normal((6, 8)).astype(np.float32)
    frozen.flags.writeable = False
    for feed_x in (wide[:, ::2], frozen, np.ascontiguousarray(wide[:, 1::2])):
        feed = {"x": feed_x}
        first = exe.run(feed)
        assert_close(first, rlx.run(g, feed, p1))
        second = exe.run(feed)
        assert not np.shares_memory(first[0], second[0])
        second[1][0, 0] = 99.0
        assert feed_x[0, 0] != 99.0
    exe.set_params({"w": p2["w"]})
    assert_close(exe.run({"x": frozen}), rlx.run(g, {"x": frozen}, {**p1, "w": p2["w"]}))
    assert_close(exe.run({"x": frozen}, params=p2), rlx.run(g, {"x": frozen}, p2))
    assert_close(exe.run({"x": frozen}), rlx.run(g, {"x": frozen}, p2))  # run(params=...) stays bound
    with pytest.raises(rlx.FeedError):
        exe.run({"x": frozen.astype(np.float64)})


def test_training_on_the_torch_backend_matches_numpy():
    rng = np.random.default_rng(2)
    g = rlx.Graph("train")
    x, y = g.input("x", (8, 6)), g.input("y", (8, 2))
    h = g.tanh(x @ g.param("w1", (6, 5)) + g.param("b1", (5,)))
    d = h @ g.param("w2", (5, 2)) - y
    g.set_outputs([g.mean(d * d, axes=[0, 1])])
    init = {"w1": rng.standard_normal((6, 5)), "b1": rng.standard_normal(5), "w2": rng.standard_normal((5, 2))}
    init = {k: v.astype(np.float32) for k, v in init.items()}
    feed = {"x": rng.standard_normal((8, 6)).astype(np.float32), "y": rng.standard_normal((8, 2)).astype(np.float32)}
    ref = rlx.compile_training(g, optimizer="sgd", lr=0.1, params=init)
    tt = rlx.compile_training(g, optimizer="sgd", lr=0.1, params=init, backend="torch")
    for _ in range(3):
        assert tt.step(feed) == pytest.approx(ref.step(feed), rel=1e-5)
    for k in init:
        np.testing.assert_allclose(tt.params[k], ref.params[k], rtol=1e-5, atol=1e-6)


def test_threads_share_one_executable():
    rng = np.random.default_rng(3)
    g = rlx.Graph("th")
    x = g.input("x", (16, 32))
    g.set_outputs([g.tanh(x @ g.param("w", (32, 8)))])
    exe = rlx.compile(g, backend="torch", params={"w": rng.standard_normal((32, 8)).astype(np.float32)})
    cases = []
    for _ in range(8):
        feed, params = {"x": rng.standard_normal((16, 32)).astype(np.float32)}, {"w": rng.standard_normal((32, 8)).astype(np.float32)}
        cases.append((feed, params, rlx.run(g, feed, params)[0]))
    wrong = hammer(lambda c: np.allclose(exe.run(c[0], c[1])[0], c[2], rtol=1e-5, atol=1e-6), cases, 25)
    assert wrong == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_the_reference():
    g = _graph(lambda g, x: [g.softmax(g.gelu(x @ x), axis=-1)], x=((32, 32), "f32"))
    feed = {"x": np.random.default_rng(4).standard_normal((32, 32)).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", device="cuda")
    assert_close(exe.run(feed), rlx.run(g, feed), rtol=1e-4, atol=1e-5)
    resident = exe.run_device({"x": torch.from_numpy(feed["x"]).cuda()})  # device tensors in, device tensors out
    assert resident[0].device.type == "cuda"
    assert_close([resident[0].cpu().numpy()], rlx.run(g, feed), rtol=1e-4, atol=1e-5)


def test_torch_tensors_as_inputs_stay_as_they_are():
    """Inputs may be torch tensors: those of the declared dtype and shape on the device are used without a
    copy (the output of a view of one shares its storage), others take the full check, which names them."""
    rng = np.random.default_rng(5)
    g = rlx.Graph("tensor_feed")
    x, w = g.input("x", (4, 6)), g.param("w", (6, 3))
    g.set_outputs([g.relu(x @ w), g.reshape(x, (6, 4))])
    params = {"w": rng.standard_normal((6, 3)).astype(np.float32)}
    feed = {"x": rng.standard_normal((4, 6)).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", params=params)
    xt = torch.from_numpy(feed["x"].copy())
    out = exe.run_device({"x": xt})
    assert_close([o.numpy() for o in out], rlx.run(g, feed, params))
    assert out[1].data_ptr() == xt.data_ptr()  # no copy of the resident input
    assert_close(exe.run({"x": xt.clone().requires_grad_()}), rlx.run(g, feed, params))
    assert_close(exe.run({"x": torch.from_numpy(feed["x"].T.copy()).T}), rlx.run(g, feed, params))  # a strided view
    with pytest.raises(rlx.FeedError, match=r"'x'.*torch\.float64"):
        exe.run({"x": xt.double()})
    with pytest.raises(rlx.FeedError, match="x"):
        exe.run({"x": torch.zeros(4, 5)})


@pytest.mark.slow
def test_inductor_mode_matches_the_reference():
    g = _graph(lambda g, x, b: [g.gelu(x @ x + b), g.layer_norm(x, g.constant(np.ones(16, np.float32)),
                                                               g.constant(np.zeros(16, np.float32)), axis=-1)],
               x=((16, 16), "f32"), b=((16,), "f32"))
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((16, 16)).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32)}
    assert_close(rlx.compile(g, backend="torch", mode="inductor").run(feed), rlx.run(g, feed), rtol=1e-4, atol=1e-5)


def test_a_lowering_giving_the_wrong_shape_is_caught_until_a_run_succeeds(monkeypatch):
    """Each lowered call checks its result's shape against the node's type until the module's first
    successful run (a static module's shapes cannot change after it); a failing run leaves the checks on."""
    from rlx.backends.torch_backend import lowering as L

    good = L.LOWERINGS["activation"]
    monkeypatch.setitem(L.LOWERINGS, "activation", lambda args, attrs, out: good(args, attrs, out).reshape(-1))
    g = _graph(lambda g, x: [g.relu(x)], x=((3, 4), "f32"))
    feed = {"x": np.arange(-6, 6, dtype=np.float32).reshape(3, 4)}
    exe = rlx.compile(g, backend="torch")
    for _ in range(2):
        with pytest.raises(rlx.RlxError, match=r"torch lowering of 'activation' .* gave shape \[12\], expected \[3, 4\]"):
            exe.run(feed)
    monkeypatch.setitem(L.LOWERINGS, "activation", good)
    fixed = rlx.compile(g, backend="torch")
    for _ in range(3):
        assert_close(fixed.run(feed), rlx.run(g, feed))
