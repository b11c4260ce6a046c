"""User HIR blocks and named HIR module hooks (rlx.hir.extensions)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.hir import (
    apply_hir_extensions,
    apply_hir_extensions_named,
    hir_extensions,
    register_block,
    register_hir_extension,
    unregister_block,
    unregister_hir_extension,
)


def _gated_infer(ins, attrs):
    x, w1, w2 = ins
    if x.shape[-1] != w1.shape[0] or w1.shape != w2.shape:
        raise rlx.ShapeError(f"gated_mlp: x {x.shape!r}, w1 {w1.shape!r}, w2 {w2.shape!r} do not chain")
    return rlx.ir.shape.TensorType((*x.shape[:-1], w1.shape[1]), x.dtype)


def _gated_lower(g, ops, attrs, policy):
    x, w1, w2 = ops
    return g.matmul(x, w1) * g.sigmoid(g.matmul(x, w2) * attrs["beta"])


@pytest.fixture
def gated_block():
    register_block("gated_mlp", infer=_gated_infer, lower=_gated_lower, operands=("x", "w1", "w2"),
                   attrs={"beta": rlx.AttrSpec("float", default=1.0)})
    try:
        yield
    finally:
        unregister_block("gated_mlp")


@pytest.fixture
def clean_hooks():
    before = hir_extensions()
    yield
    for name in hir_extensions():
        if name not in before:
            unregister_hir_extension(name)


def _feed(seed=0):
    rng = np.random.default_rng(seed)
    return ({"x": rng.standard_normal((3, 4)).astype(np.float32)},
            {"w1": rng.standard_normal((4, 5)).astype(np.float32), "w2": rng.standard_normal((4, 5)).astype(np.float32)})


def _model(h):
    return h.gated_mlp(h.input("x", (3, 4)), h.param("w1", (4, 5)), h.param("w2", (4, 5)), beta=2.0)


@pytest.mark.parametrize("policy", [rlx.FusionPolicy.DIRECT, rlx.FusionPolicy.FUSABLE])
def test_a_user_block_builds_lowers_and_runs(gated_block, policy):
    m = rlx.define("gated", _model)
    assert [n.op for n in m.graph.nodes][-1] == "gated_mlp"
    inputs, params = _feed()
    want = (inputs["x"] @ params["w1"]) / (1 + np.exp(-2.0 * (inputs["x"] @ params["w2"])))
    mir = m.lower_to_mir(policy)
    assert "gated_mlp" not in {n.op for n in mir.nodes}
    (got,) = rlx.run(mir, inputs=inputs, params=params)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (hir_out,) = rlx.run(m.graph, inputs=inputs, params=params)  # the block's reference kernel evaluates its lowering
    np.testing.assert_allclose(hir_out, want, rtol=1e-5, atol=1e-6)


def test_a_user_block_round_trips_text_and_files(gated_block, tmp_path):
    m = rlx.define("gated", _model)
    assert rlx.parse(str(m.graph)) == m.graph
    rlx.save(m, tmp_path / "g.rlx")
    back = rlx.load(tmp_path / "g.rlx")
    assert back.graph == m.graph


def test_shape_errors_name_the_block(gated_block):
    with pytest.raises(rlx.RlxError, match="gated_mlp"):
        rlx.define("bad", lambda h: h.gated_mlp(h.input("x", (3, 4)), h.param("w1", (3, 5)), h.param("w2", (3, 5))))


def test_built_in_names_are_refused_and_replacement_is_explicit(gated_block):
    with pytest.raises(rlx.RlxError, match="built-in"):
        register_block("linear", infer=_gated_infer, lower=_gated_lower)
    with pytest.raises(rlx.RlxError, match="replace=True"):
        register_block("gated_mlp", infer=_gated_infer, lower=_gated_lower, operands=("x", "w1", "w2"))
    register_block("gated_mlp", infer=_gated_infer, lower=lambda g, ops, attrs, policy: g.matmul(ops[0], ops[1]),
                   operands=("x", "w1", "w2"), attrs={"beta": rlx.AttrSpec("float", default=1.0)}, replace=True)
    inputs, params = _feed(1)
    (got,) = rlx.run(rlx.define("gated", _model).lower_to_mir(), inputs=inputs, params=params)
    np.testing.assert_allclose(got, inputs["x"] @ params["w1"], rtol=1e-5)


def _scale_outputs(factor):
    def hook(module):
        h = module.graph
        outs = [h.mir("binary", o, h.constant(np.float32(factor)), op="mul") for o in h.outputs]
        h.set_outputs(outs)
        return module

    return hook


def _mlp_module():
    return rlx.define("mlp", lambda h: h.linear(h.input("x", (2, 4)), h.param("w", (4, 3)), activation="relu"))


def test_hooks_run_in_registration_order_and_replace_by_name(clean_hooks):
    register_hir_extension("t_double", _scale_outputs(2.0))
    register_hir_extension("t_noop", lambda m: None)
    register_hir_extension("t_triple", _scale_outputs(3.0))
    assert hir_extensions()[-3:] == ["t_double", "t_noop", "t_triple"]
    x, w = np.ones((2, 4), np.float32), np.eye(4, 3, dtype=np.float32)
    m = apply_hir_extensions_named(_mlp_module(), ["t_double", "t_noop", "t_triple"])
    (got,) = rlx.run(m.lower_to_mir(), inputs={"x": x}, params={"w": w})
    np.testing.assert_allclose(got, 6.0 * np.maximum(x @ w, 0))
    register_hir_extension("t_double", _scale_outputs(5.0))  # replaced: now runs last
    assert hir_extensions()[-1] == "t_double"
    m = apply_hir_extensions_named(_mlp_module(), ["t_double"])
    (got,) = rlx.run(m.lower_to_mir(), inputs={"x": x}, params={"w": w})
    np.testing.assert_allclose(got, 5.0 * np.maximum(x @ w, 0))


def test_apply_all_runs_every_registered_hook(clean_hooks):
    register_hir_extension("t_double", _scale_outputs(2.0))
    m = apply_hir_extensions(_mlp_module())
    assert sum(n.op == "binary" for n in m.graph.nodes) == 1


def test_hook_errors(clean_hooks):
    with pytest.raises(rlx.RlxError, match="no HIR extension named"):
        apply_hir_extensions_named(_mlp_module(), ["t_missing"])
    register_hir_extension("t_bad", lambda m: 42)
    with pytest.raises(rlx.RlxError, match=r"t_bad.*int"):
        apply_hir_extensions_named(_mlp_module(), ["t_bad"])
    with pytest.raises(rlx.RlxError, match="HIR module"):
        apply_hir_extensions_named(rlx.GraphModule(_mlp_module().lower_to_mir()), [])
    with pytest.raises(rlx.RlxError, match="function"):
        register_hir_extension("t_x", "not callable")
