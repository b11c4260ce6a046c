"""The torch backend's once-per-binding work (``fold_weights``) and conv layout (``memory_format``):
an eval-mode conv / BatchNorm / ReLU / flatten / linear model imported through torch.export runs
with its BatchNorm folded into the conv and its conv operands channels-last, and still gives torch
eager's numbers, for the weights bound at compile time, rebound later and passed per call."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from backends.jax_cases import assert_close  # noqa: E402


def _cnn(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, stride=2, padding=1), torch.nn.BatchNorm2d(4),
        torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 6))
    for bn in (m[1], m[4]):  # non-trivial running statistics, so the fold has work to do
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return m.eval()


def _eager(m: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return m(torch.from_numpy(x)).numpy()


@pytest.fixture(scope="module")
def imported():
    x = np.random.default_rng(0).standard_normal((2, 3, 10, 10)).astype(np.float32)
    first, second = _cnn(0), _cnn(1)
    g, p1 = rlx.torch.import_module(first, (torch.from_numpy(x),))
    _, p2 = rlx.torch.import_module(second, (torch.from_numpy(x),))
    return g, x, (first, p1), (second, p2)


def test_batchnorm_is_folded_and_the_numbers_follow_every_binding(imported):
    g, x, (first, p1), (second, p2) = imported
    feed = {next(iter(g.inputs())): x}
    exe = rlx.compile(g, backend="torch", params=p1)
    ops = [n.op for n in exe.prepared.nodes]
    assert ops.count("fused_conv2d_bias_act") == 2 and "conv2d" not in ops  # BN folded, bias + ReLU in the conv call
    out = exe.run(feed)[0]
    assert out.flags.c_contiguous and float(np.std(out)) > 1e-3
    assert_close([out], [_eager(first, x)], rtol=1e-4, atol=1e-5)
    exe.set_params(p2)  # the prelude reruns for the new weights
    assert_close(exe.run(feed), [_eager(second, x)], rtol=1e-4, atol=1e-5)
    fresh = rlx.compile(g, backend="torch", params=p1)
    assert_close(fresh.run(feed, params=p2), [_eager(second, x)], rtol=1e-4, atol=1e-5)
    unfolded = rlx.compile(g, backend="torch", params=p1, fold_weights=False, memory_format="contiguous")
    assert [n.op for n in unfolded.prepared.nodes] == [n.op for n in g.nodes]
    assert_close(unfolded.run(feed), [_eager(first, x)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("memory_format", ["channels_last", "contiguous"])
def test_conv_operands_take_the_chosen_memory_format(imported, monkeypatch, memory_format):
    g, x, (first, p1), _ = imported
    want_out = _eager(first, x)  # before the patch: nn.Conv2d calls F.conv2d too
    seen = []
    real = torch.nn.functional.conv2d

    def recording(inp, weight, *args, **kwargs):
        seen.append((inp.is_contiguous(memory_format=torch.channels_last), weight.is_contiguous(memory_format=torch.channels_last)))
        return real(inp, weight, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "conv2d", recording)
    exe = rlx.compile(g, backend="torch", params=p1, memory_format=memory_format)
    out = exe.run({next(iter(g.inputs())): x})[0]
    assert_close([out], [want_out], rtol=1e-4, atol=1e-5)
    want = memory_format == "channels_last"
    assert seen == [(want, want)] * 2  # the 3-channel input and the 8-channel activation; both weights
    converted = [n for n in exe.module.graph.nodes if n.op == "call_function" and n.target.__name__ == "_to_channels_last"]
    assert len(converted) == (4 if want else 0)  # x and w of each conv (no-ops for the prelude's weights)


def test_weight_only_outputs_are_fresh_arrays():
    """An output computed from params alone comes from the prelude's tensors: the caller gets a copy."""
    g = rlx.Graph("w_out")
    x, w = g.input("x", (3, 4)), g.param("w", (4, 5))
    tw = g.transpose(w, (1, 0)) * 2.0
    g.set_outputs([x @ w, tw])
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((4, 5)).astype(np.float32)}
    feed = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", params=params)
    first = exe.run(feed)
    assert_close(first, [feed["x"] @ params["w"], params["w"].T * 2.0])
    first[1][...] = 0.0
    assert_close(exe.run(feed), [feed["x"] @ params["w"], params["w"].T * 2.0])


def test_symbolic_batch_conv_runs_channels_last_per_binding():
    g = rlx.Graph("sym_conv")
    x = g.input("x", ("batch", 3, 6, 6))
    g.set_outputs([g.relu(g.conv2d(x, g.param("w", (5, 3, 3, 3)), padding=[1, 1]))])
    rng = np.random.default_rng(2)
    params = {"w": rng.standard_normal((5, 3, 3, 3)).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", params=params)
    for batch in (1, 3):
        feed = {"x": rng.standard_normal((batch, 3, 6, 6)).astype(np.float32)}
        want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(feed["x"]), torch.from_numpy(params["w"]), padding=1))
        assert_close(exe.run(feed), [want.numpy()], rtol=1e-5, atol=1e-5)


def test_bad_layout_options_are_refused():
    g = rlx.Graph("opts")
    g.set_outputs([g.relu(g.input("x", (2,)))])
    with pytest.raises(rlx.RlxError, match="memory_format"):
        rlx.compile(g, backend="torch", memory_format="nhwc")
    with pytest.raises(rlx.RlxError, match="fold_weights"):
        rlx.compile(g, backend="torch", fold_weights="yes")


def test_symbolic_inputs_reuse_the_prelude_of_the_bound_params():
    """With a symbolic input the run takes the checked path every call, but the weight-only nodes
    (here the transpose torch.export writes before a linear) still run once per params binding."""
    g = rlx.Graph("sym_linear")
    x, w = g.input("x", ("batch", 4)), g.param("w", (5, 4))
    g.set_outputs([x @ g.transpose(w, (1, 0))])
    rng = np.random.default_rng(3)
    p1, p2 = ({"w": rng.standard_normal((5, 4)).astype(np.float32)} for _ in range(2))
    exe = rlx.compile(g, backend="torch", params=p1)
    assert exe._prelude is not None
    calls, prelude = [], exe._prelude
    exe._prelude = lambda *tensors: calls.append(len(tensors)) or prelude(*tensors)
    for batch in (1, 3, 2):
        feed = {"x": rng.standard_normal((batch, 4)).astype(np.float32)}
        assert_close(exe.run(feed), [feed["x"] @ p1["w"].T], rtol=1e-5, atol=1e-6)
    assert calls == []  # it ran when p1 was bound, before the count started
    feed = {"x": rng.standard_normal((2, 4)).astype(np.float32)}
    assert_close(exe.run(feed, params=p2), [feed["x"] @ p2["w"].T], rtol=1e-5, atol=1e-6)
    assert calls == [1]  # per-call params are bound (they stay for later runs): the prelude runs once for them
