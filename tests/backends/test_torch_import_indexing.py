"""torch import of advanced indexing, indexed writes, gather, pads and norms: small modules, torch as the oracle."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn  # noqa: E402
from rlx.frontends.torch.importer import TorchImportError  # noqa: E402


def _parity(fn, *args, atol=1e-6, grad=False):
    module = Fn(fn)
    g, params = rlx.torch.import_module(module, args)
    rlx.verify(g)
    feed = {name: a.numpy() for name, a in zip(g.inputs(), args)}
    want = fn(*args)
    got = rlx.run(g, feed, params)[0]
    assert got.shape == tuple(want.shape) and got.dtype == want.numpy().dtype
    np.testing.assert_allclose(got, want.numpy(), atol=atol, rtol=0)
    if grad:  # d/dx sum(out * r) against torch.autograd (x is the first argument)
        r = torch.randn(want.shape, generator=torch.Generator().manual_seed(3), dtype=want.dtype)
        g.set_outputs([g.sum(g.outputs[0] * g.constant(r.numpy()))])
        dx = rlx.run(rlx.grad(g, [next(iter(g.inputs()))]), {**feed, "d_output": np.array(1.0, np.float32)}, params)[0]
        x = args[0].clone().requires_grad_(True)
        (fn(x, *args[1:]) * r).sum().backward()
        np.testing.assert_allclose(dx, x.grad.numpy(), atol=1e-5, rtol=0)
    return g


X = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0))
I = torch.tensor([[0], [3], [-1]])
J = torch.tensor([4, 0])


@pytest.mark.parametrize("fn", [
    lambda x, i, j: x[i, j],
    lambda x, i, j: x[i, :, j],
    lambda x, i, j: x[:, j, i.clamp(0, 3)],
    lambda x, i, j: x[None, i, ..., j],
], ids=["adjacent", "slice_between", "leading_slice", "new_axis_ellipsis"])
def test_index_with_several_tensors(fn):
    g = _parity(fn, X, I, J, grad=True)
    assert any(n.op == "advanced_index" for n in g.nodes)


def test_index_put_accumulate_and_overwrite():
    v = torch.randn(3, 2, 6, generator=torch.Generator().manual_seed(1))
    _parity(lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True), X, I, J, v, grad=True)
    _parity(lambda x, j, v: x.index_put((j,), v[:2, :1]), X, J - 1, v)


def test_in_place_writes_become_functional():
    def write(x, y):
        x = x.clone()
        x[:, 1:3] = y[:, :2]       # slice_scatter
        x[:, 4] = y[:, 2]          # select_scatter
        x[..., ::2] += 1.0         # slice with a step
        return x

    _parity(write, X, torch.randn(4, 3, 6, generator=torch.Generator().manual_seed(2)), grad=True)


def test_mask_assignment():
    def masked(x, m):
        x = x.clone()
        x[m] = -2.0
        return x

    _parity(masked, X, X[:, :, 0] > 0)


def test_gather():
    idx = torch.tensor([[[0, 2], [1, 1], [4, 0]]]).expand(4, 3, 2)
    _parity(lambda x, i: torch.gather(x, 1, i), X, idx, grad=True)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes(mode):
    x = X.reshape(2, 2, 5, 6)
    _parity(lambda x: F.pad(x, (2, 1, -1, 3), mode=mode) if mode == "constant" else F.pad(x, (2, 1, 1, 3), mode=mode), x, grad=True)
    _parity(lambda x: F.pad(x, (2, 3), mode=mode, **({"value": 1.5} if mode == "constant" else {})), X, grad=True)


@pytest.mark.parametrize("ord_", [2, 1, 3.0, float("inf"), 0])
def test_vector_norm(ord_):
    _parity(lambda x: torch.linalg.vector_norm(x, ord=ord_, dim=(-1, 0), keepdim=ord_ == 1), X, atol=1e-5, grad=ord_ != 0)


def test_normalize():
    _parity(lambda x: F.normalize(x, dim=-1), X, grad=True)


def test_boolean_index_is_refused_with_the_reason():
    class Masked(torch.nn.Module):
        def forward(self, x, i):
            return x[i]

    with pytest.raises(TorchImportError, match=r"boolean mask|data-dependent|nonzero|export"):
        rlx.torch.import_module(Masked(), (X, X[:, 0, 0] > 0))


def test_out_of_range_index_raises():
    g, params = rlx.torch.import_module(Fn(lambda x, i, j: x[i, j]), (X, I, J))
    with pytest.raises(rlx.RlxError, match="out of range"):
        rlx.run(g, dict(zip(g.inputs(), [X.numpy(), np.array([[0], [9], [1]]), J.numpy()])), params)


def test_module_paths_and_output_names_survive():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 6)

        def forward(self, x):
            return torch.relu(self.lin(x))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return {"hidden": x, "pooled": x.mean(1)}

    batch = torch.export.Dim("batch")
    g, _ = rlx.torch.import_module(Net().eval(), (X[:, 0],), {"x": {0: batch}})
    labels = {n.prov.label for n in g.nodes if n.prov is not None}
    assert {"layers.0.lin", "layers.1.lin", "layers.0", "layers.1"} <= labels
    assert [o.name for o in g.outputs] == ["hidden", "pooled"]
    assert g.inputs()["x"].shape[0] == "batch"
    from rlx.hir.inspect import inspect

    assert '"layers.1.lin"' in inspect(g)
