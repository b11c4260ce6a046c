"""2-D convolution and pooling on NCHW tensors: conv2d, conv_transpose2d, pool2d, resize_nearest_2x.

Geometry attributes are pairs ``[h, w]``. Spatial dims, channels and weights must be
static; the batch dim may be symbolic. Kernels are vectorized NumPy (strided window views
plus ``einsum``), never loops over pixels.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import promote_all
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import promote_args, require_float, require_rank

POOL_KINDS = ("max", "mean", "sum", "min", "prod")


def _pair(attrs, key: str, minimum: int) -> tuple[int, int]:
    value = attrs[key]
    if len(value) != 2 or any(v < minimum for v in value):
        raise ShapeError(f"{key} must be two ints >= {minimum}, got {list(value)}")
    return int(value[0]), int(value[1])


def _static_spatial(x: TensorType, what: str = "x") -> tuple:
    require_rank(x, 4, f"{what} (NCHW)")
    n, c, h, w = x.shape
    if not all(isinstance(d, int) for d in (c, h, w)):
        raise ShapeError(f"{what} {x.shape!r}: channels and spatial dims must be static")
    return n, c, h, w


def _kernel_size_canon(ins, attrs):
    """kernel_size=None is taken from the weight's trailing dims."""
    if attrs["kernel_size"] is None and len(ins) > 1 and len(ins[1].shape) == 4 and ins[1].shape.is_static:
        return {**attrs, "kernel_size": tuple(ins[1].shape[2:])}
    return attrs


def _weight(ins, attrs) -> tuple[int, int, int, int]:
    w = ins[1]
    require_rank(w, 4, "w")
    if not w.shape.is_static:
        raise ShapeError(f"w {w.shape!r} must be static")
    k = attrs["kernel_size"]
    if k is not None and tuple(k) != tuple(w.shape[2:]):
        raise ShapeError(f"kernel_size {list(k)} does not match the weight's spatial dims {list(w.shape[2:])}")
    return tuple(w.shape)  # type: ignore[return-value]


def _conv_dtype(ins):
    for t, what in zip(ins, ("x", "w")):
        require_float(t, what)
    return promote_all([t.dtype for t in ins])


def conv_out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(x: np.ndarray, k, s, d) -> np.ndarray:
    """[N, C, H, W] (already padded) -> [N, C, Ho, Wo, kH, kW] strided, dilated window view."""
    span = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    v = sliding_window_view(x, span, axis=(2, 3))
    return v[:, :, :: s[0], :: s[1], :: d[0], :: d[1]]


