"""3-D convolution and pooling and adaptive max pooling with indices, imported from torch (built from rlx's
2-D ops and gathers); torch eager is the oracle, on rlx.run, compiled numpy and the other backends."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import Fn, _x, check  # noqa: E402

TOL = {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("kw", [
    {"stride": (2, 1, 2), "padding": (1, 0, 2), "dilation": (1, 2, 1)},
    {"padding": "same", "dilation": (2, 1, 1)},  # even effective kernel: torch pads the extra at the end
    {"groups": 2, "stride": 2},
])
def test_conv3d(kw):
    x, w, b = _x(2, 4, 7, 6, 8), _x(6, 4 // kw.get("groups", 1), 3, 2, 3, seed=1), _x(6, seed=2)
    check(Fn(lambda x, w, b: F.conv3d(x, w, b, **kw)), x, w, b, **TOL)


@pytest.mark.parametrize("kw", [
    {"stride": (2, 1, 3), "padding": (1, 0, 1), "output_padding": (1, 0, 2)},
    {"groups": 2, "dilation": (2, 1, 1), "stride": 2, "output_padding": 1},
])
def test_conv_transpose3d(kw):
    x, w, b = _x(2, 4, 3, 5, 4), _x(4, 3, 3, 2, 3, seed=1), _x(3 * kw.get("groups", 1), seed=2)
    check(Fn(lambda x, w, b: F.conv_transpose3d(x, w, b, **kw)), x, w, b, **TOL)


def test_unbatched_and_integer_conv3d():
    check(Fn(lambda x, w: F.conv3d(x, w, padding=1)), _x(2, 4, 5, 3), _x(3, 2, 3, 3, 3, seed=1), **TOL)
    gen = torch.Generator().manual_seed(0)
    xi, wi = torch.randint(-5, 5, (1, 2, 4, 4, 4), generator=gen), torch.randint(-3, 3, (2, 2, 2, 2, 2), generator=gen)
    check(Fn(lambda x, w: F.conv_transpose3d(x, w, stride=2)), xi, wi)


@pytest.mark.parametrize("kw", [
    {"kernel_size": (2, 3, 2), "stride": (1, 2, 2), "padding": (1, 1, 0), "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 2, "stride": 1, "padding": 1, "divisor_override": 3},
    {"kernel_size": (2, 3, 4), "stride": (1, 2, 2), "padding": (0, 1, 2), "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
])
def test_avg_pool3d(kw):
    check(Fn(lambda x: F.avg_pool3d(x, **kw)), _x(2, 3, 5, 6, 7), **TOL)


def test_adaptive_avg_pool3d():
    check(Fn(lambda x: F.adaptive_avg_pool3d(x, (3, None, 2))), _x(2, 3, 7, 5, 5), **TOL)


@pytest.mark.parametrize("fn, shape, size", [
    (F.adaptive_max_pool1d, (2, 3, 10), 4),
    (F.adaptive_max_pool2d, (2, 3, 7, 5), (3, 2)),
    (F.adaptive_max_pool2d, (3, 7, 5), (4, None)),
    (F.adaptive_max_pool3d, (1, 2, 5, 4, 6), (2, 3, 4)),
])
def test_adaptive_max_pool_indices(fn, shape, size):
    x = _x(*shape)
    x.view(-1)[::7] = x.view(-1)[1]  # ties: torch keeps the first
    check(Fn(lambda x: fn(x, size, return_indices=True)), x)


def test_adaptive_max_pool_nan_takes_the_last_nan():
    x = _x(1, 2, 6, 6)
    x[0, 0, 0, 0] = x[0, 0, 1, 1] = x[0, 1, 5, 5] = float("nan")
    check(Fn(lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True)), x)


@pytest.mark.parametrize("backend", [pytest.param("jax", marks=pytest.mark.slow), "torch", "onnxruntime"])
def test_other_backends(backend):
    module = Fn(lambda x, w, v: (F.conv3d(x, w, stride=(1, 2, 1), padding=1), F.conv_transpose3d(x, v, stride=2),
                                 F.avg_pool3d(x, 2), F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True)[1]))
    args = (_x(1, 2, 4, 5, 6), _x(3, 2, 3, 3, 2, seed=1), _x(2, 2, 2, 3, 2, seed=2))
    g, params = rlx.torch.import_module(module, args)
    exe = rlx.compile(rlx.plan(rlx.optimize(g)[0]), backend=backend)
    got = exe.run(inputs=dict(zip(g.inputs(), [a.numpy() for a in args])), params=params)
    with torch.no_grad():
        want = module(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), **TOL)


@pytest.mark.parametrize("fn, shape, k, out", [
    (F.fractional_max_pool2d, (2, 3, 9, 11), (3, 2), (4, 5)),
    (F.fractional_max_pool3d, (1, 2, 7, 6, 8), (2, 3, 2), (3, 2, 4)),
    (F.fractional_max_pool2d, (3, 9, 9), 3, (2, 1)),  # unbatched; one window on an axis
])
def test_fractional_max_pool_with_given_samples(fn, shape, k, out):
    spatial = 3 if fn is F.fractional_max_pool3d else 2
    batch = shape[0] if len(shape) == spatial + 2 else 1
    samples = torch.rand(batch, shape[-spatial - 1], spatial, generator=torch.Generator().manual_seed(0))
    check(Fn(lambda x, s: fn(x, k, output_size=out, return_indices=True, _random_samples=s)), _x(*shape), samples)


def test_symbolic_batch():
    from torch.export import Dim

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv3d(2, 4, 3, padding=1, stride=(2, 1, 1))
            self.up = torch.nn.ConvTranspose3d(4, 2, 2, stride=2)

        def forward(self, x):
            return F.avg_pool3d(self.up(self.conv(x)), 2), F.adaptive_max_pool2d(x[:, :, 0], (2, 3), return_indices=True)[1]

    torch.manual_seed(0)
    module = Net().eval()
    g, params = rlx.torch.import_module(module, (_x(2, 2, 4, 5, 6),), dynamic_shapes=({0: Dim("batch")},))
    x = _x(3, 2, 4, 5, 6, seed=1)
    got = rlx.run(g, inputs={"x": x.numpy()}, params=params)
    with torch.no_grad():
        want = module(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.numpy(), **TOL)
