"""Cases for the quantisation ops. Oracles: torch's quantization functions (fake_quantize_per_*_affine,
quantize_per_*, learnable fake-quant and its autograd), torch conv2d on exact integers, ml_dtypes fp8
decoding, and integer loops / formulas written out here (rounding half away from zero, as docs/semantics.md#quantisation).

Fake-quant forwards are straight-through estimators, so finite differences only agree with their
gradient rules where the estimator is the true derivative (saturated inputs): those f64 cases are the
gradient-checked ones; the other fake-quant cases are f32 (not gradient-checked)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

from opcases import OpCase, ShapeErrorCase, randn

QMAX = {8: 127, 4: 7, 2: 1}


def rha(v):
    """Round half away from zero (Rust f32::round)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def chan(p, axis, ndim):
    p = np.asarray(p)
    if axis is None:
        return p.reshape(())
    shape = [1] * ndim
    shape[axis] = -1
    return p.reshape(shape)


X32 = randn(4, 6, seed=11).astype(np.float32)
X3 = randn(2, 3, 5, seed=12).astype(np.float32)

# --------------------------------------------------------------------------- quantize / dequantize
def _q_formula(x, scales, zps, axis):
    inv = (np.float32(1) / np.asarray(scales, np.float32)).astype(np.float32)
    v = x * chan(inv, axis, x.ndim)
    q = np.clip(rha(v) + chan(np.asarray(zps, np.float32), axis, x.ndim), -128, 127)
    return np.where(np.isnan(q), 0, q).astype(np.int8)


CASES = [
    OpCase("quantize", "per_tensor_sym_torch", lambda g, x: g.quantize(x, scales=[0.02]), {"x": X32},
           lambda x: torch.quantize_per_tensor(torch.from_numpy(x), 0.02, 0, torch.qint8).int_repr()),
    OpCase("quantize", "per_channel_affine_torch", lambda g, x: g.quantize(x, axis=1, scales=[0.01, 0.02, 0.05], zero_points=[-3, 0, 7]),
           {"x": X3}, lambda x: torch.quantize_per_channel(torch.from_numpy(x), torch.tensor([0.01, 0.02, 0.05], dtype=torch.float64),
                                                         torch.tensor([-3, 0, 7]), 1, torch.qint8).int_repr()),
    OpCase("quantize", "ties_half_away_saturate_nan", lambda g, x: g.quantize(x, scales=[0.5], zero_points=[1]),
           {"x": np.array([0.25, 0.75, -0.25, -0.75, 1.25, 100.0, -100.0, np.nan], np.float32)},
           lambda x: np.array([2, 3, 0, -1, 4, 127, -128, 0], np.int8)),
    OpCase("quantize", "negative_axis_formula",
           lambda g, x: g.quantize(x, axis=-1, scales=[0.1, 0.2, 0.3, 0.4, 0.5], zero_points=[0, 1, 2, 3, 4]),
           {"x": X3}, lambda x: _q_formula(x, [0.1, 0.2, 0.3, 0.4, 0.5], [0, 1, 2, 3, 4], 2)),
    OpCase("quantize", "f64_one_shared_scale_per_channel", lambda g, x: g.quantize(x, axis=0, scales=[0.03]),
           {"x": randn(3, 4, seed=13)}, lambda x: np.clip(rha(x * (1 / 0.03)), -128, 127).astype(np.int8)),
]

Q8 = np.random.default_rng(14).integers(-128, 128, size=(3, 4)).astype(np.int8)
CASES += [
    OpCase("dequantize", "per_tensor_torch", lambda g, q: g.dequantize(q, scales=[0.05], zero_points=[3]), {"q": Q8},
           lambda q: torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), 0.05, 3).dequantize()),
    OpCase("dequantize", "per_channel_formula",
           lambda g, q: g.dequantize(q, axis=1, scales=[0.1, 0.2, 0.3, 0.4], zero_points=[0, -1, 2, 5]), {"q": Q8},
           lambda q: (q.astype(np.float32) - np.array([0, -1, 2, 5], np.float32)) * np.array([0.1, 0.2, 0.3, 0.4], np.float32)),
    OpCase("dequantize", "to_f64_from_i32", lambda g, q: g.dequantize(q, scales=[0.25], to="f64"),
           {"q": np.array([-3, 0, 1000], np.int32)}, lambda q: q * 0.25),
]


