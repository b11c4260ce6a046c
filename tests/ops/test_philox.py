"""Philox4x32-10 (rlx.ops.numerics) against the published Random123 known-answer vectors, and the
upstream stream (non-standard M0, docs/semantics.md#random-numbers) against a scalar implementation written out here."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ops.numerics import PHILOX_M0, PHILOX_M0_STANDARD, philox4x32, philox_f32, philox_u32

# Random123 tests/kat_vectors, "philox4x32 10": counter[4] key[2] -> output[4]
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0), (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox4x32_10_known_answers(ctr, key, expected):
    out = philox4x32(np.array([ctr], np.uint32), key, m0=PHILOX_M0_STANDARD)
    assert [int(v) for v in out[0]] == list(expected)


def test_philox_vectorised_over_blocks():
    ctrs = np.array([k[0] for k in KAT], np.uint32)
    # one key for all: each row must equal its own single-block evaluation
    out = philox4x32(ctrs, (0xA4093822, 0x299F31D0), m0=PHILOX_M0_STANDARD)
    for row, ctr in zip(out, ctrs):
        assert np.array_equal(row, philox4x32(ctr[None], (0xA4093822, 0x299F31D0), m0=PHILOX_M0_STANDARD)[0])


def _scalar_block(ctr, key, m0):
    s0, s1, s2, s3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = s0 * m0, s2 * 0xCD9E8D57
        s0, s1, s2, s3 = ((p1 >> 32) ^ s1 ^ k0) & 0xFFFFFFFF, p1 & 0xFFFFFFFF, ((p0 >> 32) ^ s3 ^ k1) & 0xFFFFFFFF, p0 & 0xFFFFFFFF
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return [s0, s1, s2, s3]


@pytest.mark.parametrize("seed", [0xDEADBEEF, 1, 0xFFFF_FFFF_FFFF_FFFF, 0x0123_4567_89AB_CDEF])
def test_upstream_stream_matches_scalar_reference(seed):
    assert PHILOX_M0 == 0xD2561A75
    n = 11  # crosses block boundaries, not a multiple of 4
    key = (seed & 0xFFFFFFFF, seed >> 32)
    words = []
    for b in range(3):
        words += _scalar_block([b, 0, 0, 0], key, PHILOX_M0)
    assert [int(w) for w in philox_u32(seed, n)] == words[:n]
    f = philox_f32(seed, n)
    assert f.dtype == np.float32 and np.all((f >= 0) & (f < 1))
    assert np.array_equal(f, np.array([w >> 8 for w in words[:n]], np.float32) / np.float32(2**24))


def test_counter_carries_into_word1():
    # block 2**32 has counter words (0, 1, 0, 0)
    blocks = np.array([[0, 1, 0, 0]], np.uint32)
    assert [int(v) for v in philox4x32(blocks, (5, 6))[0]] == _scalar_block([0, 1, 0, 0], (5, 6), PHILOX_M0)


def test_sample_repeats_per_execution_and_seed_changes_stream():
    logits = np.zeros((64, 50), np.float32)  # uniform: the ids are the draws
    g = rlx.Graph("s")
    x = g.input("x", logits.shape)
    g.set_outputs([g.sample(x, seed=42), g.sample(x, seed=43), g.sample(x)])
    a1, b1, c1 = rlx.run(g, {"x": logits})
    a2, _, _ = rlx.run(g, {"x": logits})
    assert np.array_equal(a1, a2)
    assert not np.array_equal(a1, b1)
    expected = np.floor(philox_f32(42, 64).astype(np.float64) * 50).astype(np.int64)
    # r <= cumsum(p)[i] with p = 1/50: the id is ceil(r·50) - 1 except exact multiples; compare loosely off the edges
    close = np.abs(philox_f32(42, 64) * 50 - np.round(philox_f32(42, 64) * 50)) > 1e-3
    assert np.array_equal(a1[close], expected[close])
    assert np.array_equal(c1, rlx.run(g, {"x": logits})[2])
