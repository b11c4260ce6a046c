"""Import upstream rlx-ir 0.2.1's unversioned serde JSON (docs/pipeline.md#upstream-json) as rlx objects.

    g = rlx.from_upstream_json(text)        # a Graph or MirModule {"inner": …} -> verified MIR Graph
    m = rlx.from_upstream_json(hir_text)    # a HirModule -> GraphModule at stage HIR (its fusion policy)
    lir = rlx.from_upstream_json(lir_text)  # an LirModule -> rlx.LirModule, re-planned by rlx.plan

Upstream writes its structs with serde's defaults: externally tagged enums (``"MatMul"``,
``{"Binary": "Add"}``, ``{"Input": {"name": "x"}}``), shapes as ``{"dims": [{"Static": 2},
{"Dynamic": 1}], "dtype": "F32"}``, byte payloads as arrays of ints, NaN / infinity as
``null``, nested graphs inline. The document kind is recognised by its keys.

Every upstream op variant is one :class:`UpstreamOp` entry of :data:`MIR_OPS` (HirOp
variants: :data:`HIR_OPS`): the rlx op it becomes, the upstream field names with their
serde types, and at most a small attribute translator where names or encodings differ.
Variants that rlx does not import are listed with the reason in :data:`REFUSED_MIR` /
:data:`REFUSED_HIR`; registered rlx ops with no upstream 0.2.1 counterpart in
:data:`RLX_ONLY`. Tests walk these tables against the op registry.

Upstream node shapes are *declared*; rlx infers every type. A node is appended with its
op rule, then reconciled with the declared type: a declared dtype that differs (upstream
keeps the lhs dtype where rlx promotes; index outputs are floats upstream) is honoured with
an explicit ``cast``; a declared ``[1]`` for a one-element ``[]`` result (or the reverse) with
a ``reshape``; any other difference is a :class:`rlx.VerifyError` naming the node. Float
index operands (gather indices, labels, expert ids, scatter rows) get a ``cast`` to i64
(truncation toward zero, as upstream; a negative index wraps in rlx where upstream
saturates it to 0). Dynamic dims ``{"Dynamic": k}`` become symbols: ``batch``, ``seq``,
``rows``, ``past_seq`` for upstream's well-known 0..3, ``d<k>`` otherwise.

Safety as :func:`rlx.from_json`: no eval, pickle or import; every field is checked and a
bad one raises :class:`rlx.FormatError` naming its path (``nodes[3].op.Binary: unknown
variant "Foo"``); node ids must equal their position and operands must be earlier nodes;
:class:`rlx.LoadLimits` bound the document before anything is allocated; the result is
verified. Only FormatError and VerifyError escape.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.ir.attrs import FrozenArray
from rlx.ir.dtype import DType
from rlx.ir.errors import AttributeSchemaError, FormatError, RlxError, VerifyError
from rlx.ir.graph import Graph, GraphStage, Provenance
from rlx.ir.opdef import get_op
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits, _guard, _parse_json, _short, _tname, _verify
from rlx.ir.shape import Shape, TensorType
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, REDUCE_KINDS

__all__ = [
    "HIR_OPS", "MIR_OPS", "REFUSED_HIR", "REFUSED_MIR", "RLX_ONLY", "WELL_KNOWN_SYMBOLS", "UpstreamOp",
    "from_upstream_json", "symbol_name",
]

_INT_MAX = 2**63 - 1
_U32_MAX = 2**32 - 1

#: Upstream's well-known dynamic symbols (docs/pipeline.md#dynamic-dims) and their rlx names.
WELL_KNOWN_SYMBOLS = {0: "batch", 1: "seq", 2: "rows", 3: "past_seq"}


def symbol_name(sym: int) -> str:
    """The rlx symbol of upstream ``Dim::Dynamic(sym)``."""
    return WELL_KNOWN_SYMBOLS.get(sym, f"d{sym}")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_DTYPES = {
    "Bool": DType.BOOL, "I8": DType.I8, "U8": DType.U8, "I16": DType.I16, "BF16": DType.BF16, "F16": DType.F16,
    "I32": DType.I32, "U32": DType.U32, "I64": DType.I64, "F32": DType.F32, "F64": DType.F64, "C64": DType.C64,
}
#: Unit enums: upstream variant -> rlx attribute value.
ACTIVATIONS = {row.upstream: k for k, row in ACTIVATION_KINDS.items() if row.upstream}
BINARY_OPS = {row.upstream: k for k, row in BINARY_KINDS.items() if row.upstream}
COMPARE_OPS = {row.upstream: k for k, row in COMPARE_KINDS.items() if row.upstream}
REDUCE_OPS = {row.upstream: k for k, row in REDUCE_KINDS.items() if row.upstream}
STE_KINDS = {n: _snake(n) for n in ("Identity", "ClippedIdentity", "Tanh", "HardTanh")}
ATTENTION_WRT = {n: n.lower() for n in ("Query", "Key", "Value")}
MASK_KINDS = {"None": "none", "Causal": "causal", "Custom": "custom", "Bias": "bias"}  # + {"SlidingWindow": w}
SCALE_MODES = {"PerBatch": "per_batch", "Fixed": "fixed"}  # + {"EMA": {"decay": d}}
QUANT_SCHEMES = {
    "Fp8E4m3": "fp8_e4m3", "Fp8E5m2": "fp8_e5m2", "GgufQ4K": "gguf_q4_k", "GgufQ5K": "gguf_q5_k",
    "GgufQ6K": "gguf_q6_k", "GgufQ8K": "gguf_q8_k", "GgufQ2K": "gguf_q2_k", "GgufQ3K": "gguf_q3_k",
    "GgufQ4_0": "gguf_q4_0", "GgufQ8_0": "gguf_q8_0", "Nvfp4Block": "nvfp4_block",
}
BLOCK_SCHEMES = {"Int8Block": "int8_block", "Int8BlockAsym": "int8_block_asym", "Int4Block": "int4_block"}  # {"block_size": n}
FUSION_POLICIES = {"Direct": "direct", "Fusable": "fusable"}


# ------------------------------------------------------------------------------------ the tables


@dataclass(frozen=True)
class UpstreamOp:
    """How one upstream op variant becomes an rlx node.

    ``fields`` lists the upstream field names with their serde types (``None``: a unit
    variant; one field named ``_``: a newtype variant; a name ending in ``?`` is a field of
    later upstream releases, accepted when absent). The rlx attributes are the fields renamed
    by ``rename``, or what the translator ``attrs(fields, ctx)`` returns, plus ``fixed``.
    ``index_operands`` are cast from upstream's float indices to i64; ``order`` lists, for
    each rlx operand, the upstream one. ``build`` names a special builder (``leaf``,
    ``constant``, ``custom``) used instead of ``op``; ``note`` documents the entry.
    """

    variant: str
    op: str | None
    fields: tuple[tuple[str, str, bool], ...] | None = None
    rename: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    attrs: Callable[[dict[str, Any], _Ctx], dict[str, Any]] | None = None
    index_operands: tuple[int, ...] = ()
    order: tuple[int, ...] | None = None
    build: str | None = None
    note: str = ""

    def rlx_attrs(self, fields: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
        """The rlx attributes of a node of this variant (not yet checked against the op's schema)."""
        if self.attrs is not None:
            return {**self.attrs(dict(fields), ctx), **self.fixed}
        return {**{self.rename.get(k, k): v for k, v in fields.items()}, **self.fixed}


def _op(variant: str, op: str | None, fields: str | None = None, **kw: Any) -> UpstreamOp:
    spec = None
    if fields is not None:
        spec = tuple((n.rstrip("?"), kind, n.endswith("?")) for n, kind in (f.split(":") for f in fields.split()))
    return UpstreamOp(variant, op, spec, **kw)


@dataclass
class _Ctx:
    """What an attribute translator may read: operand types, the declared type, the op path."""

    ins: list[TensorType]
    out: TensorType
    path: str

    def fail(self, message: str) -> FormatError:
        return FormatError(f"{self.path}: {message}")

    def static_dim(self, axis: int, what: str) -> int:
        dims = self.out.shape
        d = dims[axis] if -len(dims) <= axis < len(dims) else None
        if type(d) is not int:
            raise self.fail(f"{what} comes from the declared shape, which must give it statically (declared {self.out})")
        return d


def _mask(a: dict[str, Any], kind_window: tuple[str, int | None]) -> dict[str, Any]:
    a["mask_kind"], a["window"] = kind_window
    return a


def _attention(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    """MaskKind -> mask_kind + window; a rank-4 layout as upstream guesses it (heads at axis 1 iff q.shape[1] == H)."""
    a = _mask({k: v for k, v in f.items() if k not in ("mask_kind", "mask")}, f.get("mask_kind") or f["mask"])
    q = c.ins[0] if c.ins else None
    if q is not None and q.shape.rank == 4:
        a["layout"] = "bhsd" if q.shape[1] == f["num_heads"] else "bshd"
    return a


def _llama(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    if f.pop("rope_style", None):
        raise c.fail("rope_style GptJ (interleaved RoPE) has no rlx llama_decoder_block counterpart")
    return _mask({k: v for k, v in f.items() if k != "mask"}, f["mask"])


def _pad2(values: tuple[int, ...], default: int) -> tuple[int, ...]:
    """Upstream's CPU kernels read missing entries of a 2-D geometry list as the default."""
    return (*values, *[default] * (2 - len(values))) if len(values) < 2 else values


def _conv(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    a = dict(f)
    a["kernel_size"] = f["kernel_size"] or None
    for key, default in (("stride", 1), ("padding", 0), ("dilation", 1), ("output_padding", 0)):
        if key in a:
            a[key] = _pad2(a[key], default)
    return a


def _pool(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    return {**f, "stride": f["stride"] or None, "padding": _pad2(f["padding"], 0)}


def _conv_backward(key: str) -> Callable[[dict[str, Any], _Ctx], dict[str, Any]]:
    return lambda f, c: {**_conv(f, c), key: tuple(c.out.shape)}


def _scheme(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    scheme, block = f["scheme"]
    return {"scheme": scheme} if block is None else {"scheme": scheme, "block_size": block}


def _region(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    if f.get("prologue"):
        raise c.fail(f"prologue {f['prologue']} (a later upstream release) has no rlx elementwise_region counterpart")
    return {"chain": f["chain"], "num_inputs": f["num_inputs"]}


def _scale_mode(f: dict[str, Any]) -> dict[str, Any]:
    mode, decay = f.pop("scale_mode")
    return {**f, "scale_mode": mode} if decay is None else {**f, "scale_mode": mode, "decay": decay}


def _custom_fn(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    if f["num_inputs"] != len(c.ins):
        raise c.fail(f"num_inputs is {f['num_inputs']} but the node has {len(c.ins)} inputs")
    return {"body": f["fwd_body"], "vjp_body": f["vjp_body"], "jvp_body": f["jvp_body"]}


_CONV = "kernel_size:usizes stride:usizes padding:usizes dilation:usizes groups:usize"
_SPLAT = ("width:u32 height:u32 tile_size:u32 alpha_cutoff:f32 max_splat_steps:u32 transmittance_threshold:f32 "
          "max_list_entries:u32")
_QZP = "x_zp:i32 w_zp:i32 out_zp:i32 mult:f32"


def _table(*ops: UpstreamOp) -> dict[str, UpstreamOp]:
    return {o.variant: o for o in ops}


#: Upstream ``Op`` variants (rlx-ir 0.2.1, docs/semantics.md#vocabulary) and the rlx op each becomes.
MIR_OPS = _table(
    _op("Input", "input", "name:str", build="leaf"),
    _op("Param", "param", "name:str", build="leaf"),
    _op("Constant", "constant", "data:bytes", build="constant",
        note="bytes in the declared dtype; 4 bytes per element are read as f32 (upstream's CPU / autodiff encoding)"),
    _op("Activation", "activation", "_:activation", rename={"_": "kind"}),
    _op("Cast", "cast", "to:dtype"),
    _op("Binary", "binary", "_:binary", rename={"_": "op"}),
    _op("Compare", "compare", "_:compare", rename={"_": "op"}),
    _op("Where", "where"),
    _op("ElementwiseRegion", "elementwise_region",
        "chain:chain num_inputs:u32 scalar_input_mask:u32 input_modulus:modulus prologue?:prologue prologue_input?:u32",
        attrs=_region, note="scalar_input_mask / input_modulus are kernel hints, checked and dropped"),
    _op("MatMul", "matmul"),
    _op("DotGeneral", "dot_general", "lhs_contracting:usizes rhs_contracting:usizes lhs_batch:usizes rhs_batch:usizes"),
    _op("DenseSolve", "dense_solve"),
    _op("BatchedDenseSolve", "batched_dense_solve"),
    _op("LayerNorm", "layer_norm", "axis:i32 eps:f32"),
    _op("LayerNorm2d", "layer_norm2d", "eps:f32"),
    _op("GroupNorm", "group_norm", "num_groups:usize eps:f32"),
    _op("RmsNorm", "rms_norm", "axis:i32 eps:f32"),
    _op("ResizeNearest2x", "resize_nearest_2x"),
    _op("Attention", "attention", "num_heads:usize head_dim:usize mask_kind:mask score_scale:opt_f32 attn_logit_softcap:opt_f32",
        attrs=_attention),
    _op("Rope", "rope", "head_dim:usize n_rot:usize style?:rope_style", rename={"style": "interleaved"}),
    _op("AxialRope2d", "axial_rope2d", "end_x:usize end_y:usize head_dim:usize num_heads:usize theta:f32 repeat_factor:usize"),
    _op("Reshape", "reshape", "new_shape:i64s"),
    _op("Transpose", "transpose", "perm:usizes"),
    _op("Narrow", "narrow", "axis:usize start:usize len:usize", rename={"len": "length"}),
    _op("Concat", "concat", "axis:usize"),
    _op("Expand", "expand", "target_shape:i64s"),
    _op("Gather", "gather", "axis:usize", index_operands=(1,)),
    _op("Reduce", "reduce", "op:reduce axes:usizes keep_dim:bool"),
    _op("Softmax", "softmax", "axis:i32"),
    _op("Cumsum", "cumulative", "axis:i32 exclusive:bool", fixed={"op": "sum"}),
    _op("CumsumBackward", "cumulative", "axis:i32 exclusive:bool", fixed={"op": "sum", "reverse": True}),
    _op("TopK", "top_k", "k:usize", fixed={"axis": -1, "output": "indices"}, note="i64 indices, cast to the declared float"),
    _op("Sample", "sample", "top_k:usize top_p:f32 temperature:f32 seed:u64", note="i64 ids, cast to the declared float"),
    _op("Conv", "conv2d", _CONV, attrs=_conv),
    _op("ConvTranspose2d", "conv_transpose2d", _CONV + " output_padding:usizes", attrs=_conv),
    _op("Pool", "pool2d", "kind:reduce kernel_size:usizes stride:usizes padding:usizes", attrs=_pool,
        fixed={"count_include_pad": True}),
    _op("ReluBackward", "relu_backward"),
    _op("ActivationBackward", "activation_backward", "kind:activation"),
    _op("MaxPool2dBackward", "max_pool2d_backward", "kernel_size:usizes stride:usizes padding:usizes", attrs=_pool),
    _op("Conv2dBackwardInput", "conv2d_backward_input", _CONV, attrs=_conv_backward("input_shape")),
    _op("Conv2dBackwardWeight", "conv2d_backward_weight", _CONV, attrs=_conv_backward("weight_shape")),
    _op("SoftmaxCrossEntropyWithLogits", "softmax_cross_entropy", index_operands=(1,)),
    _op("SoftmaxCrossEntropyBackward", "softmax_cross_entropy_backward", index_operands=(1,)),
    _op("AttentionBackward", "attention_backward", "num_heads:usize head_dim:usize mask_kind:mask wrt:wrt", attrs=_attention),
    _op("LayerNormBackwardInput", "layer_norm_backward_input", "axis:i32 eps:f32"),
    _op("LayerNormBackwardGamma", "layer_norm_backward_gamma", "axis:i32 eps:f32"),
    _op("RmsNormBackwardInput", "rms_norm_backward_input", "axis:i32 eps:f32"),
    _op("RmsNormBackwardGamma", "rms_norm_backward_gamma", "axis:i32 eps:f32"),
    _op("RmsNormBackwardBeta", "rms_norm_backward_beta", "axis:i32 eps:f32"),
    _op("RopeBackward", "rope_backward", "head_dim:usize n_rot:usize"),
    _op("GroupNormBackwardInput", "group_norm_backward_input", "num_groups:usize eps:f32"),
    _op("GroupNormBackwardGamma", "group_norm_backward_gamma", "num_groups:usize eps:f32"),
    _op("GroupNormBackwardBeta", "group_norm_backward_beta", "num_groups:usize eps:f32"),
    _op("GatherBackward", "gather_backward", "axis:i32", attrs=lambda f, c: {**f, "table_shape": tuple(c.out.shape)},
        index_operands=(1,)),
    _op("FusedMatMulBiasAct", "fused_matmul_bias_act", "activation:opt_activation"),
    _op("FusedResidualLN", "fused_residual_layer_norm", "has_bias:bool eps:f32"),
    _op("FusedResidualRmsNorm", "fused_residual_rms_norm", "has_bias:bool eps:f32"),
    _op("FusedSwiGLU", "fused_swiglu", "cast_to:opt_dtype gate_first:bool"),
    _op("FusedAttentionBlock", "fused_attention_block", "num_heads:usize head_dim:usize has_bias:bool has_rope:bool"),
    _op("FusedTransformerLayer", "fused_transformer_layer",
        "num_heads:usize head_dim:usize intermediate_size:usize eps1:f32 eps2:f32 activation:activation has_bias:bool"),
    _op("LoraMatMul", "lora_matmul", "scale:f32"),
    _op("Quantize", "quantize", "axis:opt_usize scales:f32s zero_points:i32s"),
    _op("Dequantize", "dequantize", "axis:opt_usize scales:f32s zero_points:i32s"),
    _op("FakeQuantize", "fake_quantize", "bits:u8 axis:opt_usize ste:ste scale_mode:scale_mode",
        attrs=lambda f, c: _scale_mode(f)),
    _op("FakeQuantizeLSQ", "fake_quantize_lsq", "bits:u8 axis:opt_usize"),
    _op("FakeQuantizeLSQBackwardX", "fake_quantize_lsq_backward_x", "bits:u8 axis:opt_usize"),
    _op("FakeQuantizeLSQBackwardScale", "fake_quantize_lsq_backward_scale", "bits:u8 axis:opt_usize"),
    _op("FakeQuantizeBackward", "fake_quantize_backward", "bits:u8 axis:opt_usize ste:ste", fixed={"scale_mode": "per_batch"}),
    _op("QMatMul", "q_matmul", _QZP),
    _op("QConv2d", "q_conv2d", f"{_CONV} {_QZP}", attrs=_conv),
    _op("DequantMatMul", "dequant_matmul", "scheme:scheme", attrs=_scheme),
    _op("If", "if_", "then_branch:graph else_branch:graph"),
    _op("While", "while_", "cond:graph body:graph max_iterations:opt_usize"),
    _op("Scan", "scan", "body:graph length:u32 save_trajectory:bool num_bcast:u32 num_xs:u32 num_checkpoints:u32"),
    _op("ScatterAdd", "scatter_add",
        attrs=lambda f, c: {"num_rows": c.static_dim(0, "ScatterAdd's row count")}, index_operands=(1,)),
    _op("ComplexNormSq", "complex_norm_sq"),
    _op("ComplexNormSqBackward", "complex_norm_sq_backward"),
    _op("Conjugate", "conjugate"),
    _op("Custom", None, "name:str num_inputs:u32 attrs:bytes", build="custom",
        note="a custom op registered with rlx.custom_op under the same name, taking no attribute bytes"),
    _op("CustomFn", "custom_fn", "fwd_body:graph vjp_body:opt_graph jvp_body:opt_graph num_inputs:u32", attrs=_custom_fn),
    _op("SelectiveScan", "selective_scan", "state_size:usize"),
    _op("GatedDeltaNet", "gated_delta_net", "state_size:usize carry_state:bool", fixed={"output": "y"}),
    _op("GroupedMatMul", "grouped_matmul", index_operands=(2,)),
    _op("DequantGroupedMatMul", "dequant_grouped_matmul", "scheme:scheme",
        attrs=lambda f, c: {"scheme": f["scheme"][0], "n": c.static_dim(-1, "DequantGroupedMatMul's N")}, index_operands=(2,)),
    _op("DequantMoEWeights", "dequant_moe_weights", "scheme:scheme",
        attrs=lambda f, c: {"scheme": f["scheme"][0], "k": c.static_dim(-2, "DequantMoEWeights' K"), "n": c.static_dim(-1, "its N")}),
    _op("GaussianSplatRender", "gaussian_splat_render", f"{_SPLAT} radius_scale:f32"),
    _op("GaussianSplatRenderBackward", "gaussian_splat_render_backward",
        f"{_SPLAT} radius_scale:f32 loss_grad_clip:f32 sh_band:u32 max_anisotropy:f32"),
    _op("GaussianSplatPrepare", "gaussian_splat_prepare", f"{_SPLAT} radius_scale:f32"),
    _op("GaussianSplatRasterize", "gaussian_splat_rasterize", _SPLAT),
)

_LATER = "added to upstream after 0.2.1, the release rlx reads"
#: Upstream ``Op`` variants rlx does not import, with the reason.
REFUSED_MIR = {
    "ScanBackward": "rlx differentiates scan with a reverse scan of the body's VJP; it has no dedicated scan backward op",
    "ScanBackwardXs": "rlx differentiates scan with a reverse scan of the body's VJP; it has no dedicated scan backward op",
    "Fft": "upstream 0.2.1's Fft transforms a real [re..., im...] block layout; rlx's fft takes c64 tensors and "
           "has no exact real/imaginary split to rebuild that layout",
    **{name: _LATER for name in (
        "StopGradient", "Fma", "TransformRegion", "BatchElementwiseRegion", "BatchNormInference", "Reverse", "ArgMax",
        "ArgMin", "RngNormal", "RngUniform", "Im2Col", "BatchNormInferenceBackwardInput", "BatchNormInferenceBackwardGamma",
        "BatchNormInferenceBackwardBeta", "SoftmaxCrossEntropy", "Lstm", "Gru", "Rnn", "Mamba2", "ScaledMatMul",
        "ScaledQuantize", "ScaledQuantScale", "ScaledDequantize", "FftButterflyStage", "LogMel", "LogMelBackward",
        "WelchPeaks")},
}

#: Upstream ``HirOp`` variants; ``Mir(op)`` reads ``op`` with :data:`MIR_OPS`.
HIR_OPS = _table(
    MIR_OPS["Input"], MIR_OPS["Param"], MIR_OPS["Constant"],
    _op("Linear", "linear", "activation:opt_activation has_bias:bool"),
    _op("LinearFused", "linear_fused", "activation:opt_activation"),
    _op("SharedLinearPair", "shared_linear_pair", "slot:u8"),
    _op("SwiGLU", "swiglu"),
    _op("ResidualRmsNorm", "residual_rms_norm", "eps:f32"),
    _op("Attention", "attention", "num_heads:usize head_dim:usize mask:mask", attrs=_attention),
    _op("DepthwiseConv1dCausal", "depthwise_conv1d_causal", "kernel_size:usize"),
    _op("DequantMatMul", "dequant_matmul", "scheme:scheme", attrs=_scheme),
    _op("GatedDeltaNet", "gated_delta_net", "state_size:usize carry_state:bool", fixed={"output": "y"}),
    _op("RoPE", "rope", "head_dim:usize n_rot:usize"),
    _op("RmsNorm", "rms_norm", "eps:f32", fixed={"axis": -1}),
    # upstream operands x, ln1_g, ln1_b, q, k, v, o, ln2_g, ln2_b, gate, up, down, cos, sin [, mask]
    _op("LlamaDecoderBlock", "llama_decoder_block",
        "num_heads:usize head_dim:usize num_kv_heads:usize eps:f32 mask:mask rope_style?:rope_style",
        attrs=_llama, order=(0, 1, 2, 3, 4, 5, 6, 12, 13, 7, 8, 9, 10, 11, 14)),
    _op("Qwen35MtpHead", "qwen35_mtp_head",
        "num_heads:usize num_kv_heads:usize head_dim:usize n_rot:usize n_embd:usize n_ff:usize mtp_vocab:usize eps:f32"),
)
REFUSED_HIR = {
    "Lstm": _LATER,
    "Gru": _LATER,
}

#: Registered rlx ops (non-HIR) that no upstream 0.2.1 variant maps to, with the reason.
RLX_ONLY = {
    "result": "upstream nodes have one output; rlx's multi-result nodes hold results 1.. in result nodes",
    "split": "a multi-result node (upstream has one output per node)",
    "max_pool2d_with_indices": "a multi-result node (values, indices); upstream's MaxPool has one output",
    "arg_reduce": "upstream 0.2.1 has no argmax / argmin op (ArgMax / ArgMin came later)",
    "binary_ext": "mod / fmod / bitwise / shift ops are rlx extensions (ONNX import)",
    "unary_math": "erf / floor / ceil / sign / round_even / inverse trig / hyperbolic ops are rlx extensions",
    "gather_elements": "element-wise gather (ONNX GatherElements) is an rlx extension",
    "advanced_index": "NumPy advanced indexing (torch aten.index) is an rlx extension",
    "advanced_index_put": "NumPy indexed assignment (torch index_put) is an rlx extension",
    "scatter_elements": "element-wise scatter (ONNX ScatterElements) is an rlx extension",
    "observer_update": "upstream updates the EMA state of FakeQuantize in place; rlx returns it from this op",
    "fft": "upstream 0.2.1's Fft uses a real block layout (see REFUSED_MIR['Fft'])",
    "bitcast": "upstream 0.2.1 has no bit reinterpretation op (ONNX BitCast, torch Tensor.view(dtype))",
    "gaussian_splat_render_jvp": "upstream's splat render has no forward-mode derivative op (autodiff treats it as constant)",
    "fused_conv2d_bias_act": "upstream has no fused conv: its Conv takes no bias, which a separate Add applies",
}


# ------------------------------------------------------------------------------------ reading


_UNIT: Any = object()  # payload of a unit variant


class _Importer:
    """Reads one upstream document; counts nodes, nesting and bytes against the limits."""

    def __init__(self, limits: LoadLimits):
        self.limits = limits
        self.depth = 0
        self.node_count = 0
        self.bytes_read = 0
        unit = self._unit_enum
        self.kinds: dict[str, Callable[[Any, str], Any]] = {
            "u8": lambda v, p: self._int(v, p, 0, 255), "u32": lambda v, p: self._int(v, p, 0, _U32_MAX),
            "usize": lambda v, p: self._int(v, p, 0, _INT_MAX), "u64": lambda v, p: self._int(v, p, 0, 2**64 - 1),
            "i32": lambda v, p: self._int(v, p, -(2**31), 2**31 - 1), "i64": lambda v, p: self._int(v, p, -(2**63), _INT_MAX),
            "f32": self._f32, "bool": self._bool, "str": self._str, "bytes": self._bytes,
            "usizes": self._ints("usize"), "i64s": self._ints("i64"), "i32s": self._ints("i32"), "f32s": self._ints("f32"),
            "modulus": self._modulus, "dtype": self._dtype,
            "activation": unit(ACTIVATIONS, "Activation"), "binary": unit(BINARY_OPS, "BinaryOp"),
            "compare": unit(COMPARE_OPS, "CmpOp"), "reduce": unit(REDUCE_OPS, "ReduceOp"), "ste": unit(STE_KINDS, "SteKind"),
            "wrt": unit(ATTENTION_WRT, "AttentionBwdWrt"), "rope_style": unit({"NeoX": False, "GptJ": True}, "RopeStyle"),
            "prologue": unit({"None": None, "ResizeNearest2x": "ResizeNearest2x"}, "RegionPrologue"),
            "mask": self._mask_kind, "scale_mode": self._scale_mode, "scheme": self._scheme,
            "graph": lambda v, p: self.graph(v, p, GraphStage.MIR), "chain": self._chain,
        }

    # ------------------------------------------------------------ primitives
    @staticmethod
    def err(path: str, message: str) -> FormatError:
        return FormatError(f"{path or '<document>'}: {message}")

    def obj(self, v: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if type(v) is not dict:
            raise self.err(path, f"expected an object, got {_tname(v)}")
        for key in required:
            if key not in v:
                raise self.err(_join(path, key), "missing field")
        extra = sorted(str(k) for k in v if k not in required and k not in optional)
        if extra:
            raise self.err(_join(path, extra[0][:80]), "unknown field")
        return v

    def _sized(self, v: Any, path: str, kind: type) -> Any:
        """A list (at most max_items entries) or a str (at most max_string characters)."""
        what, unit, limit = ("list", "entries", "max_items") if kind is list else ("string", "characters", "max_string")
        if type(v) is not kind:
            raise self.err(path, f"expected a {what}, got {_tname(v)}")
        if len(v) > getattr(self.limits, limit):
            raise self.err(path, f"{len(v)} {unit} exceed {limit}={getattr(self.limits, limit)}")
        return v

    def list(self, v: Any, path: str) -> list:
        return self._sized(v, path, list)

    def _int(self, v: Any, path: str, lo: int, hi: int) -> int:
        if type(v) is not int:
            raise self.err(path, f"expected an integer, got {_tname(v)}")
        if not lo <= v <= hi:
            raise self.err(path, f"{_short(v)} is outside [{lo}, {hi}]")
        return v

    def _f32(self, v: Any, path: str) -> float:
        if v is None:
            raise self.err(path, "null: upstream writes NaN and infinities as null and cannot read them back (the value is lost)")
        if (type(v) is int and abs(v) < 2**128) or type(v) is float:
            return float(v)
        raise self.err(path, f"expected a number, got {_tname(v)}")

    def _bool(self, v: Any, path: str) -> bool:
        if type(v) is not bool:
            raise self.err(path, f"expected a bool, got {_tname(v)}")
        return v

    def _str(self, v: Any, path: str) -> str:
        return self._sized(v, path, str)

    def _ints(self, kind: str) -> Callable[[Any, str], tuple]:
        return lambda v, p: tuple(self.kinds[kind](x, f"{p}[{j}]") for j, x in enumerate(self.list(v, p)))

    def _modulus(self, v: Any, path: str) -> tuple[int, ...]:
        out = self._ints("u32")(v, path)
        if len(out) != 16:
            raise self.err(path, f"expected 16 entries ([u32; 16]), got {len(out)}")
        return out

    def _bytes(self, v: Any, path: str) -> bytes:
        lim = self.limits
        if type(v) is not list:
            raise self.err(path, f"expected a list of byte values, got {_tname(v)}")
        if len(v) > lim.max_inline_bytes or self.bytes_read + len(v) > lim.max_total_bytes:
            raise self.err(path, f"{len(v)} bytes exceed max_inline_bytes={lim.max_inline_bytes} / max_total_bytes")
        self.bytes_read += len(v)
        if not v:
            return b""
        try:
            arr = np.asarray(v) if all(type(x) is int for x in v) else None
        except OverflowError:
            arr = None
        if arr is None or arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > 255:
            j = next((j for j, x in enumerate(v) if type(x) is not int or not 0 <= x <= 255), 0)
            raise self.err(f"{path}[{j}]", f"expected a byte (an integer 0..255), got {_short(v[j])}")
        return arr.astype(np.uint8).tobytes()

    def _dtype(self, v: Any, path: str) -> DType:
        if type(v) is not str or v not in _DTYPES:
            raise self.err(path, f"unknown DType {_short(v)} (expected one of {', '.join(_DTYPES)})")
        return _DTYPES[v]

    # ------------------------------------------------------------ enums
    def variant(self, v: Any, path: str) -> tuple[str, Any]:
        """(name, payload) of an externally tagged enum value; the payload of a unit variant is _UNIT."""
        if type(v) is str:
            return v, _UNIT
        if type(v) is dict and len(v) == 1:
            ((name, payload),) = v.items()
            return name, payload
        raise self.err(path, f"expected an enum variant (a string or an object with one key), got {_tname(v)}")

    def _unknown(self, path: str, name: str, what: str, known: Collection[str]) -> FormatError:
        expected = f"one of {', '.join(known)}" if len(known) <= 20 else f"an upstream rlx-ir 0.2.1 {what} variant"
        return self.err(path, f"unknown variant {json.dumps(name[:80])} of {what} (expected {expected})")

    def _unit_enum(self, table: Mapping[str, Any], what: str) -> Callable[[Any, str], Any]:
        def read(v: Any, path: str) -> Any:
            name, payload = self.variant(v, path)
            if payload is not _UNIT or name not in table:
                raise self._unknown(path, name, what, table)
            return table[name]

        return read

    def _mask_kind(self, v: Any, path: str) -> tuple[str, int | None]:
        name, payload = self.variant(v, path)
        if name == "SlidingWindow" and payload is not _UNIT:
            return "sliding_window", self.kinds["usize"](payload, f"{path}.SlidingWindow")
        if payload is not _UNIT or name not in MASK_KINDS:
            raise self._unknown(path, name, "MaskKind", (*MASK_KINDS, "SlidingWindow"))
        return MASK_KINDS[name], None

    def _scale_mode(self, v: Any, path: str) -> tuple[str, float | None]:
        name, payload = self.variant(v, path)
        if name == "EMA" and payload is not _UNIT:
            self.obj(payload, f"{path}.EMA", ("decay",))
            return "ema", self._f32(payload["decay"], f"{path}.EMA.decay")
        if payload is not _UNIT or name not in SCALE_MODES:
            raise self._unknown(path, name, "ScaleMode", (*SCALE_MODES, "EMA"))
        return SCALE_MODES[name], None

    def _scheme(self, v: Any, path: str) -> tuple[str, int | None]:
        name, payload = self.variant(v, path)
        if name in BLOCK_SCHEMES and payload is not _UNIT:
            self.obj(payload, f"{path}.{name}", ("block_size",))
            return BLOCK_SCHEMES[name], self._int(payload["block_size"], f"{path}.{name}.block_size", 1, _U32_MAX)
        if payload is not _UNIT or name not in QUANT_SCHEMES:
            raise self._unknown(path, name, "QuantScheme supported by rlx", (*BLOCK_SCHEMES, *QUANT_SCHEMES))
        return QUANT_SCHEMES[name], None

    def _chain(self, v: Any, path: str) -> tuple:
        """ElementwiseRegion steps -> rlx's ``['binary', 'add', ['in', 0], ['step', 1]]`` form."""
        out = []
        for j, step in enumerate(self.list(v, path)):
            where = f"{path}[{j}]"
            name, payload = self.variant(step, where)
            arity = {"Activation": 2, "Cast": 2, "Binary": 3, "Compare": 3, "Where": 3}.get(name)
            if arity is None or payload is _UNIT:
                raise self._unknown(where, name, "ChainStep", ("Activation", "Cast", "Binary", "Compare", "Where"))
            where = f"{where}.{name}"
            args = self.list(payload, where)
            if len(args) != arity:
                raise self.err(where, f"expected {arity} values, got {len(args)}")
            refs = tuple(self._chain_ref(a, f"{where}[{k}]") for k, a in enumerate(args) if k > 0 or name == "Where")
            if name == "Where":
                out.append(("where", *refs))
                continue
            sub = {"Activation": self.kinds["activation"], "Cast": self._dtype, "Binary": self.kinds["binary"],
                   "Compare": self.kinds["compare"]}[name](args[0], f"{where}[0]")
            out.append((name.lower(), sub.value if isinstance(sub, DType) else sub, *refs))
        return tuple(out)

    def _chain_ref(self, v: Any, path: str) -> tuple[str, int]:
        name, payload = self.variant(v, path)
        if name not in ("Input", "Step") or payload is _UNIT:
            raise self._unknown(path, name, "ChainOperand", ("Input", "Step"))
        return ("in" if name == "Input" else "step", self._int(payload, f"{path}.{name}", 0, _U32_MAX))

    def value(self, kind: str, v: Any, path: str) -> Any:
        if kind.startswith("opt_"):
            return None if v is None else self.kinds[kind[4:]](v, path)
        return self.kinds[kind](v, path)

    def fields(self, spec: UpstreamOp, payload: Any, path: str) -> dict[str, Any]:
        """The variant's fields, decoded (a later-release field that is absent is left out)."""
        if spec.fields is None:
            if payload is not _UNIT:
                raise self.err(path, f"{spec.variant} is a unit variant: write it as the string {json.dumps(spec.variant)}")
            return {}
        if payload is _UNIT:
            raise self.err(path, f"{spec.variant} needs a value")
        if spec.fields[0][0] == "_":
            return {"_": self.value(spec.fields[0][1], payload, path)}
        required = tuple(n for n, _, later in spec.fields if not later)
        self.obj(payload, path, required, tuple(n for n, _, later in spec.fields if later))
        return {n: self.value(kind, payload[n], f"{path}.{n}") for n, kind, _ in spec.fields if n in payload}

    # ------------------------------------------------------------ shapes and graphs
    def shape(self, v: Any, path: str) -> TensorType:
        lim = self.limits
        self.obj(v, path, ("dims", "dtype"))
        raw = self.list(v["dims"], f"{path}.dims")
        if len(raw) > lim.max_rank:
            raise self.err(f"{path}.dims", f"rank {len(raw)} exceeds max_rank={lim.max_rank}")
        dims: list[int | str] = []
        for j, d in enumerate(raw):
            where = f"{path}.dims[{j}]"
            name, payload = self.variant(d, where)
            if name == "Static" and payload is not _UNIT:
                dims.append(self._int(payload, f"{where}.Static", 0, lim.max_dim))
            elif name == "Dynamic" and payload is not _UNIT:
                dims.append(symbol_name(self._int(payload, f"{where}.Dynamic", 0, _U32_MAX)))
            else:
                raise self._unknown(where, name, "Dim", ("Static", "Dynamic"))
        dtype = self._dtype(v["dtype"], f"{path}.dtype")
        if all(type(d) is int for d in dims):
            nbytes = math.prod(dims) * dtype.itemsize
            if nbytes > lim.max_tensor_bytes:
                raise self.err(f"{path}.dims", f"declares a tensor of {nbytes} bytes, over max_tensor_bytes={lim.max_tensor_bytes}")
        return TensorType(Shape(dims), dtype)

    def origin(self, v: Any, path: str) -> Provenance | None:
        if v is None:
            return None
        self.obj(v, path, (), ("hir", "label", "pass"))
        hir = v.get("hir")
        hir = None if hir is None else self._int(hir, f"{path}.hir", 0, _U32_MAX)
        label, pass_ = (None if v.get(k) is None else self._str(v[k], f"{path}.{k}") for k in ("label", "pass"))
        if hir is None and label is None and pass_ is None:
            return None
        return Provenance(hir, label, (pass_,) if pass_ else ())

    def graph(self, doc: Any, path: str, stage: GraphStage, extra: tuple[str, ...] = ()) -> Graph:
        """An upstream Graph (or HirModule body at stage HIR), not yet verified."""
        lim = self.limits
        self.obj(doc, path, ("name", "nodes", "outputs", *extra))
        if self.depth >= lim.max_depth:
            raise self.err(path, f"graphs nested deeper than max_depth={lim.max_depth}")
        name = self._str(doc["name"], _join(path, "name"))
        nodes = self.list(doc["nodes"], _join(path, "nodes"))
        self.node_count += len(nodes)
        if self.node_count > lim.max_nodes:
            raise self.err(_join(path, "nodes"), f"{self.node_count} nodes exceed max_nodes={lim.max_nodes}")
        g = Graph(name, stage)
        ids: list[int] = []  # upstream id -> rlx node id
        self.depth += 1
        try:
            for i, nd in enumerate(nodes):
                ids.append(self.node(g, nd, i, f"{_join(path, 'nodes')}[{i}]", ids, stage is GraphStage.HIR))
        finally:
            self.depth -= 1
        outputs = self.list(doc["outputs"], _join(path, "outputs"))
        for j, out in enumerate(outputs):
            if type(out) is not int or not 0 <= out < len(nodes):
                raise self.err(f"{_join(path, 'outputs')}[{j}]", f"expected the id of a node (0..{len(nodes) - 1}), got {_short(out)}")
        g.set_outputs([ids[o] for o in outputs])
        return g

    def node(self, g: Graph, nd: Any, i: int, path: str, ids: list[int], hir: bool) -> int:
        self.obj(nd, path, ("id", "op", "inputs", "shape"), ("name",) if hir else ("name", "origin"))
        if nd["id"] != i or type(nd["id"]) is not int:
            raise self.err(f"{path}.id", f"expected {i} (node ids are positions), got {_short(nd['id'])}")
        inputs = self.list(nd["inputs"], f"{path}.inputs")
        for j, src in enumerate(inputs):
            if type(src) is not int or not 0 <= src < i:
                raise self.err(f"{path}.inputs[{j}]", f"expected the id of an earlier node (0..{i - 1}), got {_short(src)}")
        declared = self.shape(nd["shape"], f"{path}.shape")
        name = None if nd.get("name") is None else self._str(nd["name"], f"{path}.name")
        prov = self.origin(nd.get("origin"), f"{path}.origin")
        op_path, table, refused = f"{path}.op", (HIR_OPS if hir else MIR_OPS), (REFUSED_HIR if hir else REFUSED_MIR)
        variant, payload = self.variant(nd["op"], op_path)
        if hir and variant == "Mir" and payload is not _UNIT:
            op_path, table, refused = f"{op_path}.Mir", MIR_OPS, REFUSED_MIR
            variant, payload = self.variant(payload, op_path)
        spec = table.get(variant)
        if spec is None:
            if variant in refused:
                raise self.err(op_path, f"upstream op {variant} is not imported: {refused[variant]}")
            raise self._unknown(op_path, variant, "HirOp" if table is HIR_OPS else "Op", table)
        vpath = f"{op_path}.{variant}"
        fields = self.fields(spec, payload, vpath)
        return _Builder(g, path, vpath, name, prov).build(spec, fields, [ids[s] for s in inputs], declared)

    # ------------------------------------------------------------ documents
    def document(self, doc: dict) -> Any:
        keys = set(doc)
        if "format" in keys and "version" in keys:
            raise self.err("format", "a versioned rlx-ir document: read it with rlx.from_json")
        if keys == {"inner"}:
            return _verified(self.graph(doc["inner"], "inner", GraphStage.MIR))
        if keys == {"mir", "buffers"}:
            return self.lir(doc)
        if "fusion_policy" in keys:
            return self.hir(doc)
        if "nodes" in keys:
            return _verified(self.graph(doc, "", GraphStage.MIR))
        raise self.err("", "not an upstream rlx-ir document: expected a Graph {name, nodes, outputs}, a MirModule "
                           "{inner}, a HirModule {name, nodes, outputs, fusion_policy} or an LirModule {mir, buffers}")

    def hir(self, doc: dict) -> Any:
        from rlx.hir.module import GraphModule

        policy = self._unit_enum(FUSION_POLICIES, "FusionPolicy")(doc.get("fusion_policy"), "fusion_policy")
        g = _verified(self.graph(doc, "", GraphStage.HIR, extra=("fusion_policy",)))
        return GraphModule(g, policy)

    def lir(self, doc: dict) -> Any:
        """The MIR graph, re-planned by rlx: upstream's buffer assignments are checked for shape only, never used."""
        from rlx.lir.plan import plan

        mir = self.obj(doc["mir"], "mir", ("inner",))
        g = _verified(self.graph(mir["inner"], "mir.inner", GraphStage.MIR))
        kinds = {"arena_size": int, "assignments": dict, "schedule": list, "view_aliases": dict, "phases": dict,
                 "io": dict, "alignment": int, "dynamic_symbols": list}
        buffers = self.obj(doc["buffers"], "buffers", tuple(kinds))
        for key, kind in kinds.items():
            if type(buffers[key]) is not kind:
                raise self.err(f"buffers.{key}", f"expected {_tname(kind())}, got {_tname(buffers[key])}")
        alignment = self._int(buffers["alignment"], "buffers.alignment", 1, 1 << 20)
        if alignment & (alignment - 1):
            raise self.err("buffers.alignment", f"{alignment} is not a power of two")
        try:
            return plan(g, alignment)
        except RlxError as exc:
            raise VerifyError(f"rlx's planner cannot plan graph {g.name!r}: {exc}") from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _verified(g: Graph) -> Graph:
    _verify(g)
    return g


class _Builder:
    """Appends the rlx node(s) of one upstream node and reconciles the declared type."""

    def __init__(self, g: Graph, path: str, vpath: str, name: str | None, prov: Provenance | None):
        self.g, self.path, self.vpath, self.name, self.prov = g, path, vpath, name, prov

    def build(self, spec: UpstreamOp, f: dict[str, Any], ids: list[int], declared: TensorType) -> int:
        if spec.build == "leaf":
            leaf = f["name"]
            attrs = {"name": leaf, "shape": tuple(declared.shape), "dtype": declared.dtype}
            return self.append(spec.op, [], attrs, main=True, name=self.name if self.name is not None else leaf)
        if spec.build == "constant":
            return self.append("constant", [], {"value": FrozenArray(self.constant(f["data"], declared))}, main=True)
        if spec.order is not None:
            ids = [ids[k] for k in spec.order if k < len(ids)]
        for k in spec.index_operands:
            if k < len(ids) and not self.g.nodes[ids[k]].type.dtype.is_int:
                ids[k] = self.append("cast", [ids[k]], {"to": DType.I64})
        ctx = _Ctx([self.g.nodes[i].type for i in ids], declared, self.vpath)
        op, attrs = (self.custom(f, ctx), {}) if spec.build == "custom" else (spec.op, spec.rlx_attrs(f, ctx))
        assert op is not None
        return self.reconcile(self.append(op, ids, attrs, main=True), declared, spec.variant)

    def append(self, op: str, ids: list[int], attrs: dict[str, Any], *, main: bool = False, name: str | None = None) -> int:
        opdef = get_op(op)
        where = f"{self.vpath} (rlx op {op!r})"
        try:
            checked = opdef.check_attrs(attrs, op)
        except AttributeSchemaError as exc:
            raise FormatError(f"{where}: {exc}") from None
        expected, count = opdef.expected_arity(checked), len(ids)
        if count < opdef.min_arity if expected is None else count != expected:
            want = f"at least {opdef.min_arity}" if expected is None else str(expected)
            raise VerifyError(f"{self.path}: rlx op {op!r} takes {want} operand(s), the node has {count}")
        try:
            if opdef.canonicalize is not None:
                checked = opdef.canonicalize([self.g.nodes[i].type for i in ids], checked)
            node_name = (name if name is not None else self.name) if main else None
            return self.g.append(op, ids, checked, name=node_name, prov=self.prov).id
        except AttributeSchemaError as exc:
            raise FormatError(f"{where}: {exc}") from None
        except RlxError as exc:  # ShapeError from the op rule, a duplicate leaf name …
            if op in ("input", "param"):
                raise FormatError(f"{self.path}: {exc}") from None
            raise VerifyError(f"{self.path}: {exc}") from None

    def reconcile(self, vid: int, declared: TensorType, variant: str) -> int:
        got = self.g.nodes[vid].type
        if got.shape != declared.shape:
            if got.shape.numel == 1 and declared.shape.numel == 1:
                vid = self.append("reshape", [vid], {"new_shape": tuple(declared.shape)})
            else:
                raise VerifyError(f"{self.path}: upstream {variant} declares {declared}; rlx's rule for it gives {got}")
        if got.dtype != declared.dtype:
            vid = self.append("cast", [vid], {"to": declared.dtype})
        return vid

    def constant(self, data: bytes, declared: TensorType) -> np.ndarray:
        dims, dtype = declared.shape, declared.dtype
        if not dims.is_static:
            raise FormatError(f"{self.path}.shape: a Constant needs a static shape, got {declared}")
        n = math.prod(dims)  # type: ignore[arg-type]
        if len(data) == n * dtype.itemsize:
            if dtype is DType.BOOL:
                return (np.frombuffer(data, np.uint8) != 0).reshape(dims)
            arr = np.frombuffer(data, dtype=dtype.numpy.newbyteorder("<"), count=n)
        elif len(data) == 4 * n:  # upstream's CPU reader and its autodiff zeros: 4-byte f32 whatever the dtype
            arr = np.frombuffer(data, dtype="<f4", count=n)
        else:
            raise FormatError(f"{self.vpath}.data: {len(data)} bytes cannot hold {declared} ({n * dtype.itemsize} bytes)")
        return arr.astype(dtype.numpy).reshape(dims)

    def custom(self, f: dict[str, Any], c: _Ctx) -> str:
        from rlx.ops.custom import custom_ops

        name = f["name"]
        if name not in custom_ops():
            raise FormatError(f"{self.vpath}.name: {name[:80]!r} is not a custom op registered with rlx.custom_op "
                              "(files never import code)")
        if f["attrs"]:
            raise FormatError(f"{self.vpath}.attrs: {len(f['attrs'])} opaque attribute bytes only upstream's op registry "
                              "can read; rlx custom ops take typed attributes")
        if f["num_inputs"] != len(c.ins):
            raise c.fail(f"num_inputs is {f['num_inputs']} but the node has {len(c.ins)} inputs")
        return name


def from_upstream_json(text_or_bytes: str | bytes, *, limits: LoadLimits | None = None) -> Any:
    """Import a document written by upstream rlx-ir 0.2.1 (serde JSON, no version field).

    A ``Graph`` or a ``MirModule`` (``{"inner": graph}``) becomes a verified MIR
    :class:`rlx.Graph`; a ``HirModule`` a :class:`rlx.GraphModule` at stage HIR with its
    fusion policy; an ``LirModule`` an :class:`rlx.LirModule` whose graph is the document's
    MIR graph, planned again by :func:`rlx.plan` with the document's alignment (upstream's
    buffer assignments are not trusted). Raises :class:`rlx.FormatError` (with the field's
    path) or :class:`rlx.VerifyError`, nothing else.
    """
    lim = limits or DEFAULT_LIMITS
    return _guard(lambda: _Importer(lim).document(_parse_json(text_or_bytes, lim)))
