"""Cases for fft, the solves, top_k (also the former topk_indices cases), sample, scatter_add and the
complex helpers (cumsum / cumsum_backward cases: cases_indexing.py, op cumulative). Oracles:
numpy.fft, torch.linalg.solve, torch.topk / a sorted() loop,
torch.Tensor.index_add_, and for sample a scalar pure-Python Philox4x32-10 and per-row sampler
written out here (docs/semantics.md#numerics, #random-numbers)."""

from __future__ import annotations

import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn, torch_f64

T = torch_f64


def crandn(*shape, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(np.complex64)


# ------------------------------------------------------------------------------------------ fft
Z = crandn(3, 8, seed=1)
Z7 = crandn(2, 7, seed=2)
CASES = []
for inverse in (False, True):
    for norm in ("backward", "ortho", "forward"):
        fn = np.fft.ifft if inverse else np.fft.fft
        CASES.append(OpCase("fft", f"{'inverse' if inverse else 'forward'}_{norm}",
                            lambda g, x, inverse=inverse, norm=norm: g.fft(x, inverse=inverse, norm=norm), {"x": Z},
                            lambda x, fn=fn, norm=norm: fn(x.astype(np.complex128), norm=norm), rtol=1e-5, atol=1e-5))
CASES += [
    OpCase("fft", "odd_length_axis0", lambda g, x: g.fft(x, axis=0), {"x": Z7.T.copy()},
           lambda x: np.fft.fft(x.astype(np.complex128), axis=0), rtol=1e-5, atol=1e-5),
    OpCase("fft", "round_trip_backward_norm", lambda g, x: g.fft(g.fft(x), inverse=True), {"x": Z}, lambda x: x, rtol=1e-5, atol=1e-5),
]

# --------------------------------------------------------------------------------------- solves
A = randn(4, 4, seed=3) + 4 * np.eye(4)
AB = randn(2, 3, 3, seed=4) + 3 * np.eye(3)
CASES += [
    OpCase("dense_solve", "vector_b", lambda g, a, b: g.dense_solve(a, b), {"a": A, "b": randn(4, seed=5)},
           lambda a, b: torch.linalg.solve(T(a), T(b)), rtol=1e-10),
    OpCase("dense_solve", "matrix_b", lambda g, a, b: g.dense_solve(a, b), {"a": A, "b": randn(4, 2, seed=6)},
           lambda a, b: torch.linalg.solve(T(a), T(b)), rtol=1e-10),
    OpCase("dense_solve", "f32", lambda g, a, b: g.dense_solve(a, b), {"a": A.astype(np.float32), "b": randn(4, seed=7).astype(np.float32)},
           lambda a, b: torch.linalg.solve(T(a), T(b)), rtol=1e-4, atol=1e-5),
    OpCase("batched_dense_solve", "vector_b", lambda g, a, b: g.batched_dense_solve(a, b), {"a": AB, "b": randn(2, 3, seed=8)},
           lambda a, b: torch.linalg.solve(T(a), T(b).unsqueeze(-1)).squeeze(-1), rtol=1e-10),
    OpCase("batched_dense_solve", "matrix_b", lambda g, a, b: g.batched_dense_solve(a, b), {"a": AB, "b": randn(2, 3, 2, seed=9)},
           lambda a, b: torch.linalg.solve(T(a), T(b)), rtol=1e-10),
    OpCase("batched_dense_solve", "two_batch_dims", lambda g, a, b: g.batched_dense_solve(a, b),
           {"a": randn(2, 2, 3, 3, seed=10) + 3 * np.eye(3), "b": randn(2, 2, 3, 1, seed=11)},
           lambda a, b: torch.linalg.solve(T(a), T(b)), rtol=1e-10),
]


# ---------------------------------------------------------------------------------------- top_k
def _topk_loop(x, k, largest=True, values=False):
    """sorted() over each row of the last axis: by value, ties to the lower index."""
    rows = x.reshape(-1, x.shape[-1])
    out = []
    for row in rows:
        order = sorted(range(len(row)), key=lambda i: ((-row[i]) if largest else row[i], i))[:k]
        out.append(row[order] if values else np.array(order, np.int64))
    return np.array(out).reshape(*x.shape[:-1], k)


TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.0, 0.0, 0.0, -1.0, 5.0]])
XK = randn(3, 6, seed=12)
XK21 = randn(3, 4, seed=21)
CASES += [
    OpCase("top_k", "indices_torch", lambda g, x: g.top_k(x, k=3), {"x": XK}, lambda x: torch.topk(T(x), 3).indices),
    OpCase("top_k", "values_torch_f64", lambda g, x: g.top_k(x, k=4, output="values"), {"x": XK}, lambda x: torch.topk(T(x), 4).values),
    OpCase("top_k", "smallest_axis0_torch", lambda g, x: g.top_k(x, k=2, axis=0, largest=False, output="values"), {"x": XK},
           lambda x: torch.topk(T(x), 2, dim=0, largest=False).values),
    OpCase("top_k", "ties_lower_index_first", lambda g, x: g.top_k(x, k=4), {"x": TIES}, lambda x: _topk_loop(x, 4)),
    OpCase("top_k", "ties_smallest", lambda g, x: g.top_k(x, k=3, largest=False), {"x": TIES}, lambda x: _topk_loop(x, 3, largest=False)),
    OpCase("top_k", "int_values", lambda g, x: g.top_k(x, k=2, output="values"), {"x": np.array([[5, -3, 9, 9], [0, 1, 2, 3]], np.int64)},
           lambda x: _topk_loop(x, 2, values=True)),
    OpCase("top_k", "nan_ranks_largest", lambda g, x: g.top_k(x, k=2), {"x": np.array([1.0, np.nan, 3.0, 2.0])},
           lambda x: np.array([1, 2])),
    OpCase("top_k", "nan_last_for_smallest", lambda g, x: g.top_k(x, k=4, largest=False), {"x": np.array([1.0, np.nan, 3.0, 2.0])},
           lambda x: np.array([0, 3, 2, 1])),
    OpCase("top_k", "u32_extremes", lambda g, x: g.top_k(x, k=3, output="values"),
           {"x": np.array([1, 2**32 - 1, 0, 2**31], np.uint32)}, lambda x: np.array([2**32 - 1, 2**31, 1], np.uint32)),
    OpCase("top_k", "i64_min_smallest", lambda g, x: g.top_k(x, k=2, largest=False),
           {"x": np.array([5, -2**63, 2**63 - 1, -2**63], np.int64)}, lambda x: np.array([1, 3])),
    # former topk_indices cases (rank 2, explicit axis)
    OpCase("top_k", "indices_largest_axis_neg1", lambda g, x: g.top_k(x, k=2, axis=-1, output="indices"), {"x": XK21},
           lambda x: torch.topk(T(x), 2, dim=-1).indices),
    OpCase("top_k", "indices_smallest_ties_stable", lambda g, x: g.top_k(x, k=3, axis=0, largest=False),
           {"x": np.array([2.0, 1.0, 1.0, 0.0])}, lambda x: np.array([3, 1, 2])),
    OpCase("top_k", "topk_indices_builder", lambda g, x: g.topk_indices(x, k=3, axis=1), {"x": XK21},
           lambda x: torch.topk(T(x), 3, dim=1).indices),
    # one node, two results (values, indices)
    OpCase("top_k", "both_torch", lambda g, x: g.top_k(x, k=3, output="both"), {"x": XK},
           lambda x: tuple(torch.topk(T(x), 3))),
    OpCase("top_k", "both_smallest_axis0_torch", lambda g, x: g.top_k(x, k=2, axis=0, largest=False, output="both"), {"x": XK},
           lambda x: tuple(torch.topk(T(x), 2, dim=0, largest=False))),
    OpCase("top_k", "both_values_used_twice", lambda g, x: (lambda v, i: (v * v, v))(*g.top_k(x, k=2, output="both")), {"x": XK},
           lambda x: (torch.topk(T(x), 2).values ** 2, torch.topk(T(x), 2).values)),
]

