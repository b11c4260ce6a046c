"""Modules, policies, docs/pipeline.md#reference-graphs, provenance and typed errors of the HIR layer."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hir_cases import randn

import rlx
from rlx.hir import HirGraph, lower_to_mir
from rlx.hir.inspect import op_kind


def section9(h):
    """x[2,8] -> Linear(+bias, gelu) -> SwiGLU (8 -> 16 -> 8) -> ResidualRmsNorm(residual x)."""
    x = h.input("x", (2, 8))
    y = h.linear(x, h.param("w", (8, 8)), bias=h.param("b", (8,)), activation="gelu")
    f = h.swiglu(y, h.param("up", (8, 16)), h.param("gate", (8, 16)), h.param("down", (16, 8)))
    return h.residual_rms_norm(f, x, h.param("gamma", (8,)), h.param("beta", (8,)))


SECTION9_FEED = (
    {"x": randn(2, 8, seed=1)},
    {"w": randn(8, 8, seed=2) * 0.3, "b": randn(8, seed=3), "up": randn(8, 16, seed=4) * 0.3, "gate": randn(8, 16, seed=5) * 0.3,
     "down": randn(16, 8, seed=6) * 0.3, "gamma": randn(8, seed=7), "beta": randn(8, seed=8)},
)


def test_api_example():
    m = rlx.define("layer", lambda h: h.linear(h.input("x", (2, 128)), h.param("w", (128, 128)),
                                               bias=h.param("b", (128,)), activation="gelu"))
    assert m.stage is rlx.GraphStage.HIR
    assert m.fusion_policy is rlx.FusionPolicy.DIRECT
    mir = m.lower_to_mir(policy=rlx.FusionPolicy.DIRECT)
    assert isinstance(mir, rlx.Graph) and mir.stage is rlx.GraphStage.MIR
    assert [n.op for n in mir.nodes] == ["input", "param", "param", "fused_matmul_bias_act"]
    assert rlx.FusionPolicy.for_autodiff() is rlx.FusionPolicy.FUSABLE
    assert {rlx.FusionPolicy.DIRECT, rlx.FusionPolicy.FUSABLE} == set(rlx.FusionPolicy)


def test_section9_node_counts():
    m = rlx.define("s9", section9)
    direct, fusable = m.lower_to_mir(), m.lower_to_mir(rlx.FusionPolicy.FUSABLE)
    assert len(direct) == 14
    assert len(fusable) == 18
    assert Counter(op_kind(n) for n in direct.nodes) == Counter({
        "param": 7, "matmul": 2, "concat": 1, "fused_matmul_bias_act": 1, "fused_residual_rms_norm": 1,
        "fused_swiglu": 1, "input": 1})
    assert Counter(op_kind(n) for n in fusable.nodes) == Counter({
        "param": 7, "input": 1, "matmul": 4, "add": 2, "gelu": 1, "silu": 1, "mul": 1, "rms_norm": 1})
    assert len(m.lower_for_autodiff()) == 18
    a = rlx.run(direct, *SECTION9_FEED)[0]
    b = rlx.run(fusable, *SECTION9_FEED)[0]
    c = rlx.run(m.graph, *SECTION9_FEED)[0]
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-6)


def test_parsed_hir_graph_lowers_the_same():
    m = rlx.define("s9", section9)
    back = rlx.parse(str(m.graph))
    assert back.stage is rlx.GraphStage.HIR and back == m.graph
    for policy in ("direct", "fusable"):
        assert lower_to_mir(back, policy) == m.lower_to_mir(policy)
    assert rlx.GraphModule.from_graph(back).lower_to_mir() == m.lower_to_mir()


def test_policy_coercion_and_module_policy():
    m = rlx.define("s9", section9)
    assert len(m.lower_to_mir("fusable")) == 18
    assert len(m.lower_to_mir("FUSABLE")) == 18
    f = m.with_fusion_policy(rlx.FusionPolicy.FUSABLE)
    assert f.fusion_policy is rlx.FusionPolicy.FUSABLE and len(f.lower_to_mir()) == 18
    assert len(rlx.define("s9", section9, policy="fusable").lower_to_mir()) == 18
    with pytest.raises(rlx.RlxError, match="fusion policy"):
        m.lower_to_mir("greedy")


def test_module_stages():
    m = rlx.define("s9", section9)
    assert m.pipeline_stage is rlx.AdPipelineStage.HIR_BUILD
    low = m.lower()
    assert low.stage is rlx.GraphStage.MIR and low.pipeline_stage is rlx.AdPipelineStage.MIR_LOWERED
    assert low.lower() is low and low.lower_to_mir() is low.graph
    with pytest.raises(rlx.RlxError, match="not HIR"):
        low.with_fusion_policy("fusable")
    assert rlx.GraphModule is rlx.HirModule
    assert rlx.GraphModule.mir("m").stage is rlx.GraphStage.MIR
    hm = rlx.GraphModule.hir("built")
    x = hm.input("x", (2, 3))
    hm.set_outputs([hm.graph.gelu(x)])
    assert len(hm.lower_to_mir()) == 2

    class FakeLir:
        graph = low.graph
        plan = object()

    lm = rlx.GraphModule.from_lir(FakeLir())
    assert lm.stage is rlx.GraphStage.LIR and lm.lower_to_mir() is low.graph and lm.pipeline_stage is None
    with pytest.raises(rlx.RlxError, match="LIR"):
        lm.input("y", (1,))


def test_ad_pipeline_stage():
    order = [rlx.AdPipelineStage.HIR_BUILD, rlx.AdPipelineStage.MIR_LOWERED, rlx.AdPipelineStage.MIR_PREPARED,
             rlx.AdPipelineStage.MIR_BACKWARD]
    assert list(rlx.AdPipelineStage) == order
    assert [s.graph_stage for s in order] == [rlx.GraphStage.HIR] + [rlx.GraphStage.MIR] * 3
    assert order[0].next is order[1] and order[-1].next is None


# ---------------------------------------------------------------------------- provenance


def _attn_model(h):
    x = h.input("x", (2, 8))
    y = h.block("ffn", lambda h: h.swiglu(x, h.param("up", (8, 16)), h.param("gate", (8, 16)), h.param("down", (16, 8))))
    with h.block("out"):
        z = h.linear(y, h.param("w", (8, 8)), name="proj")
        z = z * 0.5  # operators inside a block are labelled too
    return h.rms_norm(z, h.param("g", (8,)), h.param("b", (8,)))


def test_block_labels_on_hir_nodes():
    g = rlx.define("m", _attn_model).graph
    labels = {n.id: n.name for n in g.nodes if n.op not in ("input", "param")}
    ops = {n.id: n.op for n in g.nodes}
    assert [labels[i] for i in sorted(labels)] == ["ffn", "out/proj", None, "out", "rms_norm"]
    assert [ops[i] for i in sorted(labels)] == ["swiglu", "linear", "constant", "binary", "rms_norm"]


def test_nested_blocks():
    def build(h):
        x = h.input("x", (2, 4))
        return h.block("layer0", lambda h: h.block("attn", lambda h: h.gelu(x)))

    g = rlx.define("n", build).graph
    assert g.node(g.output_ids[0]).name == "layer0/attn"


@pytest.mark.parametrize("policy", ["direct", "fusable"])
def test_provenance_survives_lowering(policy):
    m = rlx.define("m", _attn_model)
    hir = m.graph
    mir = m.lower_to_mir(policy)
    swiglu_id = next(n.id for n in hir.nodes if n.op == "swiglu")
    ffn = [n for n in mir.nodes if n.prov.hir == swiglu_id]
    assert ffn and all(n.prov.label == "ffn" and n.name == "ffn" for n in ffn)
    assert {n.prov.label for n in mir.nodes if n.prov.hir == hir.node(hir.output_ids[0]).id} == {"rms_norm"}
    for node in mir.nodes:
        assert node.prov is not None and node.prov.hir is not None
        src = hir.node(node.prov.hir)
        if src.op in ("input", "param"):
            assert node.prov.label is None and node.name == src.attrs["name"]
    # visible in both dumps, and kept by the text form
    assert f'hir=h{swiglu_id}, "ffn"' in rlx.hir.inspect(mir)
    assert '"label": "out/proj"' in str(mir)
    back = rlx.parse(str(mir))
    assert back == mir and [n.prov for n in back.nodes] == [n.prov for n in mir.nodes]


def test_provenance_survives_later_passes():
    opt = pytest.importorskip("rlx.opt")

    def build(h):
        out = _attn_model(h)
        h.block("dead", lambda h: h.gelu(out))  # unused: DCE removes it and rebuilds the graph
        return out

    mir = rlx.define("m", build).lower_to_mir("fusable")
    result = opt.run_passes(mir, [opt.CSE, opt.DCE])
    out = result.graph
    assert len(out) < len(mir)
    before = {n.id: n for n in mir.nodes}
    for old, new in result.id_map.items():
        a, b = before[old], out.node(new)
        assert (b.prov.hir, b.prov.label, b.name) == (a.prov.hir, a.prov.label, a.name)
    assert {"ffn", "out/proj", "out", "rms_norm"} <= {n.prov.label for n in out.nodes}


def test_lowering_with_wrong_declared_shape_is_caught():
    g = rlx.Graph("bad", rlx.GraphStage.HIR)
    x = g.input("x", (2, 4))
    w = g.param("w", (4, 3))
    g.append("linear", [x, w], {"has_bias": False}, type=rlx.TensorType((2, 3), "f32"))
    g.append("linear", [x, w], {"has_bias": False}, type=rlx.TensorType((2, 5), "f32"), check=False)
    g.set_outputs([3])
    with pytest.raises(rlx.VerifyError, match="differs"):
        lower_to_mir(g)


def test_lower_rejects_non_hir_graphs():
    g = rlx.Graph("m")
    g.set_outputs([g.gelu(g.input("x", (2,)))])
    with pytest.raises(rlx.RlxError, match="HIR graph"):
        lower_to_mir(g)


def test_hir_ops_are_rejected_in_mir_graphs():
    g = rlx.Graph("m")
    x, w = g.input("x", (2, 4)), g.param("w", (4, 3))
    g.set_outputs([g.apply("linear", x, w)])
    with pytest.raises(rlx.VerifyError, match="HIR op 'linear'"):
        rlx.verify(g)


# -------------------------------------------------------------------------------- errors


def _expect(build, *needles):
    with pytest.raises(rlx.LowerError) as info:
        rlx.define("err", build)
    assert isinstance(info.value, rlx.ShapeError)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    return info.value


def test_wrong_arity_names_block_and_label():
    def build(h):
        x = h.input("x", (2, 8))
        return h.swiglu(x, h.param("up", (8, 16)), h.param("gate", (8, 16)))

    err = _expect(build, "swiglu", "swiglu_ffn", "expects 4 operands")
    assert err.block == "swiglu" and err.label == "swiglu_ffn"


def test_wrong_arity_inside_block_names_block_label():
    def build(h):
        x = h.input("x", (2, 8))
        return h.block("mlp", lambda h: h.residual_rms_norm(x, x, h.param("g", (8,))))

    err = _expect(build, "residual_rms_norm", "'mlp'")
    assert err.label == "mlp"


def test_missing_operand():
    def build(h):
        x = h.input("x", (2, 8))
        return h.block("proj", lambda h: h.linear(x, None))

    _expect(build, "linear", "'proj'", "missing operand 1 (w)")


def test_mismatched_shapes():
    def build(h):
        x = h.input("x", (2, 8))
        return h.residual_rms_norm(x, h.input("r", (2, 4)), h.param("g", (8,)), h.param("b", (8,)))

    _expect(build, "residual_rms_norm", "[2, 8]", "[2, 4]")


@pytest.mark.parametrize("bad", [
    lambda h, x: h.linear(x, h.param("w", (7, 3))),
    lambda h, x: h.linear(x, h.param("w", (8, 3)), bias=h.param("b", (4,))),
    lambda h, x: h.swiglu(x, h.param("u", (8, 4)), h.param("g", (8, 5)), h.param("d", (4, 8))),
    lambda h, x: h.shared_linear_pair(x, h.param("a", (8, 4)), h.param("c", (6, 4))),
    lambda h, x: h.depthwise_conv1d_causal(h.input("s", (1, 5, 3)), h.param("k", (3, 1, 1, 4)), h.input("p", (1, 2, 3)), kernel_size=4),
    lambda h, x: h.linear_fused(x, h.param("w", (8, 3)), h.param("b", (8,))),
])
def test_shape_errors_are_typed(bad):
    def build(h):
        return bad(h, h.input("x", (2, 8)))

    with pytest.raises(rlx.LowerError, match="HIR block"):
        rlx.define("err", build)


def test_llama_errors():
    arr_shapes = {"x": (1, 3, 16), "attn_norm": (16,), "attn_norm_b": (16,), "wq": (16, 16), "wk": (16, 8), "wv": (16, 8),
                  "wo": (16, 16), "cos": (4, 2), "sin": (4, 2), "ffn_norm": (16,), "ffn_norm_b": (16,), "w_gate": (16, 24),
                  "w_up": (16, 24), "w_down": (24, 16)}

    def build(kv, drop=0):
        def b(h):
            vals = [h.input(k, s) for k, s in arr_shapes.items()]
            return h.llama_decoder_block(*vals[: len(vals) - drop], num_heads=4, head_dim=4, num_kv_heads=kv)
        return b

    rlx.define("ok", build(2))
    _expect(build(3), "llama_decoder_block", "num_kv_heads")
    _expect(build(4), "llama_decoder_block", "wk")
    _expect(build(2, drop=1), "llama_decoder_block", "expects 14 operands")


def test_lower_checks_arity_of_unchecked_nodes():
    g = HirGraph("raw")
    x, w = g.input("x", (2, 4)), g.param("w", (4, 3))
    g.append("linear", [x, w], {"activation": None, "has_bias": True}, name="lin", type=rlx.TensorType((2, 3), "f32"), check=False)
    g.set_outputs([2])
    with pytest.raises(rlx.LowerError, match=r"'linear' \(label 'lin'\): wrong input count on h2: expected 3"):
        lower_to_mir(g)


def test_section9_fusable_optimizes_back_to_the_direct_graph():
    opt = pytest.importorskip("rlx.opt")
    if not hasattr(opt, "optimize"):
        pytest.skip("rlx.opt.optimize not available")
    m = rlx.define("s9", section9)
    result = opt.optimize(m.lower_to_mir("fusable"))
    optimized = result[0] if isinstance(result, tuple) else result
    direct = m.lower_to_mir()
    assert len(optimized) == 14
    assert Counter(op_kind(n) for n in optimized.nodes) == Counter(op_kind(n) for n in direct.nodes)
    hir_ids = {n.prov.hir for n in optimized.nodes}
    assert hir_ids == set(range(len(m.graph)))  # every HIR node still traceable after fusion
    np.testing.assert_allclose(rlx.run(optimized, *SECTION9_FEED)[0], rlx.run(direct, *SECTION9_FEED)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("policy", ["direct", "fusable"])
def test_symbolic_batch(policy):
    def build(h):
        x = h.input("x", ("batch", 6, 4))
        y = h.linear(x, h.param("w", (4, 4)), bias=h.param("b", (4,)), activation="silu")
        y = h.swiglu(y, h.param("up", (4, 8)), h.param("gate", (4, 8)), h.param("down", (8, 4)))
        y = h.residual_rms_norm(y, x, h.param("g", (4,)), h.param("beta", (4,)))
        return h.depthwise_conv1d_causal(y, h.param("k", (4, 1, 1, 3)), h.input("pad", ("batch", 2, 4)), kernel_size=3)

    m = rlx.define("sym", build)
    assert m.graph.outputs[0].shape == ("batch", 6, 4)
    mir = m.lower_to_mir(policy)
    assert mir.outputs[0].shape == ("batch", 6, 4)
    params = {"w": randn(4, 4, seed=1), "b": randn(4, seed=2), "up": randn(4, 8, seed=3), "gate": randn(4, 8, seed=4),
              "down": randn(8, 4, seed=5), "g": randn(4, seed=6), "beta": randn(4, seed=7), "k": randn(4, 1, 1, 3, seed=8)}
    for batch in (1, 3):
        inputs = {"x": randn(batch, 6, 4, seed=9), "pad": randn(batch, 2, 4, seed=10)}
        (got,) = rlx.run(mir, inputs, params)
        (ref,) = rlx.run(m.graph, inputs, params)
        assert got.shape == (batch, 6, 4)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_f64_blocks_keep_their_dtype():
    def build(h):
        x = h.input("x", (2, 4), "f64")
        return h.linear(x, h.param("w", (4, 3), "f64"), bias=h.param("b", (3,), "f64"), activation="gelu")

    m = rlx.define("f64", build)
    for policy in ("direct", "fusable"):
        assert m.lower_to_mir(policy).outputs[0].dtype is rlx.DType.F64
