"""One set of edge semantics on every backend (docs/semantics.md "Edge cases").

A registry of edge cases — NaN through max / min / argmax / argmin / top_k (sorting) / softmax, inf in
softmax, empty reductions, float -> int casts out of range, integer overflow — each a graph, a feed
and an oracle computed independently of rlx (Python numbers, NumPy). Every case runs on the reference
interpreter and the numpy, jax, torch, onnxruntime and openvino backends (OpenVINO's documented deviations as
strict xfails). Integer division by 0 and MIN / -1
(which can kill a process) are in tests/security/test_int_division.py.
"""

from __future__ import annotations

import math
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import rlx

NAN, INF = math.nan, math.inf
BACKENDS = ("reference", "numpy", "jax", "torch", "onnxruntime", "openvino")


@dataclass
class Case:
    build: Callable[[rlx.Graph], list]  # graph -> outputs (inputs named after the feed)
    feed: dict[str, np.ndarray]
    oracle: Callable[[dict[str, np.ndarray]], list[np.ndarray]]


CASES: dict[str, Case] = {}


def case(name: str, feed: dict[str, np.ndarray]):
    def register(fn):
        def build(g):
            ins = {k: g.input(k, v.shape, rlx.DType.of(v.dtype)) for k, v in feed.items()}
            return fn(g, **ins)
        CASES[name] = Case(build, feed, fn.oracle)
        return fn
    return register


def oracle(fn):
    def attach(case_fn):
        case_fn.oracle = fn
        return case_fn
    return attach


# --------------------------------------------------------------------------- NaN through selections
X = np.array([[1, NAN, 3, -2], [NAN, 5, NAN, 0], [4, 2, -1, 7], [INF, 1, 2, -INF], [-0.0, 0.0, NAN, NAN]], np.float32)
Y = np.array([[NAN, 2, 0, -3], [5, NAN, -2, NAN], [1, 8, 0, -7], [NAN, INF, 2, 1], [0.0, -0.0, 1, NAN]], np.float32)


def _rows(x):
    return [[float(v) for v in row] for row in x]


def _pick(a: float, b: float, high: bool) -> float:
    if math.isnan(a) or math.isnan(b):
        return NAN
    return max(a, b) if high else min(a, b)


@case("binary max / min propagate NaN", {"x": X, "y": Y})
@oracle(lambda f: [np.array([[_pick(a, b, high) for a, b in zip(ra, rb)] for ra, rb in zip(_rows(f["x"]), _rows(f["y"]))],
                            np.float32) for high in (True, False)])
def _binary(g, x, y):
    return [g.maximum(x, y), g.minimum(x, y)]


def _reduce_row(row: list[float], high: bool) -> float:
    if any(math.isnan(v) for v in row):
        return NAN
    return max(row) if high else min(row)


@case("reduce max / min propagate NaN", {"x": X})
@oracle(lambda f: [np.array([_reduce_row(r, high) for r in _rows(f["x"])], np.float32) for high in (True, False)])
def _reduce(g, x):
    return [g.reduce(x, op=op, axes=[1], keep_dim=False) for op in ("max", "min")]


IMG = (np.arange(2 * 2 * 5 * 5, dtype=np.float32).reshape(2, 2, 5, 5) % 7) - 3
IMG[0, 0, 1, 1] = IMG[0, 1, 3, 4] = IMG[1, 1, 0, 0] = NAN
IMG[1, 0, :2, :2] = NAN
IMG[0, 1, 0, 0], IMG[1, 0, 4, 4], IMG[0, 0, 4, 0] = np.inf, -np.inf, -0.0  # infinities stay, only NaN spreads


def _pool(x: np.ndarray, k: int, s: int, p: int, high: bool) -> np.ndarray:
    n, c, h, w = x.shape
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, ho, wo), x.dtype)
    for i, j, y, z in np.ndindex(n, c, ho, wo):
        win = [float(x[i, j, a, b]) for a in range(y * s - p, y * s - p + k) for b in range(z * s - p, z * s - p + k)
               if 0 <= a < h and 0 <= b < w]  # padding never counts
        out[i, j, y, z] = _reduce_row(win, high)
    return out


@case("pool2d max / min propagate NaN", {"x": IMG})
@oracle(lambda f: [_pool(f["x"], k, s, p, high) for k, s, p in ((2, 2, 0), (3, 1, 1)) for high in (True, False)])
def _pool2d(g, x):
    return [g.pool2d(x, kind=kind, kernel_size=[k, k], stride=[s, s], padding=[p, p])
            for k, s, p in ((2, 2, 0), (3, 1, 1)) for kind in ("max", "min")]


def _arg(row: list[float], high: bool, last: bool) -> int:
    order = range(len(row) - 1, -1, -1) if last else range(len(row))
    nans = [i for i in order if math.isnan(row[i])]
    if nans:  # NaN is the extreme of both (NumPy)
        return nans[0]
    best = max(row) if high else min(row)
    return next(i for i in order if row[i] == best)


