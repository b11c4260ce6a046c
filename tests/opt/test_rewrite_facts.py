"""Rewrite facts live with the ops (``OpDef.identity`` / ``commutes`` / ``keeps_grid``, the kind rows'
identity elements, commutativity, grid behaviour, ``selects``, the ``eager_unsafe`` and ``broadcasts``
flags) and the passes read them: each fact is checked here against NumPy, and a test-only op that
states a fact is rewritten by the pass that reads it, without the pass naming the op."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.flags import BROADCASTS, EAGER_UNSAFE
from rlx.ir.opdef import all_ops, get_op
from rlx.ops.evaluate import eval_node
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, REDUCE_KINDS
from rlx.opt import CSE, DCE, SIMPLIFY, run_passes
from rlx.opt.legalize import legalize_broadcast
from rlx.opt.lower import eager_unsafe_ops
from rlx.opt.quantize import propagate_fake_quant

RNG = np.random.default_rng(19)
X = RNG.standard_normal((3, 4)).astype(np.float32)
_NUMPY_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
                 "min": np.minimum, "fmax": np.fmax, "fmin": np.fmin, "pow": np.power}
_NUMPY_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                  "ge": np.greater_equal}


def _binary(kind: str, a, b):
    g = rlx.Graph()
    x, y = g.input("a", a.shape, "f32"), g.input("b", b.shape, "f32")
    g.set_outputs([g.binary(x, y, op=kind)])
    return rlx.run(g, {"a": a, "b": b})[0]


@pytest.mark.parametrize("kind", sorted(BINARY_KINDS))
def test_binary_identity_elements_hold(kind):
    row = BINARY_KINDS[kind]
    x = np.abs(X) + 0.5 if kind == "pow" else X
    for unit, lhs_is_x in ((row.right_identity, True), (row.left_identity, False)):
        if unit is None:
            continue
        e = np.full_like(x, unit)
        got = _binary(kind, x, e) if lhs_is_x else _binary(kind, e, x)
        np.testing.assert_array_equal(got, x)
        assert np.array_equal(_NUMPY_BINARY[kind](x, e) if lhs_is_x else _NUMPY_BINARY[kind](e, x), x)


@pytest.mark.parametrize("table,oracle", [(BINARY_KINDS, _NUMPY_BINARY), (COMPARE_KINDS, _NUMPY_COMPARE)])
def test_commutative_kinds_commute_and_others_do_not(table, oracle):
    a, b = X, RNG.standard_normal(X.shape).astype(np.float32)
    for name, row in table.items():
        swapped_equal = np.array_equal(oracle[name](a, b), oracle[name](b, a))
        assert row.commutative == swapped_equal, name


def test_grid_kinds_map_the_grid_into_itself():
    scale = 0.25
    grid = np.arange(-127, 128, dtype=np.float32) * scale
    marked = {k: r for k, r in ACTIVATION_KINDS.items() if r.grid is not None}
    assert set(marked) == {"relu", "neg", "abs"}
    for name, row in marked.items():
        y = row.forward(np, grid)
        np.testing.assert_array_equal(y / scale, np.round(y / scale), err_msg=name)
        assert np.abs(y).max() <= 127 * scale, name
        if row.grid == "keeps_magnitude":
            np.testing.assert_array_equal(np.abs(y), np.abs(grid), err_msg=name)
        else:
            assert row.grid == "keeps" and not np.array_equal(np.abs(y), np.abs(grid)), name  # relu drops |x| < 0


def test_selecting_reductions_return_an_element():
    x = RNG.standard_normal((5, 7))
    for name, row in REDUCE_KINDS.items():
        r = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
               "fmax": np.fmax.reduce, "fmin": np.fmin.reduce}[name](x, axis=1)
        assert row.selects == all(v in x[i] for i, v in enumerate(r)), name


def test_flags_name_the_ops_that_need_them():
    unsafe = {op.name for op in all_ops() if EAGER_UNSAFE in op.flags}
    assert {"gather", "dense_solve", "sample", "softmax_cross_entropy"} <= unsafe
    g = rlx.Graph()
    t = g.input("t", (4, 2))
    i = g.input("i", (3,), "i64")
    g.set_outputs([g.gather(t, i, axis=0)])
    table = np.ones((4, 2), np.float32)
    with pytest.raises(rlx.RlxError, match="out of range"):  # why gather carries the flag
        eval_node(g.nodes[2], [table, np.array([0, 9, 1])], g.nodes[2].type)
    assert eager_unsafe_ops(g) == ["gather"]
    assert {op.name for op in all_ops() if BROADCASTS in op.flags} == {"binary", "compare", "where"}


def _test_op(temporary_op, **facts):
    return temporary_op(rlx.OpDef(
        name="facts_test_op", family="test", arity=2, operands=("a", "b"),
        infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0] + 0 * args[1],
        doc="a (b ignored): a test-only op stating rewrite facts", **facts))


def test_passes_read_identity_and_commutes_from_the_op(temporary_op):
    _test_op(temporary_op, identity=lambda attrs, ins, out, consts: 0 if ins[0] == out else None,
             commutes=lambda attrs: True)
    g = rlx.Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (3, 4))
    g.set_outputs([g.apply("facts_test_op", a, b) * 2.0])
    r = run_passes(g, [SIMPLIFY, DCE])
    assert "facts_test_op" not in [n.op for n in r.graph.nodes]
    feeds = {"a": X, "b": X + 1}
    np.testing.assert_array_equal(rlx.run(r.graph, feeds)[0], X * 2.0)

    g = rlx.Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (3, 4))
    g.set_outputs([g.apply("facts_test_op", a, b) + g.apply("facts_test_op", b, a)])
    assert [n.op for n in run_passes(g, [CSE, DCE]).graph.nodes].count("facts_test_op") == 1


def test_ops_without_facts_are_left_alone(temporary_op):
    _test_op(temporary_op)
    g = rlx.Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (3, 4))
    g.set_outputs([g.apply("facts_test_op", a, b) + g.apply("facts_test_op", b, a)])
    ops = [n.op for n in run_passes(g, [SIMPLIFY, CSE, DCE]).graph.nodes]
    assert ops.count("facts_test_op") == 2
    assert get_op("facts_test_op").keeps_grid is None


def test_propagate_fake_quant_reads_keeps_grid(temporary_op):
    """FQ -> op -> FQ (same quantizer): the second FQ goes exactly when the op says it keeps the grid."""
    def build(op: str):
        g = rlx.Graph()
        x = g.input("x", (2, 3))
        s = g.constant(np.array([0.1], np.float32))
        q1 = g.fake_quantize(x, s, scale_mode="fixed")
        g.set_outputs([g.fake_quantize(g.apply(op, q1), s, scale_mode="fixed")])
        return g

    for keeps in (True, False):
        temporary_op(rlx.OpDef(
            name=f"facts_grid_op_{keeps}", family="test", arity=1, operands=("x",), infer=lambda ins, attrs: ins[0],
            kernel=lambda args, attrs, out: -args[0], doc="negation (a test-only op)",
            keeps_grid=(lambda attrs, rank, protected, copies_only, keeps=keeps: keeps)))
        g = build(f"facts_grid_op_{keeps}")
        out = run_passes(g, [propagate_fake_quant, DCE]).graph
        assert [n.op for n in out.nodes].count("fake_quantize") == (1 if keeps else 2)
        feed = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}
        np.testing.assert_array_equal(rlx.run(out, feed)[0], rlx.run(g, feed)[0])


def test_legalize_reads_broadcasts():
    g = rlx.Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (3, 1))
    g.set_outputs([g.where(g.gt(a, b), a, b)])
    res = legalize_broadcast(g)
    assert res.stats["expanded"] == 2  # b in the compare and b in the where
    feeds = {"a": X, "b": X[:, :1]}
    np.testing.assert_array_equal(rlx.run(res.graph, feeds)[0], np.where(X > X[:, :1], X, X[:, :1]))