# ------------------------------------------------------------------------------------ fake_quantize
def _torch_fq(x, bits, axis=None):
    q = QMAX[bits]
    t = torch.from_numpy(x)
    if axis is None:
        s = max(float(np.max(np.abs(x))) / q, 1e-12)
        return torch.fake_quantize_per_tensor_affine(t, s, 0, -q, q)
    red = tuple(i for i in range(x.ndim) if i != axis)
    s = np.maximum(np.max(np.abs(x), axis=red) / q, 1e-12).astype(np.float32)
    return torch.fake_quantize_per_channel_affine(t, torch.from_numpy(s), torch.zeros(len(s), dtype=torch.int32), axis, -q, q)


def _fq_formula(x, s, bits):
    q = QMAX[bits]
    return np.clip(rha(x / s), -q, q) * s


def _ema_scale(x, s, axis_red, decay=0.9, q=127):
    cur = np.maximum(np.max(np.abs(x), axis=axis_red) / q, 1e-12)
    return np.where(s <= 0, cur, decay * s + (1 - decay) * cur)


STATE3 = np.array([0.0, 0.02, 0.5], np.float32)  # 0 = "no EMA yet": the batch scale is used
CASES += [
    OpCase("fake_quantize", "per_tensor_8bit_torch", lambda g, x: g.fake_quantize(x), {"x": X32}, lambda x: _torch_fq(x, 8)),
    OpCase("fake_quantize", "per_channel_4bit_torch", lambda g, x: g.fake_quantize(x, bits=4, axis=1), {"x": X3},
           lambda x: _torch_fq(x, 4, axis=1)),
    OpCase("fake_quantize", "per_channel_2bit_ste_tanh_torch", lambda g, x: g.fake_quantize(x, bits=2, axis=0, ste="tanh"), {"x": X32},
           lambda x: _torch_fq(x, 2, axis=0)),
    OpCase("fake_quantize", "ema_state_read_only", lambda g, x, s: g.fake_quantize(x, s, axis=1, scale_mode="ema", decay=0.8),
           {"x": X3, "s": STATE3},
           lambda x, s: _fq_formula(x, _ema_scale(x, s, (0, 2), decay=0.8).astype(np.float32).reshape(1, 3, 1), 8)),
    OpCase("fake_quantize", "fixed_scale_clips", lambda g, x, s: g.fake_quantize(x, s, scale_mode="fixed", bits=4),
           {"x": X32, "s": np.array([0.1], np.float32)}, lambda x, s: _fq_formula(x, np.float32(0.1), 4)),
    # f64 and gradient-checked: every |x| > q_max·s, where clipped_identity's estimate (0) is the derivative
    OpCase("fake_quantize", "saturated_clipped_ste_f64", lambda g, x, s: g.fake_quantize(x, s, scale_mode="fixed", ste="clipped_identity"),
           {"x": np.array([[3.0, -2.5, 4.0], [-3.5, 2.2, -5.0]]), "s": np.array([0.01])},
           lambda x, s: np.sign(x) * 127 * 0.01, differentiable=("x",)),
]


CASES += [
    OpCase("observer_update", "ema_per_channel", lambda g, x, s: g.observer_update(x, s, axis=1, scale_mode="ema"),
           {"x": X3, "s": STATE3}, lambda x, s: _ema_scale(x, s, (0, 2)).astype(np.float32), rtol=1e-6),
    OpCase("observer_update", "per_batch_per_tensor_4bit", lambda g, x: g.observer_update(x, bits=4), {"x": X32},
           lambda x: np.array([np.max(np.abs(x)) / 7], np.float32)),
    OpCase("observer_update", "fixed_floors", lambda g, x, s: g.observer_update(x, s, scale_mode="fixed", axis=0),
           {"x": X32, "s": np.array([0.5, 0.0, 1e-20, 2.0], np.float32)}, lambda x, s: np.maximum(s, np.float32(1e-12))),
]


def _fqb_formula(x, dy, bits, ste, s):
    q = QMAX[bits]
    if ste == "identity":
        return dy
    if ste == "clipped_identity":
        return dy * (np.abs(x) <= q * s)
    if ste == "tanh":
        return dy * (1 - np.tanh(x / s) ** 2)
    return dy * np.maximum(0, 1 - np.abs(x / (q * s)))


