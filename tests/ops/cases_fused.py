"""Cases for the fused ops; oracles are torch float64 compositions written out here."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from opcases import OpCase, ShapeErrorCase, randn, torch_f64
from ops.cases_backward import packed, torch_attention, torch_rope

T = torch_f64
TIGHT = {"rtol": 1e-10, "atol": 1e-12}


def case(op, name, build, feed, oracle, **tol):
    return OpCase(op, name, build, feed, oracle, **{**TIGHT, **tol})


TORCH_ACT = {None: lambda t: t, "gelu": F.gelu, "relu": torch.relu, "silu": F.silu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def rms_norm(h, g, b, eps):
    return h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * g + b


# ------------------------------------------------------------------ matmul + bias + act
X, W, B = randn(2, 3, 4, seed=1), randn(4, 5, seed=2), randn(5, seed=3)
CASES = []
for act in (None, "gelu", "relu"):
    CASES.append(case("fused_matmul_bias_act", f"{act}", lambda g, x, w, b, a=act: g.fused_matmul_bias_act(x, w, b, activation=a),
                      {"x": X, "w": W, "b": B}, lambda x, w, b, a=act: TORCH_ACT[a](T(x) @ T(w) + T(b)), params=("w", "b")))
CASES.append(case("fused_matmul_bias_act", "silu_f32", lambda g, x, w, b: g.fused_matmul_bias_act(x, w, b, activation="silu"),
                  {k: v.astype(np.float32) for k, v in {"x": X, "w": W, "b": B}.items()},
                  lambda x, w, b: F.silu(T(x) @ T(w) + T(b)), rtol=1e-5, atol=1e-6))

# ----------------------------------------------------------------- residual + norms
RX, RR, RB = randn(2, 3, 6, seed=4), randn(2, 3, 6, seed=5), randn(6, seed=6)
RG, RBETA = randn(6, seed=7), randn(6, seed=8)


def _residual_oracle(norm, *ops):
    *summands, gamma, beta = (T(t) for t in ops)
    return norm(sum(summands), gamma, beta, 1e-3)


for has_bias in (False, True):
    feed = {"x": RX, "r": RR, **({"b": RB} if has_bias else {}), "gm": RG, "bt": RBETA}
    for op, ref in (("fused_residual_layer_norm", lambda h, g, b, eps: F.layer_norm(h, h.shape[-1:], g, b, eps)),
                    ("fused_residual_rms_norm", rms_norm)):
        CASES.append(case(op, f"bias_{has_bias}", lambda g, op=op, hb=has_bias, **ops: g.apply(op, *ops.values(), has_bias=hb, eps=1e-3),
                          dict(feed), lambda ref=ref, **a: _residual_oracle(ref, *a.values())))
        # one node, two results (sum, normed): the residual stream and its norm
        CASES.append(case(op, f"with_sum_bias_{has_bias}",
                          lambda g, op=op, hb=has_bias, **ops: g.apply(op, *ops.values(), has_bias=hb, eps=1e-3, with_sum=True),
                          dict(feed), lambda ref=ref, **a: (sum(T(t) for t in list(a.values())[:-2]), _residual_oracle(ref, *a.values()))))

# ------------------------------------------------------------------- conv + bias + act
# (name, x shape, w shape, stride, padding, dilation, groups, activation, has_bias)
CONV_FUSED = [
    ("relu_bias", (2, 4, 7, 6), (5, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1, "relu", True),
    ("gelu_stride_groups", (2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), (2, 1), 2, "gelu", True),
    ("silu_depthwise", (1, 3, 6, 6), (3, 1, 3, 3), (1, 1), (1, 1), (1, 1), 3, "silu", True),
    ("no_act", (2, 5, 4, 4), (3, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1, None, True),
    ("sigmoid_no_bias", (1, 2, 5, 5), (4, 2, 2, 2), (1, 2), (1, 1), (2, 1), 1, "sigmoid", False),
]
for name, xs, ws, s, p, d, gr, act, hb in CONV_FUSED:
    geo = {"stride": list(s), "padding": list(p), "dilation": list(d), "groups": gr}
    feed = {"x": randn(*xs, seed=41), "w": randn(*ws, seed=42), **({"b": randn(ws[0], seed=43)} if hb else {})}
    CASES.append(case(
        "fused_conv2d_bias_act", name,
        lambda g, geo=geo, a=act, hb=hb, **ops: g.fused_conv2d_bias_act(*ops.values(), activation=a, has_bias=hb, **geo),
        feed, lambda s=s, p=p, d=d, gr=gr, a=act, **ops: TORCH_ACT[a](F.conv2d(
            T(ops["x"]), T(ops["w"]), T(ops["b"]) if "b" in ops else None, stride=s, padding=p, dilation=d, groups=gr)),
        params=("w", "b") if hb else ("w",)))

# ------------------------------------------------------------------------------ swiglu
SX = randn(2, 3, 8, seed=9)


def torch_swiglu(x, gate_first=False):
    lo, hi = T(x).chunk(2, -1)
    up, gate = (hi, lo) if gate_first else (lo, hi)
    return up * F.silu(gate)


CASES += [
    case("fused_swiglu", "default", lambda g, x: g.fused_swiglu(x), {"x": SX}, torch_swiglu),
    case("fused_swiglu", "gate_first", lambda g, x: g.fused_swiglu(x, gate_first=True), {"x": SX},
         lambda x: torch_swiglu(x, True)),
    case("fused_swiglu", "cast_to_f32", lambda g, x: g.fused_swiglu(x, cast_to="f32"), {"x": SX[0]},
         lambda x: torch_swiglu(x).float(), rtol=1e-6, atol=1e-7),
]

# --------------------------------------------------------------------------------- lora
CASES += [
    case("lora_matmul", "scale_half", lambda g, x, w, a, b: g.lora_matmul(x, w, a, b, scale=0.5),
         {"x": randn(3, 4, seed=10), "w": randn(4, 5, seed=11), "a": randn(4, 2, seed=12), "b": randn(2, 5, seed=13)},
         lambda x, w, a, b: T(x) @ T(w) + 0.5 * ((T(x) @ T(a)) @ T(b)), params=("w", "a", "b")),
    case("lora_matmul", "batched_default_scale", lambda g, x, w, a, b: g.lora_matmul(x, w, a, b),
         {"x": randn(2, 3, 4, seed=14), "w": randn(4, 5, seed=15), "a": randn(4, 1, seed=16), "b": randn(1, 5, seed=17)},
         lambda x, w, a, b: T(x) @ T(w) + (T(x) @ T(a)) @ T(b)),
]

# ------------------------------------------------------------------- attention blocks
HEADS, HD, HID, SEQ = 2, 4, 6, 5
MASK = np.array([[1.0, 1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0, 0.0]])
ANG = randn(SEQ + 1, HD // 2, seed=18)


def torch_block(hidden, qkv_w, out_w, mask, qkv_b=None, out_b=None, cos=None, sin=None):
    width = HEADS * HD
    qkv = T(hidden) @ T(qkv_w) + (T(qkv_b) if qkv_b is not None else 0)
    q, k, v = qkv[..., :width], qkv[..., width:2 * width], qkv[..., 2 * width:]
    if cos is not None:
        q, k = (torch_rope(t, T(cos), T(sin), HD) for t in (q, k))
    attn = packed(lambda a, b, c: torch_attention(a, b, c, T(mask), kind="custom"), HEADS)(q, k, v)
    return attn @ T(out_w) + (T(out_b) if out_b is not None else 0)


BLOCK_FEED = {"hidden": randn(2, SEQ, HID, seed=19), "qkv_w": randn(HID, 3 * HEADS * HD, seed=20) * 0.5,
              "out_w": randn(HEADS * HD, HID, seed=21), "mask": MASK}
BLOCK_EXTRA = {"qkv_b": randn(3 * HEADS * HD, seed=22), "out_b": randn(HID, seed=23), "cos": np.cos(ANG), "sin": np.sin(ANG)}
for has_bias in (False, True):
    for has_rope in (False, True):
        extra = [k for k in BLOCK_EXTRA if (k.endswith("_b") and has_bias) or (k in ("cos", "sin") and has_rope)]
        CASES.append(case(
            "fused_attention_block", f"bias_{has_bias}_rope_{has_rope}",
            lambda g, hb=has_bias, hr=has_rope, **ops: g.fused_attention_block(
                *ops.values(), num_heads=HEADS, head_dim=HD, has_bias=hb, has_rope=hr),
            {**BLOCK_FEED, **{k: BLOCK_EXTRA[k] for k in extra}},
            lambda hidden, qkv_w, out_w, mask, **kw: torch_block(hidden, qkv_w, out_w, mask, **kw)))

INTER = 7
LAYER_FEED = {
    "hidden": BLOCK_FEED["hidden"], "qkv_w": BLOCK_FEED["qkv_w"], "qkv_b": BLOCK_EXTRA["qkv_b"],
    "out_w": BLOCK_FEED["out_w"] * 0.5, "out_b": BLOCK_EXTRA["out_b"], "ln1_g": randn(HID, seed=24), "ln1_b": randn(HID, seed=25),
    "fc1_w": randn(HID, INTER, seed=26), "fc1_b": randn(INTER, seed=27), "fc2_w": randn(INTER, HID, seed=28) * 0.5,
    "fc2_b": randn(HID, seed=29), "ln2_g": randn(HID, seed=30), "ln2_b": randn(HID, seed=31), "mask": MASK,
}
NO_BIAS = ("qkv_b", "out_b", "fc1_b", "fc2_b")


def torch_layer(hidden, qkv_w, out_w, ln1_g, ln1_b, fc1_w, fc2_w, ln2_g, ln2_b, mask,
                qkv_b=None, out_b=None, fc1_b=None, fc2_b=None, act=F.gelu, eps1=1e-5, eps2=1e-5):
    def ln(h, g, b, eps):
        return F.layer_norm(h, (HID,), T(g), T(b), eps)

    def bias(b):
        return T(b) if b is not None else 0

    h1 = ln(torch_block(hidden, qkv_w, out_w, mask, qkv_b, out_b) + T(hidden), ln1_g, ln1_b, eps1)
    ffn = act(h1 @ T(fc1_w) + bias(fc1_b)) @ T(fc2_w) + bias(fc2_b)
    return ln(ffn + h1, ln2_g, ln2_b, eps2)


LAYER_ATTRS = {"num_heads": HEADS, "head_dim": HD, "intermediate_size": INTER}
CASES += [
    case("fused_transformer_layer", "bias_14_operands", lambda g, **ops: g.fused_transformer_layer(*ops.values(), **LAYER_ATTRS),
         dict(LAYER_FEED), lambda **kw: torch_layer(**kw), params=tuple(k for k in LAYER_FEED if k not in ("hidden", "mask"))),
    case("fused_transformer_layer", "no_bias_10_operands_relu",
         lambda g, **ops: g.fused_transformer_layer(*ops.values(), has_bias=False, activation="relu", eps1=1e-3, eps2=1e-4, **LAYER_ATTRS),
         {k: v for k, v in LAYER_FEED.items() if k not in NO_BIAS},
         lambda **kw: torch_layer(**kw, act=torch.relu, eps1=1e-3, eps2=1e-4)),
]

# -------------------------------------------------------------------- elementwise_region
EA, EB = randn(3, 4, seed=32), randn(4, seed=33)


def region(*chain, n=2):
    return lambda g, **ops: g.elementwise_region(*ops.values(), chain=[list(s) for s in chain], num_inputs=n)


CASES += [
    case("elementwise_region", "add_gelu_mul_broadcast",
         region(("binary", "add", ("in", 0), ("in", 1)), ("activation", "gelu", ("step", 0)), ("binary", "mul", ("step", 1), ("in", 0))),
         {"a": EA, "b": EB}, lambda a, b: F.gelu(T(a) + T(b)) * T(a)),
    case("elementwise_region", "compare_where",
         region(("compare", "lt", ("in", 0), ("in", 1)), ("activation", "exp", ("in", 0)), ("where", ("step", 0), ("step", 1), ("in", 1))),
         {"a": EA, "b": EB}, lambda a, b: torch.where(T(a) < T(b), torch.exp(T(a)), T(b))),
    case("elementwise_region", "int_promotes_then_cast_f32",
         region(("binary", "mul", ("in", 0), ("in", 1)), ("cast", "f32", ("step", 0)), ("activation", "tanh", ("step", 1))),
         {"a": EA, "i": np.array([1, -2, 3, 0], np.int32)}, lambda a, i: torch.tanh((T(a) * T(i).double()).float()),
         rtol=1e-6, atol=1e-7),
    case("elementwise_region", "single_input_scalar_operand",
         region(("binary", "max", ("in", 0), ("in", 1)), ("activation", "neg", ("step", 0))),
         {"a": EA, "s": np.array(0.25)}, lambda a, s: -torch.maximum(T(a), T(s))),
    case("elementwise_region", "f16_cast_rounds",
         region(("cast", "f16", ("in", 0)), ("binary", "sub", ("in", 0), ("step", 0)), n=1),
         {"a": EA.astype(np.float32)}, lambda a: T(a) - T(a).half().double(), rtol=1e-6, atol=1e-8),
]


# ------------------------------------------------------------------------------ errors
def _in(g, name, shape, dtype="f64"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("fused_matmul_bias_act", "bias_not_vector",
                   lambda g: g.fused_matmul_bias_act(_in(g, "x", (3, 4)), _in(g, "w", (4, 5)), _in(g, "b", (3, 5))), match="bias"),
    ShapeErrorCase("fused_matmul_bias_act", "k_mismatch",
                   lambda g: g.fused_matmul_bias_act(_in(g, "x", (3, 4)), _in(g, "w", (3, 5)), _in(g, "b", (5,)))),
    ShapeErrorCase("fused_residual_layer_norm", "residual_broadcasts_up",
                   lambda g: g.fused_residual_layer_norm(_in(g, "x", (1, 6)), _in(g, "r", (3, 6)), _in(g, "gm", (6,)), _in(g, "bt", (6,)))),
    ShapeErrorCase("fused_residual_rms_norm", "gamma_length",
                   lambda g: g.fused_residual_rms_norm(_in(g, "x", (3, 6)), _in(g, "r", (3, 6)), _in(g, "b", (6,)), _in(g, "gm", (5,)),
                                                       _in(g, "bt", (6,)), has_bias=True)),
    ShapeErrorCase("fused_conv2d_bias_act", "bias_length",
                   lambda g: g.fused_conv2d_bias_act(_in(g, "x", (1, 2, 5, 5)), _in(g, "w", (3, 2, 3, 3)), _in(g, "b", (2,))),
                   match="bias"),
    ShapeErrorCase("fused_conv2d_bias_act", "bias_dtype",
                   lambda g: g.fused_conv2d_bias_act(_in(g, "x", (1, 2, 5, 5)), _in(g, "w", (3, 2, 3, 3)), _in(g, "b", (3,), "f32")),
                   match="dtype"),
    ShapeErrorCase("fused_conv2d_bias_act", "channels",
                   lambda g: g.fused_conv2d_bias_act(_in(g, "x", (1, 4, 5, 5)), _in(g, "w", (3, 2, 3, 3)), _in(g, "b", (3,))),
                   match="groups"),
    ShapeErrorCase("fused_swiglu", "odd_width", lambda g: g.fused_swiglu(_in(g, "x", (2, 5))), match="even"),
    ShapeErrorCase("lora_matmul", "rank_mismatch",
                   lambda g: g.lora_matmul(_in(g, "x", (3, 4)), _in(g, "w", (4, 5)), _in(g, "a", (4, 2)), _in(g, "b", (3, 5)))),
    ShapeErrorCase("fused_attention_block", "qkv_width",
                   lambda g: g.fused_attention_block(_in(g, "h", (1, 3, 6)), _in(g, "qw", (6, 25)), _in(g, "ow", (8, 6)),
                                                     _in(g, "m", (1, 3)), num_heads=2, head_dim=4), match="columns"),
    ShapeErrorCase("fused_attention_block", "mask_shape",
                   lambda g: g.fused_attention_block(_in(g, "h", (1, 3, 6)), _in(g, "qw", (6, 24)), _in(g, "ow", (8, 6)),
                                                     _in(g, "m", (1, 4)), num_heads=2, head_dim=4), match="mask"),
    ShapeErrorCase("fused_transformer_layer", "intermediate_size",
                   lambda g: g.fused_transformer_layer(
                       *(_in(g, k, v.shape) for k, v in LAYER_FEED.items()), num_heads=HEADS, head_dim=HD, intermediate_size=INTER + 1),
                   match="intermediate_size"),
    ShapeErrorCase("elementwise_region", "forward_step_reference",
                   lambda g: g.elementwise_region(_in(g, "a", (2,)), chain=[["activation", "exp", ["step", 0]]], num_inputs=1)),
    ShapeErrorCase("elementwise_region", "no_broadcast",
                   lambda g: g.elementwise_region(_in(g, "a", (2,)), _in(g, "b", (3,)),
                                                  chain=[["binary", "add", ["in", 0], ["in", 1]]], num_inputs=2), match="broadcast"),
    ShapeErrorCase("elementwise_region", "bad_step_kind",
                   lambda g: g.elementwise_region(_in(g, "a", (2,)), chain=[["reduce", "sum", ["in", 0]]], num_inputs=1)),
]