@case("argmax / argmin take the first (select_last: last) NaN", {"x": X})
@oracle(lambda f: [np.array([_arg(r, op == "argmax", last) for r in _rows(f["x"])], np.int64)
                   for op in ("argmax", "argmin") for last in (False, True)])
def _arg_reduce(g, x):
    return [g.arg_reduce(x, op=op, axis=1, keep_dim=False, select_last=last) for op in ("argmax", "argmin") for last in (False, True)]


def _top(row: list[float], k: int, largest: bool) -> tuple[list[float], list[int]]:
    key = [INF if math.isnan(v) else v for v in row]  # NaN ranks as the largest (torch.topk); ties to the lower index
    idx = sorted(range(len(row)), key=lambda i: (-key[i] if largest else key[i], i))[:k]
    return [row[i] for i in idx], idx


@case("top_k sorts NaN as the largest", {"x": X})
@oracle(lambda f: [np.array([_top(r, 4, largest)[j] for r in _rows(f["x"])], np.float32 if j == 0 else np.int64)
                   for largest in (True, False) for j in (0, 1)])
def _top_k(g, x):
    outs = []
    for largest in (True, False):
        outs += [g.top_k(x, k=4, axis=1, largest=largest, output="values"), g.top_k(x, k=4, axis=1, largest=largest, output="indices")]
    return outs


# --------------------------------------------------------------------------- softmax with inf / NaN
S = np.array([[INF, 1, 2], [-INF, 1, 2], [-INF, -INF, -INF], [NAN, 1, 2], [INF, INF, 1], [1, 2, 3], [INF, NAN, 1],
              [-INF, INF, 0]], np.float32)


def _softmax_row(row: list[float]) -> list[float]:
    if any(math.isnan(v) or v == INF for v in row) or all(v == -INF for v in row):  # torch / jax: all NaN
        return [NAN] * len(row)
    m = max(row)
    e = [math.exp(v - m) for v in row]
    return [v / sum(e) for v in e]


@case("softmax rows with inf and NaN", {"x": S})
@oracle(lambda f: [np.array([_softmax_row(r) for r in _rows(f["x"])], np.float32)])
def _softmax(g, x):
    return [g.softmax(x, axis=1)]


# --------------------------------------------------------------------------- empty reductions
E = np.zeros((3, 0), np.float32)


@case("empty reductions: sum 0, mean NaN, prod 1, max -inf, min inf", {"x": E})
@oracle(lambda f: [np.full(3, v, np.float32) for v in (0.0, NAN, 1.0, -INF, INF)])
def _empty(g, x):
    return [g.reduce(x, op=op, axes=[1], keep_dim=False) for op in ("sum", "mean", "prod", "max", "min")]


# --------------------------------------------------------------------------- float -> int casts
F = np.array([NAN, INF, -INF, -1.0, 300.0, -300.0, 3e9, -3e9, 1e20, 255.9, -0.9, 2.5, -2.5, 2**31, -2**31, 2**32, 2**63,
              1.8e19, -2**63, 65535.0, 4e9, -129.0], np.float64)
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def _npd(to: str) -> np.dtype:
    return np.dtype(("int" if to[0] == "i" else "uint") + to[1:])


def _cast_int(v: float, to: str) -> int:
    """docs/semantics.md: exact when it fits; u32 / u64 of a value >= 0 that does not: 0; otherwise through
    i32 (i64 for 64-bit types), NaN / inf / beyond giving its minimum; then the low bits."""
    bits, signed = int(to[1:]), to[0] == "i"
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    t = None if math.isnan(v) or math.isinf(v) else math.trunc(v)
    if t is not None and lo <= t < hi:
        return t
    if not signed and bits >= 32 and not math.isnan(v) and v >= 0:
        return 0
    via = 64 if bits == 64 else 32
    w = t if t is not None and -(1 << (via - 1)) <= t < (1 << (via - 1)) else -(1 << (via - 1))
    w &= (1 << bits) - 1
    return w - (1 << bits) if signed and w >> (bits - 1) else w


@case("float -> int casts out of range", {"x": F.astype(np.float32), "d": F, "h": F.astype(np.float16)})
@oracle(lambda f: [np.array([_cast_int(float(v), to) for v in f[src]], _npd(to)) for src in ("x", "d", "h") for to in INTS])
def _casts(g, x, d, h):
    return [g.cast(v, to=to) for v in (x, d, h) for to in INTS]


# --------------------------------------------------------------------------- integer overflow
I32 = np.array([2**31 - 1, -2**31, 7, -1, 65536], np.int32)
I64 = np.array([2**63 - 1, -2**63, 7, -1, 2**32], np.int64)
U8 = np.array([255, 0, 128, 1, 200], np.uint8)