XB = randn(3, 4, seed=15)
DYB = randn(3, 4, seed=16)
for ste in ("identity", "clipped_identity", "tanh", "hard_tanh"):
    CASES.append(OpCase(
        "fake_quantize_backward", f"{ste}_per_channel_f64",
        lambda g, x, dy, ste=ste: g.fake_quantize_backward(x, dy, bits=4, axis=0, ste=ste),
        {"x": XB, "dy": DYB},
        lambda x, dy, ste=ste: _fqb_formula(x, dy, 4, ste, np.maximum(np.max(np.abs(x), axis=1, keepdims=True) / 7, 1e-12)),
        rtol=1e-12, differentiable=("dy",)))
CASES += [
    OpCase("fake_quantize_backward", "clipped_fixed_scale_uses_forward_scale",
           lambda g, x, dy, s: g.fake_quantize_backward(x, dy, s, ste="clipped_identity", scale_mode="fixed"),
           {"x": XB, "dy": DYB, "s": np.array([0.005])}, lambda x, dy, s: dy * (np.abs(x) <= 127 * 0.005), differentiable=("dy",)),
]


# ------------------------------------------------------------------------------------------- LSQ
def _torch_lsq(x, scale, dy=None, want="out"):
    """torch's learnable fake-quant (zero point 0, range [-q, q], grad_factor 1) and its autograd."""
    q = 127
    t = torch.from_numpy(x).clone().requires_grad_(True)
    s = torch.from_numpy(scale).clone().requires_grad_(True)
    out = torch._fake_quantize_learnable_per_tensor_affine(t, s, torch.zeros(1), -q, q, 1.0)
    if want == "out":
        return out
    out.backward(torch.from_numpy(dy))
    return t.grad if want == "dx" else s.grad


XL = randn(4, 5, seed=17).astype(np.float32)
SL = np.array([np.max(np.abs(XL)) / 100], np.float32)  # no clipping: torch's range test agrees with |x/s| <= q_max
DYL = randn(4, 5, seed=18).astype(np.float32)
# z = x/s: integers + offsets in [-0.4, 0.4] (far from rounding ties), some saturated beyond q_max = 7, none near 7
_ZL = np.array([[0.3, -1.2, 2.35, -3.1, 9.2], [-8.7, 4.0, 5.25, -6.3, 0.1], [1.4, -2.2, 12.0, -0.35, 3.3]])
SCL = np.array([0.5, 0.25, 0.125])  # per-channel along axis 0
XLC = _ZL * SCL[:, None]
DYLC = randn(3, 5, seed=19)


def _psi(z, q):
    return np.where(np.abs(z) <= q, rha(z) - z, np.sign(z) * q)


CASES += [
    OpCase("fake_quantize_lsq", "per_tensor_torch", lambda g, x, s: g.fake_quantize_lsq(x, s), {"x": XL, "s": SL},
           lambda x, s: _torch_lsq(x, s)),
    OpCase("fake_quantize_lsq", "per_channel_4bit_formula", lambda g, x, s: g.fake_quantize_lsq(x, s, bits=4, axis=0),
           {"x": XLC.astype(np.float32), "s": SCL.astype(np.float32)},
           lambda x, s: np.clip(rha(x / s[:, None]), -7, 7) * s[:, None], rtol=1e-6),
    # f64 and gradient-checked: all saturated, where the LSQ estimator (dx = 0, ds = sign(z)·q_max) is the derivative
    OpCase("fake_quantize_lsq", "saturated_f64", lambda g, x, s: g.fake_quantize_lsq(x, s, bits=2, axis=1),
           {"x": np.array([[3.1, -4.2], [-2.6, 5.5]]), "s": np.array([0.5, 1.0])},
           lambda x, s: np.sign(x) * 1 * s),
    OpCase("fake_quantize_lsq_backward_x", "per_tensor_torch", lambda g, x, s, dy: g.fake_quantize_lsq_backward_x(x, s, dy),
           {"x": XL, "s": SL, "dy": DYL}, lambda x, s, dy: _torch_lsq(x, s, dy, "dx")),
    OpCase("fake_quantize_lsq_backward_x", "per_channel_f64", lambda g, x, s, dy: g.fake_quantize_lsq_backward_x(x, s, dy, bits=4, axis=0),
           {"x": XLC, "s": SCL, "dy": DYLC}, lambda x, s, dy: dy * (np.abs(x / s[:, None]) <= 7)),
    OpCase("fake_quantize_lsq_backward_scale", "per_tensor_torch", lambda g, x, s, dy: g.fake_quantize_lsq_backward_scale(x, s, dy),
           {"x": XL, "s": SL, "dy": DYL}, lambda x, s, dy: _torch_lsq(x, s, dy, "ds"), rtol=1e-5, atol=1e-5),
    OpCase("fake_quantize_lsq_backward_scale", "per_channel_f64",
           lambda g, x, s, dy: g.fake_quantize_lsq_backward_scale(x, s, dy, bits=4, axis=0),
           {"x": XLC, "s": SCL, "dy": DYLC}, lambda x, s, dy: np.sum(_psi(x / s[:, None], 7) * dy, axis=1), rtol=1e-12),
    OpCase("fake_quantize_lsq_backward_scale", "per_tensor_f64_3d",
           lambda g, x, s, dy: g.fake_quantize_lsq_backward_scale(x, s, dy, bits=4),
           {"x": (XLC * 0.5).reshape(3, 1, 5), "s": np.array([0.0625]), "dy": DYLC.reshape(3, 1, 5)},
           lambda x, s, dy: np.array([np.sum(_psi(x / 0.0625, 7) * dy)]), rtol=1e-12),
]


