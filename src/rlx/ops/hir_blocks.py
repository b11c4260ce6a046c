"""HIR block ops: the coarse building blocks model builders use (level ``"hir"``).

Each block is one registry entry with a shape rule (HIR shapes are inferred and verified;
upstream trusts builder-declared shapes) and a ``lower(g, operands, attrs, policy)`` hook
that appends MIR ops to ``g`` following docs/pipeline.md#hir-lowering: under ``DIRECT`` straight to
fused MIR ops, under ``FUSABLE`` to the primitive chains the optimizer recognises.
The reference kernel of every block runs its ``DIRECT`` lowering on the operands (one
generic helper, :func:`kernel_via_lowering`), so ``rlx.run`` also evaluates HIR graphs.

Blocks that MIR already has (``rms_norm``, ``layer_norm``, ``rope``, ``attention``, every
mask kind) are *not* duplicated: a HIR graph uses the MIR op itself, which lowers verbatim —
exactly upstream's lowering of its HIR ``RmsNorm`` / ``RoPE`` / ``Attention`` (one MIR node
of the same op). Any other MIR op in a HIR graph is the ``mir`` escape hatch (upstream
``HirOp::Mir``) and also lowers verbatim.

``linear`` takes its bias as an optional third operand: attribute ``has_bias`` sets the
arity (2 or 3). The HIR builder maps ``h.linear(x, w, bias=b, activation="gelu")`` onto
``linear(x, w, b; has_bias=True, activation="gelu")``. ``shared_linear_pair`` is one op with
a ``slot`` attribute; the builder appends both slots (two nodes, identical operands), and
each slot lowers to its own ``matmul`` — the same MIR upstream gets from its per-triple
cache. ``llama_decoder_block`` implements grouped-query attention by repeating k/v heads
(per-head ``narrow`` + ``concat``), as upstream, because MIR ``attention`` has no GQA; the
repeat is skipped when ``num_kv_heads == num_heads``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType, promote_all
from rlx.ir.errors import AttributeSchemaError, RlxError, ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import OpDef, defop, get_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import NORM_EPS, require_dim, require_float, require_rank
from rlx.ops.cost import last_dim_macs, swiglu_macs
from rlx.ops.elementwise import ACTIVATIONS

HIR_FAMILY = "hir_blocks"

#: MIR ops that double as HIR blocks (upstream HirOp RmsNorm, RoPE, Attention; plus layer_norm).
MIR_BLOCKS = ("rms_norm", "layer_norm", "rope", "attention")

#: The label a block gets when the builder gives none (docs/pipeline.md#hir-lowering).
DEFAULT_LABELS = {
    "linear": "linear",
    "linear_fused": "linear_fused",
    "swiglu": "swiglu_ffn",
    "residual_rms_norm": "residual_rms_norm",
    "depthwise_conv1d_causal": "depthwise_conv1d_causal",
    "llama_decoder_block": "llama_decoder_block",
    "rms_norm": "rms_norm",
    "layer_norm": "layer_norm",
    "rope": "rope",
    "attention": "attention",
}

LEAF_OPS = frozenset({"input", "param", "constant"})


def default_label(op: str, attrs: Mapping[str, Any]) -> str | None:
    """The default label of a block built without a name (None for plain MIR ops)."""
    if op == "shared_linear_pair":
        return f"shared_linear_pair[{attrs.get('slot', 0)}]"
    return DEFAULT_LABELS.get(op)


def is_fusable(policy: Any) -> bool:
    """True for ``FusionPolicy.FUSABLE`` (or the string "fusable"); the ops layer cannot import rlx.hir."""
    return str(getattr(policy, "value", policy)).lower() == "fusable"


# ------------------------------------------------------------------ shared rules


def _matmul(x: TensorType, w: TensorType, what: str) -> TensorType:
    require_rank(w, 2, f"{what} [in, out]")
    try:
        return get_op("matmul").infer([x, w], {})
    except ShapeError as exc:
        raise ShapeError(f"{what}: {exc}") from None


def _check_bias(b: TensorType, n: Any) -> None:
    require_rank(b, 1, "bias b [out]")
    require_dim(b.shape[0], n, "bias length (weight out dim)")


def _with_dtype(t: TensorType, types: Sequence[TensorType]) -> TensorType:
    return TensorType(t.shape, promote_all([t.dtype, *(u.dtype for u in types)]))


_ACT = AttrSpec("str", default=None, choices=(None, *ACTIVATIONS), doc="activation applied last; None = identity")


def _add(g: Graph, a: Value, b: Value) -> Value:
    return g.apply("binary", a, b, op="add")


def _act(g: Graph, y: Value, kind: str | None) -> Value:
    return y if kind is None else g.apply("activation", y, kind=kind)


# ---------------------------------------------------------------------- kernels

_KERNEL_CACHE: dict[Any, Graph] = {}
_KERNEL_CACHE_MAX = 256


def scratch_lowering(opdef: OpDef, in_types: Sequence[TensorType], attrs: Mapping[str, Any], policy: Any = "direct") -> Graph:
    """Lower one block on fresh inputs ``in0, in1 …`` into a new MIR graph whose output is the block's."""
    g = Graph(f"{opdef.name}_lowered")
    operands = [g.input(f"in{i}", t.shape, t.dtype) for i, t in enumerate(in_types)]
    assert opdef.lower is not None
    out = opdef.lower(g, operands, attrs, policy)
    g.set_outputs([out])
    return g


