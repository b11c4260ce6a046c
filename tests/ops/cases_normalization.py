"""Cases for layer_norm, layer_norm2d, group_norm, rms_norm; oracles are torch float64."""

from __future__ import annotations

import numpy as np
import torch.nn.functional as F

from opcases import OpCase, ShapeErrorCase, randn, symbolic, torch_f64

T = torch_f64


def torch_layer_norm(x, gamma, beta, axis=-1, eps=1e-5):
    """F.layer_norm normalizes trailing dims: move ``axis`` last, normalize, move it back."""
    t = T(x).movedim(axis, -1)
    return F.layer_norm(t, (t.shape[-1],), T(gamma), T(beta), eps).movedim(-1, axis)


def torch_rms_norm(x, gamma, beta, axis=-1, eps=1e-5):
    t = T(x).movedim(axis, -1)
    return (F.rms_norm(t, (t.shape[-1],), T(gamma), eps) + T(beta)).movedim(-1, axis)


def _affine_feed(shape, axis, dtype=np.float64, seed=0):
    n = shape[axis]
    return {"x": randn(*shape, dtype=dtype, seed=seed) * 3 + 1,
            "gamma": randn(n, dtype=dtype, seed=seed + 1), "beta": randn(n, dtype=dtype, seed=seed + 2)}


def _norm_cases(op, oracle):
    cases = []
    for name, shape, axis, dtype, tol in [
        ("last_axis", (4, 8), -1, np.float64, 1e-10),
        ("axis1_of_3", (2, 5, 3), 1, np.float64, 1e-10),
        ("negative_axis_-2", (2, 5, 3), -2, np.float64, 1e-10),
        ("axis0", (6, 2, 3), 0, np.float64, 1e-10),
        ("f32", (3, 16), -1, np.float32, 1e-5),
    ]:
        cases.append(OpCase(op, name, lambda g, x, gamma, beta, axis=axis: getattr(g, op)(x, gamma, beta, axis=axis),
                            _affine_feed(shape, axis, dtype, seed=len(cases) * 3),
                            lambda x, gamma, beta, axis=axis: oracle(x, gamma, beta, axis=axis), rtol=tol, atol=tol))
    cases += [
        OpCase(op, "eps_and_params", lambda g, x, gamma, beta: getattr(g, op)(x, gamma, beta, eps=0.5),
               _affine_feed((3, 4), -1, seed=40), lambda x, gamma, beta: oracle(x, gamma, beta, eps=0.5),
               rtol=1e-10, atol=1e-10, params=("gamma", "beta")),
        OpCase(op, "symbolic_rows",
               symbolic(lambda g, x, gamma, beta: getattr(g, op)(x, gamma, beta),
                        {"x": ("rows", 6), "gamma": (6,), "beta": (6,)}, ("rows", 6)),
               _affine_feed((5, 6), -1, seed=43), oracle, rtol=1e-10, atol=1e-10),
        OpCase(op, "mixed_f32_x_f64_affine", lambda g, x, gamma, beta: getattr(g, op)(x, gamma, beta),
               {**_affine_feed((3, 4), -1, seed=46), "x": randn(3, 4, dtype=np.float32, seed=49)}, oracle,
               rtol=1e-10, atol=1e-10),
    ]
    return cases


def torch_layer_norm2d(x, gamma, beta, eps=1e-5):
    t = T(x).permute(0, 2, 3, 1)
    return F.layer_norm(t, (t.shape[-1],), T(gamma), T(beta), eps).permute(0, 3, 1, 2)


