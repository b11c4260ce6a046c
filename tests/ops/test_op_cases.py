"""Runs every op case of every family: verify, numeric oracle, text round trip, coverage."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect

ALL = collect()


@pytest.mark.parametrize("case", ALL.cases, ids=lambda c: c.id)
def test_numeric_against_oracle(case):
    g, outs = case.graph()
    rlx.verify(g)
    inputs, params = case.split_feed()
    got = rlx.run(g, inputs, params)
    want = case.expected()
    assert len(got) == len(want)
    for value, actual, expected in zip(outs, got, want):
        assert tuple(value.shape) == tuple(expected.shape), f"inferred {value.shape} vs oracle {expected.shape}"
        assert actual.dtype == value.dtype.numpy
        if actual.dtype.kind in "fc":
            np.testing.assert_allclose(actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64),
                                       expected, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("case", ALL.cases, ids=lambda c: c.id)
def test_text_round_trip(case):
    g, _ = case.graph()
    text = str(g)
    back = rlx.parse(text)
    assert back == g
    assert str(back) == text


@pytest.mark.parametrize("case", ALL.shape_errors, ids=lambda c: c.id)
def test_shape_error(case):
    g = rlx.Graph("bad")
    with pytest.raises(rlx.ShapeError, match=case.match) as info:
        case.build(g)
    assert case.op in str(info.value), f"the error should name the op: {info.value}"


def test_every_op_has_cases():
    numeric = {c.op for c in ALL.cases}
    errors = {c.op for c in ALL.shape_errors}
    ops = {op.name for op in rlx.all_ops() if op.level != "hir"}  # HIR blocks: tests/hir checks their coverage
    assert not ops - numeric, f"ops without a numeric case: {sorted(ops - numeric)}"
    assert not ops - errors, f"ops without a ShapeError case: {sorted(ops - errors)}"
