"""Embedding gradients as torch defines them (padding_idx, scale_grad_by_freq) and tied weights under every
``named_parameters()`` name: torch autograd is the oracle."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402


def _grads(module, ids, weight_names):
    """rlx gradients of sum(out * r) w.r.t. the named params, and torch's, and both losses."""
    g, params = rlx.torch.import_module(module, (ids,))
    out = g.outputs[0]
    r = np.random.default_rng(0).standard_normal(tuple(out.shape)).astype(np.float32)
    g.set_outputs([g.reduce(out * g.constant(r), op="sum", axes=list(range(len(out.shape))), keep_dim=False)])
    bwd = rlx.grad_with_loss(g, wrt=weight_names)
    got = rlx.run(bwd, {next(iter(g.inputs())): ids.numpy(), "d_output": np.array(1.0, np.float32)}, params)
    module.zero_grad()
    loss = (module(ids) * torch.from_numpy(r)).sum()
    loss.backward()
    return got, loss, params


class Embed(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(9, 4, **kw)

    def forward(self, ids):
        return torch.tanh(self.emb(ids))


@pytest.mark.parametrize("kw", [{"padding_idx": 0}, {"padding_idx": -2}, {"scale_grad_by_freq": True},
                                {"padding_idx": 3, "scale_grad_by_freq": True}, {}])
def test_embedding_gradient_rules(kw):
    ids = torch.tensor([[0, 1, 1, 3], [7, 3, 1, 0]])
    m = Embed(**kw)
    got, loss, _ = _grads(m, ids, ["emb.weight"])
    np.testing.assert_allclose(got[0], loss.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(got[1], m.emb.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    if m.emb.padding_idx is not None:
        assert not np.any(got[1][m.emb.padding_idx])


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight  # torch.export lifts it as head.weight

    def forward(self, ids):
        return self.head(torch.relu(self.emb(ids)))


def test_tied_weights_under_every_named_parameters_name():
    m = Tied()
    ids = torch.tensor([[0, 1, 2, 1, 9]])
    g, params = rlx.torch.import_module(m, (ids,))
    named = dict(m.named_parameters())  # torch deduplicates to the first name: emb.weight
    assert set(g.params()) <= set(named)
    for name, _ in m.named_parameters(remove_duplicate=False):
        assert name in params
        np.testing.assert_array_equal(params[name], m.emb.weight.detach().numpy())
    got, _, _ = _grads(m, ids, list(named))
    np.testing.assert_allclose(got[1], m.emb.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], m.head.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    out = rlx.run(g, {"ids": ids.numpy()}, params)[0]  # the params dict feeds the graph as is
    np.testing.assert_allclose(out, m(ids).detach().numpy(), rtol=1e-5, atol=1e-6)
