"""Symbol ranges: decisions checked against brute-force evaluation over every size in the
ranges, graphs narrowing symbols (shape rules, verify, passes, text / JSON), and feeds outside a
range refused with the symbol and its range named."""

import itertools
import json
import math

import numpy as np
import pytest

import rlx
from rlx.ir.serialize import fingerprint, from_json, to_json
from rlx.ir.symbolic import (
    bind_symbols,
    bounds,
    check_range,
    dim_max,
    dim_min,
    evaluate,
    floordiv,
    known_ge,
    mod,
    ranges_in_effect,
    symbol,
)
from rlx.ir.text import parse

b, s = symbol("b"), symbol("s")
RANGES = [{"b": (1, 4), "s": (3, 6)}, {"b": (2, 2), "s": (1, 5)}, {"b": (5, 9), "s": (5, 9)}]
EXPRS = [b - s, b * s - 3 * s, 2 * b - s - 1, (b + s) // 4, (b + 1) % 4, dim_max(b, s) - 5, dim_min(b, s) - b,
         floordiv(b, s), mod(b * s + 1, 3), b * b - 4 * b + 4, s - 3]


def _sizes(ranges):
    return [dict(zip(ranges, combo)) for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges.values()))]


@pytest.mark.parametrize("ranges", RANGES, ids=str)
def test_decisions_under_ranges_agree_with_every_size(ranges):
    decided = 0
    with ranges_in_effect(ranges):
        for expr in EXPRS:
            values = [evaluate(expr, sizes) for sizes in _sizes(ranges)]
            lo, hi = bounds(expr)
            assert lo <= min(values) and max(values) <= hi, expr
            for k in (-1, 0, 1, 2):
                ge = known_ge(expr, k)
                if ge is not None:
                    decided += 1
                    assert ge == all(v >= k for v in values) and (ge or all(v < k for v in values)), (expr, k)
    assert decided >= 10  # the ranges decide comparisons the default [1, inf) leaves open


def test_ranges_decide_what_the_default_cannot():
    assert known_ge(b, 2) is None and known_ge(64, b) is None
    with ranges_in_effect({"b": (2, 64)}):
        assert b >= 2 and b <= 64 and not (b > 64)
        assert dim_max(b, 2) == b and dim_min(b, 100) == b
        assert floordiv(b, 128) == 0 and mod(b, 100) == b
        assert bounds(b * b - b) == (2, 64 * 64 - 2)
    assert str(dim_max(b, 2)) == "max(2, b)"  # outside the ranges: undecided again
    with ranges_in_effect({"b": (1, 8)}), pytest.raises(rlx.ShapeError, match=r"b > s.*b in \[1, 8\], s in \[1, inf\]"):
        _ = b > s


def test_bad_ranges_are_refused():
    for args, match in [((0, 4), ">= 1"), ((5, 4), "empty"), ((1.5, 4), "int"), ((True, 2), "int"), ((1, "8"), "int")]:
        with pytest.raises(rlx.ShapeError, match=match):
            check_range("b", *args)
    with pytest.raises(rlx.ShapeError, match="identifier"):
        check_range("not a name", 1, 2)
    assert check_range("b", 2) == (2, math.inf) and check_range("b", 2, 2) == (2, 2)


def _graph(ranges):
    g = rlx.Graph("r", ranges=ranges)
    x = g.input("x", ("seq", 8))
    img = g.input("img", (1, 3, "h", "h"))
    y = g.narrow(x, axis=0, start=0, length=4)
    c = g.conv2d(img, g.param("w", (2, 3, 5, 5)))
    g.set_outputs([y, c])
    return g


def test_shape_rules_use_the_graph_ranges():
    with pytest.raises(rlx.ShapeError, match=r"narrow.*out of bounds"):
        _graph({"seq": (1, 3)})  # seq < 4 for every size: refused when built, not when run
    with pytest.raises(rlx.ShapeError, match="conv2d"):
        _graph({"seq": (4, 9), "h": (1, 4)})  # the output would be empty at every size
    g = _graph({"seq": (4, 9), "h": (5, 32)})
    assert g.symbol_ranges == {"seq": (4, 9), "h": (5, 32)}
    rlx.verify(g)