# --------------------------------------------------------------------------------------- sample
M0, M1, W0, W1 = 0xD2561A75, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox_block_scalar(ctr, key, m0=M0):
    """Philox4x32-10 on Python ints, one block, written out from docs/semantics.md#random-numbers."""
    s0, s1, s2, s3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = s0 * m0, s2 * M1
        s0, s1, s2, s3 = ((p1 >> 32) ^ s1 ^ k0) & 0xFFFFFFFF, p1 & 0xFFFFFFFF, ((p0 >> 32) ^ s3 ^ k1) & 0xFFFFFFFF, p0 & 0xFFFFFFFF
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return [s0, s1, s2, s3]


def draws_scalar(seed, n):
    seed = seed or 0xDEADBEEF
    key = (seed & 0xFFFFFFFF, seed >> 32)
    words, block = [], 0
    while len(words) < n:
        words += philox_block_scalar([block & 0xFFFFFFFF, block >> 32, 0, 0], key)
        block += 1
    return [np.float32(w >> 8) / np.float32(2**24) for w in words[:n]]


def sample_loop(logits, seed=0, temperature=1.0, top_k=0, top_p=1.0):
    """Per-row sampling loop in f32 (docs/semantics.md#numerics), rows in C order, one draw per row."""
    rows = logits.reshape(-1, logits.shape[-1]).astype(np.float32)
    r = draws_scalar(seed, len(rows))
    out = []
    for row, u in zip(rows, r):
        v = len(row)
        z = row / np.float32(max(temperature, 1e-6))
        if 0 < top_k < v:
            kth = sorted(z, reverse=True)[top_k - 1]
            z = np.array([zi if zi >= kth else -np.inf for zi in z], np.float32)
        e = np.exp(z - z.max())
        p = e / e.sum()
        if top_p < 1.0:
            order = sorted(range(v), key=lambda i: (-p[i], i))
            acc, keep = np.float32(0), set()
            for i in order:
                keep.add(i)
                acc = np.float32(acc + p[i])
                if acc >= np.float32(top_p):
                    break
            p = np.array([p[i] if i in keep else 0 for i in range(v)], np.float32)
            p = p / p.sum()
        c, pick = np.float32(0), v - 1
        for i in range(v):
            c = np.float32(c + p[i])
            if u <= c:
                pick = i
                break
        out.append(pick)
    return np.array(out, np.int64).reshape(logits.shape[:-1])


