"""``rlx.parse`` of hostile text, deep if_ nests in save / fingerprint / print, and feeds that are
not mappings: each a typed :class:`rlx.RlxError`, never a RecursionError, ValueError or crash.

The text cases and the fuzzer (``text_fuzz.py``) run in child processes with time and memory
limits (isolate.py), so a crash or a hang fails its case instead of the test run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import rlx

from .isolate import run_cases

FUZZ = os.path.join(os.path.dirname(__file__), "text_fuzz.py")
GOOD = '''graph @"t" mir {
  %0 = input {dtype="f32", name="x", shape=[2, 3]} : [2, 3] f32 name="x"
  %1 = reduce(%0) {axes=[1], keep_dim=false, op="sum"} : [2] f32
  return %1
}'''


def _hostile_texts() -> dict[str, str]:
    deep_graphs = GOOD.replace('%1 = reduce(%0) {axes=[1], keep_dim=false, op="sum"}',
                               '%1 = if_(%0) {then_branch=' + 'graph @"g" mir {\n %0 = if_() {then_branch=' * 400)
    return {
        "dtype name": GOOD.replace('dtype="f32"', 'dtype="f99"', 1),
        "dtype format string": GOOD.replace('dtype="f32"', 'dtype="f32, [2]"', 1),
        "dtype literal": GOOD.replace('dtype="f32"', 'dtype="[(\\"a\\", \\"<f4\\")]"', 1),
        "type dtype": GOOD.replace(": [2] f32", ": [2] q7"),
        "tensor dtype": GOOD.replace("[2, 3] f32 name", '[2, 3] f32 name').replace(
            "%1 = reduce(%0) {axes=[1], keep_dim=false, op=\"sum\"} : [2] f32",
            '%1 = constant {value=tensor(zz, [1], "AAAA")} : [1] f32'),
        "tensor dims": GOOD.replace("%1 = reduce(%0) {axes=[1], keep_dim=false, op=\"sum\"} : [2] f32",
                                    '%1 = constant {value=tensor(f32, [-1, 0], "")} : [1] f32'),
        "deep json": GOOD.replace("axes=[1]", "axes=" + "[" * 100_000 + "]" * 100_000),
        "deep graphs": deep_graphs,
        "huge id": GOOD.replace("%1 = reduce(%0)", "%1 = reduce(%" + "9" * 5000 + ")"),
        "huge dim": GOOD.replace("[2] f32", "[" + "9" * 5000 + "] f32"),
        "huge attribute dim": GOOD.replace("shape=[2, 3]", "shape=[" + "9" * 100_000 + ", 3]"),
        "huge attribute int": GOOD.replace("axes=[1]", "axes=[" + "9" * 100_000 + "]"),
        "huge exponent": GOOD.replace("axes=[1]", "axes=[1e" + "9" * 100_000 + "]"),
        "garbage": "\x00\xff\ud800" * 50,
        "truncated": GOOD[:90],
        "not text": "",
    }


def test_hostile_text_raises_parse_errors():
    texts = _hostile_texts()
    outcomes = run_cases(FUZZ, "parse_outcome", [[t] for t in texts.values()], wall=60)
    for name, o in zip(texts, outcomes):
        assert o.exited and o.error is None, f"{name}: {o.how} {o.raised[:1]} {o.message[:300]}"
        assert o.value == "ParseError", f"{name}: {o.value}"


def test_text_fuzz_raises_only_rlx_errors():
    """300 mutated printed graphs in three limited children: a Graph that round-trips, or an RlxError."""
    outcomes = run_cases(FUZZ, "run_batch", [[0, 100], [100, 200], [200, 300]], wall=120)
    counts: dict[str, int] = {}
    for o in outcomes:
        assert o.exited and o.error is None, f"{o.how} {o.raised[:1]} {o.message[:300]}"
        assert not o.value["failures"], o.value["failures"]
        for k, v in o.value["counts"].items():
            counts[k] = counts.get(k, 0) + v
    assert sum(counts.values()) == 300 and set(counts) <= {"parsed", "rlx_error"}, counts
    assert counts.get("parsed", 0) > 0  # some mutations leave valid graphs: the round trip runs too


def test_deep_if_nest_is_a_format_error(tmp_path):
    """400 nested if_: FormatError from save / to_json / fingerprint / str (was RecursionError); at the load
    limit (LoadLimits.max_depth levels) all of them work and the saved model loads back equal."""
    deep, edge = run_cases(FUZZ, "deep_if_outcomes", [[400, str(tmp_path / "a")], [31, str(tmp_path / "b")]], wall=120)
    assert deep.exited and edge.exited, (deep.how, deep.message, edge.how, edge.message)
    assert deep.value == {"save": "FormatError", "to_json": "FormatError", "fingerprint": "FormatError", "str": "FormatError"}
    assert edge.value == {"save": "ok", "to_json": "ok", "fingerprint": "ok", "str": "ok", "load": "equal"}


def _graph() -> rlx.Graph:
    g = rlx.Graph("feed")
    x = g.input("x", (2,), "f32")
    w = g.param("w", (2,), "f32")
    g.set_outputs([x * w])
    return g


def _runners():
    g = _graph()
    params = {"w": np.full(2, 3.0, np.float32)}
    yield "rlx.run", lambda inputs, p=params: rlx.run(g, inputs=inputs, params=p)
    for backend in ("numpy", "jax", "torch", "onnxruntime"):
        if backend != "numpy":
            pytest.importorskip({"jax": "jax", "torch": "torch", "onnxruntime": "onnxruntime"}[backend])
        exe = rlx.compile(g, backend=backend, params=params)
        yield backend, exe.run


@pytest.mark.parametrize("feed", [[np.ones(2, np.float32)], np.ones(2, np.float32), "x", {0: np.ones(2, np.float32)}],
                         ids=["list", "array", "str", "int key"])
def test_feed_that_is_not_a_mapping_is_a_feed_error(feed):
    for name, run in _runners():
        with pytest.raises(rlx.FeedError, match=r"inputs= must be a mapping|input names must be strings") as info:
            run(feed)
        assert "'x'" in str(info.value), name  # names the graph's inputs
        assert np.array_equal(run({"x": np.array([1, 2], np.float32)})[0], [3, 6]), name


def test_params_that_are_not_a_mapping_are_a_feed_error():
    g = _graph()
    with pytest.raises(rlx.FeedError, match="params= must be a mapping"):
        rlx.run(g, inputs={"x": np.ones(2, np.float32)}, params=[np.ones(2, np.float32)])
    exe = rlx.compile(g, params={"w": np.ones(2, np.float32)})
    with pytest.raises(rlx.FeedError, match="params= must be a mapping"):
        exe.run({"x": np.ones(2, np.float32)}, params=[np.ones(2, np.float32)])
