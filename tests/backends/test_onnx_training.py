"""ONNX training-domain ops (``ai.onnx.preview.training``) through rlx.onnx.import_model.

``Gradient`` is computed by rlx's own autodiff on the imported graph; torch.autograd on the
same formula is the oracle. The optimizers (Adagrad, Momentum, Adam) are checked against the
shipped node cases and onnx's reference evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

RNG = np.random.default_rng(0)
F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializer=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.preview.training", 1)])


def test_gradient_of_a_non_scalar_y_with_a_fixed_z_and_a_weight():
    """y = tanh(x @ w) * z: Gradient wrt x and w (z held fixed) is d sum(y) / d(x, w)."""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    z = RNG.standard_normal((3, 2)).astype(np.float32)
    w = RNG.standard_normal((4, 2)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Mul", ["t", "z"], ["y"]),
             helper.make_node("Gradient", ["x", "w", "z"], ["dx", "dw"], domain="ai.onnx.preview.training",
                              xs=["x", "w"], zs=["z"], y="y")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [3, 4]), helper.make_tensor_value_info("z", F32, [3, 2])],
                   [helper.make_tensor_value_info(n, F32, None) for n in ("y", "dx", "dw")],
                   [helper.make_tensor("w", F32, [4, 2], w.reshape(-1))])
    g, params = import_model(model)
    y, dx, dw = rlx.run(g, {"x": x, "z": z}, params)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.tanh(tx @ tw) * torch.tensor(z)
    ty.sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_cuts_at_an_intermediate_x_and_gives_zeros_where_y_does_not_depend():
    """xs may name an intermediate value (differentiated as if it were an input); an x that y
    does not read gets a zero gradient."""
    a = RNG.standard_normal(5).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    nodes = [helper.make_node("Exp", ["a"], ["e"]), helper.make_node("Mul", ["e", "e"], ["y"]),
             helper.make_node("Gradient", ["e", "b"], ["de", "db"], domain="ai.onnx.preview.training",
                              xs=["e", "b"], y="y")]
    model = _model(nodes, [helper.make_tensor_value_info(n, F32, [5]) for n in ("a", "b")],
                   [helper.make_tensor_value_info(n, F32, [5]) for n in ("de", "db")])
    g, params = import_model(model)
    de, db = rlx.run(g, {"a": a, "b": b}, params)
    np.testing.assert_allclose(de, 2 * np.exp(a), rtol=1e-6)  # d(e*e)/de, e = exp(a)
    np.testing.assert_array_equal(db, np.zeros(5, np.float32))


def test_empty_axis_fed_for_a_named_dim():
    """A named dim is a symbol ranging over sizes >= 1; fed an empty axis, the model runs with the
    fed shape (import_runnable imports it with that shape)."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, axes=[0])]
    model = helper.make_model(helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F32, ["n", 3])],
                                                [helper.make_tensor_value_info("s", F32, [3])]),
                              opset_imports=[helper.make_opsetid("", 11)])
    run = rlx.onnx.import_runnable(model)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(run.run({"x": x})[0], x.sum(0), rtol=1e-6)
    (got,) = run.run({"x": np.zeros((0, 3), np.float32)})
    np.testing.assert_array_equal(got, np.zeros(3, np.float32))
    assert not run.shape_specialized  # only the empty feed took the fed-shape path


@pytest.mark.parametrize("name", ["test_adagrad", "test_adagrad_multiple", "test_adam", "test_adam_multiple", "test_momentum",
                                  "test_momentum_multiple", "test_nesterov_momentum"])
def test_shipped_optimizer_cases(name):
    from rlx.frontends.onnx import conformance

    (case,) = conformance.load_cases(f"^{name}$")
    result = conformance.run_case(case)
    assert result.status == "passed", result.reason


@pytest.mark.parametrize(("op", "attrs", "k"), [
    ("Adagrad", {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01}, 3),
    ("Momentum", {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.02}, 3),
    ("Momentum", {"alpha": 0.8, "beta": 0.3, "mode": "standard", "norm_coefficient": 0.0}, 3),
    ("Adam", {"alpha": 0.85, "beta": 0.95, "epsilon": 1e-4, "norm_coefficient": 0.01, "norm_coefficient_post": 0.05}, 4),
])
@pytest.mark.parametrize("step", [0, 3])
def test_optimizer_step_matches_onnx_reference(op, attrs, k, step):
    """One update of two tensors, the step count fed at run time (T = 0: no bias correction / beta 1);
    the accumulators (the third and fourth groups) are non-negative, as squared-gradient sums are."""
    from onnx.reference import ReferenceEvaluator

    shapes = [(3, 4), (5,)]
    names = [f"{role}{i}" for role in "xgvh"[:k] for i in range(2)]
    outs = [f"{role}{i}_new" for role in "xvh"[:k - 1] for i in range(2)]
    inputs = [helper.make_tensor_value_info("r", F32, []), helper.make_tensor_value_info("t", TensorProto.INT64, [])]
    inputs += [helper.make_tensor_value_info(n, F32, list(shapes[int(n[-1])])) for n in names]
    node = helper.make_node(op, ["r", "t", *names], outs, domain="ai.onnx.preview.training", **attrs)
    model = _model([node], inputs, [helper.make_tensor_value_info(n, F32, None) for n in outs])
    feed = {"r": np.array(0.1, np.float32), "t": np.array(step, np.int64)}
    feed.update({n: (np.abs(RNG.standard_normal(shapes[int(n[-1])])) if n[0] in "vh" else
                     RNG.standard_normal(shapes[int(n[-1])])).astype(np.float32) for n in names})
    want = ReferenceEvaluator(model).run(None, feed)
    g, params = import_model(model)
    got = rlx.run(g, feed, params)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
