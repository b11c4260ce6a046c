"""Torch modules trained with rlx.compile_training on numpy / jax / torch against torch's own
AdamW training: every step's loss within 1e-4 relative, final params (and BatchNorm running
statistics, functionalized from the exported program's buffer mutations) within 1e-3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from training.torch_cases import bert_classifier, cnn_bn, feeds, gpt2_lm, imported, llama_lm, torch_run

STEPS = 20
BACKENDS = ["numpy", "jax", "torch"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny matmuls on a shared 2-core machine: torch's thread pool only adds waiting."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


_CACHE: dict[str, tuple] = {}


def _prepared(make):
    if make.__name__ not in _CACHE:
        case, graph, params = imported(make)
        _CACHE[make.__name__] = (case, graph, params, *torch_run(case, STEPS, lr=1e-2))
    return _CACHE[make.__name__]


def _check(make, backend, loss_rtol=1e-4, param_atol=1e-3):
    if backend == "jax":
        pytest.importorskip("jax")
    case, graph, params, torch_losses, torch_state = _prepared(make)
    trainer = rlx.compile_training(graph, optimizer="adamw", lr=1e-2, params=params, backend=backend)
    losses = [trainer.step(f) for f in feeds(graph, case, STEPS)]
    np.testing.assert_allclose(losses, torch_losses, rtol=loss_rtol)
    final = trainer.params
    # tied weights: torch names the shared tensor under every owner; the graph holds one of them
    for name, value in final.items():
        np.testing.assert_allclose(value.astype(np.float64), torch_state[name], atol=param_atol, rtol=0, err_msg=name)
    assert losses[-1] < losses[0]
    return trainer, torch_state


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_with_batchnorm_in_training_mode(backend):
    trainer, torch_state = _check(cnn_bn, backend)
    assert trainer.buffers == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert "bn.running_mean" not in trainer.trainable
    params = trainer.params
    assert int(params["bn.num_batches_tracked"]) == STEPS
    # running stats: torch's momentum update with the unbiased batch variance
    np.testing.assert_allclose(params["bn.running_var"], torch_state["bn.running_var"], rtol=1e-5)
    np.testing.assert_allclose(params["bn.running_mean"], torch_state["bn.running_mean"], atol=1e-6)


def test_buffer_mutations_become_named_outputs():
    case, graph, params, *_ = _prepared(cnn_bn)
    from rlx.frontends.torch.state import buffer_updates

    updates = buffer_updates(graph)
    assert sorted(updates) == ["bn.num_batches_tracked", "bn.running_mean", "bn.running_var"]
    assert updates and min(updates.values()) == 1  # the loss first, then the updates
    # one run of the imported graph = one torch forward in training mode: the new buffer values
    module = __import__("copy").deepcopy(case.module)
    x, y = case.batch(0)
    with torch.no_grad():
        module(x, y)
    outs = rlx.run(graph, inputs={"x": x.numpy(), "y": y.numpy()}, params=params)
    for name, pos in updates.items():
        np.testing.assert_allclose(outs[pos], dict(module.named_buffers())[name].numpy(), rtol=1e-5, atol=1e-7)


def test_input_mutations_become_named_outputs():
    class Inplace(torch.nn.Module):
        def forward(self, x):
            x.mul_(2.0)
            return x.sum()

    from rlx.frontends.torch.state import input_updates

    g, params = rlx.torch.import_module(Inplace(), (torch.ones(3),))
    (name, pos), = input_updates(g).items()
    out = rlx.run(g, inputs={name: np.arange(3, dtype=np.float32)}, params=params)
    np.testing.assert_array_equal(out[pos], [0.0, 2.0, 4.0])  # what torch leaves in x
    assert float(out[0]) == 6.0


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [gpt2_lm, bert_classifier, llama_lm], ids=["gpt2", "bert", "llama"])
def test_transformers_train_like_torch(make, backend):
    trainer, _ = _check(make, backend)
    case = _prepared(make)[0]
    torch_params = {n for n, _ in case.module.named_parameters(remove_duplicate=False)}  # tied: every owner
    assert sorted(trainer.trainable) == sorted(n for n in trainer.params if n in torch_params)


def test_in_place_buffer_rescale_is_applied_after_every_step():
    """A buffer updated in place in forward (an exponential moving average of the batch mean,
    then rescaled) follows torch's values step by step; the loss reads the old value."""

    class Ema(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)
            self.register_buffer("ema", torch.zeros(4))

        def forward(self, x, y):
            loss = ((self.lin(x - self.ema).squeeze(-1) - y) ** 2).mean()
            self.ema.mul_(0.9).add_(0.1 * x.mean(0))
            return loss

    torch.manual_seed(0)
    module = Ema()
    batches = [(torch.randn(8, 4) + 2, torch.randn(8)) for _ in range(4)]
    graph, params = rlx.torch.import_module(__import__("copy").deepcopy(module), batches[0])
    trainer = rlx.compile_training(graph, optimizer="sgd", lr=0.1, params=params, backend="numpy")
    assert trainer.buffers == ["ema"] and trainer.trainable == ["lin.bias", "lin.weight"]
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    for x, y in batches:
        opt.zero_grad()
        tl = module(x, y)
        tl.backward()
        opt.step()
        assert trainer.step({"x": x.numpy(), "y": y.numpy()}) == pytest.approx(tl.item(), rel=1e-5)
        np.testing.assert_allclose(trainer.params["ema"], module.ema.numpy(), rtol=1e-6)
    np.testing.assert_allclose(trainer.params["lin.weight"], module.lin.weight.detach().numpy(), rtol=1e-5)


def test_input_mutation_is_left_out_of_training():
    """A forward that rescales its input in place trains like torch: the loss reads the new value, the
    input's update output is not a loss."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, x):
            x.mul_(2.0)
            return (self.lin(x) ** 2).mean()

    torch.manual_seed(0)
    module, x = Scaled(), torch.randn(5, 3)
    graph, params = rlx.torch.import_module(__import__("copy").deepcopy(module), (x.clone(),))
    trainer = rlx.compile_training(graph, optimizer="sgd", lr=0.1, params=params, backend="numpy")
    loss = module(x.clone())
    loss.backward()
    assert trainer.step({"x": x.numpy()}) == pytest.approx(loss.item(), rel=1e-5)
    want = module.lin.weight.detach().numpy() - 0.1 * module.lin.weight.grad.numpy()
    np.testing.assert_allclose(trainer.params["lin.weight"], want, rtol=1e-5)


def test_float_buffers_are_not_trained():
    """A float buffer the forward reads (a rotary ``inv_freq``, a fixed scale) is not an
    nn.Parameter: torch's optimizer never touches it, nor does the trainer (AdamW decays all it trains)."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)
            self.register_buffer("scale", torch.full((3,), 2.0))

        def forward(self, x, y):
            return ((self.lin(x * self.scale).squeeze(-1) - y) ** 2).mean()

    x, y = torch.randn(6, 3), torch.randn(6)
    graph, params = rlx.torch.import_module(Scaled(), (x, y))
    trainer = rlx.compile_training(graph, optimizer="adamw", lr=0.1, params=params)
    assert trainer.trainable == ["lin.bias", "lin.weight"] and trainer.buffers == []
    for _ in range(3):
        trainer.step({"x": x.numpy(), "y": y.numpy()})
    np.testing.assert_array_equal(trainer.params["scale"], np.full(3, 2.0, np.float32))
    # named explicitly, a buffer can still be trained
    explicit = rlx.compile_training(graph, ["scale", "lin.weight"], optimizer="sgd", lr=0.1, params=params)
    assert explicit.trainable == ["scale", "lin.weight"]
