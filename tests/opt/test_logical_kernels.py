"""Logical kernels with a primitive body: group_norm and resize_nearest_2x lower to ops a
minimal claim set has, and the lowered graphs match torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.opt.legalize import legalize_for_backend
from rlx.opt.lower import rewrite_for_backend

PRIMITIVES = {"input", "param", "constant", "reshape", "expand", "reduce", "binary", "activation"}


def _legal(g):
    res = rewrite_for_backend(g, PRIMITIVES, strict=True)
    rlx.verify(res.graph)
    assert legalize_for_backend(res.graph, PRIMITIVES) == []
    assert {n.op for n in res.graph.nodes} <= PRIMITIVES
    return res.graph


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 3), 3), ((1, 4, 7), 2), ((3, 8, 2, 2, 2), 8)])
def test_group_norm_lowers_to_primitives(shape, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    gamma, beta = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    g = rlx.Graph("gn")
    g.set_outputs([g.group_norm(g.input("x", shape), g.param("gamma", (shape[1],)), g.param("beta", (shape[1],)),
                                num_groups=groups, eps=1e-5)])
    low = _legal(g)
    (got,) = rlx.run(low, inputs={"x": x}, params={"gamma": gamma, "beta": beta})
    want = torch.nn.functional.group_norm(torch.from_numpy(x).double(), groups, torch.from_numpy(gamma).double(),
                                          torch.from_numpy(beta).double(), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_resize_nearest_2x_lowers_to_primitives():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    g = rlx.Graph("up")
    g.set_outputs([g.resize_nearest_2x(g.input("x", x.shape))])
    low = _legal(g)
    (got,) = rlx.run(low, inputs={"x": x})
    want = torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=2, mode="nearest").numpy()
    np.testing.assert_array_equal(got, want)


def test_claimed_kernels_are_left_alone():
    g = rlx.Graph("up")
    g.set_outputs([g.resize_nearest_2x(g.input("x", (1, 1, 2, 2)))])
    res = rewrite_for_backend(g, PRIMITIVES | {"resize_nearest_2x"})
    assert [n.op for n in res.graph.nodes] == ["input", "resize_nearest_2x"]