# ---------------------------------------------------------------------------- q_matmul / q_conv2d
def _requant_scalar(acc, mult, out_zp):
    """One output: int32 accumulator -> i8, round half away from zero, in f32 like upstream."""
    v = float(np.float32(acc) * np.float32(mult))
    r = math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)
    return max(-128, min(127, r + out_zp))


def _q_matmul_loop(x, w, b, x_zp, w_zp, out_zp, mult):
    m, k = x.shape
    n = w.shape[1]
    out = np.zeros((m, n), np.int8)
    for i in range(m):
        for j in range(n):
            acc = int(b[j]) + sum((int(x[i, p]) - x_zp) * (int(w[p, j]) - w_zp) for p in range(k))
            out[i, j] = _requant_scalar(acc, mult, out_zp)
    return out


R = np.random.default_rng(20)
XQ = R.integers(-128, 128, size=(3, 5)).astype(np.int8)
WQ = R.integers(-128, 128, size=(5, 4)).astype(np.int8)
BQ = R.integers(-2000, 2000, size=(4,)).astype(np.int32)
CASES += [
    OpCase("q_matmul", "zero_points_loop", lambda g, x, w, b: g.q_matmul(x, w, b, x_zp=3, w_zp=-2, out_zp=5, mult=0.0021),
           {"x": XQ, "w": WQ, "b": BQ}, lambda x, w, b: _q_matmul_loop(x, w, b, 3, -2, 5, 0.0021)),
    OpCase("q_matmul", "ties_half_away_and_saturation", lambda g, x, w, b: g.q_matmul(x, w, b, mult=0.5),
           {"x": np.array([[1, 3, -1], [100, 100, 100]], np.int8), "w": np.array([[1, 0], [0, 1], [1, 1]], np.int8),
            "b": np.array([0, 2], np.int32)},
           lambda x, w, b: _q_matmul_loop(x, w, b, 0, 0, 0, 0.5)),
    OpCase("q_matmul", "batch_dims_loop", lambda g, x, w, b: g.q_matmul(x, w, b, mult=0.003, batch_dims=1),
           {"x": np.stack([XQ, XQ[::-1]]), "w": np.stack([WQ, -WQ]), "b": np.stack([BQ, BQ // 2])},
           lambda x, w, b: np.stack([_q_matmul_loop(x[i], w[i], b[i], 0, 0, 0, 0.003) for i in range(2)])),
]


def _q_conv_oracle(x, w, b, stride, padding, dilation, groups, x_zp, w_zp, out_zp, mult):
    xs = torch.from_numpy(x.astype(np.float64) - x_zp)
    ws = torch.from_numpy(w.astype(np.float64) - w_zp)
    acc = torch.nn.functional.conv2d(xs, ws, torch.from_numpy(b.astype(np.float64)), stride, padding, dilation, groups).numpy()
    flat = [_requant_scalar(int(a), mult, out_zp) for a in acc.reshape(-1)]
    return np.array(flat, np.int8).reshape(acc.shape)


XC = R.integers(-128, 128, size=(2, 4, 5, 5)).astype(np.int8)
WC = R.integers(-128, 128, size=(6, 2, 3, 3)).astype(np.int8)
BC = R.integers(-5000, 5000, size=(6,)).astype(np.int32)
CASES += [
    OpCase("q_conv2d", "groups_stride_pad_zero_points",
           lambda g, x, w, b: g.q_conv2d(x, w, b, stride=[2, 1], padding=[1, 1], groups=2, x_zp=-4, w_zp=2, out_zp=-1, mult=0.0004),
           {"x": XC, "w": WC, "b": BC}, lambda x, w, b: _q_conv_oracle(x, w, b, (2, 1), (1, 1), (1, 1), 2, -4, 2, -1, 0.0004)),
    OpCase("q_conv2d", "dilation", lambda g, x, w, b: g.q_conv2d(x, w, b, dilation=[2, 2], mult=0.001),
           {"x": XC, "w": WC[:, :, :, :].repeat(2, axis=1)[:, :4], "b": BC},
           lambda x, w, b: _q_conv_oracle(x, w, b, (1, 1), (0, 0), (2, 2), 1, 0, 0, 0, 0.001)),
]


# ------------------------------------------------------------------------------- dequant_matmul
def _pack_int4(nib):
    flat = nib.reshape(-1).astype(np.uint8)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


K, N, BS = 10, 3, 4
NB = -(-K // BS)
XD = randn(2, K, seed=21)
W8 = R.integers(-128, 128, size=(K, N)).astype(np.int8)
SC = (np.abs(randn(NB, N, seed=22)) * 0.01 + 0.001).astype(np.float32)
ZP = R.integers(-5, 5, size=(NB, N)).astype(np.float32)
NIB = R.integers(0, 16, size=(K, N))  # K·N = 30 nibbles -> 15 bytes
ROWS = np.arange(K) // BS
FP8 = R.integers(0, 256, size=(K, N)).astype(np.uint8)
FP8 = np.where((FP8 & 0x78) == 0x78, FP8 & 0xB7, FP8).astype(np.uint8)  # no inf / NaN inside a matmul
FP8S = np.array([0.5, 2.0, 1.0], np.float32)
ALL_BYTES = np.arange(256, dtype=np.uint8).reshape(1, 256)

CASES += [
    OpCase("dequant_matmul", "int8_block_f64_x",
           lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="int8_block", block_size=BS),
           {"x": XD, "w": W8, "s": SC, "z": np.zeros(1, np.float32)},
           lambda x, w, s, z: x @ (w.astype(np.float64) * s.astype(np.float64)[ROWS]), rtol=1e-6, differentiable=("x",)),
    OpCase("dequant_matmul", "int8_block_asym",
           lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="int8_block_asym", block_size=BS),
           {"x": XD.astype(np.float32), "w": W8, "s": SC, "z": ZP},
           lambda x, w, s, z: x.astype(np.float64) @ ((w - z[ROWS]).astype(np.float64) * s.astype(np.float64)[ROWS]), rtol=1e-5, atol=1e-6),
    OpCase("dequant_matmul", "int4_block_unsigned_nibbles",
           lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="int4_block", block_size=BS),
           {"x": XD.astype(np.float32), "w": _pack_int4(NIB), "s": SC, "z": np.zeros((NB, N), np.float32)},
           lambda x, w, s, z: x.astype(np.float64) @ (NIB * s.astype(np.float64)[ROWS]), rtol=1e-5, atol=1e-6),
    OpCase("dequant_matmul", "int4_odd_count_2d_packing",
           lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="int4_block", block_size=2),
           {"x": np.ones((1, 3), np.float32), "w": np.array([[0x21], [0x43]], np.uint8), "s": np.ones((2, 1), np.float32) * 0.5,
            "z": np.zeros(1, np.float32)},
           lambda x, w, s, z: np.array([[(1 + 2 + 3) * 0.5]])),
    OpCase("dequant_matmul", "fp8_e4m3_scaled",
           lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="fp8_e4m3"),
           {"x": XD.astype(np.float32), "w": FP8, "s": FP8S, "z": np.zeros(1, np.float32)},
           lambda x, w, s, z: x.astype(np.float64) @ (w.view(ml_dtypes.float8_e4m3).astype(np.float64) * s), rtol=1e-5, atol=1e-5),
    OpCase("dequant_matmul", "fp8_e4m3_every_byte", lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="fp8_e4m3"),
           {"x": np.ones((1, 1), np.float32), "w": ALL_BYTES, "s": np.zeros(0, np.float32), "z": np.zeros(1, np.float32)},
           lambda x, w, s, z: w.view(ml_dtypes.float8_e4m3).astype(np.float64)),
    OpCase("dequant_matmul", "fp8_e5m2_every_byte", lambda g, x, w, s, z: g.dequant_matmul(x, w, s, z, scheme="fp8_e5m2"),
           {"x": np.full((1, 1), 2.0, np.float32), "w": ALL_BYTES, "s": np.array([0.5], np.float32), "z": np.zeros(1, np.float32)},
           lambda x, w, s, z: w.view(ml_dtypes.float8_e5m2).astype(np.float64)),
]


