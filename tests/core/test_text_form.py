"""The text form: random well-formed graphs survive parse(str(g)) and verify; bad text fails clearly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx
from rlx.ir.graph import Provenance

FLOAT_DTYPES = ["f32", "f64", "f16", "bf16"]
UNARY = ["exp", "tanh", "neg", "abs", "sigmoid", "gelu", "round", "sin"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
NAMES = st.one_of(st.none(), st.text(min_size=1, max_size=8))


@st.composite
def random_graphs(draw):
    g = rlx.Graph(draw(st.text(max_size=10)))
    shape = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    pool = [g.input("x", shape, draw(st.sampled_from(FLOAT_DTYPES)))]
    for _ in range(draw(st.integers(1, 12))):
        choice = draw(st.integers(0, 4))
        name = draw(NAMES)
        a = draw(st.sampled_from(pool))
        if choice == 0:
            v = g.activation(a, kind=draw(st.sampled_from(UNARY)), name=name)
        elif choice == 1:
            v = getattr(g, draw(st.sampled_from(BINARY)))(a, draw(st.sampled_from(pool)), name=name)
        elif choice == 2:
            special = draw(st.sampled_from([0.5, np.nan, np.inf, -np.inf, -0.0, 1e-30]))
            v = a + g.constant(np.full(shape[-1:] or (), special, np.float32), name=name)
        elif choice == 3:
            v = g.where(g.lt(a, draw(st.sampled_from(pool))), a, draw(st.sampled_from(pool)))
        else:
            v = g.cast(a, to=draw(st.sampled_from([*FLOAT_DTYPES, "i32", "bool"])), name=name)
            if not v.dtype.is_float:
                v = g.cast(v, to="f32")
        pool.append(v)
    if draw(st.booleans()):
        g.param("p", ("batch", 2), "bf16")
    g.set_outputs(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3)))
    return g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs_round_trip(g):
    rlx.verify(g)
    text = str(g)
    back = rlx.parse(text)
    assert back == g
    assert str(back) == text


def test_provenance_and_names_round_trip():
    g = rlx.Graph('we"ird\nname')
    x = g.input("x", (2,))
    y = g.append("activation", [x], {"kind": "exp"}, name="é\t", prov=Provenance(3, "linear", ("fuse", "cse")))
    g.set_outputs([y])
    text = str(g)
    assert 'prov={"hir": 3, "label": "linear", "passes": ["fuse", "cse"]}' in text
    assert rlx.parse(text) == g


def test_constant_bytes_exact_for_every_dtype():
    g = rlx.Graph("c")
    outs = []
    for d in rlx.DType:
        arr = (np.arange(6) - 2).astype(d.numpy).reshape(2, 3)
        outs.append(g.constant(arr, name=str(d)))
    g.set_outputs(outs)
    back = rlx.parse(str(g))
    for node_a, node_b in zip(g.nodes, back.nodes):
        a, b = node_a.attrs["value"].array, node_b.attrs["value"].array
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("text", "needle"), [
    ("graph @\"g\" mir {\n  %0 = input {dtype=\"f32\", name=\"x\", shape=[2]} : [2] f32\n  return %0\n", "end of text"),
    ("graph @\"g\" mir {\n  %1 = input {dtype=\"f32\", name=\"x\", shape=[2]} : [2] f32\n  return %1\n}", "out of order"),
    ("graph @\"g\" mir {\n  %0 = frob : [2] f32\n  return %0\n}", "unknown op 'frob'"),
    ("graph @\"g\" mir {\n  %0 = input {dtype=\"f32\", name=3, shape=[2]} : [2] f32\n  return %0\n}", "input.name: expected str"),
    ("graph @\"g\" mir {\n  %0 = constant {value=tensor(f32, [2], \"AAAA\")} : [2] f32\n  return %0\n}", "needs 8"),
    ("graph @\"g\" xir {\n  return\n}", "unknown stage"),
])
def test_parse_errors_name_the_line(text, needle):
    with pytest.raises(rlx.ParseError, match="line") as info:
        rlx.parse(text)
    assert needle in str(info.value)
    assert isinstance(info.value, rlx.FormatError)


def test_parse_verifies():
    text = ('graph @"g" mir {\n  %0 = input {dtype="f32", name="x", shape=[2]} : [2] f32\n'
            '  %1 = activation(%0) {kind="exp"} : [3] f32\n  return %1\n}')
    with pytest.raises(rlx.VerifyError, match="differs from the type the op rule gives"):
        rlx.parse(text)
    assert rlx.parse(text, verify=False).node(1).shape == (3,)
