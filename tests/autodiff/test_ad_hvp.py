"""``rlx.hvp`` (forward over reverse) against ``torch.autograd.functional.hvp`` in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from ops.cases_elementwise import POSITIVE_ONLY as POSITIVE
from ops.cases_elementwise import TORCH_ACT


def _run_hvp(h: rlx.Graph, inputs: dict, params: dict, v: dict) -> list[np.ndarray]:
    return rlx.run(h, {**inputs, "d_output": np.array(1.0), **{f"t_{k}": a for k, a in v.items()}}, params)


def _mlp(act: str):
    g = rlx.Graph(f"mlp_{act}")
    x = g.input("x", (5, 4), "f64")
    w1, b1 = g.param("w1", (4, 6), "f64"), g.param("b1", (6,), "f64")
    w2, b2 = g.param("w2", (6, 3), "f64"), g.param("b2", (3,), "f64")
    h = getattr(g, act)(g.matmul(x, w1) + b1)
    y = getattr(g, act)(g.matmul(h, w2) + b2)
    g.set_outputs([g.mean(y * y)])
    return g


@pytest.mark.parametrize("act", ["gelu", "tanh"])
def test_hvp_mlp_matches_torch(act):
    g = _mlp(act)
    names = ["w1", "b1", "w2", "b2"]
    h = rlx.hvp(g, names)
    rlx.verify(h)
    assert set(h.inputs()) == {"x", "d_output", "t_w1", "t_b1", "t_w2", "t_b2"}
    assert len(h.outputs) == 2 + 2 * len(names)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))
    params = {n: rng.standard_normal(tuple(g.params()[n].shape)) for n in names}
    params["b1"][0] = 0.0  # pre-activations exactly 0 where x rows meet a zero bias are fine too
    v = {n: rng.standard_normal(a.shape) for n, a in params.items()}
    outs = _run_hvp(h, {"x": x}, params, v)
    tact = {"gelu": torch.nn.functional.gelu, "tanh": torch.tanh}[act]

    def f(w1, b1, w2, b2):
        hid = tact(torch.from_numpy(x) @ w1 + b1)
        y = tact(hid @ w2 + b2)
        return (y * y).mean()

    primals = tuple(torch.from_numpy(params[n]) for n in names)
    loss, hv = torch.autograd.functional.hvp(f, primals, tuple(torch.from_numpy(v[n]) for n in names))
    np.testing.assert_allclose(outs[0], loss.item(), rtol=1e-12)
    k = len(names)
    got_hv = outs[2 + k:]
    for n, a, b in zip(names, got_hv, hv):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-9, atol=1e-12, err_msg=n)
    # <grad, v> output
    ps = [p.clone().requires_grad_() for p in primals]
    gr = torch.autograd.grad(f(*ps), ps)
    np.testing.assert_allclose(outs[1 + k], sum((a * torch.from_numpy(v[n])).sum().item() for a, n in zip(gr, names)), rtol=1e-10)


@pytest.mark.parametrize("act", sorted(TORCH_ACT))
def test_hvp_of_every_activation_matches_torch(act):
    g = rlx.Graph("a")
    x = g.input("x", (7,), "f64")
    w = g.param("w", (7,), "f64")
    g.set_outputs([g.sum(getattr(g, act)(x * w) * w)])
    rng = np.random.default_rng(1)
    xs = np.abs(rng.standard_normal(7)) + 0.2 if act in POSITIVE else rng.standard_normal(7)
    ws = np.abs(rng.standard_normal(7)) + 0.5 if act in POSITIVE else rng.standard_normal(7)
    if act in ("gelu", "gelu_approx", "silu", "tanh", "sin", "atan", "sigmoid"):
        xs[0] = 0.0  # second derivatives at 0 must be right too (gelu's Φ has a guard there)
        xs[1] = 1e-4
    v = rng.standard_normal(7)
    h = rlx.hvp(g, ["w"])
    outs = _run_hvp(h, {"x": xs}, {"w": ws}, {"w": v})
    fn = TORCH_ACT[act]
    _, hv = torch.autograd.functional.hvp(lambda w: (fn(torch.from_numpy(xs) * w) * w).sum(), torch.from_numpy(ws), torch.from_numpy(v))
    np.testing.assert_allclose(outs[-1], hv.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "pow"])
def test_hvp_of_binary_ops_matches_torch(op):
    g = rlx.Graph("b")
    a = g.input("a", (2, 3), "f64")
    b = g.input("b", (3,), "f64")
    g.set_outputs([g.sum(g.sin(getattr(g, op)(a, b)))])
    rng = np.random.default_rng(2)
    av, bv = np.abs(rng.standard_normal((2, 3))) + 0.5, rng.standard_normal(3)
    va, vb = rng.standard_normal((2, 3)), rng.standard_normal(3)
    h = rlx.hvp(g, ["a", "b"])
    outs = _run_hvp(h, {"a": av, "b": bv}, {}, {"a": va, "b": vb})
    tfn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
           "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin, "pow": torch.pow}[op]
    _, hv = torch.autograd.functional.hvp(lambda x, y: torch.sin(tfn(x, y)).sum(), (torch.from_numpy(av), torch.from_numpy(bv)),
                                          (torch.from_numpy(va), torch.from_numpy(vb)))
    np.testing.assert_allclose(outs[-2], hv[0].numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(outs[-1], hv[1].numpy(), rtol=1e-9, atol=1e-12)


def test_third_order_through_gelu():
    """grad of grad of grad: the rules' own ops have rules, to any order."""
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    g.set_outputs([g.sum(g.gelu(x))])
    d1 = rlx.grad(g, ["x"])  # first derivative
    d2 = rlx.grad(_sum_of(d1), ["x"], seed="d_output2")  # second
    d3 = rlx.grad(_sum_of(d2), ["x"], seed="d_output3")  # third
    xs = np.array([-1.3, 0.0, 0.7])
    one = np.array(1.0)
    (third,) = rlx.run(d3, {"x": xs, "d_output": one, "d_output2": one, "d_output3": one})
    t = torch.from_numpy(xs).requires_grad_()
    (g1,) = torch.autograd.grad(torch.nn.functional.gelu(t).sum(), t, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), t, create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), t)
    np.testing.assert_allclose(third, g3.numpy(), rtol=1e-8, atol=1e-12)


def _sum_of(g: rlx.Graph) -> rlx.Graph:
    """``g`` with its single output replaced by the sum of it (a scalar loss for the next grad)."""
    out = rlx.Graph(g.name + "_s")
    for node in g.nodes:
        out._push(node)
    out.set_outputs([out.sum(out.value(g.output_ids[0]))])
    return out
