"""Promotion lattice and broadcasting, checked against JAX's documented table and NumPy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rlx
from rlx import DType

ALL = list(DType)

# Facts from jax.numpy's type-promotion table (jax.numpy.promote_types, x64 mode), for the
# dtypes rlx has. Written out here, not computed by rlx.
JAX_TABLE = {
    ("bool", "i8"): "i8", ("bool", "u8"): "u8", ("bool", "f16"): "f16", ("u8", "i8"): "i16",
    ("u8", "u32"): "u32", ("u32", "i8"): "i64", ("u32", "i32"): "i64", ("i32", "i64"): "i64",
    ("i8", "f16"): "f16", ("i32", "bf16"): "bf16", ("i64", "f32"): "f32", ("f16", "bf16"): "f32",
    ("bf16", "f64"): "f64", ("f32", "f64"): "f64", ("f32", "c64"): "c64", ("i16", "i32"): "i32",
    ("u8", "f32"): "f32", ("bool", "c64"): "c64", ("i64", "bf16"): "bf16",
}


@pytest.mark.parametrize(("a", "b"), list(JAX_TABLE))
def test_matches_jax_table(a, b):
    assert DType.promote(a, b) == DType(JAX_TABLE[(a, b)])


@pytest.mark.parametrize(("a", "b"), list(itertools.product(ALL, ALL)))
def test_commutative_and_upper_bound(a, b):
    c = DType.promote(a, b)
    assert DType.promote(b, a) == c
    assert DType.promote(a, c) == c and DType.promote(b, c) == c  # c is above both
    assert DType.promote(a, a) == a


@pytest.mark.parametrize(("a", "b", "c"), list(itertools.product(ALL, repeat=3))[::7])
def test_associative(a, b, c):
    assert DType.promote(DType.promote(a, b), c) == DType.promote(a, DType.promote(b, c))


UNSIGNED_PAIRS = [("u8", "u16"), ("u16", "u32"), ("u32", "u64"), ("u16", "i8"), ("u16", "i16"), ("u16", "i32"),
                  ("u64", "u8"), ("u64", "i8"), ("u64", "i64"), ("u64", "bool")]


@pytest.mark.parametrize(("a", "b"), UNSIGNED_PAIRS)
def test_unsigned_joins_match_numpy(a, b):
    """Between integers (and bool) NumPy's promotion is exact: rlx's lattice gives the same types."""
    want = np.result_type(DType(a).numpy, DType(b).numpy)
    assert DType.promote(a, b).numpy == want


@pytest.mark.parametrize("d", ALL)
def test_numpy_mapping_round_trips(d):
    assert DType.of(d.numpy) == d and DType.of(d.value) == d
    assert d.itemsize == np.dtype(d.numpy).itemsize


def test_int_float_join_never_loses_kind():
    for a, b in itertools.product(ALL, ALL):
        c = DType.promote(a, b)
        if a.is_float or b.is_float:
            assert c.is_float or c.is_complex


def test_aliases_and_bad_names():
    assert rlx.f32 is DType.F32 and rlx.bool_ is DType.BOOL and rlx.bf16.itemsize == 2
    with pytest.raises(rlx.RlxError):
        DType.of("float128x")


dims = st.integers(min_value=1, max_value=4)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)


@given(shapes, shapes)
def test_broadcast_matches_numpy(a, b):
    from rlx.ir.shape import Shape, broadcast_shapes

    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(rlx.ShapeError):
            broadcast_shapes(Shape(a), Shape(b))
        return
    assert broadcast_shapes(Shape(a), Shape(b)) == expected


@given(shapes, shapes, st.sampled_from(ALL[:11]), st.sampled_from(ALL[:11]))
def test_binary_result_type_matches_numpy_shape_and_lattice_dtype(a, b, da, db):
    g = rlx.Graph("p")
    x, y = g.input("x", a, da), g.input("y", b, db)
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(rlx.ShapeError):
            g.add(x, y)
        return
    if DType.promote(da, db).is_bool:
        return
    z = g.add(x, y)
    assert z.shape == expected and z.dtype == DType.promote(da, db)


def test_symbolic_broadcast():
    g = rlx.Graph("sym")
    a = g.input("a", ("batch", 1, 4))
    b = g.input("b", (3, 1))
    assert (a + b).shape == ("batch", 3, 4)
    assert (a + g.input("c", ("batch", 1, 1))).shape == ("batch", 1, 4)
    with pytest.raises(rlx.ShapeError, match="batch"):
        g.add(a, g.input("d", ("seq", 1, 4)))