def _in(g, name, shape, dtype="f32"):
    return g.input(name, shape, dtype)


SHAPE_ERRORS = [
    ShapeErrorCase("quantize", "scale_count", lambda g: g.quantize(_in(g, "x", (2, 3)), axis=1, scales=[0.1, 0.2]), match="scales"),
    ShapeErrorCase("quantize", "int_input", lambda g: g.quantize(_in(g, "x", (2,), "i32"), scales=[0.1])),
    ShapeErrorCase("quantize", "zero_scale", lambda g: g.quantize(_in(g, "x", (2,)), scales=[0.0])),
    ShapeErrorCase("dequantize", "float_input", lambda g: g.dequantize(_in(g, "q", (2,)), scales=[0.1])),
    ShapeErrorCase("dequantize", "zp_count", lambda g: g.dequantize(_in(g, "q", (2, 2), "i8"), axis=0, scales=[1.0, 2.0], zero_points=[1])),
    ShapeErrorCase("fake_quantize", "state_shape",
                   lambda g: g.fake_quantize(_in(g, "x", (2, 3)), _in(g, "s", (2,)), axis=1, scale_mode="ema"), match="state"),
    ShapeErrorCase("fake_quantize", "missing_state", lambda g: g.fake_quantize(_in(g, "x", (2, 3)), scale_mode="fixed")),
    ShapeErrorCase("observer_update", "int_input", lambda g: g.observer_update(_in(g, "x", (2, 3), "i8"))),
    ShapeErrorCase("fake_quantize_backward", "dy_shape",
                   lambda g: g.fake_quantize_backward(_in(g, "x", (2, 3)), _in(g, "dy", (3, 2))), match="dy"),
    ShapeErrorCase("fake_quantize_lsq", "scale_shape", lambda g: g.fake_quantize_lsq(_in(g, "x", (2, 3)), _in(g, "s", (3,)))),
    ShapeErrorCase("fake_quantize_lsq_backward_x", "dy_dtype",
                   lambda g: g.fake_quantize_lsq_backward_x(_in(g, "x", (2,)), _in(g, "s", (1,)), _in(g, "dy", (2,), "f64"))),
    ShapeErrorCase("fake_quantize_lsq_backward_scale", "batch_dims_mismatch",
                   lambda g: g.fake_quantize_lsq_backward_scale(_in(g, "x", (2, 3)), _in(g, "s", (3, 1)), _in(g, "dy", (2, 3)),
                                                                batch_dims=1)),
    ShapeErrorCase("q_matmul", "float_operand",
                   lambda g: g.q_matmul(_in(g, "x", (2, 3)), _in(g, "w", (3, 4), "i8"), _in(g, "b", (4,), "i32"), mult=1.0)),
    ShapeErrorCase("q_matmul", "k_mismatch",
                   lambda g: g.q_matmul(_in(g, "x", (2, 3), "i8"), _in(g, "w", (2, 4), "i8"), _in(g, "b", (4,), "i32"), mult=1.0)),
    ShapeErrorCase("q_conv2d", "bias_length",
                   lambda g: g.q_conv2d(_in(g, "x", (1, 2, 4, 4), "i8"), _in(g, "w", (3, 2, 3, 3), "i8"), _in(g, "b", (2,), "i32"),
                                        mult=1.0)),
    ShapeErrorCase("dequant_matmul", "scale_blocks",
                   lambda g: g.dequant_matmul(_in(g, "x", (2, 8)), _in(g, "w", (8, 3), "i8"), _in(g, "s", (1, 3)), _in(g, "z", (1,)),
                                              scheme="int8_block", block_size=4)),
    ShapeErrorCase("dequant_matmul", "int4_byte_count",
                   lambda g: g.dequant_matmul(_in(g, "x", (2, 4)), _in(g, "w", (5,), "u8"), _in(g, "s", (1, 3)), _in(g, "z", (1,)),
                                              scheme="int4_block", block_size=4)),
]