def _cache_key(name: str, attrs: Mapping[str, Any], args: Sequence[np.ndarray]) -> Any:
    key = (name, tuple(sorted(attrs.items())), tuple((a.shape, a.dtype.str) for a in args))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def kernel_via_lowering(name: str):
    """A reference kernel for block ``name``: evaluate its DIRECT lowering with the MIR kernels."""

    def kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out: TensorType) -> np.ndarray:
        key = _cache_key(name, attrs, args)
        g = _KERNEL_CACHE.get(key) if key is not None else None
        if g is None:
            types = [TensorType(Shape(a.shape), DType.of(a.dtype)) for a in args]
            g = scratch_lowering(get_op(name), types, attrs, "direct")
            if key is not None:
                if len(_KERNEL_CACHE) >= _KERNEL_CACHE_MAX:
                    _KERNEL_CACHE.clear()
                _KERNEL_CACHE[key] = g
        values: list[np.ndarray] = list(args)
        for node in g.nodes[len(args):]:
            sub = get_op(node.op)
            if sub.kernel is None:
                raise RlxError(f"{name}: lowered op {node.op!r} has no reference kernel")
            result = np.asarray(sub.kernel([values[i] for i in node.inputs], node.attrs, node.type))
            target = np.float32 if node.dtype.is_low_precision_float else node.dtype.numpy
            values.append(result.astype(target, copy=False))
        return values[g.output_ids[0]]

    return kernel


def _hir_op(name: str, **fields: Any) -> OpDef:
    return defop(name=name, family=HIR_FAMILY, level="hir", kernel=kernel_via_lowering(name), **fields)


# ----------------------------------------------------------------------- linear


def _linear_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    out = _matmul(ins[0], ins[1], "weight w")
    if attrs["has_bias"]:
        _check_bias(ins[2], ins[1].shape[1])
    return _with_dtype(out, ins)


def _linear_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    x, w = ops[0], ops[1]
    if not attrs["has_bias"]:
        return _act(g, g.apply("matmul", x, w), attrs["activation"])
    if not is_fusable(policy):
        return g.apply("fused_matmul_bias_act", x, w, ops[2], activation=attrs["activation"])
    return _act(g, _add(g, g.apply("matmul", x, w), ops[2]), attrs["activation"])


def _linear_text(attrs: Mapping[str, Any]) -> str:
    """``linear+bias+gelu``: the printed form of a linear block (``rlx.hir.inspect``)."""
    act = attrs.get("activation")
    return "linear" + ("+bias" if attrs.get("has_bias") else "") + (f"+{act}" if act else "")


_hir_op(
    "linear", macs=last_dim_macs, arity=lambda attrs: 3 if attrs["has_bias"] else 2, operands=("x", "w", "b"),
    text=_linear_text,
    attrs={"activation": _ACT, "has_bias": AttrSpec("bool", default=False, doc="a third operand b [out] is added")},
    infer=_linear_type, lower=_linear_lower,
    doc="act(x @ w [+ b]) with w [in, out] and optional bias b [out] (operand 3 iff has_bias; the HIR "
    "builder takes it as bias=). Lowers, with a bias, to fused_matmul_bias_act (DIRECT) or matmul -> add "
    "-> activation (FUSABLE); without a bias to matmul -> activation under both policies.",
)


def _linear_fused_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    out = _matmul(ins[0], ins[1], "weight w")
    _check_bias(ins[2], ins[1].shape[1])
    return _with_dtype(out, ins)


_hir_op(
    "linear_fused", macs=last_dim_macs, arity=3, operands=("x", "w", "b"), attrs={"activation": _ACT},
    infer=_linear_fused_type,
    lower=lambda g, ops, attrs, policy: g.apply("fused_matmul_bias_act", *ops, activation=attrs["activation"]),
    doc="act(x @ w + b); lowers to fused_matmul_bias_act under both policies.",
)


