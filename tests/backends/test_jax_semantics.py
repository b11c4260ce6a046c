"""Edge semantics the op cases do not feed: NaN, infinities, integer corner cases, ties, duplicates.

All graphs are merged into one program (one XLA compilation) and compared with ``rlx.run``
bit for bit where the reference is exact (integers, selections) and within 1e-6 otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import rlx  # noqa: E402
from backends.jax_cases import assert_close, compile_fn, merge  # noqa: E402

NAN, INF = np.nan, np.inf
F = np.array([[1.0, NAN, -2.0, 0.5], [NAN, NAN, NAN, NAN], [-INF, 3.0, INF, -0.5]], np.float32)
I = np.array([-7, 7, -7, 5, 0, -1], np.int32)
J = np.array([2, -2, 0, 0, 3, -3], np.int32)


def _graph(name, feed, build):
    g = rlx.Graph(name)
    handles = {k: g.input(k, v.shape, rlx.DType.of(v.dtype)) for k, v in feed.items()}
    outs = build(g, **handles)
    g.set_outputs(list(outs) if isinstance(outs, (list, tuple)) else [outs])
    return g, feed


def _cases():
    f, i, j = {"x": F}, {"a": I, "b": J}, {"x": F, "y": F[::-1].copy()}
    pool_x = np.array([[[[1, NAN, 2, 2], [NAN, NAN, 0, 5], [3, 3, -1, 7], [0, 0, 7, 7]]]], np.float32)
    return [
        _graph("fmax", j, lambda g, x, y: [g.maximum(x, y), g.minimum(x, y), g.lt(x, y), g.eq(x, x)]),
        _graph("reduce_nan", f, lambda g, x: [g.max(x, axes=[1]), g.min(x, axes=[0], keep_dim=True), g.sum(x, axes=[1])]),
        _graph("reduce_empty", {"x": np.zeros((2, 0), np.float32)},
               lambda g, x: [g.max(x, axes=[1]), g.min(x, axes=[1]), g.sum(x, axes=[1])]),
        _graph("softmax_inf", {"x": np.array([[-INF, -INF], [0.0, INF], [1.0, 2.0]], np.float32)}, lambda g, x: g.softmax(x, axis=1)),
        _graph("int_div_pow", i, lambda g, a, b: [g.div(a, b), g.pow(a, b), g.maximum(a, b), g.abs(a), g.neg(b)]),
        _graph("int_mod_shift", i, lambda g, a, b: [g.binary_ext(a, b, op="mod"), g.binary_ext(a, b, op="fmod"),
                                                    g.binary_ext(a, g.abs(b) * 11, op="shift_left"),
                                                    g.binary_ext(a, g.abs(b) * 11, op="shift_right"),
                                                    g.binary_ext(a, b, op="shift_right"), g.binary_ext(b, a, op="shift_left")]),
        _graph("float_mod", {"a": np.array([-7.5, 7.5, -0.0, 3.0], np.float32), "b": np.array([2.0, -2.0, 3.0, 0.0], np.float32)},
               lambda g, a, b: [g.binary_ext(a, b, op="mod"), g.binary_ext(a, b, op="fmod"), g.pow(a, b)]),
        _graph("round_cast", {"x": np.array([0.5, -0.5, 1.5, 2.5, -2.5, -1.7, 3.99, 0.0], np.float32)},
               lambda g, x: [g.round(x), g.cast(x, to="i32"), g.cast(x, to="bool"), g.cast(x, to="bf16"),
                             g.unary_math(x, kind="round_even"), g.unary_math(x, kind="sign")]),
        _graph("where_float_cond", {"c": np.array([0.0, 2.0, NAN, -1.0], np.float32), "x": np.arange(4, dtype=np.float32)},
               lambda g, c, x: g.where(c, x, -x)),
        _graph("pool_nan", {"x": pool_x}, lambda g, x: [g.pool2d(x, kind="max", kernel_size=[2, 2]),
                                                         g.pool2d(x, kind="min", kernel_size=[3, 3], stride=[1, 1], padding=[1, 1]),
                                                         g.max_pool2d_backward(g.abs(x), g.pool2d(g.abs(x), kind="max", kernel_size=[2, 2]),
                                                                               kernel_size=[2, 2])]),
        _graph("scatter_dup", {"d": np.zeros((3, 2), np.float32), "i": np.array([[0, 1], [0, 1], [2, 1]], np.int64),
                               "u": np.arange(6, dtype=np.float32).reshape(3, 2)},
               lambda g, d, i, u: [g.scatter_elements(d, i, u, axis=0), g.scatter_elements(d, i, u, axis=0, reduction="add"),
                                   g.gather_elements(u, i, axis=0)]),
        _graph("select_nan_ties", {"x": np.array([[1.0, 3.0, 3.0, NAN], [2.0, 2.0, 1.0, 0.0]], np.float32)},
               lambda g, x: [g.arg_reduce(x, op="argmax", axis=1), g.arg_reduce(x, op="argmin", axis=1, select_last=True),
                             g.topk_indices(x, k=3, axis=1), g.topk_indices(x, k=2, axis=1, largest=False),
                             g.cumulative(x, op="sum", axis=1, exclusive=True, reverse=True)]),
    ]


def test_edge_semantics_match_reference():
    cases = _cases()
    merged, renames, spans = merge([g for g, _ in cases], name="edges")
    feed = {names[k]: v for (_, f), names in zip(cases, renames) for k, v in f.items()}
    got = compile_fn()(merged, backend="jax").run(inputs=feed)
    failures = []
    for (g, f), span in zip(cases, spans):
        try:
            assert_close(got[span], rlx.run(g, f), rtol=1e-6, atol=1e-6)
        except AssertionError as exc:
            failures.append(f"{g.name}: {str(exc).strip()[:500]}")
    assert not failures, "\n".join(failures)
