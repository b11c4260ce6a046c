"""Shared check for the torch reader tests: import, run with rlx.run and compiled numpy, compare with torch."""

from __future__ import annotations

import numpy as np
import torch

import rlx
import rlx.torch


class Fn(torch.nn.Module):
    """A module calling ``fn`` on its inputs (one export per test: tuple outputs check several ops at once)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _x(*shape: int, scale: float = 3.0, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).float()


def run_both(module: torch.nn.Module, *args: torch.Tensor) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(rlx.run outputs, optimize -> plan -> compile(numpy) outputs) of ``module`` imported on ``args``."""
    g, params = rlx.torch.import_module(module, args)
    inputs = dict(zip(g.inputs(), [a.numpy() for a in args]))
    ref = rlx.run(g, inputs=inputs, params=params)
    opt, _ = rlx.optimize(g)
    exe = rlx.compile(rlx.plan(opt), backend="numpy")
    return ref, exe.run(inputs=inputs, params=params)


def check(module: torch.nn.Module, *args: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Both rlx paths equal torch eager: same dtype and shape, NaN where torch has NaN, values within tolerance."""
    with torch.no_grad():
        want = module(*args)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for got in run_both(module, *args):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            b = b.resolve_conj().resolve_neg().numpy()
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
            if b.dtype.kind in "fc":
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
            else:
                np.testing.assert_array_equal(a, b)