# ----------------------------------------------------------------------------- conv2d
def _conv2d_type(ins, attrs):
    dtype = _conv_dtype(ins)
    n, c, h, w = _static_spatial(ins[0])
    cout, cin_g, kh, kw = _weight(ins, attrs)
    s, p, d = _pair(attrs, "stride", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    g = attrs["groups"]
    if g < 1 or cin_g * g != c or cout % g:
        raise ShapeError(f"groups={g}: need w.shape[1] * groups == C_in ({cin_g} * {g} vs {c}) and C_out {cout} divisible by groups")
    ho, wo = conv_out_size(h, kh, s[0], p[0], d[0]), conv_out_size(w, kw, s[1], p[1], d[1])
    if ho < 1 or wo < 1:
        raise ShapeError(
            f"output spatial size {ho}x{wo} is not positive (input {h}x{w}, kernel {kh}x{kw}, dilation {list(d)}, padding {list(p)})"
        )
    return TensorType(Shape((n, cout, ho, wo)), dtype)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int) -> np.ndarray:
    """Grouped, strided, dilated cross-correlation by im2col (window view) + einsum."""
    n = x.shape[0]
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    cols = _windows(xp, (kh, kw), stride, dilation)
    ho, wo = cols.shape[2:4]
    cols = cols.reshape(n, groups, cin_g, ho, wo, kh, kw)
    wg = w.reshape(groups, cout // groups, cin_g, kh, kw)
    out = np.einsum("ngchwij,gocij->ngohw", cols, wg, optimize=True)
    return out.reshape(n, cout, ho, wo)


def _conv2d_kernel(args, attrs, out):
    x, w = promote_args(args, out.dtype)
    return conv2d_reference(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"])


_CONV_ATTRS = {
    "kernel_size": AttrSpec("ints", default=None, doc="[kH, kW]; None = from w (stored explicit); must match w"),
    "stride": AttrSpec("ints", default=(1, 1)),
    "padding": AttrSpec("ints", default=(0, 0), doc="symmetric zero padding [pH, pW]"),
    "dilation": AttrSpec("ints", default=(1, 1)),
    "groups": AttrSpec("int", default=1),
}

defop(
    name="conv2d", family="conv", arity=2, operands=("x", "w"),
    attrs=_CONV_ATTRS,
    canonicalize=_kernel_size_canon, infer=_conv2d_type, kernel=_conv2d_kernel, flags={"blas"},
    doc="NCHW cross-correlation = torch.nn.functional.conv2d without bias: x [N, Cin, H, W], "
    "w [Cout, Cin/groups, kH, kW] -> [N, Cout, Hout, Wout], Hout = (H + 2pH - dH(kH-1) - 1) // sH + 1. "
    "Symmetric zero padding. kernel_size defaults to w's spatial dims and must match them (upstream trusts it). "
    "A non-positive output size is a ShapeError (upstream clamps it to 1). Float operands, dtypes promoted.",
)


# ------------------------------------------------------------------- conv_transpose2d
def _conv_t_type(ins, attrs):
    dtype = _conv_dtype(ins)
    n, c, h, w = _static_spatial(ins[0])
    cin, cout_g, kh, kw = _weight(ins, attrs)
    s, p, d = _pair(attrs, "stride", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    op = _pair(attrs, "output_padding", 0)
    g = attrs["groups"]
    if cin != c or g < 1 or c % g:
        raise ShapeError(f"groups={g}: need w.shape[0] == C_in ({cin} vs {c}) and C_in divisible by groups")
    for i in range(2):
        if op[i] >= max(s[i], d[i]):
            raise ShapeError(f"output_padding {list(op)} must be smaller than stride {list(s)} or dilation {list(d)}")
    ho = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    wo = (w - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"output spatial size {ho}x{wo} is not positive (padding {list(p)} too large)")
    return TensorType(Shape((n, cout_g * g, ho, wo)), dtype)


def _conv_t_kernel(args, attrs, out):
    """Scatter form, one vectorized step per kernel tap: out[iy*s + ky*d - p] += x[iy] * w[ky]."""
    x, w = promote_args(args, out.dtype)
    s, p, d, g = attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    ho, wo = out.shape[2], out.shape[3]
    full_h = max((h - 1) * s[0] + d[0] * (kh - 1) + 1, p[0] + ho)
    full_w = max((wd - 1) * s[1] + d[1] * (kw - 1) + 1, p[1] + wo)
    full = np.zeros((n, g, cout_g, full_h, full_w), dtype=np.result_type(x, w))
    xg = x.reshape(n, g, cin // g, h, wd)
    wg = w.reshape(g, cin // g, cout_g, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("ngchw,gco->ngohw", xg, wg[..., ky, kx], optimize=True)
            y0, x0 = ky * d[0], kx * d[1]
            full[..., y0 : y0 + (h - 1) * s[0] + 1 : s[0], x0 : x0 + (wd - 1) * s[1] + 1 : s[1]] += contrib
    return full[..., p[0] : p[0] + ho, p[1] : p[1] + wo].reshape(n, g * cout_g, ho, wo)


defop(
    name="conv_transpose2d", family="conv", arity=2, operands=("x", "w"),
    attrs={**_CONV_ATTRS, "output_padding": AttrSpec("ints", default=(0, 0))},
    canonicalize=_kernel_size_canon, infer=_conv_t_type, kernel=_conv_t_kernel, flags={"blas"},
    doc="torch.nn.functional.conv_transpose2d without bias: x [N, Cin, H, W], w [Cin, Cout/groups, kH, kW] -> "
    "[N, Cout, Hout, Wout], Hout = (H-1)sH - 2pH + dH(kH-1) + opH + 1. Input pixel (iy, ix) adds x*w at "
    "(iy*s + ky*d - p, ix*s + kx*d - p); output_padding only grows the output and must be smaller than stride "
    "or dilation (torch's rule). kernel_size as in conv2d. Float operands, dtypes promoted.",
)


# ----------------------------------------------------------------------------- pool2d
def _pool_canon(ins, attrs):
    if attrs["stride"] is None:
        return {**attrs, "stride": attrs["kernel_size"]}
    return attrs


def _pool_type(ins, attrs):
    x, kind = ins[0], attrs["kind"]
    n, c, h, w = _static_spatial(x)
    if x.dtype.is_bool or x.dtype.is_complex:
        raise ShapeError(f"pooling is not defined on {x.dtype}")
    if kind == "mean":
        require_float(x, "mean pool input")
    k = _pair(attrs, "kernel_size", 1)
    s = _pair(attrs, "stride", 1) if attrs["stride"] is not None else k
    p = _pair(attrs, "padding", 0)
    if p[0] >= k[0] or p[1] >= k[1]:
        raise ShapeError(f"padding {list(p)} must be smaller than kernel_size {list(k)} (a window could be all padding)")
    ho, wo = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"output spatial size {ho}x{wo} is not positive (input {h}x{w}, kernel {list(k)}, padding {list(p)})")
    return TensorType(Shape((n, c, ho, wo)), x.dtype)


def _pool_fill(kind: str, dtype: np.dtype):
    """Padding value that never changes the window result (the reduction's identity)."""
    if kind in ("sum", "mean"):
        return 0
    if kind == "prod":
        return 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if kind == "max" else info.max
    return np.nan  # np.fmax / np.fmin skip NaN, so NaN padding never wins


def _pool_kernel(args, attrs, out):
    x, kind = args[0], attrs["kind"]
    k, p = attrs["kernel_size"], attrs["padding"]
    s = attrs["stride"] if attrs["stride"] is not None else k
    pads = ((0, 0), (0, 0), (p[0],) * 2, (p[1],) * 2)
    win = _windows(np.pad(x, pads, constant_values=_pool_fill(kind, x.dtype)), k, s, (1, 1))
    axes = (-2, -1)
    if kind == "max":
        return np.fmax.reduce(win, axis=axes)
    if kind == "min":
        return np.fmin.reduce(win, axis=axes)
    if kind == "prod":
        return np.prod(win, axis=axes, dtype=x.dtype)
    total = np.sum(win, axis=axes, dtype=x.dtype)
    if kind == "sum":
        return total
    if attrs["count_include_pad"]:
        return total / (k[0] * k[1])
    ones = np.pad(np.ones(x.shape[2:], dtype=x.dtype), pads[2:])
    count = np.sum(_windows(ones[None, None], k, s, (1, 1)), axis=axes)
    return total / count


defop(
    name="pool2d", family="conv", arity=1, operands=("x",),
    attrs={
        "kind": AttrSpec("str", choices=POOL_KINDS),
        "kernel_size": AttrSpec("ints"),
        "stride": AttrSpec("ints", default=None, doc="None = kernel_size (stored explicit)"),
        "padding": AttrSpec("ints", default=(0, 0)),
        "count_include_pad": AttrSpec("bool", default=True, doc="mean divides by kH*kW (True) or by the in-bounds count"),
    },
    canonicalize=_pool_canon, infer=_pool_type, kernel=_pool_kernel, flags={"reduction"},
    doc="NCHW pooling (no dilation): windows start at ho*s - p; Hout = (H + 2p - k) // s + 1. max / min / sum / "
    "prod reduce the in-bounds elements only (padding never wins); upstream's kernel computes a plain sum for "
    "sum, min and prod, rlx computes each as named. max / min ignore NaN like np.fmax. mean divides by kH*kW "
    "(count_include_pad=True, upstream's choice) or, with count_include_pad=False, by the number of in-bounds "
    "elements (torch / ONNX default). padding must be smaller than kernel_size, so no window is all padding. "
    "Integer inputs are allowed except for mean.",
)


# ---------------------------------------------------------------------- resize_nearest_2x
def _resize_type(ins, attrs):
    require_rank(ins[0], 4, "x (NCHW)")
    n, c, h, w = ins[0].shape
    if not (isinstance(h, int) and isinstance(w, int)):
        raise ShapeError(f"x {ins[0].shape!r}: spatial dims must be static (2*H of a symbol is not expressible)")
    return TensorType(Shape((n, c, 2 * h, 2 * w)), ins[0].dtype)


defop(
    name="resize_nearest_2x", family="conv", arity=1, operands=("x",),
    infer=_resize_type,
    kernel=lambda args, attrs, out: args[0].repeat(2, axis=2).repeat(2, axis=3),
    doc="2x nearest-neighbour upsampling of NCHW: [N, C, H, W] -> [N, C, 2H, 2W], x.repeat(2, 2).repeat(2, 3) "
    "(= torch interpolate(scale_factor=2, mode='nearest')). H and W must be static.",
)
