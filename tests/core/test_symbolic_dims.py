"""Symbolic dims (rlx.ir.symbolic): canonical form, arithmetic checked against integer
evaluation at many sizes, sound decisions, text / JSON round trips, feed binding."""

import gc
import itertools
import json

import numpy as np
import pytest

import rlx
from rlx.ir.serialize import fingerprint, from_json, to_json
from rlx.ir.symbolic import (
    SymDim,
    bounds,
    dim_max,
    dim_min,
    evaluate,
    floordiv,
    fresh_symbol,
    known_ge,
    least_for_nonnegative,
    mod,
    parse_dim,
    ranges_in_effect,
    substitute,
    symbol,
)
from rlx.ir.text import parse
from rlx.runtime.specialize import PlanCache, ValueSpecialized

b, s = symbol("b"), symbol("s")
SIZES = [1, 2, 3, 5, 8, 13]


def _exprs():
    """Expressions with their meaning as a Python function of (b, s)."""
    return [
        (b * s * 8, lambda B, S: B * S * 8),
        (2 * b + 1, lambda B, S: 2 * B + 1),
        ((b - 3) // 2 + 1, lambda B, S: (B - 3) // 2 + 1),
        ((b + 2 * s) // 4, lambda B, S: (B + 2 * S) // 4),
        ((3 * b + 1) % 3, lambda B, S: (3 * B + 1) % 3),
        ((b + s) % 4, lambda B, S: (B + S) % 4),
        ((b + s) * (b - s), lambda B, S: B * B - S * S),
        (dim_max(b, s) + dim_min(b, 2), lambda B, S: max(B, S) + min(B, 2)),
        (floordiv(b * s, s), lambda B, S: B),
        (mod(b * s, b), lambda B, S: 0),
        (floordiv(b + 1, s) * s + mod(b + 1, s), lambda B, S: B + 1),
        (floordiv(12 * (b + 1) * (s + 2), (b + 1) * (s + 2)), lambda B, S: 12),
        (floordiv((s + 1) * (s + 2) + 1, s + 2), lambda B, S: ((S + 1) * (S + 2) + 1) // (S + 2)),
        (floordiv(b * b * s - s, b + 1), lambda B, S: (B * B * S - S) // (B + 1)),
        (mod(3 * (b + s) * (b + 1), b + s), lambda B, S: 0),
    ]


@pytest.mark.parametrize("index", range(len(_exprs())))
def test_arithmetic_matches_integer_evaluation(index):
    expr, fn = _exprs()[index]
    for B, S in itertools.product(SIZES, SIZES):
        assert evaluate(expr, {"b": B, "s": S}) == fn(B, S)
        lo, hi = bounds(expr)
        assert lo <= fn(B, S) <= hi


@pytest.mark.parametrize("index", range(len(_exprs())))
def test_canonical_text_round_trips(index):
    expr, _ = _exprs()[index]
    back = parse_dim(str(expr))
    assert back == expr and hash(back) == hash(expr)


def test_canonical_form_is_independent_of_spelling():
    assert b * s + 1 == 1 + s * b
    assert parse_dim("(b + 1)*(b - 1)") == b * b - 1 == parse_dim("b^2 - 1")
    assert floordiv(2 * b + 2, 2) == b + 1
    assert dim_max(b, s) == dim_max(s, b)
    assert b - b == 0 and (b * 0).__class__ is int
    assert isinstance(b + 1, SymDim) and isinstance(b + 1, str)


def test_decisions_are_sound_and_undecidable_ones_raise():
    assert b >= 1 and b > 0 and not (b < 1) and b + 1 > b and b * s >= s
    assert known_ge(b * s - b, 0) is True and known_ge(-b, 0) is False
    assert known_ge(b, s) is None
    with pytest.raises(rlx.ShapeError, match="cannot decide whether b > s"):
        _ = b > s
    with pytest.raises(rlx.ShapeError, match="cannot decide"):
        _ = b > 3


def test_exact_division_by_a_polynomial_is_a_polynomial():
    """A divisor of several terms that divides the dividend exactly gives the polynomial quotient (a reshape's -1
    after a conv stack: 768*b*n / (64*b*n) with n = floordiv(...) - 1); an inexact one stays a floordiv atom."""
    n = floordiv(floordiv(s, 80) + 1, 2) - 1
    assert floordiv(768 * b * n, 64 * b * n) == 12
    assert floordiv(b * s * (s + 1) * 64, (s + 1) * 64) == b * s
    assert floordiv(b * b * s - s, b + 1) == b * s - s
    assert mod(s * s + 3 * s + 2, s + 1) == 0
    for inexact in (floordiv(s * s + 1, s + 1), floordiv(6 * b * s, 4 * b)):
        assert "floordiv" in str(inexact)


def _brute_least(d, name, top=5000):
    """The least size of ``name`` from which ``d`` is >= 0 at every size up to ``top``, by evaluation."""
    values = [evaluate(d, {name: v}) >= 0 for v in range(1, top)]
    return next(v for v in range(1, top) if all(values[v - 1:]))


@pytest.mark.parametrize("text", ["floordiv(floordiv(floordiv(s, 80) + 1, 2) + 1, 2) - 1", "s - 7", "2*s - 9",
                                  "floordiv(s - 10, 5) - 3", "max(floordiv(s, 3), floordiv(s, 5) + 4) - 12",
                                  "min(s, 40) + floordiv(s, 7) - 30", "s^2 - 50"])
def test_least_size_where_a_size_expression_is_nonnegative(text):
    d = parse_dim(text)
    name, lo = least_for_nonnegative(d)
    assert name == "s" and lo == _brute_least(d, "s")
    with ranges_in_effect({"s": (lo, float("inf"))}):
        assert known_ge(d, 0) is True and dim_max(0, d) == d  # the clamp a [:-1] crop leaves folds away


@pytest.mark.parametrize("text", ["s + 3", "7 - s", "mod(s, 5) - 2", "b + s - 5", "floordiv(s, 2) - s + 40",
                                  "max(s - 20, 5) - 12"])
def test_least_size_is_none_where_it_cannot_be_a_range(text):
    """Always >= 0, decreasing, periodic, in two symbols, not monotone, or not evaluable at small sizes (a negative
    part of a max): no range start is claimed."""
    assert least_for_nonnegative(parse_dim(text)) is None


def test_plain_strings_and_numpy_ints_interoperate():
    assert rlx.Shape(("b", 4)) == ("b", 4)
    assert np.int64(3) * b == 3 * b
    assert "%s!" % b == "b!" and "x" + b == "xb"  # noqa: UP031 (str formatting is untouched)
    assert substitute(b * s + 1, {"b": 2}) == 2 * s + 1


def test_parser_rejects_bad_and_oversized_expressions():
    for bad in ("b +", "2*", "floordiv(b)", "b // 0", "mod(b, 0)", "b ^ 100", "(" * 40 + "b" + ")" * 40, "b$"):
        with pytest.raises((rlx.ShapeError, ZeroDivisionError)):
            parse_dim(bad)
    with pytest.raises(rlx.ShapeError, match=r"too large|longer"):
        parse_dim("(" + " + ".join(f"x{i}" for i in range(30)) + ")^8")


def _symbolic_graph():
    g = rlx.Graph("sym")
    x = g.input("x", ("b", "s", 8))
    y = g.input("y", ("s", 8))
    flat = g.reshape(x, [-1, 8])  # [b*s, 8]
    both = g.concat([flat, y], axis=0)  # [b*s + s, 8]
    mid = g.narrow(both, 0, 1, "s")  # [s, 8]
    wide = g.expand(g.reshape(y, [1, "s", 8]), ["b", -1, 8])
    back = g.reshape(flat, ["b", "s", 2, 4])
    g.set_outputs([flat, both, mid, wide, back])
    return g


def test_shape_rules_produce_expressions():
    g = _symbolic_graph()
    shapes = [tuple(g.node(o).shape) for o in g.output_ids]
    assert shapes == [(b * s, 8), (b * s + s, 8), (s, 8), (b, s, 8), (b, s, 2, 4)]
    rlx.verify(g)


def test_reshape_that_is_not_provably_equal_names_both_counts():
    g = rlx.Graph("bad")
    x = g.input("x", ("b", 6))
    with pytest.raises(rlx.ShapeError, match=r"6\*b.*4") as info:
        g.reshape(x, [-1, 4])
    assert "reshape" in str(info.value)
    with pytest.raises(rlx.ShapeError, match=r"6\*b.*b\*s"):
        g.reshape(x, ["b", "s"])


def test_text_and_json_round_trip_expressions():
    g = _symbolic_graph()
    assert parse(str(g)) == g
    doc = to_json(g)
    assert '"b*s + s"' in doc
    assert from_json(doc) == g
    assert fingerprint(from_json(doc)) == fingerprint(g)


def test_version_1_documents_with_symbol_names_load():
    g = rlx.Graph("v1")
    x = g.input("x", ("batch", 4))
    g.set_outputs([g.reshape(x, [-1, 2])])
    doc = json.loads(to_json(g))
    doc["version"] = 1
    loaded = from_json(json.dumps(doc))
    assert loaded == g and loaded.node(loaded.output_ids[0]).shape == (2 * symbol("batch"), 2)


@pytest.mark.parametrize("backend", ["reference", "numpy", "jax"])
def test_one_graph_runs_at_many_sizes(backend):
    g = _symbolic_graph()
    rng = np.random.default_rng(0)
    exe = None if backend == "reference" else rlx.compile(g, backend=backend)
    for B, S in [(1, 7), (2, 16), (3, 33)]:
        X = rng.standard_normal((B, S, 8)).astype(np.float32)
        Y = rng.standard_normal((S, 8)).astype(np.float32)
        feed = {"x": X, "y": Y}
        outs = rlx.run(g, feed) if exe is None else exe.run(feed)
        flat = X.reshape(-1, 8)
        both = np.concatenate([flat, Y])
        want = [flat, both, both[1:1 + S], np.broadcast_to(Y, (B, S, 8)), X.reshape(B, S, 2, 4)]
        for got, ref in zip(outs, want):
            np.testing.assert_array_equal(got, ref)


def test_feed_binding_names_both_feeds_and_solves_expressions():
    g = rlx.Graph("bind")
    x = g.input("x", ("batch", 3))
    y = g.input("y", ("batch",))
    g.set_outputs([g.reduce(x, op="sum", axes=[1]) + y])
    with pytest.raises(rlx.FeedError, match=r"input 'y'.*'batch' = 2 elsewhere, but 3 here \(bound by input 'x' axis 0\)"):
        rlx.run(g, {"x": np.zeros((2, 3), np.float32), "y": np.zeros(3, np.float32)})
    h = rlx.Graph("solve")
    z = h.input("z", (2 * symbol("n") + 1,))
    w = h.input("w", ("n",))
    h.set_outputs([h.narrow(z, 0, 0, "n") + w])
    Z = np.arange(7, dtype=np.float32)
    (out,) = rlx.run(h, {"z": Z, "w": np.ones(3, np.float32)})
    np.testing.assert_array_equal(out, Z[:3] + 1)
    with pytest.raises(rlx.FeedError, match=r"2\*n \+ 1"):
        rlx.run(h, {"z": np.zeros(6, np.float32), "w": np.ones(3, np.float32)})


def test_conv_and_pool_output_sizes_are_floordiv_expressions():
    torch = pytest.importorskip("torch")
    g = rlx.Graph("conv")
    x = g.input("x", ("n", 3, "h", "w"))
    wt = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = g.conv2d(x, g.constant(wt), stride=[2, 2], padding=[1, 1])
    p = g.pool2d(y, kind="max", kernel_size=[2, 2])
    g.set_outputs([y, p])
    rlx.verify(g)
    h = symbol("h")
    assert g.node(y.id).shape[2] == (h + 1) // 2 and g.node(p.id).shape[2] == (h + 1) // 4
    for shape in [(1, 3, 7, 9), (2, 3, 16, 11)]:
        X = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        ty = torch.nn.functional.conv2d(torch.from_numpy(X), torch.from_numpy(wt), stride=2, padding=1)
        got = rlx.run(g, {"x": X})
        np.testing.assert_allclose(got[0], ty.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], torch.nn.functional.max_pool2d(ty, 2).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(rlx.ShapeError, match="not positive"):
        g.pool2d(g.input("z", ("n", 1, 1, 1)), kind="max", kernel_size=[3, 3])


def test_run_checks_op_rules_at_the_fed_sizes_and_follows_a_grown_graph():
    """rlx.run binds the graph's symbols per feed and re-runs every op rule: a conv window longer than the fed
    input is the conv rule's ShapeError (as torch refuses it), not NumPy's; a graph grown after a run is run as it
    is now (the bound copies are remembered per graph length and outputs)."""
    torch = pytest.importorskip("torch")
    g = rlx.Graph("conv")
    x = g.input("x", (1, 2, 4, "w"))
    wt = np.random.default_rng(3).standard_normal((2, 2, 3, 3)).astype(np.float32)
    y = g.conv2d(x, g.constant(wt))
    g.set_outputs([y])
    with pytest.raises(rlx.ShapeError, match="not positive"):
        rlx.run(g, {"x": np.zeros((1, 2, 4, 2), np.float32)})
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv2d(torch.zeros(1, 2, 4, 2), torch.from_numpy(wt))
    X = np.random.default_rng(4).standard_normal((1, 2, 4, 6)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(X), torch.from_numpy(wt)).numpy()
    np.testing.assert_allclose(rlx.run(g, {"x": X})[0], want, rtol=1e-4, atol=1e-5)
    g.set_outputs([g.neg(y)])
    np.testing.assert_allclose(rlx.run(g, {"x": X})[0], -want, rtol=1e-4, atol=1e-5)
    from rlx.ops import evaluate

    graph_id = id(g)
    assert any(key[0] == graph_id for key in evaluate._BOUND_SUBGRAPHS)
    del g, x, y
    gc.collect()
    assert not any(key[0] == graph_id for key in evaluate._BOUND_SUBGRAPHS)  # the copies (and constants) go with it


def test_fresh_symbols_are_identifiers_named_from_input_and_axis():
    assert fresh_symbol("pixel_values.0", 2) == "pixel_values_0_d2"
    assert fresh_symbol("x", 0, taken={"x_d0"}) == "x_d0_2"
    assert fresh_symbol("0in", 1) == "_0in_d1"


def test_plan_cache_is_lru():
    cache = PlanCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1
    cache["c"] = 3
    assert list(cache) == ["a", "c"]


def test_arena_executor_replans_per_binding_and_bounds_its_cache():
    g = _symbolic_graph()
    exe = rlx.compile(g)
    rng = np.random.default_rng(3)
    for B in range(1, 20):
        X = rng.standard_normal((B, 2, 8)).astype(np.float32)
        Y = rng.standard_normal((2, 8)).astype(np.float32)
        np.testing.assert_array_equal(exe.run({"x": X, "y": Y})[0], X.reshape(-1, 8))
    assert len(exe._special) <= exe._special.maxsize


def test_value_specialized_builds_once_per_shape_value():
    """A reshape whose target comes from an input's value (ONNX Reshape with a runtime shape)."""

    def build(values):
        g = rlx.Graph("reshape_by_value")
        x = g.input("x", (12,))
        g.set_outputs([g.reshape(x, [int(v) for v in values["shape"]])])
        return g

    model = ValueSpecialized(build, ["shape"])
    X = np.arange(12, dtype=np.float32)
    for shape in ([3, 4], [2, -1], [3, 4]):
        (out,) = model.run({"x": X, "shape": np.array(shape, np.int64)})
        np.testing.assert_array_equal(out, X.reshape(shape))
    assert model.stats == {"builds": 2, "hits": 1}
    with pytest.raises(rlx.FeedError, match="shape"):
        model.run({"x": X})
