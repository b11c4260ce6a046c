"""Fused ops (docs/semantics.md#fused-ops): products of fusion passes and DIRECT-policy builders.

Each fused op is written **once**, as a body over primitive ops (matmul, binary,
activation, narrow, layer_norm, rms_norm, rope, attention, cast, compare, where), and that
one body is evaluated by three interpreters:

* on operand *types*, with each primitive's registry rule: the fused op's type rule;
* on NumPy *arrays*, with each primitive's reference kernel: the fused op's kernel;
* on a *graph*, with builder calls: the op's ``decompose`` hook (unfusing).

So a fused op's type, value and decomposition cannot drift apart, and every shape check of
the primitives applies to the fused op as well (errors name the fused op and the
primitive). Bodies add the checks the composition would not make (e.g. a bias must be
``[N]``, not merely broadcastable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.flags import BLAS
from rlx.ir.graph import Graph, Value, infer_type
from rlx.ir.opdef import all_ops, defop, get_op, has_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import NORM_EPS, promote_args
from rlx.ops.conv import CONV_ATTRS, conv2d_reference, kernel_size_canon
from rlx.ops.cost import conv_macs, last_dim_macs
from rlx.ops.elementwise import ACTIVATIONS
from rlx.ops.facts import ALL_NATIVE, CONV_WEIGHT, CPU_METAL, CPU_ONLY, FUSED_KIND, NOT_TPU

_FAMILY = "fused"


# ----------------------------------------------------------------------- interpreters
def _checked_attrs(op: str, ins: list[TensorType], attrs: dict[str, Any]) -> dict[str, Any]:
    opdef = get_op(op)
    checked = opdef.check_attrs(attrs, op)
    if opdef.canonicalize is not None:
        checked = opdef.check_attrs(opdef.canonicalize(ins, checked), op)
    return checked


def _step_type(op: str, ins: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    """The result type of one region step (a single-result primitive)."""
    out = infer_type(get_op(op), ins, attrs, op)
    if isinstance(out, tuple):
        raise ShapeError(f"{op}: a region step has one result, the op gives {len(out)}")
    return out


class _Types:
    """Evaluates a body on TensorTypes with the primitives' type rules."""

    def apply(self, op: str, /, *operands: TensorType, **attrs: Any) -> TensorType:
        ins = list(operands)
        return _step_type(op, ins, _checked_attrs(op, ins, attrs))

    def scalar(self, value: float, like: TensorType) -> TensorType:
        return TensorType(Shape(()), like.dtype)


def _array_type(a: np.ndarray) -> TensorType:
    return TensorType(Shape(a.shape), DType.of(a.dtype))


class _Arrays:
    """Evaluates a body on NumPy arrays with the primitives' reference kernels.

    Each step's result is rounded to its dtype, then (for f16 / bf16 / fp8) widened back to
    f32, as the reference runtime does between nodes. The types are read off the arrays,
    which the runtime has already widened, so low-precision operands compute in f32
    scratch and only explicit casts round (upstream's region kernels do the same).
    """

    def apply(self, op: str, /, *operands: np.ndarray, **attrs: Any) -> np.ndarray:
        arrays = [np.asarray(a) for a in operands]
        ins = [_array_type(a) for a in arrays]
        kernel = get_op(op).kernel
        if kernel is None:
            raise ShapeError(f"{op}: a region step needs a reference kernel")
        checked = _checked_attrs(op, ins, attrs)
        out = _step_type(op, ins, checked)
        result = np.asarray(kernel(arrays, checked, out)).astype(out.dtype.numpy, copy=False)
        return result.astype(np.float32) if out.dtype.is_low_precision_float else result

    def scalar(self, value: float, like: np.ndarray) -> np.ndarray:
        return np.asarray(value, dtype=like.dtype)


class _Builder:
    """Evaluates a body on a graph: appends one primitive node per step (decomposition)."""

    def __init__(self, g: Graph):
        self.g = g

    def apply(self, op: str, /, *operands: Value, **attrs: Any) -> Value:
        return self.g.apply(op, *operands, **attrs)

    def scalar(self, value: float, like: Value) -> Value:
        return self.g.scalar(value, like.dtype)


_TYPES, _ARRAYS = _Types(), _Arrays()


def _deffused(name: str, body, doc: str, **fields: Any):
    """Register a fused op whose type rule, kernel and decomposition all run ``body`` (a ``kernel``
    field replaces the body's kernel: one that writes into its slot, checked against the body by tests)."""
    def decompose(g: Graph, operands: Sequence[Value | int], attrs) -> Value:
        return body(_Builder(g), [g.value(o) for o in operands], attrs)

    fields.setdefault("kernel", lambda args, attrs, out: body(_ARRAYS, list(args), attrs))
    return defop(
        name=name, family=_FAMILY, level="fused", doc=doc,
        infer=lambda ins, attrs: body(_TYPES, list(ins), attrs),
        decompose=decompose, **fields,
    )