def numpy_layer_norm2d(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma[:, None, None] + beta[:, None, None]


def _nchw_feed(shape, dtype=np.float64, seed=0):
    c = shape[1]
    return {"x": randn(*shape, dtype=dtype, seed=seed) * 2 - 1,
            "gamma": randn(c, dtype=dtype, seed=seed + 1), "beta": randn(c, dtype=dtype, seed=seed + 2)}


CASES = _norm_cases("layer_norm", torch_layer_norm) + _norm_cases("rms_norm", torch_rms_norm)
CASES += [
    OpCase("rms_norm", "zero_beta_llama", lambda g, x, gamma, beta: g.rms_norm(x, gamma, beta),
           {**_affine_feed((2, 3, 8), -1, seed=60), "beta": np.zeros(8)},
           lambda x, gamma, beta: F.rms_norm(T(x), (8,), T(gamma), 1e-5), rtol=1e-10, atol=1e-10),
    OpCase("layer_norm2d", "f64", lambda g, x, gamma, beta: g.layer_norm2d(x, gamma, beta),
           _nchw_feed((2, 4, 3, 5), seed=70), torch_layer_norm2d, rtol=1e-10, atol=1e-10),
    OpCase("layer_norm2d", "f32_eps", lambda g, x, gamma, beta: g.layer_norm2d(x, gamma, beta, eps=1e-3),
           _nchw_feed((1, 6, 2, 2), np.float32, seed=73),
           lambda x, gamma, beta: torch_layer_norm2d(x, gamma, beta, eps=1e-3), rtol=1e-5, atol=1e-5),
    OpCase("layer_norm2d", "numpy_formula", lambda g, x, gamma, beta: g.layer_norm2d(x, gamma, beta),
           _nchw_feed((3, 2, 4, 1), seed=76), numpy_layer_norm2d, rtol=1e-10, atol=1e-10),
]
for name, shape, groups, dtype, tol in [
    ("g2_of_c6", (2, 6, 3, 4), 2, np.float64, 1e-10),
    ("g1", (2, 4, 3, 3), 1, np.float64, 1e-10),
    ("g_equals_c", (3, 4, 2, 5), 4, np.float64, 1e-10),
    ("rank3_ncl", (2, 6, 7), 3, np.float64, 1e-10),
    ("rank5", (1, 4, 2, 3, 2), 2, np.float64, 1e-10),
    ("f32", (2, 8, 4, 4), 4, np.float32, 1e-5),
]:
    CASES.append(OpCase("group_norm", name,
                        lambda g, x, gamma, beta, groups=groups: g.group_norm(x, gamma, beta, num_groups=groups),
                        _nchw_feed(shape, dtype, seed=80 + groups),
                        lambda x, gamma, beta, groups=groups: F.group_norm(T(x), groups, T(gamma), T(beta), 1e-5),
                        rtol=tol, atol=tol))
CASES.append(OpCase("group_norm", "eps", lambda g, x, gamma, beta: g.group_norm(x, gamma, beta, num_groups=2, eps=0.1),
                    _nchw_feed((2, 4, 2, 2), seed=90),
                    lambda x, gamma, beta: F.group_norm(T(x), 2, T(gamma), T(beta), 0.1), rtol=1e-10, atol=1e-10))


def _norm(op, xshape, gshape, bshape=None, xdtype="f32", **attrs):
    return lambda g: getattr(g, op)(g.input("x", xshape, xdtype), g.input("gamma", gshape),
                                    g.input("beta", bshape or gshape), **attrs)


SHAPE_ERRORS = [
    ShapeErrorCase("layer_norm", "gamma_length", _norm("layer_norm", (2, 8), (7,)), match="gamma"),
    ShapeErrorCase("layer_norm", "gamma_wrong_axis", _norm("layer_norm", (2, 8), (8,), axis=0), match="gamma"),
    ShapeErrorCase("layer_norm", "axis_out_of_range", _norm("layer_norm", (2, 8), (8,), axis=2), match="out of range"),
    ShapeErrorCase("layer_norm", "int_x", _norm("layer_norm", (2, 8), (8,), xdtype="i32"), match="float"),
    ShapeErrorCase("layer_norm", "gamma_rank2", _norm("layer_norm", (2, 8), (1, 8)), match="rank"),
    ShapeErrorCase("layer_norm", "symbol_vs_static", _norm("layer_norm", (2, "h"), (8,)), match="gamma"),
    ShapeErrorCase("rms_norm", "beta_length", _norm("rms_norm", (2, 8), (8,), (4,)), match="beta"),
    ShapeErrorCase("rms_norm", "axis_out_of_range", _norm("rms_norm", (2, 8), (8,), axis=-3), match="out of range"),
    ShapeErrorCase("layer_norm2d", "rank3", _norm("layer_norm2d", (2, 4, 5), (4,)), match="rank 4"),
    ShapeErrorCase("layer_norm2d", "gamma_not_channels", _norm("layer_norm2d", (2, 4, 5, 5), (5,)), match="gamma"),
    ShapeErrorCase("group_norm", "not_divisible", _norm("group_norm", (2, 6, 3, 3), (6,), num_groups=4), match="divisible"),
    ShapeErrorCase("group_norm", "zero_groups", _norm("group_norm", (2, 6, 3, 3), (6,), num_groups=0), match="num_groups"),
    ShapeErrorCase("group_norm", "rank1", _norm("group_norm", (6,), (6,), num_groups=1), match="rank"),
    ShapeErrorCase("group_norm", "gamma_length", _norm("group_norm", (2, 6, 3, 3), (3,), num_groups=3), match="gamma"),
]
