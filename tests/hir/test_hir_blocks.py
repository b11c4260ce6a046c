"""Every HIR block: DIRECT and FUSABLE lowerings verify, follow docs/pipeline.md#hir-lowering and agree numerically."""

from __future__ import annotations

import numpy as np
import pytest
from hir_cases import all_cases

import rlx
from rlx.hir.inspect import op_kind
from rlx.ops.hir_blocks import MIR_BLOCKS

CASES = all_cases()
POLICIES = [rlx.FusionPolicy.DIRECT, rlx.FusionPolicy.FUSABLE]


def _emitted(g: rlx.Graph) -> tuple[str, ...]:
    return tuple(op_kind(n) for n in g.nodes if n.op not in ("input", "param"))


def test_every_hir_op_has_a_case():
    hir_ops = {op.name for op in rlx.all_ops() if op.level == "hir"}
    assert hir_ops, "no HIR block ops registered"
    covered = {c.op for c in CASES}
    required = hir_ops | set(MIR_BLOCKS) | {"mir"}
    assert not required - covered, f"HIR ops without a lowering case: {sorted(required - covered)}"


def test_every_attention_mask_kind_is_covered():
    kinds = set(rlx.get_op("attention").attrs["mask_kind"].choices)
    covered = {c.name for c in CASES if c.op == "attention"}
    assert kinds <= covered, sorted(kinds - covered)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hir_graph_verifies_and_infers_shapes(case):
    m = case.module()
    assert m.stage is rlx.GraphStage.HIR
    rlx.verify(m.graph)
    back = rlx.parse(str(m.graph))
    assert back == m.graph


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_lowering_follows_the_table(case, policy):
    m = case.module()
    mir = m.lower_to_mir(policy)
    assert mir.stage is rlx.GraphStage.MIR
    rlx.verify(mir)
    assert _emitted(mir) == (case.direct if policy is rlx.FusionPolicy.DIRECT else case.fusable)
    assert [o.type for o in mir.outputs] == [o.type for o in m.graph.outputs]
    assert rlx.parse(str(mir)) == mir


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_direct_and_fusable_compute_the_same(case):
    m = case.module()
    inputs, params = case.feed()
    direct = rlx.run(m.lower_to_mir(rlx.FusionPolicy.DIRECT), inputs, params)
    fusable = rlx.run(m.lower_to_mir(rlx.FusionPolicy.FUSABLE), inputs, params)
    on_hir = rlx.run(m.graph, inputs, params)  # HIR kernels run the DIRECT lowering
    assert len(direct) == len(fusable) == len(on_hir) == len(m.graph.outputs)
    for d, f, h, out in zip(direct, fusable, on_hir, m.graph.outputs):
        assert d.shape == tuple(out.shape) and d.dtype == out.dtype.numpy
        np.testing.assert_allclose(f, d, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h, d, rtol=1e-5, atol=1e-6)
    if case.oracle is not None:
        want = case.oracle(**case.arrays)
        want = list(want) if isinstance(want, tuple) else [want]
        for got, w in zip(direct, want):
            np.testing.assert_allclose(got, w, rtol=2e-4, atol=2e-5)


def test_llama_small_case_lowers_to_36_nodes():
    case = next(c for c in CASES if c.id == "llama_decoder_block-h2-kv1-sliding_window")
    for policy in POLICIES:  # the policy is ignored by this block
        assert len(case.module().lower_to_mir(policy)) == 36


def test_mir_ops_in_hir_lower_verbatim_with_label_mir():
    def build(h):
        x = h.input("x", (2, 3))
        return h.softmax(h.gelu(x), axis=-1)

    mir = rlx.define("esc", build).lower_to_mir()
    assert [n.op for n in mir.nodes] == ["input", "activation", "softmax"]
    assert [n.prov.label for n in mir.nodes] == [None, "mir", "mir"]
    assert [n.name for n in mir.nodes] == ["x", "mir", "mir"]


def test_h_mir_rejects_hir_ops():
    def build(h):
        x, w = h.input("x", (2, 3)), h.param("w", (3, 3))
        return h.mir("linear", x, w)

    with pytest.raises(rlx.LowerError, match="linear"):
        rlx.define("bad", build)


def test_linear_bias_is_an_optional_operand():
    def build(h):
        x, w, b = h.input("x", (2, 4)), h.param("w", (4, 3)), h.param("b", (3,))
        return [h.linear(x, w), h.linear(x, w, b), h.linear(x, w, bias=b, activation="relu")]

    g = rlx.define("lin", build).graph
    nodes = [g.node(o) for o in g.output_ids]
    assert [len(n.inputs) for n in nodes] == [2, 3, 3]
    assert [n.attrs["has_bias"] for n in nodes] == [False, True, True]
    assert nodes[2].attrs["activation"] == "relu"
