"""Second order and vmap corners of the shape (narrow, concat, gather) and reduction (softmax) rules.

The first-order VJP / JVP / vmap checks of every op case live in test_ad_gradcheck.py and
test_ad_vmap.py; here: hvp against ``torch.autograd.functional.hvp`` (the rules emit ops that
have rules themselves), the vmap paths the op cases do not reach (indices batched alone, a
symbolic batch size) and symbolic shapes in the narrow VJP.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx


def _hvp(g: rlx.Graph, wrt: list[str], inputs: dict, params: dict, v: dict) -> list[np.ndarray]:
    h = rlx.hvp(g, wrt)
    rlx.verify(h)
    return rlx.run(h, {**inputs, "d_output": np.array(1.0), **{f"t_{k}": a for k, a in v.items()}}, params)


@pytest.mark.parametrize("axis", [0, -1])
def test_hvp_through_softmax_matches_torch(axis):
    rng = np.random.default_rng(0)
    xs, ws, r = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    v = rng.standard_normal((3, 4))
    g = rlx.Graph("sm")
    x, w = g.input("x", (3, 4), "f64"), g.param("w", (3, 4), "f64")
    y = g.softmax(x * w, axis=axis)
    g.set_outputs([g.sum(g.sin(y * 3.0) * g.constant(r))])
    outs = _hvp(g, ["w"], {"x": xs}, {"w": ws}, {"w": v})

    def f(wt):
        return (torch.sin(torch.softmax(torch.from_numpy(xs) * wt, dim=axis) * 3.0) * torch.from_numpy(r)).sum()

    loss, hv = torch.autograd.functional.hvp(f, torch.from_numpy(ws), torch.from_numpy(v))
    np.testing.assert_allclose(outs[0], loss.item(), rtol=1e-12)
    np.testing.assert_allclose(outs[-1], hv.numpy(), rtol=1e-9, atol=1e-12)


def test_hvp_through_narrow_concat_gather_matches_torch():
    """Second order through narrow (concat of zeros), concat (narrow) and gather (gather_backward, whose
    own rules give gather again); repeated and negative indices accumulate."""
    rng = np.random.default_rng(1)
    ws, v = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    idx = np.array([[4, 0], [-1, 4]], np.int64)
    g = rlx.Graph("ncg")
    w = g.param("w", (3, 5), "f64")
    i = g.input("i", (2, 2), "i64")
    cat = g.concat([g.narrow(w, 1, 1, 2), g.reshape(g.gather(w, i, axis=1), new_shape=[3, 4])], axis=1)
    mid = g.narrow(cat, 0, 1, 1)
    g.set_outputs([g.sum(g.sin(cat) * cat) + g.sum(mid * mid * mid)])
    outs = _hvp(g, ["w"], {"i": idx}, {"w": ws}, {"w": v})

    def f(wt):
        gat = torch.index_select(wt, 1, torch.from_numpy(idx.ravel() % 5)).reshape(3, 4)
        c = torch.cat([wt[:, 1:3], gat], dim=1)
        return (torch.sin(c) * c).sum() + (c[1:2] ** 3).sum()

    loss, hv = torch.autograd.functional.hvp(f, torch.from_numpy(ws), torch.from_numpy(v))
    np.testing.assert_allclose(outs[0], loss.item(), rtol=1e-12)
    np.testing.assert_allclose(outs[-1], hv.numpy(), rtol=1e-9, atol=1e-12)


def test_third_order_through_gather():
    """grad of grad of grad: gather -> gather_backward -> gather -> gather_backward."""
    g = rlx.Graph("g3")
    t = g.input("t", (4,), "f64")
    i = g.input("i", (3,), "i64")
    g.set_outputs([g.sum(g.sin(g.gather(t, i)))])
    d1 = rlx.grad(g, ["t"])
    d2 = rlx.grad(_sum_of(d1, lambda h, v: h.sin(v)), ["t"], seed="d_output2")
    d3 = rlx.grad(_sum_of(d2, lambda h, v: h.sin(v)), ["t"], seed="d_output3")
    ts, idx, one = np.array([0.3, -1.2, 0.8, 2.0]), np.array([2, 0, -2]), np.array(1.0)
    (third,) = rlx.run(d3, {"t": ts, "i": idx, "d_output": one, "d_output2": one, "d_output3": one})
    tt = torch.from_numpy(ts).requires_grad_()
    (g1,) = torch.autograd.grad(torch.sin(tt[torch.from_numpy(idx)]).sum(), tt, create_graph=True)
    (g2,) = torch.autograd.grad(torch.sin(g1).sum(), tt, create_graph=True)
    (g3,) = torch.autograd.grad(torch.sin(g2).sum(), tt)
    np.testing.assert_allclose(third, g3.numpy(), rtol=1e-10, atol=1e-12)


def _sum_of(g: rlx.Graph, fn) -> rlx.Graph:
    """``g`` with its single output ``o`` replaced by ``sum(fn(o))`` (a scalar loss for the next grad)."""
    out = rlx.Graph(g.name + "_s")
    for node in g.nodes:
        out._push(node)
    out.set_outputs([out.sum(fn(out, out.value(g.output_ids[0])))])
    return out


# --------------------------------------------------------------------------------- vmap
def _loop(g: rlx.Graph, feeds: list[dict]) -> list[np.ndarray]:
    per = [rlx.run(g, f) for f in feeds]
    return [np.stack([p[k] for p in per]) for k in range(len(per[0]))]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_vmap_gather_with_only_indices_batched(axis):
    rng = np.random.default_rng(2)
    ts = rng.standard_normal((3, 4, 5))
    n = ts.shape[axis]
    idx = np.stack([rng.integers(-n, n, size=(2, 3)) for _ in range(4)])
    g = rlx.Graph("gi")
    t, i = g.input("t", ts.shape, "f64"), g.input("i", (2, 3), "i64")
    g.set_outputs([g.gather(t, i, axis=axis)])
    vg = rlx.vmap(g, {"i": 0}, batch_size=4)
    rlx.verify(vg)
    (got,) = rlx.run(vg, {"t": ts, "i": idx})
    (want,) = _loop(g, [{"t": ts, "i": idx[k]} for k in range(4)])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dy_batched", [False, True])
def test_vmap_gather_backward_with_batched_indices(dy_batched):
    rng = np.random.default_rng(3)
    table, axis = (2, 5, 3), 1
    idx = np.stack([rng.integers(-5, 5, size=(4,)) for _ in range(3)])  # repeats accumulate
    dys = rng.standard_normal((3, 2, 4, 3))
    g = rlx.Graph("gb")
    dy, i = g.input("dy", (2, 4, 3), "f64"), g.input("i", (4,), "i64")
    g.set_outputs([g.gather_backward(dy, i, axis=axis, table_shape=table)])
    vg = rlx.vmap(g, {"i": 0, "dy": 0} if dy_batched else {"i": 0}, batch_size=3)
    rlx.verify(vg)
    (got,) = rlx.run(vg, {"dy": dys if dy_batched else dys[0], "i": idx})
    (want,) = _loop(g, [{"dy": dys[k] if dy_batched else dys[0], "i": idx[k]} for k in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_vmap_symbolic_batch_gather_concat_narrow_softmax():
    """A symbolic batch size through every rule of this file, both gather operands batched."""
    rng = np.random.default_rng(4)
    g = rlx.Graph("sym")
    t, i, s = g.input("t", (4, 3), "f64"), g.input("i", (2,), "i64"), g.input("s", (4, 1), "f64")
    y = g.softmax(g.concat([g.gather(t, i, axis=1), s, g.narrow(t, 1, 1, 2)], axis=1), axis=0)
    g.set_outputs([y])
    vg = rlx.vmap(g, {"t": 0, "i": 0})
    rlx.verify(vg)
    assert isinstance(vg.outputs[0].shape[0], str)
    ts, idx, ss = rng.standard_normal((5, 4, 3)), rng.integers(-3, 3, size=(5, 2)), rng.standard_normal((4, 1))
    (got,) = rlx.run(vg, {"t": ts, "i": idx, "s": ss})
    (want,) = _loop(g, [{"t": ts[k], "i": idx[k], "s": ss} for k in range(5)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# -------------------------------------------------------------------- symbolic shapes
@pytest.mark.parametrize("axis", [0, 1])
def test_narrow_vjp_with_symbolic_dims(axis):
    """A symbolic narrowed axis takes the gather_backward path; a symbolic other axis the zero-pad path."""
    g = rlx.Graph("nar")
    x = g.input("x", ("n", 5) if axis == 1 else ("n", 3), "f64")
    g.set_outputs([g.sum(g.sin(g.narrow(x, axis, 1, 2)))])
    b = rlx.grad(g, ["x"])
    rlx.verify(b)
    xs = np.random.default_rng(5).standard_normal((4, 5) if axis == 1 else (4, 3))
    (dx,) = rlx.run(b, {"x": xs, "d_output": np.array(1.0)})
    want = np.zeros_like(xs)
    sl = (slice(None), slice(1, 3)) if axis == 1 else (slice(1, 3),)
    want[sl] = np.cos(xs[sl])
    np.testing.assert_allclose(dx, want, rtol=1e-14)


def test_softmax_vjp_of_masked_row_is_finite():
    """-inf logits get probability 0 and gradient 0; the rest of the row is the plain softmax VJP."""
    g = rlx.Graph("mask")
    x = g.input("x", (1, 3), "f64")
    g.set_outputs([g.sum(g.softmax(x) * g.constant(np.array([[1.0, 2.0, 3.0]])))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": np.array([[0.0, -np.inf, 1.0]]), "d_output": np.array(1.0)})
    xt = torch.tensor([[0.0, -np.inf, 1.0]], dtype=torch.float64, requires_grad=True)
    (torch.softmax(xt, -1) * torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12)
