"""Mutation fuzzer for ``rlx.parse`` (the text form): printed graphs, randomly damaged.

Case ``i`` is fully determined by ``i`` (``random.Random(i)`` picks a seed graph's text and
1-4 mutations: byte edits, deleted / duplicated / swapped spans and lines, hostile tokens
such as unknown dtypes, 2**64 ids, 10,000-deep brackets or graph blocks, NaN, NUL). The only
acceptable outcomes are a Graph, which must then print and parse back to an equal graph, or
an :class:`rlx.RlxError`. :func:`run_batch` runs cases in the calling process and counts
outcomes; the tests call it in a child process with time and memory limits (isolate.py), so
a crash or a hang fails a test instead of the run.

Long run by hand: ``python tests/security/text_fuzz.py 20000`` (prints counts and failures);
one case: ``python tests/security/text_fuzz.py --case N``.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
from collections import Counter

import numpy as np

import rlx

CASE_SECONDS = 2.0  # CPU seconds one case may take; more is reported as slow
DEEP = 10_000
TOKENS = [
    "{", "}", "[", "]", "(", ")", "%", ",", "=", ":", '"', "@", "#", "\n", "\x00", "\ud800", "é", "NaN", "-Infinity",
    "1e999", "-0", "99999999999999999999", str(2**64), "-9223372036854775809", "%" + "9" * 5000, "f99", "q7", "bf16",
    "c64", "bool", "f8e4m3", "graph", "return", "mir", "hir", "lir", "input", "binary", "if_", "tensor(", "name=",
    "prov=", "result_names=", "batch", "batch*2", "(batch+1)//0", "max(", 'tensor(f32, [2], "AAAAAAAAAAA=")',
    'tensor(f32, [1000000000000], "")', 'tensor(zz, [1], "")', 'graph @"g" mir {\n return\n}',
    "[" * DEEP, "{" * DEEP, "(" * DEEP, '{"a":' * DEEP, "graph @\"d\" mir {\n %0 = if_() {then_branch=" * 200,
]


def seeds() -> list[str]:
    """Printed graphs covering the text form: names, symbolic dims, tensors, subgraphs, multi-results, prov."""
    out = []
    g = rlx.Graph("mlp")
    x = g.input("x", ("batch", 4), "f32")
    w = g.param("w", (4, 3), "bf16")
    c = g.constant(np.array([[np.nan, np.inf, -0.0]], np.float32), name="c")
    h = g.matmul(x, g.cast(w, to="f32")) + c
    g.set_outputs([g.reduce(g.gelu(h), op="max", axes=[1], keep_dim=True), g.maximum(h, c)])
    out.append(str(g))

    sub = rlx.Graph("branch")
    sx = sub.input("x", (2,), "f32")
    sub.set_outputs([sx * sx])
    other = rlx.Graph("other")
    ox = other.input("x", (2,), "f32")
    other.set_outputs([-ox])
    g = rlx.Graph("cond")
    p = g.input("p", (), "bool")
    x = g.input("x", (2,), "f32")
    y = g.if_([p, x], then_branch=sub, else_branch=other)
    idx = g.constant(np.array([1, 0], np.int64))
    g.set_outputs([g.gather(y, idx, axis=0), g.where(p, y, x)])
    out.append(str(g))

    g = rlx.Graph("ints", "hir")
    a = g.input("a", (3, "n"), "i32")
    b = g.input("b", (3, 1), "i32")
    g.set_outputs([g.compare(a, b, op="lt"), g.transpose(a + b, perm=[1, 0])])
    out.append(str(g))
    return out


def _splice(text: str, rnd: random.Random) -> tuple[int, int]:
    i = rnd.randrange(len(text) + 1)
    return i, min(len(text), i + rnd.choice((1, 1, 2, 5, 20, 200)))


def mutate(text: str, rnd: random.Random) -> tuple[str, list[str]]:
    what = []
    for _ in range(rnd.choice((1, 1, 2, 3, 4))):
        kind = rnd.choice(("byte", "delete", "insert", "insert", "insert", "duplicate", "swap_lines", "drop_line",
                           "truncate", "replace_word", "replace_number"))
        if not text:
            text = rnd.choice(TOKENS)
        i, j = _splice(text, rnd)
        if kind == "byte":
            text = text[:i] + chr(rnd.randrange(0x80) if rnd.random() < 0.9 else rnd.randrange(0x10FFFF)) + text[i + 1:]
        elif kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + rnd.choice(TOKENS) + text[i:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] * rnd.choice((1, 2, 50)) + text[j:]
        elif kind in ("swap_lines", "drop_line"):
            lines = text.split("\n")
            a, b = rnd.randrange(len(lines)), rnd.randrange(len(lines))
            if kind == "swap_lines":
                lines[a], lines[b] = lines[b], lines[a]
            else:
                del lines[a]
            text = "\n".join(lines)
        elif kind == "truncate":
            text = text[:i]
        else:
            words = [(m.start(), m.end()) for m in re.finditer(
                r"[A-Za-z_][A-Za-z0-9_]*" if kind == "replace_word" else r"-?[0-9]+", text)]
            if words:
                s, e = rnd.choice(words)
                text = text[:s] + rnd.choice(TOKENS) + text[e:]
        what.append(kind)
    return text, what


def make_case(texts: list[str], i: int) -> tuple[str, str]:
    """Case ``i``: (text, description)."""
    rnd = random.Random(i)
    k = rnd.randrange(len(texts))
    text, what = mutate(texts[k], rnd)
    return text, f"seed {k}: " + ", ".join(what)


def check_case(text: str) -> str:
    """'parsed' (and it round-trips) or 'rlx_error'; anything else raises."""
    try:
        g = rlx.parse(text)
    except rlx.RlxError:
        return "rlx_error"
    again = rlx.parse(str(g))
    if again != g:
        raise AssertionError("a parsed graph does not print and parse back to itself")
    return "parsed"


def parse_outcome(text: str) -> str:
    """The error class ``rlx.parse(text)`` raises ('parsed' if none); a non-rlx exception propagates."""
    try:
        rlx.parse(text)
    except rlx.RlxError as exc:
        return type(exc).__name__
    return "parsed"


def nested_if(depth: int) -> rlx.Graph:
    """``depth`` if_ nodes, each one's then-branch holding the next (the innermost doubles x)."""
    inner = rlx.Graph("leaf")
    x = inner.input("x", (2,), "f32")
    inner.set_outputs([x + x])
    for level in range(depth):
        g = rlx.Graph(f"level{level}")
        x = g.input("x", (2,), "f32")
        other = rlx.Graph("other")
        other.set_outputs([-other.input("x", (2,), "f32")])
        g.set_outputs([g.if_([g.constant(np.array(True)), x], then_branch=inner, else_branch=other)])
        inner = g
    return inner


