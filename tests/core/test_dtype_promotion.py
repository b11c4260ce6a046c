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
    ("bool", "i4"): "i4", ("bool", "u2"): "u2", ("i8", "f8e4m3fnuz"): "f8e4m3fnuz", ("u8", "f4e2m1"): "f4e2m1",
    ("i32", "f8e8m0"): "f8e8m0", ("bool", "f8e5m2fnuz"): "f8e5m2fnuz",
}

# Joins JAX refuses (no implicit promotion for the sub-byte and MX types), fixed by rlx's lattice.
RLX_ONLY_JOINS = {
    ("u2", "i2"): "i4", ("u4", "i4"): "i8", ("i4", "u8"): "i16", ("u4", "u8"): "u8", ("i2", "i8"): "i8",
    ("u2", "i16"): "i16", ("u2", "u4"): "u4", ("i4", "f16"): "f16", ("f4e2m1", "f8e8m0"): "bf16",
    ("f8e4m3fnuz", "f16"): "f32", ("f8e5m2fnuz", "f8e4m3"): "bf16", ("f4e2m1", "f8e4m3"): "bf16",
}


@pytest.mark.parametrize(("a", "b"), list(JAX_TABLE))
def test_matches_jax_table(a, b):
    assert DType.promote(a, b) == DType(JAX_TABLE[(a, b)])


@pytest.mark.parametrize(("a", "b"), list(RLX_ONLY_JOINS))
def test_sub_byte_and_narrow_float_joins(a, b):
    assert DType.promote(a, b) == DType(RLX_ONLY_JOINS[(a, b)])


NARROW_INTS = ("i4", "u4", "i2", "u2")
NARROW_FLOATS = ("f8e4m3", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e8m0", "f4e2m1")


@pytest.mark.parametrize(("a", "b"), list(itertools.product((*NARROW_INTS, "bool", "i8", "u8"), repeat=2)))
def test_integer_join_holds_every_value_of_both(a, b):
    """The join's range (from ml_dtypes' iinfo, not rlx) covers both operands' ranges."""
    import ml_dtypes

    def bounds(name):
        if name == "bool":
            return 0, 1
        info = ml_dtypes.iinfo(DType(name).numpy)
        return int(info.min), int(info.max)

    lo, hi = bounds(DType.promote(a, b).value)
    assert lo <= min(bounds(a)[0], bounds(b)[0]) and hi >= max(bounds(a)[1], bounds(b)[1])


@pytest.mark.parametrize("name", NARROW_FLOATS)
def test_narrow_floats_are_exact_in_bf16(name):
    """Every bit pattern of an 8- or 4-bit float survives a round trip through bf16 (so bf16 is a join)."""
    import ml_dtypes

    d = DType(name)
    values = np.arange(1 << d.bits, dtype=np.uint8).view(d.numpy).astype(np.float64)
    back = values.astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.array_equal(values, back, equal_nan=True)
    assert DType.promote(d, "bf16") == DType.BF16 and d.is_float and d.is_low_precision_float and d.itemsize == 1


def test_sub_byte_kinds():
    for name in NARROW_INTS:
        assert DType(name).is_int and not DType(name).is_float and DType(name).itemsize == 1
    assert [DType(n).bits for n in ("i4", "u2", "f4e2m1", "f8e8m0", "f32")] == [4, 2, 4, 8, 32]


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
