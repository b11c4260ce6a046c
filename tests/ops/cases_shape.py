"""Cases for shape ops (reshape, transpose, narrow, concat, expand, gather); oracles are NumPy written out."""

from __future__ import annotations

import numpy as np

from opcases import OpCase, ShapeErrorCase, randn, symbolic

X = randn(2, 3, 4, seed=11)
TABLE = randn(5, 6, 7, seed=12)

CASES = [
    # reshape
    OpCase("reshape", "infer_minus_one", lambda g, x: g.reshape(x, new_shape=[4, -1]), {"x": X},
           lambda x: np.reshape(x, (4, 6))),
    OpCase("reshape", "to_rank1", lambda g, x: g.reshape(x, new_shape=[-1]), {"x": X}, lambda x: x.ravel()),
    OpCase("reshape", "add_unit_dims_int", lambda g, x: g.reshape(x, new_shape=[1, 6, 1, 4]),
           {"x": np.arange(24, dtype=np.int32).reshape(2, 3, 4)}, lambda x: x.reshape(1, 6, 1, 4)),
    OpCase("reshape", "zero_size", lambda g, x: g.reshape(x, new_shape=[0, 5]), {"x": np.zeros((5, 0))},
           lambda x: np.zeros((0, 5))),
    OpCase("reshape", "symbolic_merge_and_split",
           symbolic(lambda g, x: g.reshape(g.reshape(x, new_shape=[-1, 4]), new_shape=[2, -1, 4]),
                    {"x": ("b", 6, 4)}, (2, "3*b", 4)),
           {"x": X}, lambda x: x.reshape(2, 3, 4)),
    # transpose
    OpCase("transpose", "default_reverses", lambda g, x: g.transpose(x), {"x": X}, lambda x: x.transpose(2, 1, 0)),
    OpCase("transpose", "perm", lambda g, x: g.transpose(x, perm=[1, 2, 0]), {"x": X}, lambda x: np.transpose(x, (1, 2, 0))),
    OpCase("transpose", "negative_perm", lambda g, x: g.transpose(x, perm=[0, -1, -2]), {"x": X}, lambda x: x.swapaxes(1, 2)),
    # narrow
    OpCase("narrow", "positional", lambda g, x: g.narrow(x, 1, 1, 2), {"x": X}, lambda x: x[:, 1:3, :]),
    OpCase("narrow", "negative_axis", lambda g, x: g.narrow(x, -1, 3, 1), {"x": X}, lambda x: x[..., 3:4]),
    OpCase("narrow", "len_alias_keyword", lambda g, x: g.narrow(x, axis=0, start=1, len=1), {"x": X}, lambda x: x[1:2]),
    OpCase("narrow", "symbolic_bounds", symbolic(lambda g, x: g.narrow(x, 1, 1, 2), {"x": ("b", "s", 4)}, ("b", 2, 4)),
           {"x": X}, lambda x: x[:, 1:3, :]),
    OpCase("narrow", "empty", lambda g, x: g.narrow(x, 2, 4, 0), {"x": X}, lambda x: x[:, :, 4:4]),
    # concat
    OpCase("concat", "axis1", lambda g, a, b: g.concat([a, b], axis=1), {"a": X, "b": randn(2, 5, 4, seed=13)},
           lambda a, b: np.concatenate([a, b], axis=1)),
    OpCase("concat", "negative_axis_three", lambda g, a, b, c: g.concat([a, b, c], axis=-1),
           {"a": X, "b": randn(2, 3, 1, seed=14), "c": randn(2, 3, 2, seed=15)},
           lambda a, b, c: np.concatenate([a, b, c], axis=2)),
    OpCase("concat", "symbolic_sum",
           symbolic(lambda g, a, b: g.concat([a, b, a], axis=1), {"a": (2, "s", 4), "b": (2, "t", 4)}, (2, "2*s + t", 4)),
           {"a": X, "b": randn(2, 5, 4, seed=19)}, lambda a, b: np.concatenate([a, b, a], axis=1)),
    OpCase("concat", "single", lambda g, a: g.concat([a]), {"a": X}, lambda a: a),
    OpCase("concat", "promotes_i32_f32", lambda g, a, b: g.concat([a, b], axis=0),
           {"a": np.array([[1, 2]], np.int32), "b": np.array([[0.5, 1.5]], np.float32)},
           lambda a, b: np.array([[1.0, 2.0], [0.5, 1.5]], np.float32)),
    # expand
    OpCase("expand", "left_pad", lambda g, x: g.expand(x, target_shape=[2, 3, 4]), {"x": randn(3, 1, seed=16)},
           lambda x: np.broadcast_to(x, (2, 3, 4))),
    OpCase("expand", "keep_minus_one", lambda g, x: g.expand(x, target_shape=[5, -1, 4]), {"x": randn(1, 3, 1, seed=17)},
           lambda x: np.broadcast_to(x, (5, 3, 4))),
    OpCase("expand", "symbolic_target",
           symbolic(lambda g, x: g.expand(x, target_shape=[5, -1, 4]), {"x": (1, "s", 1)}, (5, "s", 4)),
           {"x": randn(1, 3, 1, seed=17)}, lambda x: np.broadcast_to(x, (5, 3, 4))),
    OpCase("expand", "identity_bool", lambda g, x: g.expand(x, target_shape=[2, 2]),
           {"x": np.array([[True, False], [False, True]])}, lambda x: x),
    # gather
    OpCase("gather", "embedding_axis0", lambda g, t, i: g.gather(t, i),
           {"t": randn(10, 4, seed=18), "i": np.array([[0, 3], [9, 3]], np.int64)}, lambda t, i: t[i]),
    OpCase("gather", "axis1_2d_indices", lambda g, t, i: g.gather(t, i, axis=1),
           {"t": TABLE, "i": np.array([[5, 0, 1], [2, 2, 4]], np.int32)},
           lambda t, i: np.stack([np.stack([t[:, r] for r in row], axis=1) for row in i], axis=1)),
    OpCase("gather", "last_axis_negative_wrap", lambda g, t, i: g.gather(t, i, axis=-1),
           {"t": TABLE, "i": np.array([-1, 0, -7], np.int64)}, lambda t, i: np.take(t, i, axis=2)),
    OpCase("gather", "scalar_index", lambda g, t, i: g.gather(t, i, axis=1),
           {"t": TABLE, "i": np.array(4, np.int32)}, lambda t, i: t[:, 4, :]),
]