LOG = (randn(6, 10, seed=13) * 2).astype(np.float32)
CASES += [
    OpCase("sample", "default_seed_stream", lambda g, x: g.sample(x), {"x": LOG}, lambda x: sample_loop(x)),
    OpCase("sample", "seed_64bit_temperature", lambda g, x: g.sample(x, seed=0x1234_5678_9ABC_DEF0, temperature=0.7), {"x": LOG},
           lambda x: sample_loop(x, seed=0x1234_5678_9ABC_DEF0, temperature=0.7)),
    OpCase("sample", "top_k_top_p_rank3", lambda g, x: g.sample(x, seed=7, top_k=5, top_p=0.8), {"x": LOG.reshape(2, 3, 10)},
           lambda x: sample_loop(x, seed=7, top_k=5, top_p=0.8)),
    OpCase("sample", "rank1_one_row", lambda g, x: g.sample(x, seed=3), {"x": LOG[0]}, lambda x: sample_loop(x, seed=3)),
    OpCase("sample", "cold_temperature_is_argmax", lambda g, x: g.sample(x, temperature=1e-9, seed=99), {"x": LOG.astype(np.float64)},
           lambda x: np.argmax(x, axis=-1)),
    OpCase("sample", "top_k_1_is_argmax", lambda g, x: g.sample(x, top_k=1, seed=5), {"x": LOG}, lambda x: np.argmax(x, axis=-1)),
    OpCase("sample", "tiny_top_p_is_argmax", lambda g, x: g.sample(x, top_p=1e-6, seed=5), {"x": LOG}, lambda x: np.argmax(x, axis=-1)),
    OpCase("sample", "batch_dims_restart_stream", lambda g, x: g.sample(x, seed=11, batch_dims=1), {"x": LOG.reshape(2, 3, 10)},
           lambda x: np.stack([sample_loop(x[0], seed=11), sample_loop(x[1], seed=11)])),
]


# ----------------------------------------------------------------------------------- scatter_add
def _index_add(upd, idx, rows):
    out = torch.zeros((rows, *upd.shape[1:]), dtype=torch.from_numpy(upd).dtype)
    return out.index_add_(0, torch.from_numpy(idx.astype(np.int64)), torch.from_numpy(upd))


UPD = randn(5, 3, seed=15)
IDX = np.array([2, 0, 2, 3, 0], np.int64)
CASES += [
    OpCase("scatter_add", "duplicates_index_add", lambda g, u, i: g.scatter_add(u, i, num_rows=4), {"u": UPD, "i": IDX},
           lambda u, i: _index_add(u, i, 4), rtol=1e-12),
    OpCase("scatter_add", "vector_rows_i32_idx", lambda g, u, i: g.scatter_add(u, i, num_rows=3),
           {"u": randn(4, seed=16), "i": np.array([1, 1, 0, 1], np.int32)}, lambda u, i: _index_add(u, i, 3), rtol=1e-12),
    OpCase("scatter_add", "int_updates_3d", lambda g, u, i: g.scatter_add(u, i, num_rows=2),
           {"u": np.arange(12, dtype=np.int32).reshape(3, 2, 2), "i": np.array([1, 0, 1], np.int64)}, lambda u, i: _index_add(u, i, 2)),
    OpCase("scatter_add", "batch_dims", lambda g, u, i: g.scatter_add(u, i, num_rows=3, batch_dims=1),
           {"u": randn(2, 4, 2, seed=17), "i": np.array([[0, 2, 2, 1], [1, 1, 0, 0]], np.int64)},
           lambda u, i: torch.stack([_index_add(u[b], i[b], 3) for b in range(2)]), rtol=1e-12),
]

