"""Cases for conv2d, conv_transpose2d, pool2d and resize_nearest_2x; oracles are torch float64 (or NumPy loops)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from opcases import OpCase, ShapeErrorCase, randn, symbolic, torch_f64

T = torch_f64
X = randn(2, 4, 7, 6, seed=31)

# (name, x shape, w shape, stride, padding, dilation, groups)
CONV = [
    ("basic_3x3", (2, 4, 7, 6), (5, 4, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ("same_pad", (2, 4, 7, 6), (3, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("stride2_asym", (1, 3, 9, 8), (2, 3, 3, 2), (2, 3), (1, 0), (1, 1), 1),
    ("dilation2", (2, 2, 9, 9), (3, 2, 3, 3), (1, 1), (2, 1), (2, 2), 1),
    ("groups2_stride_dilate", (2, 4, 10, 9), (6, 2, 3, 2), (2, 1), (1, 2), (2, 3), 2),
    ("depthwise", (1, 3, 6, 6), (3, 1, 3, 3), (1, 1), (1, 1), (1, 1), 3),
    ("pointwise_1x1", (2, 5, 4, 4), (3, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1),
]

# (name, x shape, w shape, stride, padding, dilation, output_padding, groups)
CONV_T = [
    ("basic", (2, 3, 4, 5), (3, 2, 3, 3), (1, 1), (0, 0), (1, 1), (0, 0), 1),
    ("stride2_pad1", (1, 4, 5, 4), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1), (0, 0), 1),
    ("output_padding", (2, 2, 3, 4), (2, 3, 3, 2), (2, 3), (1, 0), (1, 1), (1, 2), 1),
    ("dilation_groups", (1, 4, 5, 5), (4, 2, 3, 2), (2, 1), (2, 1), (2, 2), (0, 1), 2),
    ("big_padding_crops", (1, 2, 6, 6), (2, 2, 2, 2), (1, 1), (2, 1), (1, 1), (0, 0), 1),
]

CASES = []
for name, xs, ws, s, p, d, gr in CONV:
    CASES.append(OpCase(
        "conv2d", name,
        lambda g, x, w, s=s, p=p, d=d, gr=gr: g.conv2d(x, w, kernel_size=list(w.shape[2:]), stride=list(s), padding=list(p),
                                                      dilation=list(d), groups=gr),
        {"x": randn(*xs, seed=32), "w": randn(*ws, seed=33)},
        lambda x, w, s=s, p=p, d=d, gr=gr: F.conv2d(T(x), T(w), stride=s, padding=p, dilation=d, groups=gr),
        rtol=1e-10, atol=1e-12, params=("w",)))
CASES += [
    OpCase("conv2d", "api_example_f32", lambda g, x, w: g.conv2d(x, w, kernel_size=[3, 3], stride=[1, 1], padding=[1, 1],
                                                                dilation=[1, 1], groups=1),
           {"x": X.astype(np.float32), "w": randn(2, 4, 3, 3, dtype=np.float32, seed=34)},
           lambda x, w: F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), padding=1), rtol=1e-5, atol=1e-5),
    OpCase("conv2d", "kernel_size_from_w", lambda g, x, w: g.conv2d(x, w), {"x": X, "w": randn(3, 4, 2, 3, seed=35)},
           lambda x, w: F.conv2d(T(x), T(w)), rtol=1e-10, atol=1e-12),
]
for name, xs, ws, s, p, d, op, gr in CONV_T:
    CASES.append(OpCase(
        "conv_transpose2d", name,
        lambda g, x, w, s=s, p=p, d=d, op=op, gr=gr: g.conv_transpose2d(x, w, stride=list(s), padding=list(p), dilation=list(d),
                                                                        output_padding=list(op), groups=gr),
        {"x": randn(*xs, seed=36), "w": randn(*ws, seed=37)},
        lambda x, w, s=s, p=p, d=d, op=op, gr=gr: F.conv_transpose2d(T(x), T(w), stride=s, padding=p, output_padding=op,
                                                                     groups=gr, dilation=d),
        rtol=1e-10, atol=1e-12, params=("w",)))


def _prod_pool(x, k, s, p):
    """Product pooling written out with loops over output pixels (padding is skipped)."""
    n, c, h, w = x.shape
    ho, wo = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    out = np.ones((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            y0, x0 = i * s[0] - p[0], j * s[1] - p[1]
            win = x[:, :, max(y0, 0):y0 + k[0], max(x0, 0):x0 + k[1]]
            out[:, :, i, j] = win.prod(axis=(2, 3))
    return out


# (name, kernel, stride, padding)
POOL = [
    ("k2s2", (2, 2), (2, 2), (0, 0)),
    ("k3s2p1", (3, 3), (2, 2), (1, 1)),
    ("k3x2_s1x2_p1x0", (3, 2), (1, 2), (1, 0)),
]
for name, k, s, p in POOL:
    kw = dict(kernel_size=list(k), stride=list(s), padding=list(p))
    CASES += [
        OpCase("pool2d", f"max_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="max", **kw), {"x": X},
               lambda x, k=k, s=s, p=p: F.max_pool2d(T(x), k, s, p)),
        OpCase("pool2d", f"min_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="min", **kw), {"x": X},
               lambda x, k=k, s=s, p=p: -F.max_pool2d(-T(x), k, s, p)),
        OpCase("pool2d", f"mean_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="mean", **kw), {"x": X},
               lambda x, k=k, s=s, p=p: F.avg_pool2d(T(x), k, s, p, count_include_pad=True), rtol=1e-12),
        OpCase("pool2d", f"mean_exclude_pad_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="mean", count_include_pad=False, **kw),
               {"x": X}, lambda x, k=k, s=s, p=p: F.avg_pool2d(T(x), k, s, p, count_include_pad=False), rtol=1e-12),
        OpCase("pool2d", f"sum_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="sum", **kw), {"x": X},
               lambda x, k=k, s=s, p=p: F.avg_pool2d(T(x), k, s, p, count_include_pad=True) * (k[0] * k[1]), rtol=1e-12),
        OpCase("pool2d", f"prod_{name}", lambda g, x, kw=kw: g.pool2d(x, kind="prod", **kw), {"x": X},
               lambda x, k=k, s=s, p=p: _prod_pool(x, k, s, p), rtol=1e-12),
    ]
CASES += [
    OpCase("pool2d", "api_example_max_f32", lambda g, x: g.pool2d(x, kind="max", kernel_size=[2, 2], stride=[2, 2], padding=[0, 0]),
           {"x": X.astype(np.float32)}, lambda x: F.max_pool2d(torch.from_numpy(x), 2, 2)),
    OpCase("pool2d", "stride_defaults_to_kernel", lambda g, x: g.pool2d(x, kind="max", kernel_size=[3, 2]), {"x": X},
           lambda x: F.max_pool2d(T(x), (3, 2))),
    OpCase("pool2d", "max_int_padded", lambda g, x: g.pool2d(x, kind="max", kernel_size=[2, 2], stride=[1, 1], padding=[1, 1]),
           {"x": -np.arange(1, 10, dtype=np.int32).reshape(1, 1, 3, 3)},
           lambda x: F.max_pool2d(torch.from_numpy(x).double(), 2, 1, 1).numpy().astype(np.int32)),
    OpCase("pool2d", "fmax_fmin_ignore_nan", lambda g, x: [g.pool2d(x, kind=k, kernel_size=[2, 2], stride=[1, 1], padding=[1, 1])
                                                           for k in ("fmax", "fmin")],
           {"x": np.array([[[[np.nan, 2.0], [np.nan, np.nan]]]])},
           lambda x: [np.array([[[[np.nan, 2.0, 2.0], [np.nan, 2.0, 2.0], [np.nan, np.nan, np.nan]]]])] * 2),
    OpCase("pool2d", "max_min_propagate_nan", lambda g, x: [g.pool2d(x, kind=k, kernel_size=[2, 2], stride=[1, 1], padding=[1, 1])
                                                            for k in ("max", "min")],
           {"x": np.array([[[[np.nan, 2.0, 1.0], [3.0, 4.0, -1.0]]]])},
           lambda x: [F.max_pool2d(T(x), 2, 1, 1), -F.max_pool2d(-T(x), 2, 1, 1)]),
    # one node, two results (values, indices): torch.nn.functional.max_pool2d(return_indices=True)
    *[OpCase("max_pool2d_with_indices", f"torch_{name}",
             lambda g, x, k=k, s=s, p=p: g.max_pool2d_with_indices(x, kernel_size=list(k), stride=list(s), padding=list(p)),
             {"x": X}, lambda x, k=k, s=s, p=p: tuple(F.max_pool2d(T(x), k, s, p, return_indices=True)))
      for name, k, s, p in POOL],
    OpCase("max_pool2d_with_indices", "ties_first_in_window_torch",
           lambda g, x: g.max_pool2d_with_indices(x, kernel_size=[2, 2], stride=[1, 1], padding=[1, 1]),
           {"x": np.zeros((1, 2, 3, 3))}, lambda x: tuple(F.max_pool2d(T(x), 2, 1, 1, return_indices=True)),
           differentiable=()),  # ties: the max is not differentiable there
    OpCase("max_pool2d_with_indices", "int_padded_torch",
           lambda g, x: g.max_pool2d_with_indices(x, kernel_size=[2, 2], stride=[1, 1], padding=[1, 1]),
           {"x": -np.arange(1, 10, dtype=np.int32).reshape(1, 1, 3, 3)},
           lambda x: (lambda v, i: (v.numpy().astype(np.int32), i))(*F.max_pool2d(torch.from_numpy(x).double(), 2, 1, 1,
                                                                                     return_indices=True))),
    OpCase("max_pool2d_with_indices", "nan_propagates_like_torch",
           lambda g, x: g.max_pool2d_with_indices(x, kernel_size=[2, 2], stride=[1, 1], padding=[1, 1]),
           {"x": np.array([[[[np.nan, 2.0, 1.0], [np.nan, np.nan, 0.5], [3.0, -1.0, 4.0]]]])},
           lambda x: F.max_pool2d(torch.from_numpy(x), 2, 1, 1, return_indices=True)),
    OpCase("resize_nearest_2x", "symbolic_spatial",
           symbolic(lambda g, x: g.resize_nearest_2x(x), {"x": ("n", X.shape[1], "h", "w")}, ("n", X.shape[1], "2*h", "2*w")),
           {"x": X}, lambda x: F.interpolate(T(x), scale_factor=2, mode="nearest")),
    OpCase("pool2d", "symbolic_spatial",
           symbolic(lambda g, x: g.pool2d(x, kind="max", kernel_size=[3, 2], stride=[2, 2], padding=[1, 0]),
                    {"x": ("n", X.shape[1], "h", "w")}, ("n", X.shape[1], "floordiv(h + 1, 2)", "floordiv(w, 2)")),
           {"x": X}, lambda x: F.max_pool2d(T(x), (3, 2), 2, (1, 0))),
    OpCase("resize_nearest_2x", "f64", lambda g, x: g.resize_nearest_2x(x), {"x": X},
           lambda x: F.interpolate(T(x), scale_factor=2, mode="nearest")),
    OpCase("resize_nearest_2x", "i32", lambda g, x: g.resize_nearest_2x(x), {"x": np.arange(6, dtype=np.int32).reshape(1, 2, 1, 3)},
           lambda x: np.array([[[[0, 0, 1, 1, 2, 2]] * 2, [[3, 3, 4, 4, 5, 5]] * 2]], np.int32)),
]


def _in(g, shape, dtype="f32", name="x"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("max_pool2d_with_indices", "padding_not_below_kernel",
                   lambda g: g.max_pool2d_with_indices(_in(g, (1, 1, 4, 4)), kernel_size=[2, 2], padding=[2, 0]), match="padding"),
    ShapeErrorCase("max_pool2d_with_indices", "bool_input",
                   lambda g: g.max_pool2d_with_indices(_in(g, (1, 1, 4, 4), "bool"), kernel_size=[2, 2])),
    ShapeErrorCase("conv2d", "channel_mismatch", lambda g: g.conv2d(_in(g, (1, 3, 5, 5)), _in(g, (2, 4, 3, 3), name="w")), match="groups"),
    ShapeErrorCase("conv2d", "cout_not_divisible", lambda g: g.conv2d(_in(g, (1, 4, 5, 5)), _in(g, (3, 2, 3, 3), name="w"), groups=2)),
    ShapeErrorCase("conv2d", "kernel_size_mismatch",
                   lambda g: g.conv2d(_in(g, (1, 3, 5, 5)), _in(g, (2, 3, 3, 3), name="w"), kernel_size=[2, 2]), match="kernel_size"),
    ShapeErrorCase("conv2d", "non_positive_output",
                   lambda g: g.conv2d(_in(g, (1, 3, 4, 4)), _in(g, (2, 3, 3, 3), name="w"), dilation=[2, 2]), match="not positive"),
    ShapeErrorCase("conv2d", "rank3_input", lambda g: g.conv2d(_in(g, (3, 5, 5)), _in(g, (2, 3, 3, 3), name="w")), match="rank"),
    ShapeErrorCase("conv_transpose2d", "channel_mismatch",
                   lambda g: g.conv_transpose2d(_in(g, (1, 3, 5, 5)), _in(g, (4, 2, 3, 3), name="w"))),
    ShapeErrorCase("conv_transpose2d", "output_padding_too_big",
                   lambda g: g.conv_transpose2d(_in(g, (1, 3, 5, 5)), _in(g, (3, 2, 3, 3), name="w"), stride=[2, 2],
                                                output_padding=[2, 0]), match="output_padding"),
    ShapeErrorCase("pool2d", "window_too_big", lambda g: g.pool2d(_in(g, (1, 1, 2, 2)), kind="max", kernel_size=[3, 3]),
                   match="not positive"),
    ShapeErrorCase("pool2d", "padding_ge_kernel",
                   lambda g: g.pool2d(_in(g, (1, 1, 4, 4)), kind="max", kernel_size=[2, 2], padding=[2, 0]), match="padding"),
    ShapeErrorCase("pool2d", "mean_of_int", lambda g: g.pool2d(_in(g, (1, 1, 4, 4), "i32"), kind="mean", kernel_size=[2, 2])),
    ShapeErrorCase("resize_nearest_2x", "rank3", lambda g: g.resize_nearest_2x(_in(g, (1, 4, 4)))),
]