def test_ranges_survive_text_json_and_passes():
    g = _graph({"seq": (4, 9), "h": (5, None)})
    text = str(g)
    assert "symbol h in [5, inf]\n" in text and "symbol seq in [4, 9]\n" in text
    assert parse(text) == g
    doc = json.loads(to_json(g))
    assert doc["symbols"] == {"h": [5, None], "seq": [4, 9]}
    assert from_json(to_json(g)) == g
    assert fingerprint(g) != fingerprint(_graph({"seq": (4, 10), "h": (5, None)}))  # ranges are part of the meaning
    assert fingerprint(from_json(to_json(g))) == fingerprint(g)
    plain = rlx.Graph("r")
    plain.set_outputs([plain.input("x", ("seq", 8))])
    assert "symbols" not in json.loads(to_json(plain)) and "symbol " not in str(plain)  # documents without ranges unchanged
    optimized, _ = rlx.optimize(g)
    assert optimized.symbol_ranges == g.symbol_ranges
    assert rlx.plan(optimized).graph.symbol_ranges == g.symbol_ranges


@pytest.mark.parametrize("bad", [
    '[1, 2]', '{"b": [0, 4]}', '{"b": [4, 2]}', '{"b": [1.0, 2]}', '{"b": [null, 2]}', '{"b": [1]}', '{"no way": [1, 2]}',
])
def test_bad_ranges_in_json_are_format_errors(bad):
    g = rlx.Graph("r")
    g.set_outputs([g.input("x", ("b", 2))])
    with pytest.raises(rlx.FormatError, match="symbols"):
        from_json(to_json(g).replace('"stage"', f'"symbols":{bad},"stage"'))


@pytest.mark.parametrize("bad", ["[0, 4]", "[4, 2]", "[1.5, 2]", "[1]", "[1, 2", "[1, " + "9" * 30 + "]", "(1, 2)"])
def test_bad_ranges_in_text_are_parse_errors(bad):
    g = rlx.Graph("r")
    g.set_outputs([g.input("x", ("b", 2))])
    with pytest.raises(rlx.ParseError, match=r"line [23]"):
        parse(str(g).replace("{\n", f"{{\n  symbol b in {bad}\n", 1))


def test_feeds_outside_a_range_name_the_symbol_and_range():
    g = rlx.Graph("r", ranges={"batch": (2, 8)})
    x = g.input("x", ("batch", 3))
    g.set_outputs([g.reshape(x, [-1])])
    ok = np.ones((5, 3), np.float32)
    np.testing.assert_array_equal(rlx.run(g, {"x": ok})[0], ok.reshape(-1))
    for backend in ("numpy", "jax"):
        if backend == "jax":
            pytest.importorskip("jax")
        exe = rlx.compile(g, backend=backend)
        np.testing.assert_array_equal(np.asarray(exe.run({"x": ok})[0]), ok.reshape(-1))
        for size in (1, 9):
            with pytest.raises(rlx.FeedError, match=rf"symbol 'batch' = {size} is outside its range \[2, 8\].*axis 0"):
                exe.run({"x": np.ones((size, 3), np.float32)})
    with pytest.raises(rlx.FeedError, match=r"'batch' = 9 is outside its range \[2, 8\]"):
        rlx.run(g, {"x": np.ones((9, 3), np.float32)})


def test_symbols_are_sizes_of_at_least_one_by_default():
    _, problems = bind_symbols([("x", (symbol("n"), 2), (0, 2))])
    assert problems == ["symbol 'n' = 0 is outside its range [1, inf] (bound by x axis 0)"]
    binding, problems = bind_symbols([("x", (2 * symbol("n") + 1, 2), (7, 2))], {"n": (4, 9)})
    assert binding == {"n": 3} and "symbol 'n' = 3 is outside its range [4, 9]" in problems[0]
