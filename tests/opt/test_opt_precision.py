"""Automatic mixed precision: which dtype every node computes in under each policy, what never
changes (leaves, non-float values, explicit casts, f64 islands, control-flow bodies), and the
numbers against torch computing the same mixed-precision model."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.opt import AMP, POLICIES, auto_mixed_precision, op_class

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
FEED = {"x": RNG.standard_normal((6, 16)).astype(np.float32), "ids": np.array([1, 0, 3, 2, 2, 1], np.int32)}
PARAMS = {"w1": (RNG.standard_normal((16, 32)) / 4).astype(np.float32), "w2": (RNG.standard_normal((32, 16)) / 6).astype(np.float32),
          "emb": RNG.standard_normal((4, 16)).astype(np.float32), "gamma": np.ones(16, np.float32), "beta": np.zeros(16, np.float32)}


def _model() -> rlx.Graph:
    """emb[ids] + x → layer_norm → matmul → gelu → matmul → softmax, plus a mask, an f64 branch and an explicit cast."""
    g = rlx.Graph("amp")
    x, ids = g.input("x", [6, 16], "f32"), g.input("ids", [6], "i32")
    p = {k: g.param(k, list(v.shape), "f32") for k, v in PARAMS.items()}
    h = g.layer_norm(x + g.gather(p["emb"], ids, axis=0), p["gamma"], p["beta"])
    logits = g.matmul(g.gelu(g.matmul(h, p["w1"])), p["w2"])
    probs = g.softmax(logits, axis=-1)
    mask = g.gt(probs, 0.05)
    wide = g.cast(logits, to="f64")
    g.set_outputs([probs, mask, g.sum(wide * wide), g.cast(h, to="bf16")])
    return g


def _run(g: rlx.Graph) -> list[np.ndarray]:
    return rlx.run(g, FEED, PARAMS)


def _dtypes(g: rlx.Graph, op: str) -> set[str]:
    return {str(n.dtype) for n in g.nodes if n.op == op}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_keeps_the_interface_and_verifies(policy):
    g = _model()
    r = auto_mixed_precision(g, policy)
    rlx.verify(r.graph)
    assert [o.type for o in r.graph.outputs] == [o.type for o in g.outputs]
    assert {k: v.type for k, v in {**r.graph.inputs(), **r.graph.params()}.items()} == \
        {k: v.type for k, v in {**g.inputs(), **g.params()}.items()}
    for op in ("gather", "layer_norm", "matmul", "activation", "softmax"):  # each computes in its class's dtype
        assert _dtypes(r.graph, op) == {str(POLICIES[policy].get(op_class(op), rlx.DType.F32))}, op
    assert all(n.dtype == rlx.DType.I32 for n in r.graph.nodes if n.name == "ids")
    np.testing.assert_allclose(_run(r.graph)[0], _run(g)[0], rtol=3e-2, atol=3e-3)


def test_conservative_policy_computes_reductions_in_f32_and_the_rest_in_f16():
    r = auto_mixed_precision(_model(), "auto_mixed_conservative")
    assert _dtypes(r.graph, "matmul") == {"f16"}
    assert _dtypes(r.graph, "activation") == {"f16"}
    assert _dtypes(r.graph, "layer_norm") == {"f32"} and _dtypes(r.graph, "softmax") == {"f32"}
    assert _dtypes(r.graph, "compare") == {"bool"}  # upstream typed it f16
    compare = next(n for n in r.graph.nodes if n.op == "compare")
    assert {str(r.graph.nodes[i].dtype) for i in compare.inputs} == {"f16"}
    # the explicit casts keep their targets; the f64 island stays f64
    assert {"f64", "bf16"} <= {str(n.attrs["to"]) for n in r.graph.nodes if n.op == "cast"}
    assert _dtypes(r.graph, "reduce") == {"f64"}


def test_bf16_and_per_op_policies():
    assert _dtypes(auto_mixed_precision(_model(), "auto_mixed_bf16").graph, "matmul") == {"bf16"}
    only = auto_mixed_precision(_model(), {"matmul": "f16"}).graph
    assert _dtypes(only, "matmul") == {"f16"}
    assert _dtypes(only, "activation") == {"f32"} and _dtypes(only, "layer_norm") == {"f32"}
    by_class = auto_mixed_precision(_model(), {"reduction": "bf16"}).graph
    assert _dtypes(by_class, "softmax") == {"bf16"} and _dtypes(by_class, "matmul") == {"f32"}


def test_one_cast_per_value_and_dtype():
    r = auto_mixed_precision(_model(), "auto_mixed")
    casts = [(n.inputs[0], n.attrs["to"]) for n in r.graph.nodes if n.op == "cast"]
    assert len(casts) == len(set(casts))


def test_mixed_precision_numbers_match_torch_computing_the_same_model():
    """Conservative policy: f16 matmuls and gelu, f32 layer_norm / softmax — torch does the same casts."""
    g = _model()
    opt, _ = rlx.optimize(g, precision="auto_mixed_conservative")
    got = _run(opt)
    t = {k: torch.from_numpy(v) for k, v in {**FEED, **PARAMS}.items()}
    h = torch.nn.functional.layer_norm(t["x"] + t["emb"][t["ids"].long()], (16,), t["gamma"], t["beta"])
    a = torch.nn.functional.gelu(h.half() @ t["w1"].half())
    logits = a @ t["w2"].half()
    probs = torch.softmax(logits.float(), -1)
    np.testing.assert_allclose(got[0], probs.numpy(), rtol=2e-3, atol=2e-4)
    np.testing.assert_array_equal(got[1], (probs.half() > 0.05).numpy())
    np.testing.assert_allclose(got[2], (logits.double() ** 2).sum().item(), rtol=2e-3)  # f16 logits, f64 sum
    full = _run(g)  # and the whole model stays close to the f32 original
    np.testing.assert_allclose(got[0], full[0], rtol=2e-2, atol=2e-3)


def test_control_flow_bodies_keep_their_types():
    g = rlx.Graph("cf")
    x, p = g.input("x", [3], "f32"), g.input("p", [], "bool")
    branch = rlx.Graph("b")
    bx = branch.input("x", [3], "f32")
    branch.set_outputs([branch.exp(bx)])
    other = rlx.Graph("o")
    ox = other.input("x", [3], "f32")
    other.set_outputs([ox * 2.0])
    g.set_outputs([g.if_([p, g.exp(x)], then_branch=branch, else_branch=other)])
    r = auto_mixed_precision(g, "auto_mixed")
    rlx.verify(r.graph)
    assert _dtypes(r.graph, "if_") == {"f32"}
    feed = {"x": np.array([0.5, -1.0, 2.0], np.float32), "p": np.array(True)}
    np.testing.assert_allclose(rlx.run(r.graph, feed)[0], np.exp(np.exp(feed["x"].astype(np.float16).astype(np.float32))), rtol=2e-3)


def test_amp_pass_in_a_pipeline_and_bad_policies():
    g = _model()
    result = rlx.opt.run_passes(g, [AMP.with_options(policy="auto_mixed"), rlx.opt.DCE], check=True)
    assert result.log[0].stats["retyped"] > 0
    assert op_class("matmul") == "compute" and op_class("softmax") == "reduction" and op_class("my_custom_op") == "f32"
    with pytest.raises(rlx.RlxError, match="unknown precision policy"):
        auto_mixed_precision(g, "fast")
    with pytest.raises(rlx.RlxError, match="not a float"):
        auto_mixed_precision(g, {"matmul": "i8"})
    with pytest.raises(rlx.RlxError, match="boundary"):
        auto_mixed_precision(g, {"boundary": "f16"})
    with pytest.raises(rlx.RlxError, match="not both"):
        rlx.optimize(g, passes=[rlx.opt.DCE], precision="auto_mixed")


def test_ops_not_marked_float16_safe_stay_f32():
    """dense_solve, fft, attention and scan declare no precision class: every policy keeps them f32
    (their operands are cast back to f32 where a neighbour went to f16), while matmul lowers."""
    g = rlx.Graph("f32_islands")
    a, b = g.input("a", [4, 4], "f32"), g.input("b", [4, 2], "f32")
    q = g.input("q", [1, 2, 3, 4], "f32")
    body = rlx.Graph("body")
    c, x = body.input("c", [2], "f32"), body.input("x", [2], "f32")
    body.set_outputs([c * 0.5 + x])
    eye = g.constant(np.eye(4, dtype=np.float32) * 4.0)
    solved = g.dense_solve(g.matmul(a, a) + eye, b)
    spec = g.fft(g.cast(b, to="c64"), axis=0)
    att = g.attention(q, q, q, num_heads=2, head_dim=4)
    scanned = g.scan(g.input("c0", [2], "f32"), g.input("xs", [3, 2], "f32"), body=body, length=3, num_xs=1)
    g.set_outputs([solved, spec, att, scanned])
    for policy in ("auto_mixed", "always_f16", "auto_mixed_bf16"):
        r = auto_mixed_precision(g, policy)
        rlx.verify(r.graph)
        assert _dtypes(r.graph, "matmul") == {str(POLICIES[policy]["compute"])}
        for op in ("dense_solve", "attention", "scan"):
            assert _dtypes(r.graph, op) == {"f32"}, (policy, op)
        assert _dtypes(r.graph, "fft") == {"c64"}
        assert all(op_class(op) == "f32" for op in ("dense_solve", "fft", "attention", "scan", "batched_dense_solve"))


def test_every_op_declares_a_known_precision_class():
    from rlx.ir.opdef import PRECISION_CLASSES

    classes = {op.name: op.precision for op in rlx.all_ops()}
    assert set(classes.values()) <= set(PRECISION_CLASSES)
    assert {classes[n] for n in ("input", "param", "constant")} == {"boundary"}
    with pytest.raises(rlx.RlxError, match="precision must be one of"):
        rlx.OpDef(name="bad", family="test", arity=1, infer=lambda i, a: i[0], kernel=None, doc="", precision="fast")