# ---------------------------------------------------------------------------- helpers
def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ShapeError(msg)


def _last_axis(v) -> int:
    _require(len(v.shape) >= 1, f"operand must have rank >= 1, got {Shape(v.shape)!r}")
    return len(v.shape) - 1


def _check_vector(v, size, what: str) -> None:
    _require(tuple(v.shape) == (size,), f"{what} must have shape [{size}], got {Shape(v.shape)!r}")


def _linear(b, x, w, bias=None, activation: str | None = None):
    """act(x @ w [+ bias]), the bias a vector over the output features."""
    y = b.apply("matmul", x, w)
    if bias is not None:
        _check_vector(bias, y.shape[-1], "bias")
        y = b.apply("binary", y, bias, op="add")
    return y if activation is None else b.apply("activation", y, kind=activation)


def _narrow_last(b, x, start: int, length: int):
    return b.apply("narrow", x, axis=_last_axis(x), start=start, length=length)


_ACTIVATION = AttrSpec("str", default=None, choices=(None, *ACTIVATIONS), doc="activation kind; None = identity")


# ---------------------------------------------------------------- fused_matmul_bias_act
def _matmul_bias_act(b, ops, attrs):
    x, w, bias = ops
    return _linear(b, x, w, bias, attrs["activation"])


_deffused(
    "fused_matmul_bias_act", _matmul_bias_act, macs=last_dim_macs, precision="compute", arity=3, operands=("x", "w", "b"),
    flags={BLAS, FUSED_KIND}, native_on=ALL_NATIVE, attrs={"activation": _ACTIVATION},
    doc="act(x @ w + b): x [..., M, K], w [..., K, N] (matmul rules), b [N] added over the last "
    "axis; activation None = identity. Decomposes to matmul, binary add, activation.",
)


# ------------------------------------------------------------- fused_conv2d_bias_act
_GEOMETRY = ("kernel_size", "stride", "padding", "dilation", "groups")


def _conv_bias_act(b, ops, attrs):
    x, w = ops[:2]
    y = b.apply("conv2d", x, w, **{k: attrs[k] for k in _GEOMETRY})
    if attrs["has_bias"]:
        bias, channels = ops[2], y.shape[1]
        _check_vector(bias, channels, "bias")
        _require(bias.dtype == y.dtype, f"bias dtype {bias.dtype} must be the conv's {y.dtype}")
        y = b.apply("binary", y, b.apply("reshape", bias, new_shape=[channels, 1, 1]), op="add")
    return y if attrs["activation"] is None else b.apply("activation", y, kind=attrs["activation"])


