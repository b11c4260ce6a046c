"""ONNX TfIdfVectorizer on integer token ids: n-gram (with skips) counts against a constant pool.

Each (length n, skip k) pair is one constant gather of the ``n`` tokens of every window, an
equality against the pool's n-grams of that length and a count over the windows; a constant
one-hot matrix sends the pool's n-grams to their output columns (``ngram_indexes``).
"""

from __future__ import annotations

import itertools

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape, _static_shape
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported


def _pool_sections(pool: np.ndarray, starts: list[int], lo: int, hi: int) -> dict[int, tuple[int, np.ndarray]]:
    """Pool n-grams of each length in ``[lo, hi]``: length -> (index of its first n-gram, ``[G, n]`` tokens)."""
    bounds = [*starts, pool.size]
    out, first = {}, 0
    for n, (a, b) in enumerate(itertools.pairwise(bounds), start=1):
        if (b - a) % n or a > b:
            raise OnnxFormatError(f"TfIdfVectorizer pool section of {n}-grams [{a}, {b}) is not whole {n}-grams")
        if lo <= n <= hi and b > a:
            out[n] = (first, pool[a:b].reshape(-1, n))
        first += (b - a) // n
    return out


@converter("TfIdfVectorizer")
def _tfidf(cx, node, ins, attrs):
    x = ins[0]
    if "pool_int64s" not in attrs:
        raise OnnxUnsupported("TfIdfVectorizer over string tokens (pool_strings)")
    shape = _static_shape(x)
    if len(shape) not in (1, 2) or not x.dtype.is_int:
        raise OnnxFormatError(f"TfIdfVectorizer needs integer [T] or [B, T] tokens, got {x.dtype} {shape}")
    lo, hi, skip = attrs["min_gram_length"], attrs["max_gram_length"], attrs["max_skip_count"]
    mode = attrs["mode"]
    if mode not in ("TF", "IDF", "TFIDF") or not 1 <= lo <= hi:
        raise OnnxFormatError(f"TfIdfVectorizer mode {mode!r}, gram lengths [{lo}, {hi}]")
    pool = np.asarray(attrs["pool_int64s"], np.int64)
    starts = [int(s) for s in attrs["ngram_counts"]]
    cols = np.asarray(attrs["ngram_indexes"], np.int64)
    if cols.size and cols.min() < 0:
        raise OnnxFormatError(f"TfIdfVectorizer ngram_indexes must be >= 0, got {int(cols.min())}")
    width = int(cols.max()) + 1 if cols.size else 0
    cx.check_elements(cols.size * width, "the TfIdfVectorizer column map")
    weights = np.asarray(attrs.get("weights", np.ones(cols.size)), np.float32)
    xs = _cast(cx, x if len(shape) == 2 else _reshape(cx, x, [1, shape[0]]), DType.I64)
    b, t = (shape if len(shape) == 2 else [1, shape[0]])
    total = None
    for n, (first, grams) in _pool_sections(pool, starts, lo, hi).items():
        counts = None
        for k in range(skip + 1 if n > 1 else 1):
            span = (n - 1) * (k + 1)
            if span >= t:
                break
            cx.check_elements((t - span) * n, "the TfIdfVectorizer windows")
            windows = np.arange(t - span)[:, None] + np.arange(n)[None, :] * (k + 1)  # [P, n]
            toks = _reshape(cx, cx.g.gather(xs, cx.const(windows), axis=1), [b, t - span, 1, n])
            hit = cx.g.reduce(_cast(cx, cx.g.eq(toks, cx.const(grams[None, None])), DType.F32), op="min", axes=[3],
                              keep_dim=False)
            c = cx.g.reduce(hit, op="sum", axes=[1], keep_dim=False)  # [B, G]
            counts = c if counts is None else counts + c
        if counts is None:
            continue
        onehot = np.zeros((len(grams), width), np.float32)
        onehot[np.arange(len(grams)), cols[first:first + len(grams)]] = 1.0
        part = cx.g.matmul(counts, cx.const(onehot))
        total = part if total is None else total + part
    if total is None:
        total = cx.const(np.zeros((b, width), np.float32))
    w = np.zeros(width, np.float32)
    w[cols] = weights
    if mode == "IDF":
        total = _cast(cx, cx.g.gt(total, cx.const(np.float32(0))), DType.F32) * cx.const(w)
    elif mode == "TFIDF":
        total = total * cx.const(w)
    return total if len(shape) == 2 else _reshape(cx, total, [width])
