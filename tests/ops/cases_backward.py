"""Cases for the backward ops; every oracle is torch.autograd in float64 (or NumPy written out)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from opcases import OpCase, ShapeErrorCase, randn, torch_f64
from ops.cases_elementwise import POSITIVE_ONLY, TORCH_ACT

T = torch_f64
TIGHT = {"rtol": 1e-10, "atol": 1e-12}


def vjp(fn, args, dy, wrt=0):
    """Gradient of ``fn(*args)`` w.r.t. ``args[wrt]``, seeded with ``dy`` (torch, float64).

    Array arguments become float64 tensors; other arguments (axes, eps) pass through."""
    ts = [T(a) if isinstance(a, np.ndarray) else a for a in args]
    ts[wrt].requires_grad_(True)
    (grad,) = torch.autograd.grad(fn(*ts), [ts[wrt]], T(dy))
    return grad


def case(op, name, build, feed, oracle, **tol):
    return OpCase(op, name, build, feed, oracle, **{**TIGHT, **tol})


X = randn(3, 5, seed=1)
X[0, 0] = 0.0
DY = randn(3, 5, seed=2)
POS = np.abs(randn(3, 5, seed=3)) + 0.1
CASES = [
    case("relu_backward", "basic", lambda g, x, dy: g.relu_backward(x, dy), {"x": X, "dy": DY},
         lambda x, dy: vjp(torch.relu, [x], dy), differentiable=("dy",)),  # x[0, 0] = 0 sits on relu's kink
    case("relu_backward", "f32", lambda g, x, dy: g.relu_backward(x, dy),
         {"x": X.astype(np.float32), "dy": DY.astype(np.float32)}, lambda x, dy: vjp(torch.relu, [x], dy), rtol=1e-6),
]
for kind, fn in TORCH_ACT.items():
    data = POS if kind in POSITIVE_ONLY else X
    kinked = kind in ("relu", "abs")  # x[0, 0] = 0: finite differences straddle the kink in x
    CASES.append(case("activation_backward", kind, lambda g, x, dy, k=kind: g.activation_backward(x, dy, kind=k),
                      {"x": data, "dy": DY}, lambda x, dy, fn=fn: vjp(fn, [x], dy), differentiable=("dy",) if kinked else None))
CASES += [
    case("activation_backward", "round_is_straight_through", lambda g, x, dy: g.activation_backward(x, dy, kind="round"),
         {"x": X, "dy": DY}, lambda x, dy: dy),
    case("activation_backward", "sqrt_rsqrt_zero_at_zero",
         lambda g, x, dy: [g.activation_backward(x, dy, kind="sqrt"), g.activation_backward(x, dy, kind="rsqrt")],
         {"x": np.array([0.0, -1.0, 4.0]), "dy": np.array([1.0, 1.0, 2.0])},
         lambda x, dy: [np.array([0.0, 0.0, 0.5]), np.array([0.0, 0.0, -2.0 * 0.5 * 4.0**-1.5])],
         differentiable=("dy",)),  # x = 0 and x < 0 sit on the guarded branch switch
]

# ------------------------------------------------------------------------------ pooling
POOL_X = randn(2, 3, 6, 7, seed=4)


def _pool_case(name, k, s, p):
    x = POOL_X
    ho, wo = (6 + 2 * p - k) // s + 1, (7 + 2 * p - k) // s + 1
    dy = randn(2, 3, ho, wo, seed=5)
    return case("max_pool2d_backward", name,
                lambda g, x, dy: g.max_pool2d_backward(x, dy, kernel_size=[k, k], stride=[s, s], padding=[p, p]),
                {"x": x, "dy": dy}, lambda x, dy: vjp(lambda t: F.max_pool2d(t, k, s, p), [x], dy))


CASES += [
    _pool_case("k2s2", 2, 2, 0),
    _pool_case("k3s1p1_overlapping", 3, 1, 1),
    _pool_case("k3s2p1", 3, 2, 1),
    case("max_pool2d_backward", "ties_first_wins", lambda g, x, dy: g.max_pool2d_backward(x, dy, kernel_size=[2, 2]),
         {"x": np.ones((1, 1, 2, 4)), "dy": np.array([[[[3.0, 5.0]]]])},
         lambda x, dy: np.array([[[[3.0, 0.0, 5.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]),
         differentiable=("dy",)),  # all-equal x: any perturbation moves the argmax
]

# -------------------------------------------------------------------------------- conv
CONV_GEOMETRIES = {  # name: (x shape, w shape, stride, padding, dilation, groups)
    "plain": ((2, 3, 5, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    "stride2_pad1": ((2, 3, 7, 6), (4, 3, 3, 2), 2, 1, 1, 1),
    "stride2_unread_rows": ((1, 2, 6, 6), (3, 2, 3, 3), 2, 0, 1, 1),
    "dilation2_groups2": ((2, 4, 8, 7), (6, 2, 2, 3), 1, 1, 2, 2),
    "depthwise": ((1, 3, 5, 5), (3, 1, 3, 3), 1, 1, 1, 3),
}
for name, (xs, ws, s, p, d, grp) in CONV_GEOMETRIES.items():
    x, w = randn(*xs, seed=6), randn(*ws, seed=7)
    fwd = F.conv2d(T(x), T(w), stride=s, padding=p, dilation=d, groups=grp)
    dy = randn(*fwd.shape, seed=8)
    geo = {"stride": [s, s], "padding": [p, p], "dilation": [d, d], "groups": grp}
    conv = lambda a, b, s=s, p=p, d=d, grp=grp: F.conv2d(a, b, stride=s, padding=p, dilation=d, groups=grp)
    CASES += [
        case("conv2d_backward_input", name, lambda g, dy, w, geo=geo, xs=xs: g.conv2d_backward_input(dy, w, input_shape=xs, **geo),
             {"dy": dy, "w": w}, lambda dy, w, x=x, conv=conv: vjp(conv, [x, w], dy, 0)),
        case("conv2d_backward_weight", name, lambda g, x, dy, geo=geo, ws=ws: g.conv2d_backward_weight(x, dy, weight_shape=ws, **geo),
             {"x": x, "dy": dy}, lambda x, dy, w=w, conv=conv: vjp(conv, [x, w], dy, 1)),
    ]
CASES.append(case("conv2d_backward_input", "f32_kernel_size_from_weight",
                  lambda g, dy, w: g.conv2d_backward_input(dy, w, input_shape=(1, 2, 4, 4)),
                  {"dy": randn(1, 3, 2, 2, dtype=np.float32, seed=9), "w": randn(3, 2, 3, 3, dtype=np.float32, seed=10)},
                  lambda dy, w: vjp(F.conv2d, [np.zeros((1, 2, 4, 4)), w], dy, 0), rtol=1e-5, atol=1e-6))

# ------------------------------------------------------------------------ cross entropy
LOGITS = randn(4, 5, seed=11) * 3
LABELS = np.array([0, 4, 2, 2], np.int64)
DLOSS = randn(4, seed=12)
CASES += [
    case("softmax_cross_entropy", "i64_labels", lambda g, z, y: g.softmax_cross_entropy(z, y), {"z": LOGITS, "y": LABELS},
         lambda z, y: F.cross_entropy(T(z), torch.from_numpy(y), reduction="none")),
    case("softmax_cross_entropy", "i32_labels_large_logits", lambda g, z, y: g.softmax_cross_entropy(z, y),
         {"z": LOGITS * 200, "y": LABELS.astype(np.int32)},
         lambda z, y: F.cross_entropy(T(z), torch.from_numpy(y).long(), reduction="none")),
    case("softmax_cross_entropy_backward", "basic", lambda g, z, y, d: g.softmax_cross_entropy_backward(z, y, d),
         {"z": LOGITS, "y": LABELS, "d": DLOSS},
         lambda z, y, d: vjp(lambda t: F.cross_entropy(t, torch.from_numpy(y), reduction="none"), [z], d)),
]


# ---------------------------------------------------------------------------- attention
def torch_attention(q, k, v, mask=None, *, kind="none", scale=None, cap=None, window=None):
    """Reference attention on [B, H, S, D] torch tensors, written out (masks replace with -1e9)."""
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if cap is not None:
        s = cap * torch.tanh(s / cap)
    sq, sk = s.shape[-2:]
    i = torch.arange(sq)[:, None] + (sk - sq)
    j = torch.arange(sk)[None, :]
    if kind == "custom":
        s = s.masked_fill(mask[..., None, None, :] < 0.5, -1e9)
    elif kind == "bias":
        s = s + mask
    elif kind == "causal":
        s = s.masked_fill(j > i, -1e9)
    elif kind == "sliding_window":
        s = s.masked_fill((j > i) | (j < i - window), -1e9)
    return torch.softmax(s, -1) @ v


def packed(fn, heads):
    """Wrap a [B, H, S, D] function for packed [B, S, H*D] (or [S, H*D]) operands."""
    def split(t):
        return t.reshape(*t.shape[:-1], heads, -1).transpose(-3, -2)

    def run(q, k, v, *rest, **kw):
        out = fn(split(q), split(k), split(v), *rest, **kw).transpose(-3, -2)
        return out.reshape(*out.shape[:-2], -1)
    return run


WRT = ("query", "key", "value")


def _attention_cases(name, shapes, attrs, ref, mask=None):
    q, k, v = (randn(*s, seed=20 + i) for i, s in enumerate(shapes))
    dy = randn(*shapes[0], seed=24)
    feed = {"q": q, "k": k, "v": v, "dy": dy}
    if mask is not None:
        feed["mask"] = mask
    for wrt_i, wrt in enumerate(WRT):
        def build(g, q, k, v, dy, mask=None, wrt=wrt):
            return g.attention_backward(q, k, v, dy, *([mask] if mask is not None else []), wrt=wrt, **attrs)

        def oracle(q, k, v, dy, mask=None, wrt_i=wrt_i):
            extra = [T(mask)] if mask is not None else []
            return vjp(lambda a, b, c: ref(a, b, c, *extra), [q, k, v], dy, wrt_i)
        CASES.append(case("attention_backward", f"{name}_{wrt}", build, dict(feed), oracle))


H2 = {"num_heads": 2, "head_dim": 4}
_attention_cases("rank3_none", [(2, 5, 8)] * 3, H2, packed(torch_attention, 2))
_attention_cases("rank3_scale_softcap", [(1, 4, 8)] * 3, {**H2, "score_scale": 0.9, "attn_logit_softcap": 1.5},
                 packed(lambda q, k, v: torch_attention(q, k, v, scale=0.9, cap=1.5), 2))
_attention_cases("rank4_causal_decode", [(2, 2, 3, 4), (2, 2, 6, 4), (2, 2, 6, 4)], {**H2, "mask_kind": "causal"},
                 lambda q, k, v: torch_attention(q, k, v, kind="causal"))
_attention_cases("rank4_bshd_window", [(1, 5, 2, 4)] * 3, {**H2, "mask_kind": "sliding_window", "window": 1, "layout": "bshd"},
                 lambda q, k, v: torch_attention(*(t.transpose(1, 2) for t in (q, k, v)), kind="sliding_window", window=1).transpose(1, 2))
_attention_cases("rank3_custom_fully_masked_row", [(2, 3, 8), (2, 4, 8), (2, 4, 8)], {**H2, "mask_kind": "custom"},
                 packed(lambda q, k, v, m: torch_attention(q, k, v, m, kind="custom"), 2),
                 mask=np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]))
_attention_cases("rank2_bias_softcap", [(3, 8), (4, 8), (4, 8)], {**H2, "mask_kind": "bias", "attn_logit_softcap": 2.0},
                 packed(lambda q, k, v, m: torch_attention(q, k, v, m, kind="bias", cap=2.0), 2), mask=randn(2, 3, 4, seed=25))
CASES.append(case("attention_backward", "sdpa_oracle_causal",
                  lambda g, q, k, v, dy: g.attention_backward(q, k, v, dy, num_heads=2, head_dim=3, mask_kind="causal", wrt="query"),
                  {"q": randn(1, 2, 4, 3, seed=26), "k": randn(1, 2, 4, 3, seed=27), "v": randn(1, 2, 4, 3, seed=28),
                   "dy": randn(1, 2, 4, 3, seed=29)},
                  lambda q, k, v, dy: vjp(lambda a: F.scaled_dot_product_attention(a, T(k), T(v), is_causal=True), [q], dy)))

# ----------------------------------------------------------------------- normalisations
NX = randn(3, 4, 6, seed=30) * 2 + 1
NDY = randn(3, 4, 6, seed=31)
G6, B6, G4, B4 = randn(6, seed=32), randn(6, seed=33), randn(4, seed=34), randn(4, seed=35)


def torch_layer_norm(x, g, b, axis=-1, eps=1e-5):
    moved = x.movedim(axis, -1)
    return F.layer_norm(moved, moved.shape[-1:], g, b, eps).movedim(-1, axis)


def torch_rms_norm(x, g, b, axis=-1, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(axis, keepdim=True) + eps) * g.reshape(-1, *[1] * (-axis - 1)) + b.reshape(
        -1, *[1] * (-axis - 1))


for axis, g_, b_ in ((-1, G6, B6), (1, G4, B4)):
    neg = axis - 3 if axis >= 0 else axis
    attrs = {"axis": axis, "eps": 1e-3}
    CASES += [
        case("layer_norm_backward_input", f"axis{axis}", lambda g, x, gm, dy, a=attrs: g.layer_norm_backward_input(x, gm, dy, **a),
             {"x": NX, "gm": g_, "dy": NDY}, lambda x, gm, dy, b=b_, n=neg: vjp(torch_layer_norm, [x, gm, b, n, 1e-3], dy, 0)),
        case("layer_norm_backward_gamma", f"axis{axis}", lambda g, x, dy, a=attrs: g.layer_norm_backward_gamma(x, dy, **a),
             {"x": NX, "dy": NDY}, lambda x, dy, gm=g_, b=b_, n=neg: vjp(torch_layer_norm, [x, gm, b, n, 1e-3], dy, 1)),
    ]
    for op, wrt in (("rms_norm_backward_input", 0), ("rms_norm_backward_gamma", 1), ("rms_norm_backward_beta", 2)):
        CASES.append(case(op, f"axis{axis}", lambda g, x, gm, bt, dy, a=attrs, op=op: g.apply(op, x, gm, bt, dy, **a),
                          {"x": NX, "gm": g_, "bt": b_, "dy": NDY},
                          lambda x, gm, bt, dy, n=neg, w=wrt: vjp(torch_rms_norm, [x, gm, bt, n, 1e-3], dy, w)))
CASES.append(case("layer_norm_backward_input", "f32_gamma_promotes",
                  lambda g, x, gm, dy: g.layer_norm_backward_input(x, gm, dy),
                  {"x": NX.astype(np.float32), "gm": G6, "dy": NDY.astype(np.float32)},
                  lambda x, gm, dy: vjp(torch_layer_norm, [x, gm, B6], dy, 0), rtol=1e-5, atol=1e-6))

GX = randn(2, 6, 3, 4, seed=36) + 0.5
GDY = randn(2, 6, 3, 4, seed=37)
GG, GB = randn(6, seed=38), randn(6, seed=39)
for op, wrt in (("group_norm_backward_input", 0), ("group_norm_backward_gamma", 1), ("group_norm_backward_beta", 2)):
    if wrt == 0:
        build = lambda g, x, gm, bt, dy: g.group_norm_backward_input(x, gm, bt, dy, num_groups=3, eps=1e-4)
        feed = {"x": GX, "gm": GG, "bt": GB, "dy": GDY}
        oracle = lambda x, gm, bt, dy: vjp(lambda t: F.group_norm(t, 3, T(gm), T(bt), 1e-4), [x], dy)
    else:
        build = lambda g, x, dy, op=op: g.apply(op, x, dy, num_groups=3, eps=1e-4)
        feed = {"x": GX, "dy": GDY}
        oracle = lambda x, dy, w=wrt: vjp(lambda a, b, c: F.group_norm(a, 3, b, c, 1e-4), [x, GG, GB], dy, w)
    CASES.append(case(op, "nchw_3_groups", build, feed, oracle))
CASES.append(case("group_norm_backward_input", "rank3_one_group",
                  lambda g, x, gm, bt, dy: g.group_norm_backward_input(x, gm, bt, dy, num_groups=1),
                  {"x": GX[:, :, 0], "gm": GG, "bt": GB, "dy": GDY[:, :, 0]},
                  lambda x, gm, bt, dy: vjp(lambda t: F.group_norm(t, 1, T(gm), T(bt), 1e-5), [x], dy)))


# --------------------------------------------------------------------------------- rope
def torch_rope(x, cos, sin, head_dim, n_rot=None, interleaved=False):
    """Rotary embedding written out in torch on packed heads [..., S, H*D]."""
    n_rot = n_rot or head_dim
    h = n_rot // 2
    seq = x.shape[-2]
    xh = x.reshape(*x.shape[:-1], -1, head_dim)
    c, s = cos[:seq, None, :h], sin[:seq, None, :h]
    if interleaved:
        a, b = xh[..., 0:n_rot:2], xh[..., 1:n_rot:2]
        rot = torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)
    else:
        a, b = xh[..., :h], xh[..., h:n_rot]
        rot = torch.cat([a * c - b * s, b * c + a * s], -1)
    return torch.cat([rot, xh[..., n_rot:]], -1).reshape(x.shape)


ANG = randn(7, 4, seed=40)
for name, shape, attrs in (("rank3", (2, 5, 16), {"head_dim": 8}),
                           ("rank2_partial", (5, 16), {"head_dim": 8, "n_rot": 4}),
                           ("interleaved", (1, 6, 8), {"head_dim": 8, "interleaved": True})):
    CASES.append(case("rope_backward", name, lambda g, dy, c, s, a=attrs: g.rope_backward(dy, c, s, **a),
                      {"dy": randn(*shape, seed=41), "c": np.cos(ANG), "s": np.sin(ANG)},
                      lambda dy, c, s, a=attrs: vjp(lambda x: torch_rope(x, T(c), T(s), **a), [np.zeros(dy.shape)], dy)))


# ------------------------------------------------------------------------------- gather
def torch_take(table, idx, axis):
    out = table.index_select(axis, torch.from_numpy(idx.ravel() % table.shape[axis]))
    return out.reshape(*table.shape[:axis], *idx.shape, *table.shape[axis + 1:])


for name, tshape, idx, axis in (("axis0_repeats", (5, 3), np.array([[0, 4], [4, 1], [0, 0]]), 0),
                                ("axis1_vector", (2, 4, 3), np.array([3, 1, 3], np.int32), 1),
                                ("axis2_negative", (2, 3, 4), np.array([[-1, 0], [2, -4]]), -1)):
    out_shape = tshape[:axis % 3] + idx.shape + tshape[axis % 3 + 1:]
    CASES.append(case("gather_backward", name, lambda g, dy, i, a=axis, t=tshape: g.gather_backward(dy, i, axis=a, table_shape=t),
                      {"dy": randn(*out_shape, seed=42), "i": idx},
                      lambda dy, i, a=axis, t=tshape: vjp(lambda tb: torch_take(tb, i, a % len(t)), [np.zeros(t)], dy)))


# ----------------------------------------------------------------------------- errors
def _in(g, name, shape, dtype="f64"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("relu_backward", "shape_mismatch", lambda g: g.relu_backward(_in(g, "x", (2, 3)), _in(g, "dy", (3, 2)))),
    ShapeErrorCase("activation_backward", "int_operand",
                   lambda g: g.activation_backward(_in(g, "x", (2,), "i32"), _in(g, "dy", (2,), "i32"), kind="tanh")),
    ShapeErrorCase("max_pool2d_backward", "dy_not_pooled_shape",
                   lambda g: g.max_pool2d_backward(_in(g, "x", (1, 1, 4, 4)), _in(g, "dy", (1, 1, 3, 3)), kernel_size=[2, 2])),
    ShapeErrorCase("max_pool2d_backward", "padding_not_smaller",
                   lambda g: g.max_pool2d_backward(_in(g, "x", (1, 1, 4, 4)), _in(g, "dy", (1, 1, 3, 3)), kernel_size=[2, 2],
                                                   stride=[2, 2], padding=[2, 2])),
    ShapeErrorCase("conv2d_backward_input", "wrong_channels",
                   lambda g: g.conv2d_backward_input(_in(g, "dy", (1, 4, 3, 3)), _in(g, "w", (4, 3, 3, 3)), input_shape=(1, 2, 5, 5))),
    ShapeErrorCase("conv2d_backward_input", "dy_spatial",
                   lambda g: g.conv2d_backward_input(_in(g, "dy", (1, 4, 4, 3)), _in(g, "w", (4, 3, 3, 3)), input_shape=(1, 3, 5, 5))),
    ShapeErrorCase("conv2d_backward_weight", "groups_do_not_divide",
                   lambda g: g.conv2d_backward_weight(_in(g, "x", (1, 4, 5, 5)), _in(g, "dy", (1, 3, 3, 3)),
                                                      weight_shape=(3, 2, 3, 3), groups=2)),
    ShapeErrorCase("softmax_cross_entropy", "float_labels",
                   lambda g: g.softmax_cross_entropy(_in(g, "z", (4, 3)), _in(g, "y", (4,))), match="integer"),
    ShapeErrorCase("softmax_cross_entropy", "rank3_logits",
                   lambda g: g.softmax_cross_entropy(_in(g, "z", (2, 4, 3)), _in(g, "y", (2,), "i64"))),
    ShapeErrorCase("softmax_cross_entropy_backward", "d_loss_length",
                   lambda g: g.softmax_cross_entropy_backward(_in(g, "z", (4, 3)), _in(g, "y", (4,), "i64"), _in(g, "d", (3,)))),
    ShapeErrorCase("attention_backward", "dy_not_q_shape",
                   lambda g: g.attention_backward(_in(g, "q", (1, 3, 8)), _in(g, "k", (1, 4, 8)), _in(g, "v", (1, 4, 8)),
                                                  _in(g, "dy", (1, 4, 8)), num_heads=2, head_dim=4, wrt="key")),
    ShapeErrorCase("attention_backward", "heads_mismatch",
                   lambda g: g.attention_backward(*(_in(g, n, (1, 3, 6)) for n in "qkvd"), num_heads=2, head_dim=4, wrt="query")),
    ShapeErrorCase("layer_norm_backward_input", "gamma_length",
                   lambda g: g.layer_norm_backward_input(_in(g, "x", (2, 6)), _in(g, "gm", (5,)), _in(g, "dy", (2, 6)))),
    ShapeErrorCase("layer_norm_backward_gamma", "axis_out_of_range",
                   lambda g: g.layer_norm_backward_gamma(_in(g, "x", (2, 6)), _in(g, "dy", (2, 6)), axis=2)),
    ShapeErrorCase("rms_norm_backward_input", "dy_shape",
                   lambda g: g.rms_norm_backward_input(_in(g, "x", (2, 6)), _in(g, "gm", (6,)), _in(g, "bt", (6,)), _in(g, "dy", (6, 2)))),
    ShapeErrorCase("rms_norm_backward_gamma", "beta_length",
                   lambda g: g.rms_norm_backward_gamma(_in(g, "x", (2, 6)), _in(g, "gm", (6,)), _in(g, "bt", (2,)), _in(g, "dy", (2, 6)))),
    ShapeErrorCase("rms_norm_backward_beta", "int_x",
                   lambda g: g.rms_norm_backward_beta(_in(g, "x", (2, 6), "i32"), _in(g, "gm", (6,)), _in(g, "bt", (6,)),
                                                      _in(g, "dy", (2, 6)))),
    ShapeErrorCase("group_norm_backward_input", "groups_do_not_divide",
                   lambda g: g.group_norm_backward_input(_in(g, "x", (1, 6, 2, 2)), _in(g, "gm", (6,)), _in(g, "bt", (6,)),
                                                         _in(g, "dy", (1, 6, 2, 2)), num_groups=4)),
    ShapeErrorCase("group_norm_backward_gamma", "rank1_x",
                   lambda g: g.group_norm_backward_gamma(_in(g, "x", (6,)), _in(g, "dy", (6,)), num_groups=2)),
    ShapeErrorCase("group_norm_backward_beta", "dy_shape",
                   lambda g: g.group_norm_backward_beta(_in(g, "x", (1, 6, 2)), _in(g, "dy", (1, 6, 3)), num_groups=2)),
    ShapeErrorCase("rope_backward", "table_width",
                   lambda g: g.rope_backward(_in(g, "dy", (1, 4, 16)), _in(g, "c", (4, 3)), _in(g, "s", (4, 3)), head_dim=8)),
    ShapeErrorCase("gather_backward", "dy_shape",
                   lambda g: g.gather_backward(_in(g, "dy", (3, 4)), _in(g, "i", (2,), "i64"), axis=0, table_shape=(5, 4))),
    ShapeErrorCase("gather_backward", "float_indices",
                   lambda g: g.gather_backward(_in(g, "dy", (2, 4)), _in(g, "i", (2,)), axis=0, table_shape=(5, 4))),
]
