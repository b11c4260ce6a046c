"""A bug inside an op's type rule or kernel surfaces as rlx.InternalError with the original
exception chained; a rule rejecting its operands stays a ShapeError naming op and operands."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import rlx
from rlx.ir.opdef import OpDef
from rlx.opt import fold_constants


def _op(name, infer, kernel=lambda args, attrs, out: args[0]):
    return OpDef(name=name, family="test", arity=1, operands=("x",), infer=infer, kernel=kernel, doc="test op")


def _buggy_rule(ins, attrs):
    return ins[0].shape.no_such_attribute  # an AttributeError: a bug, not bad input


def test_a_bug_in_a_type_rule_is_an_internal_error_with_its_traceback(temporary_op):
    temporary_op(_op("buggy_rule_op", _buggy_rule))
    g = rlx.Graph("g")
    x = g.input("x", [2], rlx.f32)
    with pytest.raises(rlx.InternalError, match=r"buggy_rule_op.*AttributeError") as info:
        g.buggy_rule_op(x)
    assert not isinstance(info.value, rlx.RlxError)  # `except RlxError` (bad input) must not swallow a bug
    cause = info.value.__cause__
    assert isinstance(cause, AttributeError)
    frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert "_buggy_rule" in frames


def test_a_rule_rejecting_operands_stays_a_shape_error(temporary_op):
    def rule(ins, attrs):
        raise rlx.ShapeError("x must be rank 2")

    temporary_op(_op("strict_rule_op", rule))
    g = rlx.Graph("g")
    x = g.input("x", [2], rlx.f32)
    with pytest.raises(rlx.ShapeError, match=r"strict_rule_op.*x must be rank 2.*operands: \[2\] f32\)"):
        g.strict_rule_op(x)


def _folding_graph(op):
    g = rlx.Graph("fold")
    c = g.constant(np.arange(3, dtype=np.float32))
    g.set_outputs([g.append(op, [c], {})])
    return g


def test_constant_folding_surfaces_a_kernel_bug(temporary_op):
    def kernel(args, attrs, out):
        raise TypeError("kernel bug")

    temporary_op(_op("buggy_kernel_op", lambda ins, attrs: ins[0], kernel))
    with pytest.raises(rlx.InternalError, match=r"fold_constants.*buggy_kernel_op.*TypeError: kernel bug") as info:
        fold_constants(_folding_graph("buggy_kernel_op"))
    assert isinstance(info.value.__cause__, TypeError)


def test_constant_folding_skips_a_node_whose_kernel_rejects_the_values(temporary_op):
    def kernel(args, attrs, out):
        raise rlx.RlxError("index 7 out of range")

    temporary_op(_op("rejecting_op", lambda ins, attrs: ins[0], kernel))
    g = _folding_graph("rejecting_op")
    r = fold_constants(g)
    assert r.stats["folded"] == 0 and [n.op for n in r.graph.nodes] == ["constant", "rejecting_op"]
    with pytest.raises(rlx.RlxError, match="index 7 out of range"):  # running reports it
        rlx.run(r.graph)


def test_constant_folding_still_folds_a_working_kernel(temporary_op):
    temporary_op(_op("double_op", lambda ins, attrs: ins[0], lambda args, attrs, out: args[0] * 2))
    r = fold_constants(_folding_graph("double_op"))
    assert r.stats["folded"] == 1
    np.testing.assert_array_equal(rlx.run(r.graph)[0], [0.0, 2.0, 4.0])