SHAPE_ERRORS = [
    ShapeErrorCase("reshape", "two_holes", lambda g: g.reshape(g.input("x", (2, 3, 4)), new_shape=[-1, -1]), match="more than one"),
    ShapeErrorCase("reshape", "not_divisible", lambda g: g.reshape(g.input("x", (2, 3, 4)), new_shape=[5, -1]), match="divisible"),
    ShapeErrorCase("reshape", "numel_mismatch", lambda g: g.reshape(g.input("x", (2, 3)), new_shape=[7])),
    ShapeErrorCase("reshape", "other_negative", lambda g: g.reshape(g.input("x", (2, 3)), new_shape=[-2, 3])),
    ShapeErrorCase("reshape", "symbolic_not_divisible", lambda g: g.reshape(g.input("x", ("b", 6)), new_shape=[-1, 4]),
                   match="provably divisible"),
    ShapeErrorCase("reshape", "symbolic_count_mismatch", lambda g: g.reshape(g.input("x", ("b", 6)), new_shape=["b", 4])),
    ShapeErrorCase("transpose", "not_a_permutation", lambda g: g.transpose(g.input("x", (2, 3, 4)), perm=[0, 0, 1])),
    ShapeErrorCase("transpose", "wrong_length", lambda g: g.transpose(g.input("x", (2, 3)), perm=[0, 1, 2])),
    ShapeErrorCase("narrow", "out_of_bounds", lambda g: g.narrow(g.input("x", (2, 3)), 1, 2, 2), match="out of bounds"),
    ShapeErrorCase("narrow", "bad_axis", lambda g: g.narrow(g.input("x", (2, 3)), 2, 0, 1), match="out of range"),
    ShapeErrorCase("narrow", "negative_start", lambda g: g.narrow(g.input("x", (2, 3)), 1, -1, 1)),
    ShapeErrorCase("concat", "off_axis_mismatch", lambda g: g.concat([g.input("a", (2, 3)), g.input("b", (3, 3))], axis=1)),
    ShapeErrorCase("concat", "rank_mismatch", lambda g: g.concat([g.input("a", (2, 3)), g.input("b", (3,))], axis=0)),
    ShapeErrorCase("concat", "symbolic_off_axis", lambda g: g.concat([g.input("a", ("n", 3)), g.input("b", ("m", 3))], axis=1)),
    ShapeErrorCase("expand", "incompatible", lambda g: g.expand(g.input("x", (3, 2)), target_shape=[3, 4])),
    ShapeErrorCase("expand", "lower_rank", lambda g: g.expand(g.input("x", (3, 2)), target_shape=[2])),
    ShapeErrorCase("gather", "float_indices", lambda g: g.gather(g.input("t", (4, 2)), g.input("i", (3,))), match="integer"),
    ShapeErrorCase("gather", "axis_out_of_range", lambda g: g.gather(g.input("t", (4, 2)), g.input("i", (3,), "i64"), axis=2)),
]
