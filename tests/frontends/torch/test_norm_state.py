"""Normalization results beyond the normalized tensor: native_layer_norm / native_group_norm's mean and
rstd, eval-mode batch norm's saved statistics, and training-mode batch norm that updates running statistics
passed as *inputs* (torch.export: USER_INPUT_MUTATION), imported as ``input_update:`` outputs. torch eager is
the oracle, including the values it leaves in the mutated inputs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn, _x, check  # noqa: E402
from rlx.frontends.torch.state import INPUT_UPDATE_PREFIX, input_updates, user_graph  # noqa: E402


def test_native_layer_norm_mean_and_rstd():
    w, b = _x(3, 4, seed=1), _x(3, 4, seed=2)
    check(Fn(lambda x, w, b: torch.native_layer_norm(x, [3, 4], w, b, 0.5)), _x(2, 3, 4), w, b, rtol=1e-5, atol=1e-5)
    check(Fn(lambda x: torch.native_layer_norm(x, [4], None, None, 1e-5)[1:]), _x(2, 3, 4), rtol=1e-5, atol=1e-5)


def test_native_group_norm_mean_and_rstd():
    x = _x(2, 6, 5)
    check(Fn(lambda x, w, b: torch.native_group_norm(x, w, b, 2, 6, 5, 3, 0.1)), x, _x(6, seed=1), _x(6, seed=2),
          rtol=1e-5, atol=1e-5)


def test_eval_batch_norm_saved_statistics_are_empty_like_torch():
    stats = (_x(3, seed=1), _x(3, seed=2).abs() + 0.5)
    check(Fn(lambda x, m, v: torch.native_batch_norm(x, None, None, m, v, False, 0.1, 1e-5)), _x(4, 3, 5), *stats)


def _mutating(fn, *args):
    """(graph, params, the graph's results in order, torch's outputs, torch's mutated args) for ``fn``."""
    module = Fn(fn)
    g, params = rlx.torch.import_module(module, tuple(a.clone() for a in args))
    inputs = dict(zip(g.inputs(), [a.numpy() for a in args]))
    mutated = [a.clone() for a in args]
    with torch.no_grad():
        want = module(*mutated)
    return g, params, inputs, want, mutated


@pytest.mark.parametrize("call", [
    lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=True, momentum=0.3, eps=1e-3),
    lambda x, m, v, w, b: F.instance_norm(x, m, v, w, b, use_input_stats=True, momentum=0.5, eps=0.6),
    lambda x, m, v, w, b: torch._native_batch_norm_legit(x, w, b, m, v, True, 0.5, 0.6)[0],
])
def test_training_batch_norm_updates_its_input_statistics(call):
    args = (_x(4, 3, 5), _x(3, seed=1), _x(3, seed=2).abs() + 0.5, _x(3, seed=3), _x(3, seed=4))
    g, params, inputs, want, mutated = _mutating(call, *args)
    updates = input_updates(g)
    names = list(g.inputs())
    assert sorted(updates) == sorted(names[1:3])  # running mean and var, by input name
    assert all(g.node(g.output_ids[p]).name == INPUT_UPDATE_PREFIX + n for n, p in updates.items())
    opt, _ = rlx.optimize(g)
    exe = rlx.compile(rlx.plan(opt), backend="numpy")
    for got in (rlx.run(g, inputs=inputs, params=params), exe.run(inputs=inputs, params=params)):
        assert len(got) == 3
        np.testing.assert_allclose(got[0], want.numpy(), rtol=1e-5, atol=1e-5)
        for name, pos in updates.items():  # what torch left in the arrays it was given
            np.testing.assert_allclose(got[pos], mutated[names.index(name)].numpy(), rtol=1e-5, atol=1e-6)
    assert len(user_graph(g).output_ids) == 1


def test_training_batch_norm_without_running_statistics():
    check(Fn(lambda x: F.batch_norm(x, None, None, training=True)), _x(4, 3, 5), rtol=1e-5, atol=1e-5)
    check(Fn(lambda x: torch._native_batch_norm_legit(x, None, None, True, 0.1, 1e-5)), _x(4, 3, 5), rtol=1e-5, atol=1e-5)


def test_rrelu_in_eval_mode_is_a_leaky_relu():
    check(Fn(lambda x: F.rrelu(x, 0.1, 0.3, training=False)), _x(3, 4))
