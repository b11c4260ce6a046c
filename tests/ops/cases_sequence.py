"""Cases for the sequence ops (selective_scan, gated_delta_net, axial_rope2d); the oracles are the
recurrences / rotations written out step by step as Python loops over NumPy (never rlx)."""

from __future__ import annotations

import math

import numpy as np

from opcases import OpCase, ShapeErrorCase, randn, symbolic


# --------------------------------------------------------------------------- selective_scan
def _oracle_selective_scan(x, delta, A, B, C):
    b_, s, h = x.shape
    n = A.shape[1]
    y = np.zeros_like(x)
    for b in range(b_):
        hs = np.zeros((h, n), dtype=x.dtype)
        for t in range(s):
            for c in range(h):
                for j in range(n):
                    hs[c, j] = math.exp(delta[b, t, c] * A[c, j]) * hs[c, j] + delta[b, t, c] * B[b, t, j] * x[b, t, c]
                y[b, t, c] = sum(C[b, t, j] * hs[c, j] for j in range(n))
    return y


def _ss_feed(b, s, h, n, seed, dtype=np.float64):
    return {
        "x": randn(b, s, h, seed=seed, dtype=dtype),
        "delta": (np.abs(randn(b, s, h, seed=seed + 1)) * 0.5 + 0.05).astype(dtype),  # softplus'd by the caller
        "A": (-np.abs(randn(h, n, seed=seed + 2)) - 0.1).astype(dtype),
        "B": randn(b, s, n, seed=seed + 3, dtype=dtype),
        "C": randn(b, s, n, seed=seed + 4, dtype=dtype),
    }


def _build_ss(n):
    return lambda g, x, delta, A, B, C: g.selective_scan(x, delta, A, B, C, state_size=n)


# -------------------------------------------------------------------------- gated_delta_net
def _oracle_gdn(q, k, v, g, beta, state=None, output="y"):
    b_, s, h, n = q.shape
    o = np.zeros_like(q)
    final = np.zeros((b_, h, n, n), dtype=q.dtype)
    for b in range(b_):
        for hd in range(h):
            S = np.zeros((n, n), dtype=q.dtype) if state is None else state[b, hd].copy()
            for t in range(s):
                S = S * math.exp(g[b, t, hd])
                sk = np.array([sum(S[i, j] * k[b, t, hd, i] for i in range(n)) for j in range(n)])
                d = (v[b, t, hd] - sk) * beta[b, t, hd]
                for i in range(n):
                    for j in range(n):
                        S[i, j] += k[b, t, hd, i] * d[j]
                for j in range(n):
                    o[b, t, hd, j] = sum(S[i, j] * q[b, t, hd, i] for i in range(n)) / math.sqrt(n)
            final[b, hd] = S
    return final if output == "state" else o