# ---------------------------------------------------------- shared_linear_pair


def _pair_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    x, w1, w2 = ins
    first, second = _matmul(x, w1, "w_first"), _matmul(x, w2, "w_second")
    return _with_dtype(first if attrs["slot"] == 0 else second, [x, w1 if attrs["slot"] == 0 else w2])


_hir_op(
    "shared_linear_pair", arity=3, operands=("x", "w_first", "w_second"),
    attrs={"slot": AttrSpec("int", default=0, choices=(0, 1), doc="0: x @ w_first, 1: x @ w_second")},
    infer=_pair_type,
    lower=lambda g, ops, attrs, policy: g.apply("matmul", ops[0], ops[1 + attrs["slot"]]),
    doc="Two projections of one input (e.g. gate/up); the builder appends both slots and returns both. "
    "Slot s lowers to matmul(x, w_first) or matmul(x, w_second) under both policies.",
)


# ----------------------------------------------------------------------- swiglu


def _swiglu_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    x, up, gate, down = ins
    for t, what in zip(ins, ("x", "up_w", "gate_w", "down_w")):
        require_float(t, what)
    hidden = _matmul(x, up, "up_w")
    if gate.shape != up.shape:
        raise ShapeError(f"gate_w {gate.shape!r} must have up_w's shape {up.shape!r}")
    return _with_dtype(_matmul(hidden, down, "down_w"), ins)


def _swiglu_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    x, up, gate, down = ops
    if is_fusable(policy):
        up_mm = g.apply("matmul", x, up)  # up before gate: the fusion passes rely on this order
        gate_mm = g.apply("matmul", x, gate)
        act = g.apply("binary", up_mm, g.apply("activation", gate_mm, kind="silu"), op="mul")
        return g.apply("matmul", act, down)
    packed = g.apply("concat", [up, gate], axis=1)
    act = g.apply("fused_swiglu", g.apply("matmul", x, packed), cast_to=None, gate_first=False)
    return g.apply("matmul", act, down)


_hir_op(
    "swiglu", macs=swiglu_macs, arity=4, operands=("x", "up_w", "gate_w", "down_w"),
    infer=_swiglu_type, lower=_swiglu_lower,
    doc="SwiGLU feed-forward: ((x @ up_w) * silu(x @ gate_w)) @ down_w, up_w/gate_w [D, F], down_w [F, D']. "
    "DIRECT: concat(up_w, gate_w; axis 1) -> matmul -> fused_swiglu(gate_first=False) -> matmul. FUSABLE: "
    "matmul(up), matmul(gate), silu, mul, matmul(down).",
)


# ------------------------------------------------------------ residual_rms_norm


def _residual_rms_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    x, residual, gamma, beta = ins
    if x.shape != residual.shape:
        raise ShapeError(f"x {x.shape!r} and residual {residual.shape!r} must have the same shape")
    if not x.shape:
        raise ShapeError("x must have rank >= 1")
    out = get_op("rms_norm").infer([x, gamma, beta], {"axis": -1, "eps": attrs["eps"]})
    return _with_dtype(out, ins)


def _residual_rms_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    x, residual, gamma, beta = ops
    if is_fusable(policy):
        return g.apply("rms_norm", _add(g, x, residual), gamma, beta, axis=-1, eps=attrs["eps"])
    return g.apply("fused_residual_rms_norm", x, residual, gamma, beta, has_bias=False, eps=attrs["eps"])


_hir_op(
    "residual_rms_norm", arity=4, operands=("x", "residual", "gamma", "beta"),
    attrs={"eps": AttrSpec("float", default=NORM_EPS, doc="added to mean(x**2) inside the square root")},
    infer=_residual_rms_type, lower=_residual_rms_lower,
    doc="rms_norm(x + residual, gamma, beta) over the last axis. DIRECT: fused_residual_rms_norm"
    "(has_bias=False); FUSABLE: add -> rms_norm(axis=-1).",
)


# ------------------------------------------------------ depthwise_conv1d_causal


