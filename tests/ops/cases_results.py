"""Cases for the multi-result structure: split (one node, one result per piece) and the result
nodes holding results 1.. Oracles: torch.split / numpy slicing."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64
X = randn(3, 7, seed=31)


def _in(g, name, shape, dtype="f32"):
    return g.input(name, shape, dtype)


CASES = [
    OpCase("split", "three_pieces_axis1_torch", lambda g, x: g.split(x, axis=1, sizes=[2, 4, 1]), {"x": X},
           lambda x: torch.split(T(x), [2, 4, 1], dim=1)),
    OpCase("split", "negative_axis_empty_piece", lambda g, x: g.split(x, axis=-1, sizes=[0, 7]), {"x": X},
           lambda x: (x[:, :0], x)),
    OpCase("split", "one_piece", lambda g, x: g.split(x, axis=0, sizes=[3]), {"x": X}, lambda x: (x,)),
    OpCase("split", "int_axis0", lambda g, x: g.split(x, sizes=[1, 2]), {"x": np.arange(12, dtype=np.int32).reshape(3, 4)},
           lambda x: (x[:1], x[1:])),
    OpCase("result", "only_the_last_piece_used", lambda g, x: g.split(x, axis=1, sizes=[3, 4])[1] * 2.0, {"x": X},
           lambda x: 2.0 * x[:, 3:]),
    OpCase("result", "pieces_out_of_order", lambda g, x: g.split(x, axis=0, sizes=[1, 1, 1])[::-1], {"x": X},
           lambda x: (x[2:], x[1:2], x[:1])),
]

SHAPE_ERRORS = [
    ShapeErrorCase("split", "sizes_do_not_add_up", lambda g: g.split(_in(g, "x", (3, 7)), axis=1, sizes=[2, 2]), match="sum to 4"),
    ShapeErrorCase("split", "scalar", lambda g: g.split(_in(g, "x", ()), sizes=[1])),
    ShapeErrorCase("split", "negative_size", lambda g: g.split(_in(g, "x", (4,)), sizes=[5, -1])),
    ShapeErrorCase("result", "of_a_single_result_node", lambda g: g.result(_in(g, "x", (3,)), index=1),
                   match="appended with its multi-result producer"),
]