def _wrap(v: int, dt: str) -> int:
    bits = int(dt[1:])
    v &= (1 << bits) - 1
    return v - (1 << bits) if dt[0] == "i" and v >> (bits - 1) else v


def _overflow_oracle(f):
    outs = []
    for name, dt in (("a", "i32"), ("b", "i64"), ("c", "u8")):
        xs = [int(v) for v in f[name]]
        npd = f[name].dtype
        for fn in (lambda v: v + v, lambda v: v * v, lambda v: v - (-v), lambda v: -v, abs):
            outs.append(np.array([_wrap(fn(v), dt) for v in xs], npd))
    return outs


@case("integer overflow wraps (two's complement)", {"a": I32, "b": I64, "c": U8})
@oracle(_overflow_oracle)
def _overflow(g, a, b, c):
    outs = []
    for v in (a, b, c):
        outs += [g.add(v, v), g.mul(v, v), g.sub(v, g.neg(v)), g.neg(v), g.abs(v)]
    return outs


NARROW = {dt: np.array([[np.iinfo(_npd(dt)).max] * 3 + [3], [np.iinfo(_npd(dt)).min, 2, 7, 1], [5, 5, 5, 5]], _npd(dt))
          for dt in ("i8", "u8", "i16")}


def _narrow_oracle(f):
    outs = []
    for dt, x in sorted(f.items()):
        info = np.iinfo(x.dtype)
        for rows in ([[int(v) for v in r] for r in x], [[] for _ in range(3)]):  # full and empty slices
            outs += [np.array([_wrap(sum(r), dt) for r in rows], x.dtype), np.array([_wrap(math.prod(r), dt) for r in rows], x.dtype),
                     np.array([max(r, default=int(info.min)) for r in rows], x.dtype),
                     np.array([min(r, default=int(info.max)) for r in rows], x.dtype)]
    return outs


@case("narrow int reductions wrap; empty ones give the identity", {**NARROW, **{f"{k}_empty": v[:, :0] for k, v in NARROW.items()}})
@oracle(lambda f: _narrow_oracle({k: v for k, v in f.items() if not k.endswith("_empty")}))
def _narrow(g, **ins):
    outs = []
    for dt in sorted(NARROW):
        for x in (ins[dt], ins[f"{dt}_empty"]):
            outs += [g.reduce(x, op=op, axes=[1], keep_dim=False) for op in ("sum", "prod", "max", "min")]
    return outs


# --------------------------------------------------------------------------- the walk


def _run(backend: str, g: rlx.Graph, feed):
    if backend == "reference":
        return rlx.run(g, feed)
    pytest.importorskip(backend)
    return rlx.compile(g, backend=backend).run(feed)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    pattern = np.isnan(got) == np.isnan(want)
    finite = ~np.isnan(want)
    return bool(pattern.all() and np.allclose(got[finite], want[finite], rtol=1e-6, atol=0))  # (the sign of a zero is not one)


_OV_NAN = "OpenVINO's CPU plugin drops NaN there (docs/backends.md)"
_OV_I64 = "OpenVINO's CPU plugin computes i64 in 32 bits (docs/backends.md)"
#: the engine's own deviations, documented in docs/backends.md; strict: a fixed engine fails the test
KNOWN_DEVIATIONS: dict[tuple[str, str], str] = {
    ("binary max / min propagate NaN", "openvino"): _OV_NAN + ": its Max / Min return the other operand",
    ("top_k sorts NaN as the largest", "openvino"): _OV_NAN + ": its TopK ranks NaN anywhere",
    ("softmax rows with inf and NaN", "openvino"): _OV_NAN + ": its Softmax keeps NaN / +inf rows finite",
    ("float -> int casts out of range", "openvino"): _OV_I64,
    ("integer overflow wraps (two's complement)", "openvino"): _OV_I64,
}


def _params():
    for name in CASES:
        for backend in BACKENDS:
            why = KNOWN_DEVIATIONS.get((name, backend))
            yield pytest.param(name, backend, marks=[pytest.mark.xfail(reason=why, strict=True)] if why else [])


@pytest.mark.parametrize("name, backend", list(_params()))
def test_edge_case_on_every_backend(name, backend):
    c = CASES[name]
    g = rlx.Graph("edge")
    g.set_outputs(c.build(g))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = c.oracle(c.feed)
    got = _run(backend, g, c.feed)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        a = np.asarray(a)
        assert _same(a, b), f"{name} on {backend}, output {k}: got {a.tolist()} ({a.dtype}), want {b.tolist()} ({b.dtype})"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="NumPy's own out-of-range cast is the CPU's")
def test_the_cast_rule_is_numpys_on_x86_64():
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(0, 22, 500), F])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for to in INTS:
            assert [int(v) for v in np.trunc(xs).astype(_npd(to))] == [_cast_int(float(v), to) for v in xs], to