def _dwconv_dims(ins: list[TensorType], attrs: Mapping[str, Any]) -> tuple[Any, Any, Any, int]:
    x, weight, pad = ins
    k = attrs["kernel_size"]
    if k < 1:
        raise ShapeError(f"kernel_size must be >= 1, got {k}")
    for t, what in zip(ins, ("input", "weight", "left_pad")):
        require_float(t, what)
    require_rank(x, 3, "input [B, S, C]")
    b, s, c = x.shape
    if not isinstance(c, int):
        raise ShapeError(f"channel dim C of input {x.shape!r} must be static (it is the conv's group count)")
    if weight.shape != Shape((c, 1, 1, k)):
        raise ShapeError(f"weight must be [C, 1, 1, K] = {Shape((c, 1, 1, k))!r}, got {weight.shape!r}")
    if pad.shape != Shape((b, k - 1, c)):
        raise ShapeError(f"left_pad must be [B, K-1, C] = {Shape((b, k - 1, c))!r}, got {pad.shape!r}")
    if not isinstance(b, int) and not isinstance(s, int):
        raise ShapeError(f"input {x.shape!r}: at most one of B and S may be symbolic (the lowering reshapes)")
    return b, s, c, k


def _dwconv_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    _dwconv_dims(ins, attrs)
    return TensorType(ins[0].shape, promote_all([t.dtype for t in ins]))


def _dwconv_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    x, weight, pad = ops
    b, s, c, k = _dwconv_dims([x.type, weight.type, pad.type], attrs)
    lead = b if isinstance(b, int) else -1
    t = s + k - 1 if isinstance(s, int) else -1
    y = g.apply("concat", [pad, x], axis=1)  # [B, K-1+S, C]
    y = g.apply("transpose", y, perm=[0, 2, 1])  # [B, C, K-1+S]
    y = g.apply("reshape", y, new_shape=[lead, c, 1, t])
    y = g.apply("conv2d", y, weight, kernel_size=[1, k], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=c)
    y = g.apply("reshape", y, new_shape=[lead, c, s if isinstance(s, int) else -1])
    return g.apply("transpose", y, perm=[0, 2, 1])


_hir_op(
    "depthwise_conv1d_causal", arity=3, operands=("input", "weight", "left_pad"),
    attrs={"kernel_size": AttrSpec("int", doc="K, the taps per channel")},
    infer=_dwconv_type, lower=_dwconv_lower,
    doc="Causal depthwise 1-D convolution over the sequence of input [B, S, C] with weight [C, 1, 1, K]; "
    "left_pad [B, K-1, C] holds the K-1 previous positions (zeros, or the conv state when decoding). "
    "out[b, s, c] = sum_j cat(left_pad, input)[b, s + j, c] * weight[c, 0, 0, j] (cross-correlation). "
    "Lowers (both policies) to concat(axis 1) -> transpose [0,2,1] -> reshape [B,C,1,K-1+S] -> conv2d "
    "(kernel [1,K], groups C) -> reshape [B,C,S] -> transpose [0,2,1].",
)


# ---------------------------------------------------------- llama_decoder_block

LLAMA_OPERANDS = (
    "x", "attn_norm", "attn_norm_b", "wq", "wk", "wv", "wo", "cos", "sin",
    "ffn_norm", "ffn_norm_b", "w_gate", "w_up", "w_down", "mask",
)


def _llama_arity(attrs: Mapping[str, Any]) -> int:
    return 15 if attrs["mask_kind"] in ("custom", "bias") else 14


def _kv_heads(attrs: Mapping[str, Any]) -> int:
    return attrs["num_heads"] if attrs["num_kv_heads"] is None else attrs["num_kv_heads"]


def _llama_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    heads, head_dim, kv = attrs["num_heads"], attrs["head_dim"], _kv_heads(attrs)
    if heads < 1 or head_dim < 1 or kv < 1:
        raise ShapeError(f"num_heads, head_dim, num_kv_heads must be >= 1, got {heads}, {head_dim}, {kv}")
    if heads % kv:
        raise ShapeError(f"num_heads={heads} is not a multiple of num_kv_heads={kv}")
    x = ins[0]
    if len(x.shape) not in (2, 3):
        raise ShapeError(f"x must be [B, S, D] or [S, D], got {x.shape!r}")
    d = x.shape[-1]
    named = dict(zip(LLAMA_OPERANDS, ins))
    expect = {"wq": (d, heads * head_dim), "wk": (d, kv * head_dim), "wv": (d, kv * head_dim), "wo": (heads * head_dim, d)}
    for key, want in expect.items():
        if named[key].shape != Shape(want):
            raise ShapeError(f"{key} must be {Shape(want)!r} (D={d}, H={heads}, KV={kv}, head_dim={head_dim}), got {named[key].shape!r}")
    for key in ("w_gate", "w_up"):
        require_rank(named[key], 2, key)
        require_dim(named[key].shape[0], d, f"{key} in dim")
    if named["w_up"].shape != named["w_gate"].shape:
        raise ShapeError(f"w_up {named['w_up'].shape!r} must have w_gate's shape {named['w_gate'].shape!r}")
    if named["w_down"].shape != Shape((named["w_up"].shape[1], d)):
        raise ShapeError(f"w_down must be {Shape((named['w_up'].shape[1], d))!r}, got {named['w_down'].shape!r}")
    lowered = scratch_lowering(get_op("llama_decoder_block"), ins, attrs)  # applies every MIR rule on the way
    return lowered.outputs[0].type