# ------------------------------------------------------------------------------------- complex
CASES += [
    OpCase("complex_norm_sq", "torch_abs_sq", lambda g, z: g.complex_norm_sq(z), {"z": Z},
           lambda z: torch.abs(torch.from_numpy(z)) ** 2, rtol=1e-5, atol=1e-6),
    OpCase("complex_norm_sq_backward", "g_times_z", lambda g, z, d: g.complex_norm_sq_backward(z, d),
           {"z": Z, "d": randn(3, 8, seed=18).astype(np.float32)}, lambda z, d: d.astype(np.complex128) * z, rtol=1e-6),
    OpCase("conjugate", "torch_conj", lambda g, z: g.conjugate(z), {"z": Z}, lambda z: torch.conj(torch.from_numpy(z)).resolve_conj()),
    OpCase("conjugate", "twice_is_identity_rank0", lambda g, z: g.conjugate(g.conjugate(z)), {"z": np.array(1 - 2j, np.complex64)},
           lambda z: z),
]


def _in(g, name, shape, dtype="f32"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("fft", "real_input", lambda g: g.fft(_in(g, "x", (4, 8))), match="c64"),
    ShapeErrorCase("fft", "axis_out_of_range", lambda g: g.fft(_in(g, "x", (4,), "c64"), axis=1)),
    ShapeErrorCase("dense_solve", "not_square", lambda g: g.dense_solve(_in(g, "a", (3, 4)), _in(g, "b", (3,))), match="square"),
    ShapeErrorCase("dense_solve", "rows_mismatch", lambda g: g.dense_solve(_in(g, "a", (3, 3)), _in(g, "b", (4,)))),
    ShapeErrorCase("dense_solve", "dtype_mismatch", lambda g: g.dense_solve(_in(g, "a", (3, 3)), _in(g, "b", (3,), "f64"))),
    ShapeErrorCase("batched_dense_solve", "batch_mismatch",
                   lambda g: g.batched_dense_solve(_in(g, "a", (2, 3, 3)), _in(g, "b", (4, 3))), match="batch"),
    ShapeErrorCase("batched_dense_solve", "rank2_a", lambda g: g.batched_dense_solve(_in(g, "a", (3, 3)), _in(g, "b", (3,)))),
    ShapeErrorCase("top_k", "k_too_large", lambda g: g.top_k(_in(g, "x", (2, 3)), k=4)),
    ShapeErrorCase("top_k", "complex", lambda g: g.top_k(_in(g, "x", (3,), "c64"), k=1)),
    ShapeErrorCase("top_k", "k_too_big_indices", lambda g: g.top_k(_in(g, "x", (2, 3)), k=4, output="indices")),
    ShapeErrorCase("top_k", "negative_k", lambda g: g.top_k(_in(g, "x", (2, 3)), k=-1)),
    ShapeErrorCase("top_k", "both_k_too_large", lambda g: g.top_k(_in(g, "x", (2, 3)), k=4, output="both")),
    ShapeErrorCase("top_k", "bool", lambda g: g.top_k(_in(g, "x", (3,), "bool"), k=1)),
    ShapeErrorCase("sample", "int_logits", lambda g: g.sample(_in(g, "x", (2, 3), "i32"))),
    ShapeErrorCase("sample", "empty_vocab", lambda g: g.sample(_in(g, "x", (2, 0)))),
    ShapeErrorCase("scatter_add", "float_indices", lambda g: g.scatter_add(_in(g, "u", (3, 2)), _in(g, "i", (3,)), num_rows=4)),
    ShapeErrorCase("scatter_add", "u_mismatch", lambda g: g.scatter_add(_in(g, "u", (3, 2)), _in(g, "i", (2,), "i64"), num_rows=4)),
    ShapeErrorCase("complex_norm_sq", "real_input", lambda g: g.complex_norm_sq(_in(g, "z", (3,)))),
    ShapeErrorCase("complex_norm_sq_backward", "g_shape",
                   lambda g: g.complex_norm_sq_backward(_in(g, "z", (3,), "c64"), _in(g, "d", (2,)))),
    ShapeErrorCase("conjugate", "real_input", lambda g: g.conjugate(_in(g, "z", (3,)))),
]
