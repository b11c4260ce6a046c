"""The autodiff API: grad_with_loss / grad / jvp / prepare_graph_for_ad contracts and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.ir import opdef as opdef_module

ONE = np.array(1.0)


def _mlp_relu():
    g = rlx.Graph("mlp")
    x = g.input("x", (2, 4), "f64")
    w1 = g.param("w1", (4, 3), "f64")
    b1 = g.param("b1", (3,), "f64")
    g.set_outputs([g.sum(g.relu(g.matmul(x, w1) + b1))])
    return g


def _feed(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((2, 4))}, {"w1": rng.standard_normal((4, 3)), "b1": rng.standard_normal(3)}


def _torch_grads(inputs, params):
    w1 = torch.from_numpy(params["w1"]).requires_grad_()
    b1 = torch.from_numpy(params["b1"]).requires_grad_()
    loss = torch.relu(torch.from_numpy(inputs["x"]) @ w1 + b1).sum()
    loss.backward()
    return loss.item(), w1.grad.numpy(), b1.grad.numpy()


# ------------------------------------------------------------------------------ contract
def test_grad_with_loss_conformance_shape():
    """docs/pipeline.md#reference-graphs: outputs [loss, dw1 [4,3], db1 [3]], seed d_output of shape []."""
    bwd = rlx.grad_with_loss(_mlp_relu(), wrt=["w1", "b1"])
    rlx.verify(bwd)
    assert bwd.stage is rlx.GraphStage.MIR
    assert [tuple(o.shape) for o in bwd.outputs] == [(), (4, 3), (3,)]
    assert set(bwd.inputs()) == {"x", "d_output"} and set(bwd.params()) == {"w1", "b1"}
    assert bwd.inputs()["d_output"].shape == ()
    inputs, params = _feed()
    loss, dw1, db1 = rlx.run(bwd, {**inputs, "d_output": ONE}, params)
    want = _torch_grads(inputs, params)
    np.testing.assert_allclose(loss, want[0], rtol=1e-12)
    np.testing.assert_allclose(dw1, want[1], rtol=1e-12)
    np.testing.assert_allclose(db1, want[2], rtol=1e-12)


def test_seed_scales_the_gradients_and_has_the_loss_shape():
    g = rlx.Graph("vec_loss")
    x = g.input("x", (3,), "f64")
    g.set_outputs([g.sin(x) * 2.0])
    bwd = rlx.grad_with_loss(g, ["x"])
    assert bwd.inputs()["d_output"].shape == (3,)
    xs, seed = np.array([0.1, 0.2, 0.3]), np.array([1.0, -2.0, 0.5])
    _, dx = rlx.run(bwd, {"x": xs, "d_output": seed})
    np.testing.assert_allclose(dx, 2 * np.cos(xs) * seed, rtol=1e-14)


