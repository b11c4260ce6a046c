"""Multi-op patterns the rewrite passes in ``rlx.opt`` (and autodiff preparation) match, declared
next to the ops they name: each table says which op plays which role, the pass says how to match.

A fact about one op is an ``OpDef`` field or flag instead (``rlx.ops.facts``); these are facts
about how several ops combine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FusedPair:
    """``second(first(...), ...)`` computes what one ``fused`` node does on ``first``'s operands."""

    first: str
    second: str
    fused: str


#: splat preparation then rasterization is one differentiable render (autodiff preparation)
SPLAT_RENDER = FusedPair("gaussian_splat_prepare", "gaussian_splat_rasterize", "gaussian_splat_render")


@dataclass(frozen=True)
class Lowering:
    """``op`` is rewritten into ``into`` by a pass of ``rlx.opt`` (``why_kept``: when it cannot be)."""

    op: str
    into: tuple[str, ...]
    why_kept: str = ""


#: dot_general -> transposes, reshapes and one batched matmul (``rlx.opt.dot_general``)
DOT_GENERAL_LOWERING = Lowering("dot_general", ("transpose", "reshape", "matmul"),
                                "its groups are not expressible as one batched matmul (several symbolic dims)")


@dataclass(frozen=True)
class Fusion:
    """A chain the fusion passes (``rlx.opt.fusion``, ``rlx.opt.fold_affine``) rewrite: a site starts
    at an ``anchor`` node; ``step`` is the op of the arithmetic it swallows (bias add, affine scale),
    ``view`` a shape-only op allowed inside the chain, ``act`` an activation it absorbs, ``fused``
    the op it emits."""

    anchor: str
    fused: str
    step: str = ""
    view: str = ""
    act: str = ""


#: matmul -> add(bias) [-> activation] => fused_matmul_bias_act
MATMUL_BIAS_ACT = Fusion("matmul", "fused_matmul_bias_act", step="binary", act="activation")
#: conv2d [-> reshape keeping N, C] [-> add(per-channel bias)] [-> activation] => fused_conv2d_bias_act
CONV_BIAS_ACT = Fusion("conv2d", "fused_conv2d_bias_act", step="binary", view="reshape", act="activation")
#: conv2d -> mul / add by per-channel constants => conv2d with the affine folded into its weight and bias
CONV_AFFINE = Fusion("conv2d", "conv2d", step="binary")
#: matmul [-> reshape keeping the last dim] -> mul / add by per-column constants => matmul with the affine
#: folded into its 2-D weight and bias (a linear layer's BatchNorm1d over flattened tokens, as in LeViT)
MATMUL_AFFINE = Fusion("matmul", "matmul", step="binary", view="reshape")
#: add(x, residual) -> layer_norm (last axis) => fused_residual_layer_norm (two results when the sum is read too)
RESIDUAL_LAYER_NORM = Fusion("layer_norm", "fused_residual_layer_norm", step="binary")
#: add(x, residual) -> rms_norm (last axis) => fused_residual_rms_norm
RESIDUAL_RMS_NORM = Fusion("rms_norm", "fused_residual_rms_norm", step="binary")
#: mul(x @ W_up, silu(x @ W_gate)) => matmul(x, concat(W_up, W_gate)) -> fused_swiglu
SWIGLU_DUAL_MATMUL = Fusion("matmul", "fused_swiglu", step="binary", view="concat", act="activation")
#: mul(narrow(h, one half), silu(narrow(h, the other half))) => fused_swiglu(h)
SWIGLU_NARROWS = Fusion("narrow", "fused_swiglu", step="binary", act="activation")
#: rms_norm (last axis) -> reshape to 2-D => reshape first, then a 2-D rms_norm
RMS_NORM_RESHAPE = Fusion("rms_norm", "rms_norm", view="reshape")
#: several matmuls of one lhs => one matmul of the concatenated weights, narrowed
SHARED_INPUT_MATMUL = Fusion("matmul", "matmul", view="narrow")


@dataclass(frozen=True)
class AttentionChain:
    """Decomposed attention (``rlx.opt.fuse_attention``): ``product(normalize(scale(product(q,
    view(k)))) [+ mask], v)`` with scales and the mask as ``step`` ops, emitted as one ``fused``."""

    product: str
    normalize: str
    view: str
    step: str
    fused: str


DECOMPOSED_ATTENTION = AttentionChain("matmul", "softmax", "transpose", "binary", "attention")


@dataclass(frozen=True)
class RepeatedQuantizer:
    """A ``quantizer`` reached from an identical earlier one through ops that keep its grid is the
    identity (``rlx.opt.quantize.propagate_fake_quant`` removes it)."""

    quantizer: str


REDUNDANT_FAKE_QUANT = RepeatedQuantizer("fake_quantize")