def deep_if_outcomes(depth: int, folder: str) -> dict:
    """What save / to_json / fingerprint / str do with a ``depth``-deep if_ nest, and whether load reads it back."""
    g = nested_if(depth)
    os.makedirs(folder, exist_ok=True)
    out = {}
    for what, fn in (("save", lambda: rlx.save(g, f"{folder}/m.rlx")), ("to_json", lambda: rlx.to_json(g)),
                     ("fingerprint", lambda: rlx.fingerprint(g)), ("str", lambda: str(g))):
        try:
            fn()
            out[what] = "ok"
        except rlx.RlxError as exc:
            out[what] = type(exc).__name__
    if out["save"] == "ok":
        back = rlx.load(f"{folder}/m.rlx")
        out["load"] = "equal" if back == g and rlx.parse(str(g)) == g else "differs"
    return out


def run_batch(start: int, stop: int) -> dict:
    """Cases [start, stop) in this process: outcome counts and the first failures (with their case)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    texts = seeds()
    counts: Counter = Counter()
    failures: list[str] = []
    for i in range(start, stop):
        text, what = make_case(texts, i)
        t0 = time.process_time()
        try:
            outcome = check_case(text)
        except BaseException as exc:
            outcome = "other_error"
            failures.append(f"case {i}: {type(exc).__name__}: {str(exc)[:200]} | {what}")
        if time.process_time() - t0 > CASE_SECONDS:
            outcome = "slow"
            failures.append(f"case {i}: {time.process_time() - t0:.1f} s | {what}")
        counts[outcome] += 1
    return {"counts": dict(counts), "failures": failures[:20]}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--case"]:
        text, what = make_case(seeds(), int(argv[1]))
        print(what)
        print(text[:3000])
        print(check_case(text))
        return 0
    n = int(argv[0]) if argv else 2000
    start = int(argv[1]) if len(argv) > 1 else 0
    t0 = time.time()
    rep = run_batch(start, start + n)
    print(f"{n} cases from {start} in {time.time() - t0:.0f} s: {rep['counts']}")
    for f in rep["failures"]:
        print(" ", f)
    return 1 if rep["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
