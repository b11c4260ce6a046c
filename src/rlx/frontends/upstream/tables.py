"""The upstream rlx-ir tables (split out of :mod:`rlx.frontends.upstream.reader`, which re-exports them):
each upstream enum variant's rlx op and field mapping, the refused variants with their reasons, the
rlx-only ops, and the small name tables both the reader and the writer read."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError
from rlx.ir.shape import TensorType
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, REDUCE_KINDS

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


#: Upstream 0.2.2's ``FftNorm`` (rlx-ir ``fft.rs``): ``Backward`` leaves both directions unscaled
#: (``ifft(fft(x)) = N·x``), ``Forward`` scales the inverse by 1/N, ``Ortho`` both by 1/√N. NumPy's
#: names mean other things (its ``backward`` is upstream's ``Forward``), so the rlx ``norm`` depends on
#: the direction: (upstream norm, inverse) -> NumPy norm.
FFT_NORMS = ("Backward", "Forward", "Ortho")
_FFT_TO_NUMPY = {
    ("Backward", False): "backward", ("Backward", True): "forward",  # NumPy's ifft(norm="forward") is unscaled
    ("Forward", False): "backward", ("Forward", True): "backward",
    ("Ortho", False): "ortho", ("Ortho", True): "ortho",
}
#: rlx (NumPy norm, inverse) -> upstream FftNorm; a forward transform scaled by 1/N (NumPy's
#: ``fft(norm="forward")``) has no upstream form.
FFT_FROM_NUMPY = {
    ("backward", False): "Backward", ("forward", True): "Backward", ("backward", True): "Forward",
    ("ortho", False): "Ortho", ("ortho", True): "Ortho",
}


def _fft(f: dict[str, Any], c: _Ctx) -> dict[str, Any]:
    """Upstream's Fft on C64 (interleaved [re, im] per element, the last axis): rlx's fft on that axis."""
    if c.ins and not c.ins[0].dtype.is_complex:
        raise c.fail(f"Fft on {c.ins[0].dtype} uses upstream's real block layout [re_0..re_(N-1), im_0..im_(N-1)]; "
                     "rlx imports the C64 (interleaved complex) form only")
    norm = f.get("norm") or "Backward"  # 0.2.1 documents carry no norm: unscaled both ways
    return {"inverse": f["inverse"], "norm": _FFT_TO_NUMPY[(norm, bool(f["inverse"]))], "axis": -1}


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


#: Upstream ``Op`` variants (rlx-ir 0.2.1, docs/semantics.md#vocabulary, and 0.2.2's Fft) and the rlx op each becomes.
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
    _op("Fft", "fft", "inverse:bool norm?:fft_norm", attrs=_fft,
        note="0.2.2: C64 operands (interleaved complex) along the last axis; norm names mapped (FFT_NORMS)"),
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
    **dict.fromkeys(("cholesky", "matrix_inverse", "det", "slogdet", "eigh", "eig", "svd", "qr", "geqrf", "householder_product", "ormqr", "lu_factor", "lu_unpack", "lu_solve", "solve_triangular", "ldl_factor", "ldl_solve", "matrix_exp", "complex", "view_as_real", "view_as_complex"), "torch.linalg factorizations / complex parts (rlx.ops.linalg_decomp, complex_parts): upstream 0.2.1 has no such op"),  # noqa: E501
    "result": "upstream nodes have one output; rlx's multi-result nodes hold results 1.. in result nodes",
    "split": "a multi-result node (upstream has one output per node)",
    "max_pool2d_with_indices": "a multi-result node (values, indices); upstream's MaxPool has one output",
    "arg_reduce": "upstream 0.2.1 has no argmax / argmin op (ArgMax / ArgMin came later)",
    "binary_ext": "mod / fmod / bitwise / shift ops are rlx extensions (ONNX import)",
    "unary_math": "erf / floor / ceil / sign / round_even / inverse trig / hyperbolic ops are rlx extensions",
    "logcumsumexp": "the running log-sum-exp (torch.logcumsumexp) is an rlx extension",
    "special": "torch.special functions (Bessel, zeta, incomplete gamma, polynomials, gcd, frexp) are rlx extensions",
    "gather_elements": "element-wise gather (ONNX GatherElements) is an rlx extension",
    "advanced_index": "NumPy advanced indexing (torch aten.index) is an rlx extension",
    "advanced_index_put": "NumPy indexed assignment (torch index_put) is an rlx extension",
    "scatter_elements": "element-wise scatter (ONNX ScatterElements) is an rlx extension",
    "observer_update": "upstream updates the EMA state of FakeQuantize in place; rlx returns it from this op",
    "bitcast": "upstream 0.2.1 has no bit reinterpretation op (ONNX BitCast, torch Tensor.view(dtype))",
    "cached_attention": "upstream 0.2.1 has no KV-cache op (a decode step's rope + attention + cache append in one node)",
    "gaussian_splat_render_jvp": "upstream's splat render has no forward-mode derivative op (autodiff treats it as constant)",
    "fused_conv2d_bias_act": "upstream has no fused conv: its Conv takes no bias, which a separate Add applies",
}