def _l2n(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _gdn_feed(b, s, h, n, seed, carry=False, dtype=np.float64):
    feed = {
        "q": _l2n(randn(b, s, h, n, seed=seed)).astype(dtype),
        "k": _l2n(randn(b, s, h, n, seed=seed + 1)).astype(dtype),
        "v": randn(b, s, h, n, seed=seed + 2, dtype=dtype),
        "gate": (-np.abs(randn(b, s, h, seed=seed + 3)) * 0.3).astype(dtype),
        "beta": (1.0 / (1.0 + np.exp(-randn(b, s, h, seed=seed + 4)))).astype(dtype),
    }
    if carry:
        feed["state"] = (randn(b, h, n, n, seed=seed + 5) * 0.3).astype(dtype)
    return feed


def _build_gdn(n, carry=False, output="y"):
    def build(g, q, k, v, gate, beta, state=None):  # the feed calls the gate operand g "gate" (g is the graph)
        ops = [q, k, v, gate, beta] + ([state] if carry else [])
        return g.gated_delta_net(*ops, state_size=n, carry_state=carry, output=output)

    return build


def _gdn_oracle(output="y"):
    return lambda q, k, v, gate, beta, state=None: _oracle_gdn(q, k, v, gate, beta, state, output)


# ------------------------------------------------------------------------------ axial_rope2d
def _oracle_rope2d(x, end_x, end_y, head_dim, num_heads, theta=10000.0, repeat=1):
    """Written from docs/semantics.md#sequence-models, angles in f32 as the spec says."""
    out = x.copy()
    S = x.shape[1]
    q, half = head_dim // 4, head_dim // 2
    r = max(repeat, 1)
    for t in range(S):
        pos = t // r
        tx, ty = pos % end_x, pos // end_x
        for i in range(q):
            f = np.float32(np.power(np.float32(theta), np.float32(-4.0 * i / head_dim)))
            for base, p in ((2 * i, tx), (half + 2 * i, ty)):
                ang = np.float32(np.float32(p) * f)
                c, s_ = float(np.cos(ang)), float(np.sin(ang))
                for hd in range(num_heads):
                    j = hd * head_dim + base
                    a, b = x[:, t, j].copy(), x[:, t, j + 1].copy()
                    out[:, t, j] = a * c - b * s_
                    out[:, t, j + 1] = a * s_ + b * c
    return out


def _rope2d_attrs(end_x, end_y, head_dim, num_heads, theta=10000.0, repeat=1):
    return dict(end_x=end_x, end_y=end_y, head_dim=head_dim, num_heads=num_heads, theta=theta, repeat_factor=repeat)


CASES = [
    OpCase("selective_scan", "b2_s5_h3_n4", _build_ss(4), _ss_feed(2, 5, 3, 4, seed=40), _oracle_selective_scan,
           rtol=1e-10, atol=1e-12),
    OpCase("selective_scan", "symbolic_batch",
           symbolic(_build_ss(2), {"x": ("b", 4, 2), "delta": ("b", 4, 2), "A": (2, 2), "B": ("b", 4, 2), "C": ("b", 4, 2)},
                    ("b", 4, 2)),
           _ss_feed(1, 4, 2, 2, seed=50), _oracle_selective_scan, rtol=1e-10, atol=1e-12),
    OpCase("selective_scan", "f32", _build_ss(3), _ss_feed(2, 6, 2, 3, seed=60, dtype=np.float32), _oracle_selective_scan,
           rtol=1e-5, atol=1e-5),
    OpCase("gated_delta_net", "y_b2_s4_h2_n3", _build_gdn(3), _gdn_feed(2, 4, 2, 3, seed=70), _gdn_oracle(),
           rtol=1e-10, atol=1e-12),
    OpCase("gated_delta_net", "y_carry_state", _build_gdn(2, carry=True), _gdn_feed(1, 3, 2, 2, seed=80, carry=True),
           _gdn_oracle(), rtol=1e-10, atol=1e-12),
    OpCase("gated_delta_net", "state_carry", _build_gdn(2, carry=True, output="state"), _gdn_feed(2, 3, 1, 2, seed=90, carry=True),
           _gdn_oracle("state"), rtol=1e-10, atol=1e-12, differentiable=("k", "v", "gate", "beta", "state")),  # q: read-out only
    OpCase("gated_delta_net", "state_from_zero", _build_gdn(3, output="state"), _gdn_feed(1, 4, 2, 3, seed=100),
           _gdn_oracle("state"), rtol=1e-10, atol=1e-12, differentiable=("k", "v", "gate", "beta")),
    OpCase("gated_delta_net", "f32", _build_gdn(4), _gdn_feed(1, 5, 2, 4, seed=110, dtype=np.float32), _gdn_oracle(),
           rtol=1e-5, atol=1e-5),
    OpCase("axial_rope2d", "grid3x2_h2_d8", lambda g, x: g.axial_rope2d(x, **_rope2d_attrs(3, 2, 8, 2)),
           {"x": randn(2, 6, 16, seed=120)}, lambda x: _oracle_rope2d(x, 3, 2, 8, 2), rtol=1e-12, atol=1e-12),
    OpCase("axial_rope2d", "repeat2_theta100", lambda g, x: g.axial_rope2d(x, **_rope2d_attrs(2, 2, 4, 1, 100.0, 2)),
           {"x": randn(1, 8, 4, seed=130)}, lambda x: _oracle_rope2d(x, 2, 2, 4, 1, 100.0, 2), rtol=1e-12, atol=1e-12),
    OpCase("axial_rope2d", "f32_large_grid", lambda g, x: g.axial_rope2d(x, **_rope2d_attrs(8, 4, 8, 1)),
           {"x": randn(1, 32, 8, seed=140, dtype=np.float32)}, lambda x: _oracle_rope2d(x, 8, 4, 8, 1), rtol=1e-5, atol=1e-5),
]


def _inp(g, name, shape, dtype="f32"):
    return g.input(name, shape, dtype)


def _ss_bad(**over):
    shapes = {"x": (2, 5, 3), "delta": (2, 5, 3), "A": (3, 4), "B": (2, 5, 4), "C": (2, 5, 4)}
    shapes.update(over)
    return lambda g: g.selective_scan(*[_inp(g, k, v) for k, v in shapes.items()], state_size=4)


def _gdn_bad(carry=False, dtype_v="f32", **over):
    shapes = {"q": (1, 3, 2, 4), "k": (1, 3, 2, 4), "v": (1, 3, 2, 4), "g": (1, 3, 2), "beta": (1, 3, 2), "state": (1, 2, 4, 4)}
    shapes.update(over)
    names = list(shapes)[: 6 if carry else 5]
    return lambda g: g.gated_delta_net(*[_inp(g, k, shapes[k], dtype_v if k == "v" else "f32") for k in names],
                                       state_size=4, carry_state=carry)


SHAPE_ERRORS = [
    ShapeErrorCase("selective_scan", "A_wrong_state_size", _ss_bad(A=(3, 5)), match="A must be"),
    ShapeErrorCase("selective_scan", "B_wrong_seq", _ss_bad(B=(2, 4, 4)), match="B must be"),
    ShapeErrorCase("selective_scan", "x_rank2", _ss_bad(x=(5, 3)), match="rank 3"),
    ShapeErrorCase("gated_delta_net", "state_wrong_shape", _gdn_bad(carry=True, state=(1, 2, 4, 3)), match="state must be"),
    ShapeErrorCase("gated_delta_net", "n_not_state_size", _gdn_bad(q=(1, 3, 2, 3), k=(1, 3, 2, 3), v=(1, 3, 2, 3)), match="state_size"),
    ShapeErrorCase("gated_delta_net", "mixed_dtypes", _gdn_bad(dtype_v="f64"), match="share one dtype"),
    ShapeErrorCase("gated_delta_net", "beta_wrong_shape", _gdn_bad(beta=(1, 3, 4)), match="beta must be"),
    ShapeErrorCase("axial_rope2d", "seq_mismatch",
                   lambda g: g.axial_rope2d(_inp(g, "x", (1, 5, 8)), **_rope2d_attrs(3, 2, 8, 1)), match="sequence axis"),
    ShapeErrorCase("axial_rope2d", "head_dim_not_mult4",
                   lambda g: g.axial_rope2d(_inp(g, "x", (1, 6, 6)), **_rope2d_attrs(3, 2, 6, 1)), match="multiple of 4"),
    ShapeErrorCase("axial_rope2d", "width_mismatch",
                   lambda g: g.axial_rope2d(_inp(g, "x", (1, 6, 12)), **_rope2d_attrs(3, 2, 8, 1)), match="num_heads"),
]