def _repeat_heads(g: Graph, t: Value, kv: int, heads: int, head_dim: int) -> Value:
    """[.., KV*D] -> [.., H*D]: q head i reads kv head i // (H/KV) (torch repeat_interleave)."""
    if kv == heads:
        return t
    axis = len(t.shape) - 1
    rep = heads // kv
    parts = [g.apply("narrow", t, axis, (i // rep) * head_dim, head_dim) for i in range(heads)]
    return g.apply("concat", parts, axis=axis)


def _llama_lower(g: Graph, ops: Sequence[Value], attrs: Mapping[str, Any], policy: Any) -> Value:
    o = dict(zip(LLAMA_OPERANDS, ops))
    heads, head_dim, kv, eps = attrs["num_heads"], attrs["head_dim"], _kv_heads(attrs), attrs["eps"]
    x = o["x"]
    h = g.apply("rms_norm", x, o["attn_norm"], o["attn_norm_b"], axis=-1, eps=eps)
    q = g.apply("matmul", h, o["wq"])
    k = g.apply("matmul", h, o["wk"])
    v = g.apply("matmul", h, o["wv"])
    q = g.apply("rope", q, o["cos"], o["sin"], head_dim=head_dim)
    k = g.apply("rope", k, o["cos"], o["sin"], head_dim=head_dim)
    k = _repeat_heads(g, k, kv, heads, head_dim)
    v = _repeat_heads(g, v, kv, heads, head_dim)
    extra = [o["mask"]] if "mask" in o else []
    att = g.apply("attention", q, k, v, *extra, num_heads=heads, head_dim=head_dim, mask_kind=attrs["mask_kind"], window=attrs["window"])
    x1 = _add(g, x, g.apply("matmul", att, o["wo"]))
    h2 = g.apply("rms_norm", x1, o["ffn_norm"], o["ffn_norm_b"], axis=-1, eps=eps)
    gate = g.apply("matmul", h2, o["w_gate"])
    up = g.apply("matmul", h2, o["w_up"])
    ffn = g.apply("binary", g.apply("activation", gate, kind="silu"), up, op="mul")
    return _add(g, x1, g.apply("matmul", ffn, o["w_down"]))


def _llama_infer(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    _check_llama_attrs(attrs)
    return _llama_type(ins, attrs)


def _check_llama_attrs(attrs: Mapping[str, Any]) -> None:
    if attrs["mask_kind"] == "sliding_window" and attrs["window"] is None:
        raise AttributeSchemaError("llama_decoder_block: mask_kind='sliding_window' needs window")


_hir_op(
    "llama_decoder_block", arity=_llama_arity, operands=LLAMA_OPERANDS,
    attrs={
        "num_heads": AttrSpec("int", doc="H, query heads"),
        "head_dim": AttrSpec("int", doc="D per head"),
        "num_kv_heads": AttrSpec("int", default=None, doc="KV heads (divides H); None = num_heads"),
        "eps": AttrSpec("float", default=NORM_EPS, doc="both RMSNorms"),
        "mask_kind": AttrSpec("str", default="causal", choices=("none", "causal", "sliding_window", "custom", "bias")),
        "window": AttrSpec("int", default=None, doc="sliding_window only"),
    },
    aliases={"mask": "mask_kind"},
    infer=_llama_infer,
    lower=_llama_lower,
    doc="Pre-norm LLaMA decoder layer on x [B, S, D] (or [S, D]): h = rms_norm(x); q, k, v = h@wq, h@wk, h@wv; "
    "NeoX RoPE (n_rot = head_dim) on q and k with tables cos, sin [T, head_dim/2]; grouped-query attention by "
    "repeating each of the num_kv_heads k/v heads H/KV times (per-head narrow + concat, skipped when KV = H); "
    "x1 = x + attention(...) @ wo; out = x1 + (silu(rms_norm(x1) @ w_gate) * (rms_norm(x1) @ w_up)) @ w_down. "
    "Weights are [in, out]; the RMSNorms take gamma and beta. Operands: x, attn_norm, attn_norm_b, wq, wk, wv, "
    "wo, cos, sin, ffn_norm, ffn_norm_b, w_gate, w_up, w_down, plus mask iff mask_kind is custom/bias. "
    "Lowers to primitives under both policies (upstream: 36 MIR nodes for H=2).",
)