def test_grad_has_no_loss_output_and_is_pruned():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    w = g.param("w", (3,), "f64")
    g.set_outputs([g.sum(x * w) + g.sum(g.exp(x))])
    full = rlx.grad_with_loss(g, ["w"])
    only = rlx.grad(g, ["w"])
    assert len(only.outputs) == 1 and len(full.outputs) == 2
    # dL/dw = x: neither exp(x) nor x*w is needed without the loss output
    assert not any(n.op == "activation" for n in only.nodes)
    assert len(only) < len(full)
    assert set(only.params()) == {"w"} and set(only.inputs()) == {"x", "d_output"}  # the feed contract is kept
    (dw,) = rlx.run(only, {"x": np.array([1.0, 2.0, 3.0]), "d_output": ONE}, {"w": np.zeros(3)})
    np.testing.assert_allclose(dw, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("how", ["name", "value", "id", "mixed"])
def test_wrt_by_name_value_or_id(how):
    g = _mlp_relu()
    w1, b1 = g.params()["w1"], g.params()["b1"]
    wrt = {"name": ["w1", "b1"], "value": [w1, b1], "id": [w1.id, b1.id], "mixed": ["w1", b1.id]}[how]
    inputs, params = _feed(1)
    _, dw1, db1 = rlx.run(rlx.grad_with_loss(g, wrt), {**inputs, "d_output": ONE}, params)
    want = _torch_grads(inputs, params)
    np.testing.assert_allclose(dw1, want[1], rtol=1e-12)
    np.testing.assert_allclose(db1, want[2], rtol=1e-12)


def test_wrt_ids_do_not_drift_across_unfusing():
    """docs/pipeline.md#autodiff: unfusing inserts nodes; w2 / b2 declared after a fused op must still be found."""
    g = rlx.Graph("two_layer")
    x = g.input("x", (2, 3), "f64")
    w1, b1 = g.param("w1", (3, 4), "f64"), g.param("b1", (4,), "f64")
    h = g.fused_matmul_bias_act(x, w1, b1, activation="gelu")
    w2, b2 = g.param("w2", (4, 2), "f64"), g.param("b2", (2,), "f64")
    y = g.fused_matmul_bias_act(h, w2, b2, activation="gelu")
    g.set_outputs([g.sum(y)])
    prepared, id_map = rlx.prepare_graph_for_ad(g, with_map=True)
    assert not any(rlx.get_op(n.op).level == "fused" for n in prepared.nodes)
    assert id_map[w2.id] != w2.id  # ids did shift ...
    bwd = rlx.grad_with_loss(g, [w2, b2.id, "w1"])  # ... and the references still resolve
    assert [tuple(o.shape) for o in bwd.outputs] == [(), (4, 2), (2,), (3, 4)]
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((2, 3))
    shapes = {"w1": (3, 4), "b1": (4,), "w2": (4, 2), "b2": (2,)}
    params = {k: rng.standard_normal(s) for k, s in shapes.items()}
    _, dw2, db2, dw1 = rlx.run(bwd, {"x": xs, "d_output": ONE}, params)
    tp = {k: torch.from_numpy(v).requires_grad_() for k, v in params.items()}
    gelu = torch.nn.functional.gelu
    gelu(gelu(torch.from_numpy(xs) @ tp["w1"] + tp["b1"]) @ tp["w2"] + tp["b2"]).sum().backward()
    np.testing.assert_allclose(dw2, tp["w2"].grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(db2, tp["b2"].grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(dw1, tp["w1"].grad.numpy(), rtol=1e-10)


def test_gradient_wrt_an_intermediate_value():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    h = g.sin(x)
    g.set_outputs([g.sum(h * h)])
    _, dh, dx = rlx.run(rlx.grad_with_loss(g, [h, "x"]), {"x": np.array([0.1, 0.5, 1.0]), "d_output": ONE})
    np.testing.assert_allclose(dh, 2 * np.sin([0.1, 0.5, 1.0]))
    np.testing.assert_allclose(dx, 2 * np.sin([0.1, 0.5, 1.0]) * np.cos([0.1, 0.5, 1.0]))


def test_mixed_precision_gradient_takes_the_leaf_dtype():
    g = rlx.Graph("mixed")
    x = g.input("x", (3,), "f64")
    w = g.param("w", (3,), "f32")
    g.set_outputs([g.sum(x * w)])  # promoted to f64
    bwd = rlx.grad(g, ["w", "x"])
    assert [o.dtype for o in bwd.outputs] == [rlx.f32, rlx.f64]
    dw, dx = rlx.run(bwd, {"x": np.array([1.0, 2.0, 3.0]), "d_output": ONE}, {"w": np.ones(3, np.float32)})
    assert dw.dtype == np.float32
    np.testing.assert_allclose(dw, [1, 2, 3])
    np.testing.assert_allclose(dx, [1, 1, 1])


def test_backward_graph_round_trips_through_text_and_json():
    bwd = rlx.grad_with_loss(_mlp_relu(), ["w1", "b1"])
    assert rlx.parse(str(bwd)) == bwd
    back = rlx.from_json(rlx.to_json(bwd))
    inputs, params = _feed(3)
    for a, b in zip(rlx.run(back, {**inputs, "d_output": ONE}, params), rlx.run(bwd, {**inputs, "d_output": ONE}, params)):
        np.testing.assert_array_equal(a, b)


def test_hir_module_is_lowered_for_autodiff():
    m = rlx.define("layer", lambda h: h.linear(h.input("x", (2, 4), "f64"), h.param("w", (4, 3), "f64"),
                                               bias=h.param("b", (3,), "f64"), activation="gelu"))
    g = rlx.Graph("loss")
    bwd = rlx.grad(_with_sum(m.lower_to_mir(policy=rlx.FusionPolicy.for_autodiff()), g), ["w"])
    assert [tuple(o.shape) for o in bwd.outputs] == [(4, 3)]

    class Duck:
        """Anything with lower_to_mir(policy) is accepted; the policy is for_autodiff()."""

        seen = None

        def lower_to_mir(self, policy):
            Duck.seen = policy
            return _with_sum(m.lower_to_mir(policy=policy), rlx.Graph("x"))

    out = rlx.grad_with_loss(Duck(), ["w", "b"])
    assert Duck.seen == rlx.FusionPolicy.for_autodiff()
    assert [tuple(o.shape) for o in out.outputs] == [(), (4, 3), (3,)]


def _with_sum(mir: rlx.Graph, _unused: rlx.Graph) -> rlx.Graph:
    out = rlx.Graph(mir.name)
    for node in mir.nodes:
        out._push(node)
    out.set_outputs([out.sum(out.value(mir.output_ids[0]))])
    return out


# ------------------------------------------------------------------------------ prepare
def test_prepare_lowers_dot_general_and_legalizes_reductions():
    g = rlx.Graph("p")
    a = g.input("a", (2, 3, 4), "f64")
    b = g.input("b", (2, 4, 5), "f64")
    d = g.dot_general(a, b, lhs_contracting=[2], rhs_contracting=[1], lhs_batch=[0], rhs_batch=[0])
    s = g.sum(g.exp(d), axes=[0, 2])
    g.set_outputs([s])
    p, id_map = rlx.prepare_graph_for_ad(g, with_map=True)
    rlx.verify(p)
    ops = [n.op for n in p.nodes]
    assert "dot_general" not in ops and "matmul" in ops
    assert all(len(n.attrs["axes"]) <= 1 for n in p.nodes if n.op == "reduce")
    assert id_map[s.id] == p.output_ids[0]
    rng = np.random.default_rng(4)
    feed = {"a": rng.standard_normal((2, 3, 4)), "b": rng.standard_normal((2, 4, 5))}
    np.testing.assert_allclose(rlx.run(p, feed)[0], rlx.run(g, feed)[0], rtol=1e-12)


def test_prepare_accepts_a_graph_without_anything_to_do():
    g = rlx.Graph("plain")
    x = g.input("x", (2, 3), "f64")
    g.set_outputs([g.sum(g.tanh(x), axes=[1])])
    assert rlx.prepare_graph_for_ad(g) == g


# ------------------------------------------------------------------------------ errors
def test_lir_is_refused():
    class FakeLir:
        stage = "lir"
        graph = _mlp_relu()
        plan = None

    for obj in (FakeLir(), rlx.Graph("l", stage="lir")):
        with pytest.raises(rlx.AutodiffError, match="LIR"):
            rlx.grad_with_loss(obj, ["w1"])
        with pytest.raises(rlx.AutodiffError, match="LIR"):
            rlx.jvp(obj, ["w1"])


def test_several_outputs_are_refused():
    g = rlx.Graph("two")
    x = g.input("x", (2,), "f64")
    g.set_outputs([g.sum(x), g.sum(x * x)])
    with pytest.raises(rlx.AutodiffError, match="exactly one output"):
        rlx.grad_with_loss(g, ["x"])
    with pytest.raises(rlx.AutodiffError, match="exactly one output"):
        rlx.hvp(g, ["x"])
    assert len(rlx.jvp(g, ["x"]).outputs) == 4  # forward mode is fine with several outputs


def test_wrt_without_gradient_is_an_error_naming_it():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    y = g.input("y", (3,), "f64")
    unused = g.param("unused", (3,), "f64")
    del unused
    mask = g.gt(y, 0.0)  # y reaches the loss only through a comparison
    g.set_outputs([g.sum(g.where(mask, x, 0.0))])
    with pytest.raises(rlx.AutodiffError, match="'unused'"):
        rlx.grad_with_loss(g, ["x", "unused"])
    with pytest.raises(rlx.AutodiffError, match="'y'"):
        rlx.grad_with_loss(g, ["y"])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": np.ones(3), "y": np.array([1.0, -1.0, 2.0]), "d_output": ONE}, {"unused": np.ones(3)})
    np.testing.assert_array_equal(dx, [1.0, 0.0, 1.0])


@pytest.mark.parametrize("wrt", ["nope", 99, "i"])
def test_bad_wrt(wrt):
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    i = g.input("i", (3,), "i32")
    g.set_outputs([g.sum(x * g.cast(i, to="f64"))])
    with pytest.raises(rlx.AutodiffError):
        rlx.grad_with_loss(g, [wrt])


def test_value_of_another_graph_is_refused():
    other = rlx.Graph("o")
    v = other.sin(other.input("z", (1,), "f64"))
    with pytest.raises(rlx.AutodiffError, match="does not belong"):
        rlx.grad(_mlp_relu(), [v])


@pytest.fixture
def ruleless_op():
    """A temporary op with a kernel and no rules (removed again after the test)."""
    name = "ad_test_ruleless_square"
    op = rlx.OpDef(name=name, family="test", arity=1, operands=("x",), infer=lambda ins, attrs: ins[0],
                   kernel=lambda args, attrs, out: args[0] * args[0], doc="x*x without rules (autodiff test)")
    rlx.register_op(op)
    try:
        yield name
    finally:
        opdef_module._REGISTRY.pop(name, None)
        opdef_module._METHODS.pop(name, None)
        if name in rlx.Graph.__dict__:
            delattr(rlx.Graph, name)


def test_op_without_rules_is_named(ruleless_op):
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    g.set_outputs([g.sum(g.apply(ruleless_op, x))])
    with pytest.raises(rlx.AutodiffError, match=f"{ruleless_op}.*no vjp rule"):
        rlx.grad_with_loss(g, ["x"])
    with pytest.raises(rlx.AutodiffError, match=f"{ruleless_op}.*no jvp rule"):
        rlx.jvp(g, ["x"])
    with pytest.raises(rlx.AutodiffError, match=f"{ruleless_op}.*no batching rule"):
        rlx.vmap(g, {"x": 0})


def test_ruleless_op_off_the_differentiable_path_is_fine(ruleless_op):
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    c = g.input("c", (3,), "f64")
    g.set_outputs([g.sum(x * g.apply(ruleless_op, c))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": np.ones(3), "c": np.array([1.0, 2.0, 3.0]), "d_output": ONE})
    np.testing.assert_array_equal(dx, [1.0, 4.0, 9.0])


def test_seed_name_collision():
    g = rlx.Graph("f")
    x = g.input("d_output", (3,), "f64")
    g.set_outputs([g.sum(x)])
    with pytest.raises(rlx.AutodiffError, match="d_output"):
        rlx.grad(g, ["d_output"])
    assert rlx.grad(g, ["d_output"], seed="seed").inputs()["seed"].shape == ()


# ------------------------------------------------------------------------------ forward mode
def test_jvp_layout_and_zero_tangents():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    c = g.input("c", (2,), "f64")
    g.set_outputs([g.sin(x), g.exp(c), g.sum(x)])
    j = rlx.jvp(g, ["x"])
    assert set(j.inputs()) == {"x", "c", "t_x"}
    assert [tuple(o.shape) for o in j.outputs] == [(3,), (2,), (), (3,), (2,), ()]
    xs, cs, tx = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0]), np.array([1.0, -1.0, 2.0])
    _, _, _, ts, te, tsm = rlx.run(j, {"x": xs, "c": cs, "t_x": tx})
    np.testing.assert_allclose(ts, np.cos(xs) * tx)
    np.testing.assert_array_equal(te, np.zeros(2))  # exp(c) does not depend on x
    np.testing.assert_allclose(tsm, tx.sum())


def test_jvp_errors():
    g = rlx.Graph("f")
    x = g.input("x", (3,), "f64")
    h = g.sin(x)
    g.input("t_x", (3,), "f64")
    g.set_outputs([h])
    with pytest.raises(rlx.AutodiffError, match="t_x"):
        rlx.jvp(g, ["x"])
    with pytest.raises(rlx.AutodiffError, match="not an input or param"):
        rlx.jvp(g, [h])


# ------------------------------------------------------------------------------ torch parity
TORCH_ACT = {
    "gelu": torch.nn.functional.gelu, "gelu_approx": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "silu": torch.nn.functional.silu, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
    "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "neg": torch.neg, "abs": torch.abs, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "atan": torch.atan,
}


@pytest.mark.parametrize("act", sorted(TORCH_ACT))
def test_activation_gradients_match_torch(act):
    rng = np.random.default_rng(6)
    xs = np.abs(rng.standard_normal(9)) + 0.1 if act in ("log", "sqrt", "rsqrt") else rng.standard_normal(9)
    if act not in ("log", "sqrt", "rsqrt"):
        xs[0] = 0.0  # the derivative conventions at 0 agree with torch's (relu' = 0, abs' = 0)
    g = rlx.Graph("a")
    x = g.input("x", (9,), "f64")
    g.set_outputs([g.sum(getattr(g, act)(x) * g.constant(np.arange(9.0)))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": xs, "d_output": ONE})
    t = torch.from_numpy(xs).requires_grad_()
    (TORCH_ACT[act](t) * torch.arange(9.0, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(dx, t.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_sqrt_gradient_at_zero_is_zero_and_finite_to_second_order():
    g = rlx.Graph("s")
    x = g.input("x", (3,), "f64")
    g.set_outputs([g.sum(g.sqrt(x))])
    (dx,) = rlx.run(rlx.grad(g, ["x"]), {"x": np.array([0.0, 1.0, 4.0]), "d_output": ONE})
    np.testing.assert_allclose(dx, [0.0, 0.5, 0.25])
    h = rlx.hvp(g, ["x"])
    out = rlx.run(h, {"x": np.array([0.0, 1.0, 4.0]), "d_output": ONE, "t_x": np.ones(3)})[-1]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[1:], [-0.25, -0.25 / 8])


# ------------------------------------------------------------------------------ symbolic dims (complex: test_ad_complex.py)
def _symbolic_mlp():
    g = rlx.Graph("sym")
    x = g.input("x", ("n", 3), "f64")
    w = g.param("w", (3, 2), "f64")
    b = g.param("b", (2,), "f64")
    y = g.gelu(g.matmul(x, w) + b)
    g.set_outputs([g.mean(g.sum(y * y, axes=[1]))])
    return g


def _torch_symbolic_loss(xs, bs):
    return lambda w: (torch.nn.functional.gelu(torch.from_numpy(xs) @ w + torch.from_numpy(bs)) ** 2).sum(1).mean()


@pytest.mark.parametrize("n", [1, 4])
def test_symbolic_dims_grad_hvp_vmap(n):
    g = _symbolic_mlp()
    rng = np.random.default_rng(n)
    xs, ws, bs = rng.standard_normal((n, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    bwd = rlx.grad_with_loss(g, ["w", "x"])
    assert [tuple(o.shape) for o in bwd.outputs] == [(), (3, 2), ("n", 3)]
    _, dw, dx = rlx.run(bwd, {"x": xs, "d_output": ONE}, {"w": ws, "b": bs})
    tw, tx = torch.from_numpy(ws).requires_grad_(), torch.from_numpy(xs).requires_grad_()
    (torch.nn.functional.gelu(tx @ tw + torch.from_numpy(bs)) ** 2).sum(1).mean().backward()
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    v = rng.standard_normal((3, 2))
    hv = rlx.run(rlx.hvp(g, ["w"]), {"x": xs, "d_output": ONE, "t_w": v}, {"w": ws, "b": bs})[-1]
    _, want = torch.autograd.functional.hvp(_torch_symbolic_loss(xs, bs), torch.from_numpy(ws), torch.from_numpy(v))
    np.testing.assert_allclose(hv, want.numpy(), rtol=1e-9, atol=1e-12)
    vg = rlx.vmap(g, {"x": 0})
    batch = rng.standard_normal((3, n, 3))
    (out,) = rlx.run(vg, {"x": batch}, {"w": ws, "b": bs})
    loop = [rlx.run(g, {"x": batch[k]}, {"w": ws, "b": bs})[0] for k in range(3)]
    np.testing.assert_allclose(out, np.stack(loop), rtol=1e-12)


def test_hir_module_refuses_ambiguous_ids_but_takes_values():
    holder = {}

    def build(h):
        w = h.param("w", (4, 3), "f64")
        holder["w"] = w
        return h.linear(h.input("x", (2, 4), "f64"), w, activation="tanh")

    m = rlx.define("layer", build)

    class Module:
        def lower_to_mir(self, policy):
            return _with_sum(m.lower_to_mir(policy=policy), rlx.Graph("x"))

    with pytest.raises(rlx.AutodiffError, match="ambiguous"):
        rlx.grad(Module(), [1])
    (dw,) = rlx.run(rlx.grad(Module(), [holder["w"]]), {"x": np.ones((2, 4)), "d_output": ONE}, {"w": np.zeros((4, 3))})
    np.testing.assert_allclose(dw, np.full((4, 3), 2.0))


def test_every_activation_kind_has_a_derivative():
    from rlx.ops.elementwise import ACTIVATIONS

    for kind in ACTIVATIONS:
        g = rlx.Graph("k")
        x = g.input("x", (2,), "f64")
        g.set_outputs([g.sum(g.activation(x, kind=kind))])
        rlx.verify(rlx.hvp(g, ["x"]))