def _conv_bias_act_kernel(args, attrs, out_type, out=None):
    """The conv written into ``out`` (the arena slot), then bias and activation applied in place with
    the binary / activation kernels: no buffer besides the conv's im2col. What the body computes on
    arrays, step for step (f16 / bf16 operands in f32 scratch, rounded once, as every fused op)."""
    x, w = promote_args(list(args[:2]), out_type.dtype)
    y = conv2d_reference(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"], out=out)
    if attrs["has_bias"]:
        get_op("binary").kernel_into([y, args[2].reshape(-1, 1, 1)], {"op": "add"}, out_type, y)
    if attrs["activation"] is not None:
        get_op("activation").kernel_into([y], {"kind": attrs["activation"]}, out_type, y)
    return y


_deffused(
    "fused_conv2d_bias_act", _conv_bias_act, macs=conv_macs, precision="compute", arity=lambda attrs: 3 if attrs["has_bias"] else 2,
    operands=("x", "w", "b"), flags={BLAS, FUSED_KIND, CONV_WEIGHT}, native_on=NOT_TPU,
    canonicalize=kernel_size_canon, kernel=_conv_bias_act_kernel,
    kernel_into=_conv_bias_act_kernel,
    attrs={**CONV_ATTRS, "has_bias": AttrSpec("bool", default=True, doc="a bias operand b [Cout] follows w"),
           "activation": _ACTIVATION},
    doc="act(conv2d(x, w) + b): x [N, Cin, H, W], w [Cout, Cin/groups, kH, kW] with conv2d's geometry "
    "attributes and rules, b [Cout] of the conv's dtype added per output channel iff has_bias; "
    "activation None = identity. The numpy executor writes the conv into the node's slot and adds b and "
    "applies the activation there. Decomposes to conv2d, reshape of b to [Cout, 1, 1], binary add, "
    "activation. An rlx extension (upstream adds a conv's bias with a separate Add).",
)


# ------------------------------------------------------------------- residual + norm
def _residual_norm(norm: str):
    def body(b, ops, attrs):
        x, residual = ops[:2]
        bias = ops[2] if attrs["has_bias"] else None
        gamma, beta = ops[-2:]
        h = b.apply("binary", x, residual, op="add")
        if bias is not None:
            _check_vector(bias, h.shape[-1], "bias")
            h = b.apply("binary", h, bias, op="add")
        _require(tuple(h.shape) == tuple(x.shape), f"residual {Shape(residual.shape)!r} must have x's shape {Shape(x.shape)!r}")
        normed = b.apply(norm, h, gamma, beta, axis=-1, eps=attrs["eps"])
        return (h, normed) if attrs["with_sum"] else normed
    return body


_RESIDUAL_ATTRS = {
    "has_bias": AttrSpec("bool", default=False, doc="a bias operand [H] follows residual"),
    "eps": AttrSpec("float", default=NORM_EPS),
    "with_sum": AttrSpec("bool", default=False, doc="two results (sum, normed): the residual stream and its norm"),
}
for _norm in ("layer_norm", "rms_norm"):
    _deffused(
        f"fused_residual_{_norm}", _residual_norm(_norm), precision="reduction", flags={FUSED_KIND},
        native_on=ALL_NATIVE if _norm == "layer_norm" else NOT_TPU,
        arity=lambda attrs: 5 if attrs["has_bias"] else 4, operands=("x", "residual", "bias", "gamma", "beta"),
        attrs=_RESIDUAL_ATTRS,
        doc=f"{_norm}(x + residual [+ bias], gamma, beta, axis=-1, eps): operands x, residual "
        "(x's shape), bias [H] iff has_bias, gamma [H], beta [H]. Output: the normalised value (x's "
        "shape); with_sum=True: one node with two results, (sum, normed), so a pre-norm residual "
        f"stream that reads the sum again fuses too. Decomposes to binary add(s) and {_norm}."
        + (" beta is mandatory, as for rms_norm." if _norm == "rms_norm" else ""),
    )


# ------------------------------------------------------------------------ fused_swiglu
def _swiglu(b, ops, attrs):
    (x,) = ops
    width = x.shape[-1] if len(x.shape) else None
    _require(isinstance(width, int) and width % 2 == 0, f"x last dim must be static and even, got {Shape(x.shape)!r}")
    n = width // 2
    up, gate = _narrow_last(b, x, 0, n), _narrow_last(b, x, n, n)
    if attrs["gate_first"]:
        up, gate = gate, up
    y = b.apply("binary", b.apply("activation", gate, kind="silu"), up, op="mul")
    return y if attrs["cast_to"] is None else b.apply("cast", y, to=attrs["cast_to"])


_deffused(
    "fused_swiglu", _swiglu, precision="elementwise", flags={FUSED_KIND}, native_on=CPU_METAL, arity=1, operands=("x",),
    attrs={"cast_to": AttrSpec("dtype", default=None, doc="result dtype; None = x's"),
           "gate_first": AttrSpec("bool", default=False, doc="the gate is the low half")},
    doc="SwiGLU of x [..., 2N] → [..., N]: up = x[..., :N], gate = x[..., N:] (swapped with "
    "gate_first), y = silu(gate)·up, then cast to cast_to if given. Upstream's unfuse pass "
    "ignores gate_first; rlx follows it. Decomposes to narrow, silu, mul, [cast].",
)


# ------------------------------------------------------------------------- lora_matmul
def _lora(b, ops, attrs):
    x, w, a, bb = ops
    low = b.apply("matmul", b.apply("matmul", x, a), bb)
    scaled = b.apply("binary", low, b.scalar(attrs["scale"], low), op="mul")
    return b.apply("binary", b.apply("matmul", x, w), scaled, op="add")


_deffused(
    "lora_matmul", _lora, macs=last_dim_macs, precision="compute", arity=4, operands=("x", "w", "a", "b"), flags={BLAS},
    attrs={"scale": AttrSpec("float", default=1.0, doc="LoRA scale (alpha / rank)")},
    doc="x @ w + scale·((x @ a) @ b): x [..., M, K], w [K, N], a [K, R], b [R, N] (matmul "
    "rules, so batched x works). Decomposes to three matmuls, a scalar mul and an add.",
)


# ------------------------------------------------------------------- attention blocks
def _attention_block(b, hidden, qkv_w, qkv_b, out_w, out_b, mask, rope, heads: int, head_dim: int):
    """Packed-QKV self-attention with a key-padding mask: ``[B, S, Hd] → [B, S, Hd]``."""
    _require(len(hidden.shape) == 3, f"hidden must be [B, S, Hd], got {Shape(hidden.shape)!r}")
    width = heads * head_dim
    _require(tuple(qkv_w.shape[-1:]) == (3 * width,), f"qkv_w must have 3·H·D = {3 * width} columns, got {Shape(qkv_w.shape)!r}")
    qkv = _linear(b, hidden, qkv_w, qkv_b)
    q, k, v = (_narrow_last(b, qkv, i * width, width) for i in range(3))
    if rope is not None:
        q, k = (b.apply("rope", t, *rope, head_dim=head_dim) for t in (q, k))
    attn = b.apply("attention", q, k, v, mask, num_heads=heads, head_dim=head_dim, mask_kind="custom")
    return _linear(b, attn, out_w, out_b)


def _attention_block_body(b, ops, attrs):
    hidden, qkv_w, out_w, mask, *rest = ops
    qkv_b, out_b = (rest[0], rest[1]) if attrs["has_bias"] else (None, None)
    rope = tuple(rest[-2:]) if attrs["has_rope"] else None
    return _attention_block(b, hidden, qkv_w, qkv_b, out_w, out_b, mask, rope, attrs["num_heads"], attrs["head_dim"])


_HEADS = {"num_heads": AttrSpec("int", doc="H"), "head_dim": AttrSpec("int", doc="D")}

_deffused(
    "fused_attention_block", _attention_block_body, flags={BLAS, FUSED_KIND}, native_on=CPU_ONLY,
    precision="data_movement", arity=lambda attrs: 4 + 2 * attrs["has_bias"] + 2 * attrs["has_rope"],
    operands=("hidden", "qkv_w", "out_w", "mask", "qkv_b", "out_b", "cos", "sin"),
    attrs={**_HEADS, "has_bias": AttrSpec("bool", default=False), "has_rope": AttrSpec("bool", default=False)},
    doc="Self-attention block: operands hidden [B, S, Hd], qkv_w [Hd, 3·H·D], out_w [H·D, Hd], "
    "mask [B, S] (1 = keep), then qkv_b [3·H·D], out_b [Hd] if has_bias, then cos, sin "
    "[T, D/2] if has_rope. qkv = hidden @ qkv_w (+ qkv_b); q, k, v are its three consecutive "
    "H·D column blocks (heads packed, [B, S, H·D]); with has_rope, NeoX rope (n_rot = D) on "
    "q and k; attention with the custom mask and the default scale D**-0.5; out = attn @ "
    "out_w (+ out_b) → [B, S, Hd]. Decomposes to matmul, add, narrow, rope, attention.",
)

_LAYER_OPERANDS = {
    True: ("hidden", "qkv_w", "qkv_b", "out_w", "out_b", "ln1_g", "ln1_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "ln2_g", "ln2_b", "mask"),
    False: ("hidden", "qkv_w", "out_w", "ln1_g", "ln1_b", "fc1_w", "fc2_w", "ln2_g", "ln2_b", "mask"),
}


def _transformer_layer(b, ops, attrs):
    o = dict(zip(_LAYER_OPERANDS[attrs["has_bias"]], ops))
    _require(tuple(o["fc1_w"].shape[-1:]) == (attrs["intermediate_size"],),
             f"fc1_w must have intermediate_size = {attrs['intermediate_size']} columns, got {Shape(o['fc1_w'].shape)!r}")
    hidden = o["hidden"]
    attn = _attention_block(b, hidden, o["qkv_w"], o.get("qkv_b"), o["out_w"], o.get("out_b"), o["mask"], None,
                            attrs["num_heads"], attrs["head_dim"])
    h1 = b.apply("layer_norm", b.apply("binary", attn, hidden, op="add"), o["ln1_g"], o["ln1_b"], axis=-1, eps=attrs["eps1"])
    ffn = _linear(b, _linear(b, h1, o["fc1_w"], o.get("fc1_b"), attrs["activation"]), o["fc2_w"], o.get("fc2_b"))
    return b.apply("layer_norm", b.apply("binary", ffn, h1, op="add"), o["ln2_g"], o["ln2_b"], axis=-1, eps=attrs["eps2"])


_deffused(
    "fused_transformer_layer", _transformer_layer, flags={BLAS, FUSED_KIND},
    arity=lambda attrs: len(_LAYER_OPERANDS[attrs["has_bias"]]), operands=_LAYER_OPERANDS[True],
    attrs={**_HEADS,
           "intermediate_size": AttrSpec("int", doc="I, the feed-forward width"),
           "eps1": AttrSpec("float", default=NORM_EPS), "eps2": AttrSpec("float", default=NORM_EPS),
           "activation": AttrSpec("str", default="gelu", choices=(None, *ACTIVATIONS), doc="feed-forward activation; None = identity"),
           "has_bias": AttrSpec("bool", default=True)},
    doc="BERT post-norm encoder layer: h1 = layer_norm(attn_block(hidden) + hidden; ln1_g, "
    "ln1_b, eps1); y = layer_norm(act(h1 @ fc1_w + fc1_b) @ fc2_w + fc2_b + h1; ln2_g, ln2_b, "
    "eps2); the attention block is fused_attention_block's (custom key-padding mask [B, S], "
    "no rope). With has_bias, 14 operands: hidden, qkv_w, qkv_b, out_w, out_b, ln1_g, ln1_b, "
    "fc1_w, fc1_b, fc2_w, fc2_b, ln2_g, ln2_b, mask. Without, 10: the same minus the four "
    "projection biases (qkv_b, out_b, fc1_b, fc2_b); the layer-norm betas stay. (Upstream's "
    "unfuse pass reads an 8-operand form with zero betas, contradicting its own arity of 10; "
    "rlx uses the 10-operand form.) fc1_w is [Hd, intermediate_size].",
)


# -------------------------------------------------------------------- elementwise_region
def _step_ops() -> list[str]:
    """The ops a chain step may name: those with a ``region_key`` (the attribute its sub-kind sets)."""
    return [o.name for o in all_ops() if o.region_key is not None and isinstance(o.arity, int)]


def _region(b, ops, attrs):
    values: list[Any] = []

    def ref(r, where: str):
        ok = isinstance(r, tuple) and len(r) == 2 and r[0] in ("in", "step") and isinstance(r[1], int)
        limit = len(ops) if ok and r[0] == "in" else len(values)
        _require(ok and 0 <= r[1] < limit, f"{where}: operand {r!r} is not ['in', i < {len(ops)}] or ['step', j < {len(values)}]")
        return (ops if r[0] == "in" else values)[r[1]]

    _require(isinstance(attrs["chain"], tuple) and len(attrs["chain"]) > 0, "chain must be a non-empty list of steps")
    for i, step in enumerate(attrs["chain"]):
        where = f"chain step {i}"
        kind = step[0] if isinstance(step, tuple) and step else None
        opdef = get_op(kind) if isinstance(kind, str) and has_op(kind) else None
        if opdef is None or opdef.region_key is None or not isinstance(opdef.arity, int):
            raise ShapeError(f"{where}: {step!r} does not start with one of {sorted(_step_ops())}")
        n, key = opdef.arity, opdef.region_key
        has_sub = bool(key)
        _require(len(step) == 1 + has_sub + n, f"{where}: {kind} step takes {'a kind and ' if has_sub else ''}{n} operand(s), got {step!r}")
        args = [ref(r, where) for r in step[1 + has_sub :]]
        if not key:
            values.append(b.apply(kind, *args))
            continue
        sub = step[1]
        if opdef.attrs[key].kind == "dtype":
            _require(isinstance(sub, str) and sub in {d.value for d in DType}, f"{where}: {kind} target {sub!r} is not a dtype short name")
        values.append(b.apply(kind, *args, **{key: sub}))
    return values[-1]


_deffused(
    "elementwise_region", _region, precision="elementwise", native_on=ALL_NATIVE,
    flags={FUSED_KIND}, arity=lambda attrs: attrs["num_inputs"], operands=("inputs",),
    attrs={"chain": AttrSpec("data", doc="the steps, in order"),
           "num_inputs": AttrSpec("int", doc="number of region operands")},
    doc="A fused chain of elementwise steps over num_inputs operands. Each step is a list: "
    "['activation', kind, a], ['cast', dtype_short_name, a], ['binary', op, a, b], "
    "['compare', op, a, b] or ['where', c, a, b], where an operand is ['in', i] (region "
    "operand i) or ['step', j] (an earlier step, 0-based). Steps follow the standalone ops' "
    "rules (broadcasting, dtype promotion, compare → bool); the result is the last step. "
    "Upstream's kernel hints (scalar_input_mask, input_modulus) are not kept: NumPy "
    "broadcasting makes them redundant. The reference kernel evaluates intermediate steps "
    "in f32 scratch for f16 / bf16 operands (as upstream's region kernel); only explicit "
    "casts and the result are rounded. Decomposes to one standalone node per step.",
)
