"""Pass manager, rebuild helper and cleanup passes (dce, cse, fold, simplify, legalize)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opt.opt_util import assert_same_outputs, op_counts
from rlx.opt import (
    CSE,
    DCE,
    FOLD,
    SIMPLIFY,
    Pass,
    PassError,
    PassResult,
    cse,
    dce,
    fold_constants,
    legalize_broadcast,
    optimize,
    run_passes,
    simplify,
)
from rlx.opt.rebuild import Rebuilder, use_counts


def _chain():
    g = rlx.Graph("chain")
    x = g.input("x", (2, 3))
    a = g.exp(x, name="a")
    b = g.exp(x, name="b")
    y = g.add(a, b, name="y")
    g.log(x, name="dead")
    g.set_outputs([y])
    return g


def test_use_counts_include_outputs():
    g = rlx.Graph()
    x = g.input("x", (2,))
    a = g.exp(x)
    b = g.add(a, a)
    g.set_outputs([a, b, b])
    u = use_counts(g)
    assert u[x.id] == 1 and u[a.id] == 2 and u[b.id] == 2


def test_dce_removes_dead_keeps_leaves_and_names():
    g = _chain()
    g2 = g.input("unused", (1,))
    assert g2.id >= 0
    r = dce(g)
    ops = [n.name for n in r.graph.nodes]
    assert "dead" not in ops and "unused" in ops and "a" in ops
    assert r.stats["removed"] == 1
    rlx.verify(r.graph)
    r2 = dce(g, keep_leaves=False)
    assert "unused" not in [n.name for n in r2.graph.nodes]
    # nothing dead: graph returned as is, identity map
    r3 = dce(r.graph)
    assert r3.graph is r.graph and r3.id_map is None


def test_cse_merges_and_maps_ids():
    g = _chain()
    r = cse(g)
    assert r.stats["merged"] == 1
    b_old = next(n.id for n in g.nodes if n.name == "b")
    a_old = next(n.id for n in g.nodes if n.name == "a")
    assert r.id_map[b_old] == r.id_map[a_old]
    assert_same_outputs(g, r.graph)


def test_cse_commutative_and_constants():
    g = rlx.Graph()
    x = g.input("x", (3,))
    y = g.input("y", (3,))
    s1 = g.add(x, y)
    s2 = g.add(y, x)
    d1 = g.sub(x, y)
    d2 = g.sub(y, x)
    c1 = g.constant(np.arange(3, dtype=np.float32))
    c2 = g.constant(np.arange(3, dtype=np.float32))
    c3 = g.constant(np.arange(3, dtype=np.float64))
    g.set_outputs([g.mul(s1, s2), g.mul(d1, d2), c1 + c2, c3])
    r = cse(g)
    assert r.id_map[s1.id] == r.id_map[s2.id]
    assert r.id_map[d1.id] != r.id_map[d2.id]
    assert r.id_map[c1.id] == r.id_map[c2.id]
    assert r.id_map[c3.id] != r.id_map[c1.id]
    assert_same_outputs(g, r.graph)


def test_cse_does_not_merge_inputs():
    g = rlx.Graph()
    a = g.input("a", (2,))
    b = g.input("b", (2,))
    g.set_outputs([g.add(a, b)])
    assert cse(g).stats["merged"] == 0


def test_fold_constants_dtype_correct():
    g = rlx.Graph()
    x = g.input("x", (3,))
    k = g.constant(np.array([1.0, 2.0, 3.0], np.float32))
    gk = g.gelu(k)  # upstream's folder used a wrong tanh formula: 1.0 -> 0.8044
    ik = g.constant(np.array([7, -7, 3], np.int32))
    div = g.div(ik, g.constant(np.array(2, np.int32)))  # integer division truncates toward zero
    cast = g.cast(ik, to="f32")  # upstream kept the raw int bytes
    g.set_outputs([x + gk, div, cast])
    r = fold_constants(g)
    rlx.verify(r.graph)
    assert r.stats["folded"] == 3
    consts = [n for n in r.graph.nodes if n.op == "constant" and n.prov and "fold_constants" in n.prov.passes]
    assert sorted(str(n.dtype) for n in consts) == ["f32", "f32", "i32"]
    out = rlx.run(r.graph, {"x": np.zeros(3, np.float32)})
    np.testing.assert_allclose(out[0][0], 0.8413447, rtol=1e-6)
    assert out[1].dtype == np.int32 and list(out[1]) == [3, -3, 1]
    assert list(out[2]) == [7.0, -7.0, 3.0]
    assert_same_outputs(g, r.graph)


def test_fold_size_cap():
    g = rlx.Graph()
    k = g.constant(np.float32(2.0))
    big = g.expand(k, target_shape=[64, 64])
    g.set_outputs([big])
    assert fold_constants(g, max_elements=100).stats["folded"] == 0
    r = fold_constants(g, max_elements=10_000)
    assert r.stats["folded"] == 1
    assert_same_outputs(g, r.graph)


def test_fold_does_not_touch_inputs_and_bf16():
    g = rlx.Graph()
    x = g.input("x", (2,), "bf16")
    k = g.constant(np.array([1.5, 2.5], np.float32))
    kb = g.cast(k, to="bf16")
    g.set_outputs([x + g.exp(kb)])
    r = fold_constants(g)
    assert r.stats["folded"] == 2
    rlx.verify(r.graph)
    assert_same_outputs(g, r.graph, rtol=1e-2)


def test_simplify_identities():
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    y = ((x + 0.0) * 1.0 - 0.0) / 1.0
    y = g.cast(y, to="f32")
    y = g.reshape(y, new_shape=[2, 3])
    y = g.transpose(y, perm=[0, 1])
    y = g.narrow(y, 1, 0, 3)
    y = g.concat([y], axis=0)
    y = g.expand(y, target_shape=[2, 3])
    g.set_outputs([y])
    r = run_passes(g, [SIMPLIFY, DCE])
    assert [n.op for n in r.graph.nodes] == ["input"]
    assert r.graph.output_ids == (0,)
    assert_same_outputs(g, r.graph)


def test_simplify_keeps_type_changing_identities():
    g = rlx.Graph()
    x = g.input("x", (3,))
    i = g.input("i", (3,), "i32")
    bx = x + g.constant(np.zeros((2, 3), np.float32))  # broadcasts: not an identity
    ii = i * 1.0  # promotes to float: not an identity
    g.set_outputs([bx, ii])
    r = simplify(g)
    assert r.stats["removed"] == 0
    assert_same_outputs(g, r.graph)


def test_simplify_where_with_a_constant_condition():
    """where(all true, a, b) = a, where(all false, a, b) = b; a mixed condition, or a branch that the
    condition broadcasts, stays (checked against NumPy's where)."""
    g = rlx.Graph()
    a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
    ones, zeros = np.ones((2, 1), bool), np.zeros((1, 3), bool)
    picked_a = g.where(g.constant(ones), a, b)
    picked_b = g.where(g.constant(zeros), a, b)
    mixed = g.where(g.constant(np.array([[True], [False]])), a, b)
    widened = g.where(g.constant(np.ones((4, 2, 3), bool)), a, b)  # [4, 2, 3]: not a's type
    g.set_outputs([picked_a, picked_b, mixed, widened])
    r = run_passes(g, [SIMPLIFY, DCE])
    assert r.graph.output_ids[:2] == (0, 1)
    assert op_counts(r.graph)["where"] == 2
    feed = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": -np.ones((2, 3), np.float32)}
    got = rlx.run(r.graph, inputs=feed)
    want = [np.where(c, feed["a"], feed["b"]) for c in (ones, zeros, np.array([[True], [False]]), np.ones((4, 2, 3), bool))]
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_simplify_sees_bound_param_values():
    """Given the params' values (an engine export's folded weights), x + zeros and where(all false, c, x)
    leave x; a param without a value, or with other values, stays. Checked against NumPy."""
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    mask, guard, other, free = g.param("mask", (1, 3)), g.param("guard", (2, 1), "bool"), g.param("other", (1, 3)), g.param("free", (1, 3))
    out = g.where(guard, g.constant(np.float32(0)), x + mask)
    g.set_outputs([out, x + other, x + free])
    values = {"mask": np.zeros((1, 3), np.float32), "guard": np.zeros((2, 1), bool), "other": np.full((1, 3), 0.5, np.float32)}
    assert not simplify(g).changed
    r = run_passes(g, [Pass("simplify", lambda gr: simplify(gr, values)), DCE])
    counts = op_counts(r.graph)
    assert "where" not in counts and counts["binary"] == 2, counts
    feed = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    got = rlx.run(r.graph, inputs=feed, params={**values, "free": np.ones((1, 3), np.float32)})
    for a, b in zip(got, [feed["x"], feed["x"] + 0.5, feed["x"] + 1]):
        np.testing.assert_array_equal(a, b)


def _evaluated_only(g: rlx.Graph):
    """simplify for a graph no one differentiates, then DCE (the verifier runs after each pass)."""
    return run_passes(g, [Pass("simplify", lambda gr: simplify(gr, keep_gradients=False)), DCE]).graph


def test_an_embeddings_padding_row_rule_is_a_plain_gather_when_no_one_differentiates():
    """The torch reader writes torch's padding-row gradient rule as where(ids == pad, stop(rows), rows),
    the stop a bitcast round trip; kept by default, a gather alone with keep_gradients=False. torch is
    the oracle."""
    torch = pytest.importorskip("torch")
    import rlx.torch

    torch.manual_seed(0)
    emb = torch.nn.Embedding(7, 4, padding_idx=1).eval()
    ids = torch.tensor([[1, 3, 1, 6], [0, 1, 2, 5]])
    g, params = rlx.torch.import_module(emb, (ids,))
    kept = run_passes(g, [SIMPLIFY, DCE]).graph
    assert {"where", "bitcast"} <= set(op_counts(kept)), op_counts(kept)
    lean = _evaluated_only(g)
    assert op_counts(lean).keys() <= {"input", "param", "gather"}, op_counts(lean)
    got = rlx.run(lean, {next(iter(lean.inputs())): ids.numpy()}, params)[0]
    np.testing.assert_array_equal(got, emb(ids).detach().numpy())


def test_a_gradient_stop_keeps_its_derivative_unless_no_one_differentiates():
    """d/dx sum(stop(x) * x) = stop(x): after the default simplify still x (NumPy), not 2x."""
    g = rlx.Graph("stop")
    x = g.input("x", (3,))
    g.set_outputs([g.sum(g.bitcast(g.bitcast(x, to="i32"), to="f32") * x)])
    xv = np.array([1.0, -2.0, 3.0], np.float32)
    for kept in (run_passes(g, [SIMPLIFY, DCE]).graph, g):
        grad = rlx.grad_with_loss(kept, wrt=["x"])
        np.testing.assert_allclose(rlx.run(grad, {"x": xv, "d_output": np.float32(1)})[1], xv, rtol=1e-6)
    assert "bitcast" not in op_counts(_evaluated_only(g))


def test_bitcasts_compose_except_through_bool():
    """bitcast to bool makes each nonzero byte 1: u8 -> bool -> u8 is not the identity; f32 -> i32 -> u32
    is one bitcast. NumPy's views are the oracle."""
    g = rlx.Graph("bitcasts")
    b, f = g.input("b", (4,), "u8"), g.input("f", (3,))
    g.set_outputs([g.bitcast(g.bitcast(b, to="bool"), to="u8"), g.bitcast(g.bitcast(f, to="i32"), to="u32")])
    lean = _evaluated_only(g)
    assert op_counts(lean)["bitcast"] == 3, op_counts(lean)
    bv, fv = np.array([0, 2, 1, 255], np.uint8), np.array([1.5, -0.0, np.nan], np.float32)
    got = rlx.run(lean, {"b": bv, "f": fv})
    np.testing.assert_array_equal(got[0], (bv != 0).astype(np.uint8))
    np.testing.assert_array_equal(got[1], fv.view(np.uint32))


def test_a_select_between_one_value_is_that_value_only_at_its_type():
    """where(c, x, x) is x, but a condition wider than x broadcasts it: kept. NumPy is the oracle."""
    g = rlx.Graph("select_one")
    c, c1, x = g.input("c", (2, 3), "bool"), g.input("c1", (3,), "bool"), g.input("x", (3,))
    g.set_outputs([g.where(c, x, x), g.where(c1, x, x)])
    r = run_passes(g, [SIMPLIFY, DCE]).graph
    assert op_counts(r).get("where") == 1 and r.output_ids[1] == r.inputs()["x"].id, op_counts(r)
    cv = np.array([[True, False, True], [False, False, True]])
    xv = np.array([1.5, np.nan, -2.0], np.float32)
    got = rlx.run(r, {"c": cv, "c1": cv[0], "x": xv})
    np.testing.assert_array_equal(got[0], np.where(cv, xv, xv))
    np.testing.assert_array_equal(got[1], xv)


def test_simplify_double_transpose_and_reshape():
    g = rlx.Graph()
    x = g.input("x", (2, 3, 4))
    t = g.transpose(g.transpose(x, perm=[1, 0, 2]), perm=[2, 0, 1])
    back = g.transpose(g.transpose(x, perm=[1, 2, 0]), perm=[2, 0, 1])
    r1 = g.reshape(g.reshape(x, new_shape=[6, 4]), new_shape=[4, -1])
    g.set_outputs([t, back, r1])
    r = run_passes(g, [SIMPLIFY, DCE])
    counts = op_counts(r.graph)
    assert counts["transpose"] == 1 and counts["reshape"] == 1
    assert r.graph.output_ids[1] == 0
    tr = next(n for n in r.graph.nodes if n.op == "transpose")
    assert tr.inputs == (0,) and tr.prov.passes == ("simplify",)
    assert_same_outputs(g, r.graph)


def test_legalize_broadcast():
    g = rlx.Graph()
    x = g.input("x", (4, 3))
    row = g.input("row", (3,))
    col = g.input("col", (4, 1))
    s = g.input("s", (1,))
    y = x + row + col + s
    g.set_outputs([y])
    r = legalize_broadcast(g)
    assert r.stats["expanded"] == 1  # only the (4, 1) column: a trailing slice and a scalar are fine
    rlx.verify(r.graph)
    assert_same_outputs(g, r.graph)


def test_pass_manager_composes_maps_and_history():
    g = _chain()
    y_old = g.output_ids[0]
    res = run_passes(g, [CSE, FOLD, SIMPLIFY, DCE])
    assert res.id_map[y_old] == res.graph.output_ids[0]
    assert res.remap(next(n.id for n in g.nodes if n.name == "dead")) is None
    assert [e.name for e in res.log] == ["cse", "fold_constants", "simplify", "dce"]
    # names and provenance survive rebuilds
    names = {n.name for n in res.graph.nodes}
    assert {"x", "a", "y"} <= names


def test_pass_manager_verifies_and_names_the_pass():
    def broken(g):
        bad = rlx.Graph(g.name)
        x = bad.input("x", (2, 3))
        from rlx.ir.graph import Node
        from rlx.ir.shape import TensorType

        bad._push(Node(1, "activation", {"kind": "exp"}, (x.id,), TensorType((9,), rlx.f32)))
        bad.set_outputs([1])
        return PassResult(bad, None, {})

    with pytest.raises(PassError, match="broken"):
        run_passes(_chain(), [Pass("broken", broken)])
    # with checks off the broken graph goes through
    res = run_passes(_chain(), [Pass("broken", broken)], check=False)
    assert len(res.graph) == 2


def test_rebuild_copies_name_and_provenance():
    g = rlx.Graph()
    x = g.input("x", (2,))
    y = g.append("activation", [x], {"kind": "exp"}, name="y", prov=rlx.Provenance(3, "blk", ("lower",)))
    g.set_outputs([y])
    rb = Rebuilder(g, "p")
    for n in g.nodes:
        rb.copy(n)
    z = rb.emit("activation", [rb.map[y.id]], {"kind": "neg"}, like=[g.node(y)])
    out, _ = rb.finish()
    assert out.node(1).name == "y" and out.node(1).prov == rlx.Provenance(3, "blk", ("lower",))
    assert out.node(z).prov == rlx.Provenance(3, "blk", ("lower", "p"))


def test_optimize_on_cleanup_graph():
    g = _chain()
    opt, report = optimize(g)
    assert report.nodes_before == 5 and report.nodes_after == len(opt) == 3
    rlx.verify(opt)
    assert_same_outputs(g, opt)
    assert g.nodes[-1].name == "dead"  # the input graph is untouched


def test_plain_function_pass_and_options():
    g = rlx.Graph()
    x = g.input("x", (1,))
    big = g.expand(g.exp(g.constant(np.float32(1.0))), target_shape=[300])
    g.set_outputs([g.add(big, g.expand(x, target_shape=[300]))])
    res = run_passes(g, [FOLD.with_options(max_elements=10), dce])  # a bare function is a pass too
    assert res.log[1].name == "dce"
    assert op_counts(res.graph)["expand"] == 2  # the exp folded, the 300-element expand did not
    assert_same_outputs(g, res.graph)


def test_backend_legalizes_broadcast():
    g = rlx.Graph()
    x = g.input("x", (4, 3))
    col = g.input("col", (4, 1))
    g.set_outputs([x * col])
    opt, _ = optimize(g, backend="cuda")
    assert op_counts(opt).get("expand") == 1
    assert_same_outputs(g, opt)
    opt2, _ = optimize(g)  # the CPU backend broadcasts implicitly
    assert "expand" not in op_counts(opt2)


def test_unknown_backend_is_a_typed_error():
    with pytest.raises(PassError, match="unknown backend"):
        optimize(_chain(), backend="nope")
