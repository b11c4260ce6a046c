"""The facts rlx.opt, the summary and the torch backend read instead of op names (``OpDef.compose`` /
``unroll`` / ``region_key`` / ``native_on``, the flags of ``rlx.ops.facts``, the pattern rows of
``rlx.ops.patterns``): each checked against NumPy or against the passes that read it, and registry
walks that fail when a new op lacks a fact its kind needs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rlx
from rlx.ir.opdef import all_ops, get_op, has_op
from rlx.ops import patterns
from rlx.ops.evaluate import SUBGRAPHS
from rlx.ops.facts import CONVERTS, SPLIT_AXES, VIEW
from rlx.opt import BACKENDS, FUSE_ATTENTION, PATTERN_PASSES, default_passes, run_passes
from rlx.opt.cleanup import simplify

RNG = np.random.default_rng(33)

#: per op with a ``compose`` fact: (input shape, inner attrs, outer attrs)
_COMPOSE_CASES = {
    "transpose": ((2, 3, 4), {"perm": [2, 0, 1]}, {"perm": [0, 2, 1]}),
    "reshape": ((2, 3, 4), {"new_shape": [6, 4]}, {"new_shape": [4, 3, 2]}),
    "bitcast": ((2, 3, 4), {"to": "i32"}, {"to": "u32"}),
}
#: NumPy's result of each case
_COMPOSE_ORACLES = {
    "transpose": lambda x, inner, outer: x.transpose(inner["perm"]).transpose(outer["perm"]),
    "reshape": lambda x, inner, outer: x.reshape(outer["new_shape"]),
    "bitcast": lambda x, inner, outer: x.view(np.uint32),
}


def test_every_compose_fact_has_a_case():
    assert {o.name for o in all_ops() if o.compose is not None} == set(_COMPOSE_CASES) == set(_COMPOSE_ORACLES)


@pytest.mark.parametrize("op", sorted(_COMPOSE_CASES))
def test_compose_equals_the_op_applied_twice(op):
    shape, inner, outer = _COMPOSE_CASES[op]
    x = RNG.standard_normal(shape).astype(np.float32)
    g = rlx.Graph("twice")
    v = g.input("x", shape, "f32")
    g.set_outputs([g.apply(op, g.apply(op, v, **inner), **outer)])
    once = rlx.Graph("once")
    once.set_outputs([once.apply(op, once.input("x", shape, "f32"), **get_op(op).compose(inner, outer))])
    want = _COMPOSE_ORACLES[op](x, inner, outer)
    np.testing.assert_array_equal(rlx.run(g, {"x": x})[0], want)
    np.testing.assert_array_equal(rlx.run(once, {"x": x})[0], want)
    res = simplify(g, keep_gradients=False)  # a gradient stop (bitcast) collapses only where no one differentiates
    assert res.stats["collapsed"] == 1
    np.testing.assert_array_equal(rlx.run(res.graph, {"x": x})[0], want)


def test_a_composition_to_the_identity_is_removed():
    g = rlx.Graph("back")
    v = g.input("x", (2, 3, 4), "f32")
    g.set_outputs([g.transpose(g.transpose(v, perm=[2, 0, 1]), perm=[1, 2, 0])])
    res = simplify(g)
    assert res.stats["removed"] == 1 and res.graph.outputs[0].id == 0


def test_every_op_with_bodies_can_be_unrolled():
    """``lower_control_flow`` / ``rewrite_for_backend`` replace ops with subgraphs through ``OpDef.unroll``."""
    with_bodies = {o.name for o in all_ops() if SUBGRAPHS in o.flags}
    assert with_bodies and with_bodies == {o.name for o in all_ops() if o.unroll is not None}


def test_region_keys_name_an_attribute_and_decode():
    """An op that may join an elementwise_region names the attribute its chain step records, and a
    region of every such op computes what the unfused ops compute."""
    eligible = [o for o in all_ops() if o.region_key is not None]
    assert {o.name for o in eligible} >= {"activation", "binary", "where"}
    for o in eligible:
        assert o.region_key == "" or o.region_key in o.attrs, o.name
    from rlx.opt.regions import mark_elementwise_regions

    g = rlx.Graph("chain")
    a, b = g.input("a", (4, 5), "f32"), g.input("b", (4, 5), "f32")
    y = g.where(g.compare(a, b, op="lt"), g.activation(g.binary(a, b, op="mul"), kind="tanh"), g.cast(b, to="f32"))
    g.set_outputs([y])
    feeds = {"a": RNG.standard_normal((4, 5)).astype(np.float32), "b": RNG.standard_normal((4, 5)).astype(np.float32)}
    marked = mark_elementwise_regions(g).graph
    assert [n.op for n in marked.nodes].count("elementwise_region") == 1
    want = np.where(feeds["a"] < feeds["b"], np.tanh(feeds["a"] * feeds["b"]), feeds["b"])
    np.testing.assert_allclose(rlx.run(marked, feeds)[0], want, rtol=1e-6)


def test_native_on_names_the_optimizers_backends():
    names = set(BACKENDS)
    for o in all_ops():
        assert o.native_on <= names, (o.name, o.native_on - names)
    # the CPU pipeline runs every fusion pass: whatever a pass creates, the CPU runtimes keep
    produced = {op for p in (*PATTERN_PASSES, FUSE_ATTENTION) for op in p.produces}
    assert produced <= BACKENDS["cpu"].claims
    ran = {p.name for p in default_passes("cpu")}
    assert {p.name for p in PATTERN_PASSES} <= ran


def test_flagged_views_and_conversions_hold():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    views = {o.name for o in all_ops() if VIEW in o.flags}
    assert views == {"reshape", "transpose", "narrow", "expand"}  # every element of the result is one of x's
    for name in views:
        assert get_op(name).work == "none" and get_op(name).precision == "data_movement"
    for o in all_ops():
        if CONVERTS in o.flags:
            assert "to" in o.attrs, o.name
    g = rlx.Graph("split")
    v = g.input("x", x.shape, "f32")
    g.set_outputs([g.reduce(v, op="sum", axes=[0, 2])])
    from rlx.autodiff.prepare import legalize_reduce_pass

    split = legalize_reduce_pass(g)
    assert SPLIT_AXES in get_op("reduce").flags and split.stats["split"] == 1
    np.testing.assert_allclose(rlx.run(split.graph, {"x": x})[0], x.sum(axis=(0, 2)), rtol=1e-5)


def test_pattern_rows_name_registered_ops():
    rows = [v for v in vars(patterns).values() if dataclasses.is_dataclass(v) and not isinstance(v, type)]
    assert len(rows) >= 8
    for row in rows:
        for f in dataclasses.fields(row):
            value = getattr(row, f.name)
            names = value if isinstance(value, tuple) else (value,)
            for name in names:
                if isinstance(name, str) and name and f.name != "why_kept":
                    assert has_op(name), f"{type(row).__name__}.{f.name} = {name!r} is no registered op"


def test_fusion_rows_drive_the_passes():
    """A matmul + bias + gelu fuses through the row's names; the fused op is the row's ``fused``."""
    g = rlx.Graph("mm")
    x, w, b = g.input("x", (3, 4), "f32"), g.param("w", (4, 5), "f32"), g.param("b", (5,), "f32")
    g.set_outputs([g.activation(g.binary(g.matmul(x, w), b, op="add"), kind="gelu")])
    out = run_passes(g, default_passes("cpu")).graph
    assert patterns.MATMUL_BIAS_ACT.fused in {n.op for n in out.nodes}
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32)}
    params = {"w": RNG.standard_normal((4, 5)).astype(np.float32), "b": RNG.standard_normal(5).astype(np.float32)}
    np.testing.assert_allclose(rlx.run(out, feeds, params)[0], rlx.run(g, feeds, params)[0], rtol=1e-5, atol=1e-6)


def test_shown_kinds_name_a_choice_attribute():
    """Histograms and printers show ``binary(op="add")`` as ``add``: the attribute must exist and spell a kind."""
    from rlx.hir.inspect import op_kind

    shown = [o for o in all_ops() if o.shown_kind is not None]
    assert {o.name for o in shown} >= {"activation", "binary", "compare"}
    for o in shown:
        assert o.attrs[o.shown_kind].choices, o.name
    g = rlx.Graph("kinds")
    a = g.input("a", (2,), "f32")
    y = g.binary(g.activation(a, kind="relu"), a, op="add")
    g.set_outputs([y])
    assert [op_kind(n) for n in g.nodes] == ["input", "relu", "add"]
