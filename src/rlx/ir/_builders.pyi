"""Generated from the op registry by scripts/gen_builder_stubs.py (rlx.ir.builder_stubs); do not edit."""

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.graph import Graph, Value

Operand = Value | int | float | np.ndarray
Dim = Any
DTypeLike = DType | str

class GraphBuilders:

    def abs(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='abs'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def activation(self, x: Operand, /, kind: Literal['gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] = ..., name: str | None = None) -> Value:
        """Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def activation_backward(self, x: Operand, dy: Operand, /, kind: Literal['gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] = ..., name: str | None = None) -> Value:
        """dy·act'(x) for every activation kind (docs/semantics.md#activations): gelu uses the exact Φ(x) + x·φ(x); sqrt and rsqrt give 0 where sqrt(x) <= 0; abs gives sign(x) (0 at 0); round is the straight-through identity; relu gives 0 at 0."""

    def add(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='add'): Broadcasting binary arithmetic in the promoted dtype."""

    def advanced_index(self, operands: Sequence[Operand], /, pattern: str = ..., name: str | None = None) -> Value:
        """x[key] with NumPy advanced-indexing semantics (torch aten.index): `pattern` has one char per key position, 'i' an integer index tensor (the operands after x, in order), ':' a full slice, 'n' a new axis; missing trailing positions are full slices."""

    def advanced_index_put(self, operands: Sequence[Operand], /, pattern: str = ..., accumulate: bool = ..., name: str | None = None) -> Value:
        """A copy of x with x[key] = values (NumPy assignment; torch index_put), or x[key] += values with duplicate indices accumulating (accumulate, np.add.at)."""

    def arg_reduce(self, x: Operand, /, op: Literal['argmax', 'argmin'] = ..., axis: int = ..., keep_dim: bool = ..., select_last: bool = ..., name: str | None = None) -> Value:
        """Index (i64) of the largest (argmax) or smallest (argmin) element along `axis` (np.argmax): the first one on ties, or the last with select_last."""

    def atan(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='atan'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def attention(self, q: Operand, k: Operand, v: Operand, mask: Operand = ..., /, num_heads: int = ..., head_dim: int = ..., mask_kind: Literal['none', 'causal', 'sliding_window', 'custom', 'bias'] = ..., window: int | None = ..., score_scale: float | None = ..., attn_logit_softcap: float | None = ..., layout: Literal['bhsd', 'bshd'] = ..., name: str | None = None) -> Value:
        """Scaled dot-product attention, per batch b and head h: s = q_h @ k_h.T * scale (scale = score_scale, default head_dim**-0.5); soft-cap s = c*tanh(s/c) if attn_logit_softcap = c; then the mask; p = softmax(s) (max-subtracted); out_h = p @ v_h."""

    def attention_backward(self, q: Operand, k: Operand, v: Operand, dy: Operand, mask: Operand = ..., /, num_heads: int = ..., head_dim: int = ..., mask_kind: Literal['none', 'causal', 'sliding_window', 'custom', 'bias'] = ..., window: int | None = ..., score_scale: float | None = ..., attn_logit_softcap: float | None = ..., layout: Literal['bhsd', 'bshd'] = ..., wrt: Literal['query', 'key', 'value'] = ..., name: str | None = None) -> Value:
        """Gradient of attention w.r.t."""

    def axial_rope2d(self, x: Operand, /, end_x: int = ..., end_y: int = ..., head_dim: int = ..., num_heads: int = ..., theta: float = ..., repeat_factor: int = ..., name: str | None = None) -> Value:
        """2-D axial rotary embedding, SAM2 geometry (docs/semantics.md#sequence-models): x [B, S, H·D] with S = end_x·end_y·max(repeat_factor, 1), D % 4 == 0 → x's shape and dtype."""

    def batched_dense_solve(self, a: Operand, b: Operand, /, name: str | None = None) -> Value:
        """dense_solve per batch slice: A [..., N, N] (rank >= 3), b [..., N] (rank of A minus 1: vectors) or [..., N, K]; the batch dims must be equal (no broadcasting)."""

    def binary(self, lhs: Operand, rhs: Operand, /, op: Literal['add', 'sub', 'mul', 'div', 'max', 'min', 'fmax', 'fmin', 'pow'] = ..., name: str | None = None) -> Value:
        """Broadcasting binary arithmetic in the promoted dtype."""

    def binary_ext(self, lhs: Operand, rhs: Operand, /, op: Literal['mod', 'fmod', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'shift_left', 'shift_right'] = ..., name: str | None = None) -> Value:
        """Broadcasting binary op in the promoted dtype."""

    def bitcast(self, x: Operand, /, to: DTypeLike = ..., name: str | None = None) -> Value:
        """Reinterpret each element's bits as dtype `to` of the same bit width (np.ndarray.view, ONNX BitCast, torch Tensor.view(dtype), lax.bitcast_convert_type); little-endian bytes; the sub-byte types are their low bits (i4 -1 is u4 15); to bool a nonzero byte is True."""

    def cached_attention(self, qkv: Operand, k_cache: Operand, v_cache: Operand, pos: Operand, cos: Operand, sin: Operand, /, num_heads: int = ..., kv_heads: int = ..., head_dim: int = ..., scale: float | None = ..., rope: Literal['interleaved', 'half'] = ..., batch_dims: int = ..., name: str | None = None) -> tuple[Value, Value, Value]:
        """One decode step of grouped-query attention over a KV cache."""

    def cast(self, x: Operand, /, to: DTypeLike = ..., name: str | None = None) -> Value:
        """Convert the element type (x.astype(to)); float to int truncates toward zero, anything to bool is x != 0, c64 to a real type keeps the real part."""

    def cholesky(self, a: Operand, /, upper: bool = ..., name: str | None = None) -> Value:
        """Cholesky factor of each symmetric positive-definite matrix of A [..., N, N]: lower L with A = L·Lᵀ, or (upper) U = Lᵀ with A = Uᵀ·U."""

    def compare(self, lhs: Operand, rhs: Operand, /, op: Literal['eq', 'ne', 'lt', 'le', 'gt', 'ge'] = ..., name: str | None = None) -> Value:
        """Broadcasting comparison in the promoted dtype; the result is bool."""

    def complex(self, re: Operand, im: Operand, /, name: str | None = None) -> Value:
        """re + i·im elementwise (NumPy broadcasting) as a complex tensor: f32 parts give c64, f64 parts c128 (torch.complex)."""

    def complex_norm_sq(self, z: Operand, /, name: str | None = None) -> Value:
        """|z|² = re² + im² of a c64 tensor, as f32 of the same dims (computed in f32)."""

    def complex_norm_sq_backward(self, z: Operand, g: Operand, /, name: str | None = None) -> Value:
        """g·z (c64): g times the Wirtinger derivative ∂/∂z̄ of |z|² (upstream's backward kernel)."""

    def concat(self, parts: Sequence[Operand], /, axis: int = ..., name: str | None = None) -> Value:
        """np.concatenate(parts, axis); variadic (>= 1 operand, passed as one list)."""

    def conjugate(self, z: Operand, /, name: str | None = None) -> Value:
        """Complex conjugate re - i·im of a c64 tensor."""

    def conv2d(self, x: Operand, w: Operand, /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., name: str | None = None) -> Value:
        """NCHW cross-correlation = torch.nn.functional.conv2d without bias: x [N, Cin, H, W], w [Cout, Cin/groups, kH, kW] -> [N, Cout, Hout, Wout], Hout = (H + 2pH - dH(kH-1) - 1) // sH + 1."""

    def conv2d_backward_input(self, dy: Operand, w: Operand, /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., input_shape: Sequence[Dim] = ..., name: str | None = None) -> Value:
        """Gradient of conv2d with respect to its input x: the exact adjoint of the forward conv (dy [N,Cout,Ho,Wo], w [Cout,Cin/G,kH,kW] → input_shape)."""

    def conv2d_backward_weight(self, x: Operand, dy: Operand, /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., weight_shape: Sequence[Dim] = ..., name: str | None = None) -> Value:
        """Gradient of conv2d with respect to its weight: dw[co,ci,kh,kw] = Σ_{n,ho,wo} x[n, g(co)·Cin/G + ci, ho·s + kh·d − p, wo·s + kw·d − p]·dy[n,co,ho,wo] (x outside the image is 0); output weight_shape."""

    def conv_transpose2d(self, x: Operand, w: Operand, /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., output_padding: Sequence[int] = ..., name: str | None = None) -> Value:
        """torch.nn.functional.conv_transpose2d without bias: x [N, Cin, H, W], w [Cin, Cout/groups, kH, kW] -> [N, Cout, Hout, Wout], Hout = (H-1)sH - 2pH + dH(kH-1) + opH + 1."""

    def cos(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='cos'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def cumprod(self, x: Operand, /, axis: int = ..., exclusive: bool = ..., reverse: bool = ..., name: str | None = None) -> Value:
        """cumulative(op='prod'): Running sum or product along `axis` (any axis, default the last): np.cumsum / np.cumprod in the input dtype (integers wrap; c64 allowed; bool not)."""

    def cumsum(self, x: Operand, /, axis: int = ..., exclusive: bool = ..., reverse: bool = ..., name: str | None = None) -> Value:
        """cumulative(op='sum'): Running sum or product along `axis` (any axis, default the last): np.cumsum / np.cumprod in the input dtype (integers wrap; c64 allowed; bool not)."""

    def cumulative(self, x: Operand, /, op: Literal['sum', 'prod'] = ..., axis: int = ..., exclusive: bool = ..., reverse: bool = ..., name: str | None = None) -> Value:
        """Running sum or product along `axis` (any axis, default the last): np.cumsum / np.cumprod in the input dtype (integers wrap; c64 allowed; bool not)."""

    def custom_fn(self, args: Sequence[Operand], /, body: Graph = ..., vjp_body: Graph | None = ..., jvp_body: Graph | None = ..., name: str | None = None) -> Value:
        """A function given as a subgraph, with optional custom derivatives: operands (one list) are bound positionally to body's inputs (node order, same types); body has one output, the node's value."""

    def dense_solve(self, a: Operand, b: Operand, /, name: str | None = None) -> Value:
        """Solve A x = b: A [N, N], b [N] or [N, K] -> x shaped like b (np.linalg.solve: LU with partial pivoting)."""

    def depthwise_conv1d_causal(self, input: Operand, weight: Operand, left_pad: Operand, /, kernel_size: int = ..., name: str | None = None) -> Value:
        """Causal depthwise 1-D convolution over the sequence of input [B, S, C] with weight [C, 1, 1, K]; left_pad [B, K-1, C] holds the K-1 previous positions (zeros, or the conv state when decoding)."""

    def dequant_grouped_matmul(self, x: Operand, w_packed: Operand, expert_idx: Operand, scale: Operand = ..., global_: Operand = ..., /, scheme: Literal['gguf_q4_k', 'gguf_q5_k', 'gguf_q6_k', 'gguf_q8_k', 'gguf_q2_k', 'gguf_q3_k', 'gguf_q4_0', 'gguf_q8_0', 'nvfp4_block'] = ..., n: int = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """grouped_matmul with packed expert weights (docs/semantics.md#packed-weights): x [M, K] (float), w_packed u8 holding E expert slabs back to back (any shape; E = bytes / slab bytes), expert_idx [M] -> [M, N], out[i] = x[i] @ W[expert_idx[i]]."""

    def dequant_matmul(self, x: Operand, w_q: Operand, scale: Operand = ..., zp: Operand = ..., /, scheme: Literal['int8_block', 'int8_block_asym', 'int4_block', 'fp8_e4m3', 'fp8_e5m2', 'gguf_q4_k', 'gguf_q5_k', 'gguf_q6_k', 'gguf_q8_k', 'gguf_q2_k', 'gguf_q3_k', 'gguf_q4_0', 'gguf_q8_0', 'nvfp4_block', 'gguf_q4_1', 'gguf_q5_0', 'gguf_q5_1', 'gguf_iq4_nl', 'gguf_iq4_xs'] = ..., block_size: int = ..., x_quant: Literal['none', 'q8_block'] = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """x [M, K] (float) @ W -> [M, N] with W [K, N] decoded from packed operands (docs/semantics.md#packed-weights, W row-major, flat index p·N + j, scale block p // block_size along K)."""

    def dequant_moe_weights(self, w_packed: Operand, scale: Operand = ..., global_: Operand = ..., /, scheme: Literal['gguf_q4_k', 'gguf_q5_k', 'gguf_q6_k', 'gguf_q8_k', 'gguf_q2_k', 'gguf_q3_k', 'gguf_q4_0', 'gguf_q8_0', 'nvfp4_block'] = ..., k: int = ..., n: int = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Decode a packed expert stack (docs/semantics.md#packed-weights) into f32 [E, K, N], the grouped_matmul weight layout: the byte count must be E whole slabs (layouts as dequant_grouped_matmul: GGUF experts packed [N, K] and transposed here; nvfp4_block with the extra scale / global operands)."""

    def dequantize(self, q: Operand, /, axis: int | None = ..., scales: Sequence[float] = ..., zero_points: Sequence[int] | None = ..., to: DTypeLike = ..., name: str | None = None) -> Value:
        """Inverse of quantize: x = (q - zp[c]) · scale[c], computed in f32 (f64 when to=f64) from any integer q (i8 from quantize)."""

    def det(self, a: Operand, /, name: str | None = None) -> Value:
        """Determinant of each square matrix of A [..., N, N] -> [...] (LU with partial pivoting; 1 for N = 0)."""

    def div(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='div'): Broadcasting binary arithmetic in the promoted dtype."""

    def dot_general(self, lhs: Operand, rhs: Operand, /, lhs_contracting: Sequence[int] = ..., rhs_contracting: Sequence[int] = ..., lhs_batch: Sequence[int] = ..., rhs_batch: Sequence[int] = ..., name: str | None = None) -> Value:
        """XLA DotGeneral."""

    @overload
    def eig(self, a: Operand, /, *, output: Literal['both'], name: str | None = None) -> tuple[Value, Value]: ...
    @overload
    def eig(self, a: Operand, /, *, output: Literal['values'] = ..., name: str | None = None) -> Value:
        """Eigen-decomposition of each square real matrix of A [..., N, N] (LAPACK geev): complex eigenvalues [..., N] (c64 for f32, c128 for f64; in LAPACK's order, conjugate pairs adjacent) and (output=both) unit-norm right eigenvectors as columns."""

    @overload
    def eigh(self, a: Operand, /, lower: bool = ..., *, output: Literal['both'], name: str | None = None) -> tuple[Value, Value]: ...
    @overload
    def eigh(self, a: Operand, /, lower: bool = ..., *, output: Literal['values'] = ..., name: str | None = None) -> Value:
        """Eigen-decomposition of each symmetric matrix of A [..., N, N] (reads the lower triangle, or the upper with lower=False; LAPACK syevd): eigenvalues [..., N] ascending, and (output=both) orthonormal eigenvectors as the columns of [..., N, N]."""

    def elementwise_region(self, /, *inputs: Operand, chain: Any = ..., num_inputs: int = ..., name: str | None = None) -> Value:
        """A fused chain of elementwise steps over num_inputs operands."""

    def eq(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='eq'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def exp(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='exp'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def expand(self, x: Operand, /, target_shape: Sequence[Dim] = ..., name: str | None = None) -> Value:
        """np.broadcast_to after left-padding x with 1s."""

    def fake_quantize(self, x: Operand, state: Operand = ..., /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., ste: Literal['identity', 'clipped_identity', 'tanh', 'hard_tanh'] = ..., scale_mode: Literal['per_batch', 'ema', 'fixed'] = ..., decay: float = ..., name: str | None = None) -> Value:
        """Symmetric quantize-dequantize for quantization-aware training (zero point 0): out = clip(round(x / s), -q_max, q_max) · s, q_max = {8: 127, 4: 7, 2: 1}[bits], round half away from zero."""

    def fake_quantize_backward(self, x: Operand, dy: Operand, state: Operand = ..., /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., ste: Literal['identity', 'clipped_identity', 'tanh', 'hard_tanh'] = ..., scale_mode: Literal['per_batch', 'ema', 'fixed'] = ..., decay: float = ..., name: str | None = None) -> Value:
        """Straight-through gradient of fake_quantize (same attributes and scale): identity: dy; clipped_identity: dy·(|x| <= q_max·s); tanh: dy·(1 - tanh²(x/s)); hard_tanh: dy·max(0, 1 - |x/(q_max·s)|)."""

    def fake_quantize_lsq(self, x: Operand, scale: Operand, /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Learned-step-size fake quantization (LSQ): s = max(scale[c], 1e-12), out = clip(round(x/s), -q_max, q_max)·s (round half away from zero), scale [C] (C = x.shape[axis], [1] per tensor)."""

    def fake_quantize_lsq_backward_scale(self, x: Operand, scale: Operand, dy: Operand, /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """LSQ gradient in the scale (shape of scale): ds[c] = Σ_{elements of channel c} ψ(x/s)·dy with ψ(z) = round(z) - z if |z| <= q_max else sign(z)·q_max, s = max(scale[c], 1e-12)."""

    def fake_quantize_lsq_backward_x(self, x: Operand, scale: Operand, dy: Operand, /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """LSQ gradient in x: dy·(|x/s| <= q_max), s = max(scale[c], 1e-12)."""

    def fft(self, x: Operand, /, inverse: bool = ..., norm: Literal['backward', 'ortho', 'forward'] = ..., axis: int = ..., name: str | None = None) -> Value:
        """1-D discrete Fourier transform of a c64 or c128 tensor along `axis` (default the last; other axes are batch): X[k] = Σ x[n]·exp(-2πi·nk/N), inverse with +, scaled as np.fft.fft / np.fft.ifft with `norm` (computed in complex128, stored in the operand's width; any length)."""

    def fmax(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='fmax'): Broadcasting binary arithmetic in the promoted dtype."""

    def fmin(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='fmin'): Broadcasting binary arithmetic in the promoted dtype."""

    def fused_attention_block(self, hidden: Operand, qkv_w: Operand, out_w: Operand, mask: Operand, qkv_b: Operand = ..., out_b: Operand = ..., cos: Operand = ..., sin: Operand = ..., /, num_heads: int = ..., head_dim: int = ..., has_bias: bool = ..., has_rope: bool = ..., name: str | None = None) -> Value:
        """Self-attention block: operands hidden [B, S, Hd], qkv_w [Hd, 3·H·D], out_w [H·D, Hd], mask [B, S] (1 = keep), then qkv_b [3·H·D], out_b [Hd] if has_bias, then cos, sin [T, D/2] if has_rope."""

    def fused_conv2d_bias_act(self, x: Operand, w: Operand, b: Operand = ..., /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., has_bias: bool = ..., activation: Literal[None, 'gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] | None = ..., name: str | None = None) -> Value:
        """act(conv2d(x, w) + b): x [N, Cin, H, W], w [Cout, Cin/groups, kH, kW] with conv2d's geometry attributes and rules, b [Cout] of the conv's dtype added per output channel iff has_bias; activation None = identity."""

    def fused_matmul_bias_act(self, x: Operand, w: Operand, b: Operand, /, activation: Literal[None, 'gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] | None = ..., name: str | None = None) -> Value:
        """act(x @ w + b): x [..., M, K], w [..., K, N] (matmul rules), b [N] added over the last axis; activation None = identity."""

    @overload
    def fused_residual_layer_norm(self, x: Operand, residual: Operand, bias: Operand, gamma: Operand, beta: Operand = ..., /, has_bias: bool = ..., eps: float = ..., *, with_sum: Literal[True], name: str | None = None) -> tuple[Value, Value]: ...
    @overload
    def fused_residual_layer_norm(self, x: Operand, residual: Operand, bias: Operand, gamma: Operand, beta: Operand = ..., /, has_bias: bool = ..., eps: float = ..., *, with_sum: Literal[False] = ..., name: str | None = None) -> Value:
        """layer_norm(x + residual [+ bias], gamma, beta, axis=-1, eps): operands x, residual (x's shape), bias [H] iff has_bias, gamma [H], beta [H]."""

    @overload
    def fused_residual_rms_norm(self, x: Operand, residual: Operand, bias: Operand, gamma: Operand, beta: Operand = ..., /, has_bias: bool = ..., eps: float = ..., *, with_sum: Literal[True], name: str | None = None) -> tuple[Value, Value]: ...
    @overload
    def fused_residual_rms_norm(self, x: Operand, residual: Operand, bias: Operand, gamma: Operand, beta: Operand = ..., /, has_bias: bool = ..., eps: float = ..., *, with_sum: Literal[False] = ..., name: str | None = None) -> Value:
        """rms_norm(x + residual [+ bias], gamma, beta, axis=-1, eps): operands x, residual (x's shape), bias [H] iff has_bias, gamma [H], beta [H]."""

    def fused_swiglu(self, x: Operand, /, cast_to: DTypeLike | None = ..., gate_first: bool = ..., name: str | None = None) -> Value:
        """SwiGLU of x [..., 2N] → [..., N]: up = x[..., :N], gate = x[..., N:] (swapped with gate_first), y = silu(gate)·up, then cast to cast_to if given."""

    def fused_transformer_layer(self, hidden: Operand, qkv_w: Operand, qkv_b: Operand, out_w: Operand, out_b: Operand, ln1_g: Operand, ln1_b: Operand, fc1_w: Operand, fc1_b: Operand, fc2_w: Operand, fc2_b: Operand = ..., ln2_g: Operand = ..., ln2_b: Operand = ..., mask: Operand = ..., /, num_heads: int = ..., head_dim: int = ..., intermediate_size: int = ..., eps1: float = ..., eps2: float = ..., activation: Literal[None, 'gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] = ..., has_bias: bool = ..., name: str | None = None) -> Value:
        """BERT post-norm encoder layer: h1 = layer_norm(attn_block(hidden) + hidden; ln1_g, ln1_b, eps1); y = layer_norm(act(h1 @ fc1_w + fc1_b) @ fc2_w + fc2_b + h1; ln2_g, ln2_b, eps2); the attention block is fused_attention_block's (custom key-padding mask [B, S], no rope)."""

    def gated_delta_net(self, q: Operand, k: Operand, v: Operand, g: Operand, beta: Operand, state: Operand = ..., /, state_size: int = ..., carry_state: bool = ..., output: Literal['y', 'state'] = ..., name: str | None = None) -> Value:
        """Gated delta-rule linear attention (docs/semantics.md#sequence-models): q, k, v [b, s, h, n], g, beta [b, s, h], plus state [b, h, n, n] iff carry_state; one float dtype."""

    def gather(self, table: Operand, indices: Operand, /, axis: int = ..., name: str | None = None) -> Value:
        """np.take(table, indices, axis): result shape table.shape[:axis] + indices.shape + table.shape[axis+1:] (upstream's rule drops table.shape[:axis], wrong for axis > 0)."""

    def gather_backward(self, dy: Operand, indices: Operand, /, axis: int = ..., table_shape: Sequence[Dim] = ..., name: str | None = None) -> Value:
        """Gradient of gather w.r.t."""

    def gather_elements(self, data: Operand, indices: Operand, /, axis: int = ..., name: str | None = None) -> Value:
        """np.take_along_axis(data, indices, axis) (ONNX GatherElements): out[i][j][k] = data[idx[i][j][k]][j][k] for axis 0."""

    def gaussian_splat_prepare(self, positions: Operand, scales: Operand, rotations: Operand, opacities: Operand, colors: Operand, sh_coeffs: Operand, meta: Operand, /, width: int = ..., height: int = ..., tile_size: int = ..., alpha_cutoff: float = ..., max_splat_steps: int = ..., transmittance_threshold: float = ..., max_list_entries: int = ..., batch_dims: int = ..., radius_scale: float = ..., name: str | None = None) -> Value:
        """Stage 1 of gaussian_splat_render: culling, view-dependent colour, tile binning, depth sort and pixel rays, packed into one vector of upstream's length 15n + max_list + 2·tiles + 3·pixels + 11 (n = max(N, 1); layout in docs/splatting.md; it records how many list entries were generated, so overflow is detectable)."""

    def gaussian_splat_rasterize(self, prep: Operand, meta: Operand, /, width: int = ..., height: int = ..., tile_size: int = ..., alpha_cutoff: float = ..., max_splat_steps: int = ..., transmittance_threshold: float = ..., max_list_entries: int = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Stage 2 of gaussian_splat_render: composites a gaussian_splat_prepare buffer (plus the background from meta) into RGBA [H·W·4]; rasterize(prepare(x)) equals render(x) bit for bit."""

    def gaussian_splat_render(self, positions: Operand, scales: Operand, rotations: Operand, opacities: Operand, colors: Operand, sh_coeffs: Operand, meta: Operand, /, width: int = ..., height: int = ..., tile_size: int = ..., alpha_cutoff: float = ..., max_splat_steps: int = ..., transmittance_threshold: float = ..., max_list_entries: int = ..., batch_dims: int = ..., radius_scale: float = ..., name: str | None = None) -> Value:
        """3-D Gaussian splat forward render (docs/semantics.md#gaussian-splatting; algorithm in docs/splatting.md) -> RGBA [H·W·4], row-major pixels."""

    def gaussian_splat_render_backward(self, positions: Operand, scales: Operand, rotations: Operand, opacities: Operand, colors: Operand, sh_coeffs: Operand, meta: Operand, d_rgba: Operand, /, width: int = ..., height: int = ..., tile_size: int = ..., alpha_cutoff: float = ..., max_splat_steps: int = ..., transmittance_threshold: float = ..., max_list_entries: int = ..., batch_dims: int = ..., radius_scale: float = ..., loss_grad_clip: float = ..., sh_band: int = ..., max_anisotropy: float = ..., name: str | None = None) -> Value:
        """Packed scene gradient of Σ d_rgba·gaussian_splat_render: [positions 3N | log-scales 3N | rotations 4N | opacity logits N | colours 3N | SH N·max(K,1)·3] (docs/semantics.md#gaussian-splatting), exact through the quaternion normalisation, the SH view direction and the colour clamp (sorting, binning and early termination held fixed)."""

    def gaussian_splat_render_jvp(self, positions: Operand, scales: Operand, rotations: Operand, opacities: Operand, colors: Operand, sh_coeffs: Operand, meta: Operand, t_positions: Operand, t_scales: Operand, t_rotations: Operand, t_opacities: Operand, t_colors: Operand, t_sh_coeffs: Operand, /, width: int = ..., height: int = ..., tile_size: int = ..., alpha_cutoff: float = ..., max_splat_steps: int = ..., transmittance_threshold: float = ..., max_list_entries: int = ..., batch_dims: int = ..., radius_scale: float = ..., name: str | None = None) -> Value:
        """Forward-mode derivative of gaussian_splat_render: the image tangent [H·W·4] at the seven operands along tangents of the six scene operands (same shapes), exact under the same conventions as render_backward (whose transpose it is)."""

    def ge(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='ge'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def gelu(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='gelu'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def gelu_approx(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='gelu_approx'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def geqrf(self, a: Operand, /, name: str | None = None) -> tuple[Value, Value]:
        """LAPACK geqrf of each matrix of A [..., M, N]: R on and above the diagonal, the Householder vectors (unit leading entry implied) below it, and their scales tau [..., min(M, N)]; Q = H_1···H_k with H_i = I - tau_i·v_i·v_iᵀ (householder_product rebuilds it, ormqr applies it)."""

    def group_norm(self, x: Operand, gamma: Operand, beta: Operand, /, num_groups: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """Group normalization of x [N, C, *spatial] (upstream: rank 4 NCHW only; rlx accepts any spatial rank, as torch does)."""

    def group_norm_backward_beta(self, x: Operand, dy: Operand, /, num_groups: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """GroupNorm gradient w.r.t."""

    def group_norm_backward_gamma(self, x: Operand, dy: Operand, /, num_groups: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """GroupNorm gradient w.r.t."""

    def group_norm_backward_input(self, x: Operand, gamma: Operand, beta: Operand, dy: Operand, /, num_groups: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """GroupNorm gradient w.r.t."""

    def grouped_matmul(self, x: Operand, w: Operand, expert_idx: Operand, /, batch_dims: int = ..., name: str | None = None) -> Value:
        """Per-token expert matmul (docs/semantics.md#packed-weights): x [M, K], w [E, K, N] (x's dtype), expert_idx [M] -> [M, N], out[i] = x[i] @ w[expert_idx[i]]."""

    def gt(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='gt'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def householder_product(self, a: Operand, tau: Operand, /, name: str | None = None) -> Value:
        """The first N columns of H_1···H_k (LAPACK orgqr), H_i = I - tau_i·v_i·v_iᵀ with v_i column i of A [..., M, N] below the diagonal and a unit entry on it; tau [..., K], K <= N <= M."""

    def if_(self, operands: Sequence[Operand], /, then_branch: Graph = ..., else_branch: Graph = ..., name: str | None = None) -> Value:
        """Structured conditional: operands [pred, *captures]; pred is a one-element bool or numeric tensor (true when != 0); each branch takes one input per capture (bound positionally, same types) and returns one output, the same type for both."""

    def layer_norm(self, x: Operand, gamma: Operand, beta: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """Layer normalization over one axis: mu = mean(x, axis), var = mean((x-mu)**2, axis) (biased, two-pass), y = (x-mu)/sqrt(var+eps)*gamma + beta, gamma/beta of shape [x.shape[axis]]."""

    def layer_norm2d(self, x: Operand, gamma: Operand, beta: Operand, /, eps: float = ..., name: str | None = None) -> Value:
        """Channel layer norm of an NCHW tensor (SAM / candle LayerNorm2d): statistics over C at every (n, h, w) (not PyTorch's LayerNorm over H x W); gamma/beta [C]."""

    def layer_norm_backward_gamma(self, x: Operand, dy: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """LayerNorm gradient w.r.t."""

    def layer_norm_backward_input(self, x: Operand, gamma: Operand, dy: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """LayerNorm gradient w.r.t."""

    def ldl_factor(self, a: Operand, /, name: str | None = None) -> tuple[Value, Value]:
        """Bunch-Kaufman LDLᵀ factorization of each symmetric matrix of A [..., N, N] (LAPACK sytrf, lower triangle): L (unit diagonal, below) and the 1x1 / 2x2 blocks of D packed in LD [..., N, N] (upper triangle zero), and LAPACK's 1-based pivots [..., N] i32 (negative pairs mark 2x2 blocks)."""

    def ldl_solve(self, ld: Operand, pivots: Operand, b: Operand, /, name: str | None = None) -> Value:
        """Solve A·X = B with ldl_factor's (LD [..., N, N], pivots [..., N]) of a symmetric A (LAPACK sytrs); B [..., N, K], batch dims broadcast."""

    def le(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='le'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def linear(self, x: Operand, w: Operand, b: Operand = ..., /, activation: Literal[None, 'gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] | None = ..., has_bias: bool = ..., name: str | None = None) -> Value:
        """act(x @ w [+ b]) with w [in, out] and optional bias b [out] (operand 3 iff has_bias; the HIR builder takes it as bias=)."""

    def linear_fused(self, x: Operand, w: Operand, b: Operand, /, activation: Literal[None, 'gelu', 'gelu_approx', 'silu', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'sin', 'cos', 'tan', 'atan', 'round'] | None = ..., name: str | None = None) -> Value:
        """act(x @ w + b); lowers to fused_matmul_bias_act under both policies."""

    def llama_decoder_block(self, x: Operand, attn_norm: Operand, attn_norm_b: Operand, wq: Operand, wk: Operand, wv: Operand, wo: Operand, cos: Operand, sin: Operand, ffn_norm: Operand, ffn_norm_b: Operand, w_gate: Operand, w_up: Operand, w_down: Operand, mask: Operand = ..., /, num_heads: int = ..., head_dim: int = ..., num_kv_heads: int | None = ..., eps: float = ..., mask_kind: Literal['none', 'causal', 'sliding_window', 'custom', 'bias'] = ..., window: int | None = ..., name: str | None = None) -> Value:
        """Pre-norm LLaMA decoder layer on x [B, S, D] (or [S, D]): h = rms_norm(x); q, k, v = h@wq, h@wk, h@wv; NeoX RoPE (n_rot = head_dim) on q and k with tables cos, sin [T, head_dim/2]; grouped-query attention by repeating each of the num_kv_heads k/v heads H/KV times (per-head narrow + concat, skipped when KV = H); x1 = x + attention(...) @ wo; out = x1 + (silu(rms_norm(x1) @ w_gate) * (rms_norm(x1) @ w_up)) @ w_down."""

    def log(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='log'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def logcumsumexp(self, x: Operand, /, axis: int = ..., reverse: bool = ..., name: str | None = None) -> Value:
        """Running log(sum(exp(x))) along `axis` (torch.logcumsumexp), a scan of logaddexp: exact per step, -inf terms add nothing, +inf saturates, NaN propagates; reverse runs from the end."""

    def lora_matmul(self, x: Operand, w: Operand, a: Operand, b: Operand, /, scale: float = ..., name: str | None = None) -> Value:
        """x @ w + scale·((x @ a) @ b): x [..., M, K], w [K, N], a [K, R], b [R, N] (matmul rules, so batched x works)."""

    def lt(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='lt'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def lu_factor(self, a: Operand, /, name: str | None = None) -> tuple[Value, Value]:
        """LU factorization with partial pivoting (LAPACK getrf) of each matrix of A [..., M, N]: L (unit diagonal, below) and U (on and above) packed in one [..., M, N], and the 1-based row interchanges pivots [..., min(M, N)] i32 (row i was swapped with row pivots[i] - 1, in order)."""

    def lu_solve(self, lu: Operand, pivots: Operand, b: Operand, /, left: bool = ..., adjoint: bool = ..., name: str | None = None) -> Value:
        """Solve A·X = B (left) or X·A = B with A = P·L·U given by lu_factor's (LU [..., N, N], pivots [..., N]); adjoint solves with Aᵀ."""

    def lu_unpack(self, lu: Operand, pivots: Operand, /, name: str | None = None) -> tuple[Value, Value, Value]:
        """lu_factor's packed result unpacked: P [..., M, M] (the permutation of the pivots' row interchanges), L [..., M, K] (unit diagonal) and U [..., K, N], K = min(M, N), with A = P·L·U."""

    def matmul(self, a: Operand, b: Operand, /, name: str | None = None) -> Value:
        """Batched matrix product a [..., M, K] @ b [..., K, N] -> [..., M, N] (np.matmul)."""

    def matrix_exp(self, a: Operand, /, name: str | None = None) -> Value:
        """exp(A) = Σ Aᵏ/k! of each square matrix of A [..., N, N] (scaling and squaring with a Padé approximant, scipy.linalg.expm; computed in A's precision)."""

    def matrix_inverse(self, a: Operand, /, name: str | None = None) -> Value:
        """A⁻¹ of each square matrix of A [..., N, N] (LAPACK getrf + getri through np.linalg.inv); a singular matrix raises RlxError at run time."""

    def max(self, x: Operand, /, axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """reduce(op='max'): Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    def max_pool2d_backward(self, x: Operand, dy: Operand, /, kernel_size: Sequence[int] = ..., stride: Sequence[int] | None = ..., padding: Sequence[int] = ..., name: str | None = None) -> Value:
        """Gradient of 2-D max pooling (x [N,C,H,W], dy [N,C,Ho,Wo] → x.shape)."""

    def max_pool2d_with_indices(self, x: Operand, /, kernel_size: Sequence[int] = ..., stride: Sequence[int] | None = ..., padding: Sequence[int] = ..., name: str | None = None) -> tuple[Value, Value]:
        """NCHW max pool as one node with two results (values, indices): values as pool2d(kind='max') (NaN propagates: a window with a NaN gives NaN, its index the last NaN tap, as torch; padding never wins); indices i64, each value's h * W + w in its input plane (torch's max_pool2d(return_indices=True); ONNX MaxPool's Indices less the plane offset), the first in row-major window order on ties."""

    def maximum(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='max'): Broadcasting binary arithmetic in the promoted dtype."""

    def mean(self, x: Operand, /, axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """reduce(op='mean'): Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    def min(self, x: Operand, /, axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """reduce(op='min'): Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    def minimum(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='min'): Broadcasting binary arithmetic in the promoted dtype."""

    def mul(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='mul'): Broadcasting binary arithmetic in the promoted dtype."""

    def narrow(self, x: Operand, /, axis: int = ..., start: Dim = ..., length: Dim = ..., name: str | None = None) -> Value:
        """x[..., start:start+length, ...] on `axis` (upstream attribute `len` is accepted as an alias)."""

    def ne(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """compare(op='ne'): Broadcasting comparison in the promoted dtype; the result is bool."""

    def neg(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='neg'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def observer_update(self, x: Operand, state: Operand = ..., /, bits: Literal[2, 4, 8] = ..., axis: int | None = ..., batch_dims: int = ..., scale_mode: Literal['per_batch', 'ema', 'fixed'] = ..., decay: float = ..., name: str | None = None) -> Value:
        """The scale fake_quantize with the same attributes uses, as a tensor [C] (C = x.shape[axis], [1] per tensor): with scale_mode='ema' it is the new observer state (decay·state + (1 - decay)·max|x_c|/q_max, or the batch scale while state <= 0)."""

    def ormqr(self, a: Operand, tau: Operand, c: Operand, /, left: bool = ..., transpose: bool = ..., name: str | None = None) -> Value:
        """op(Q)·C (left) or C·op(Q) with Q = H_1···H_k the M x M product of geqrf's reflectors in A [..., M, N] and tau [..., K], op = transpose or identity (LAPACK ormqr's result, formed as orgqr's Q times C)."""

    def pool2d(self, x: Operand, /, kind: Literal['max', 'mean', 'sum', 'min', 'prod', 'fmax', 'fmin'] = ..., kernel_size: Sequence[int] = ..., stride: Sequence[int] | None = ..., padding: Sequence[int] = ..., count_include_pad: bool = ..., name: str | None = None) -> Value:
        """NCHW pooling (no dilation): windows start at ho*s - p; Hout = (H + 2p - k) // s + 1."""

    def pow(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='pow'): Broadcasting binary arithmetic in the promoted dtype."""

    def prod(self, x: Operand, /, axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """reduce(op='prod'): Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    def q_conv2d(self, x: Operand, w: Operand, bias: Operand, /, kernel_size: Sequence[int] | None = ..., stride: Sequence[int] = ..., padding: Sequence[int] = ..., dilation: Sequence[int] = ..., groups: int = ..., x_zp: int = ..., w_zp: int = ..., out_zp: int = ..., mult: float = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Integer NCHW convolution with conv2d geometry (docs/semantics.md#convolution): x i8 [N, Cin, H, W], w i8 [Cout, Cin/groups, kH, kW], bias i32 [Cout] -> i8 [N, Cout, Ho, Wo]."""

    def q_matmul(self, x: Operand, w: Operand, bias: Operand, /, x_zp: int = ..., w_zp: int = ..., out_zp: int = ..., mult: float = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Integer matmul: x i8 [M, K], w i8 [K, N], bias i32 [N] -> i8 [M, N]; acc = bias[n] + Σ_k (x - x_zp)(w - w_zp) accumulated in int32 (wrapping), then out = clip(round(acc·mult) + out_zp, -128, 127) with acc·mult in f32 and round half away from zero (docs/semantics.md#quantisation)."""

    def qr(self, a: Operand, /, mode: Literal['reduced', 'complete'] = ..., name: str | None = None) -> tuple[Value, Value]:
        """QR decomposition A = Q·R of each matrix of A [..., M, N] by Householder reflections (LAPACK geqrf + orgqr, R's diagonal may be negative, as LAPACK and torch leave it): mode=reduced gives Q [..., M, K], R [..., K, N] (K = min(M, N)), complete Q [..., M, M], R [..., M, N]."""

    def quantize(self, x: Operand, /, axis: int | None = ..., scales: Sequence[float] = ..., zero_points: Sequence[int] | None = ..., name: str | None = None) -> Value:
        """Affine int8 quantization: q = clip(round(x · (1/scale[c])) + zp[c], -128, 127) -> i8, same dims (docs/semantics.md#quantisation: multiply by the reciprocal, round half away from zero, add the zero point, saturate; NaN -> 0 as Rust's saturating cast)."""

    def qwen35_mtp_head(self, h_pre_norm: Operand, input_ids: Operand, cos: Operand, sin: Operand, last_token_idx: Operand, embed_w: Operand, hnorm_w: Operand, hnorm_b: Operand, enorm_w: Operand, enorm_b: Operand, eh_w: Operand, attn_norm_w: Operand, attn_norm_b: Operand, q_gate_w: Operand, k_w: Operand, v_w: Operand, q_norm_w: Operand, q_norm_b: Operand, k_norm_w: Operand, k_norm_b: Operand, o_w: Operand, post_norm_w: Operand, post_norm_b: Operand, gate_w: Operand, up_w: Operand, down_w: Operand, head_norm_w: Operand, head_norm_b: Operand, lm_head_w: Operand, /, num_heads: int = ..., num_kv_heads: int = ..., head_dim: int = ..., n_rot: int = ..., n_embd: int = ..., n_ff: int = ..., mtp_vocab: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """Qwen3.5 MTP draft head (upstream Qwen35MtpHead, 29 operands): h_pre_norm [B, S, E], input_ids [B, S] (int), cos / sin [T, D/2], last_token_idx [B] (int), embed_w [vocab, E], then the norms (gamma, beta) and weights ([in, out]) named in MTP_OPERANDS."""

    def reduce(self, x: Operand, /, op: Literal['sum', 'mean', 'max', 'min', 'prod', 'fmax', 'fmin'] = ..., axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    def relu(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='relu'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def relu_backward(self, x: Operand, dy: Operand, /, name: str | None = None) -> Value:
        """Gradient of relu: dy where x > 0, else 0 (the derivative at 0 is 0)."""

    def reshape(self, x: Operand, /, new_shape: Sequence[Dim] = ..., name: str | None = None) -> Value:
        """C-order reshape (np.reshape)."""

    def residual_rms_norm(self, x: Operand, residual: Operand, gamma: Operand, beta: Operand, /, eps: float = ..., name: str | None = None) -> Value:
        """rms_norm(x + residual, gamma, beta) over the last axis."""

    def resize_nearest_2x(self, x: Operand, /, name: str | None = None) -> Value:
        """2x nearest-neighbour upsampling of NCHW: [N, C, H, W] -> [N, C, 2H, 2W], x.repeat(2, 2).repeat(2, 3) (= torch interpolate(scale_factor=2, mode='nearest'))."""

    def result(self, producer: Operand, /, index: int = ..., name: str | None = None) -> Value:
        """Result `index` (>= 1) of the multi-result node it reads, stored at that node's id + index."""

    def rms_norm(self, x: Operand, gamma: Operand, beta: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """RMS normalization over one axis: y = x / sqrt(mean(x**2, axis) + eps) * gamma + beta."""

    def rms_norm_backward_beta(self, x: Operand, gamma: Operand, beta: Operand, dy: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """RMSNorm gradient w.r.t."""

    def rms_norm_backward_gamma(self, x: Operand, gamma: Operand, beta: Operand, dy: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """RMSNorm gradient w.r.t."""

    def rms_norm_backward_input(self, x: Operand, gamma: Operand, beta: Operand, dy: Operand, /, axis: int = ..., eps: float = ..., name: str | None = None) -> Value:
        """RMSNorm gradient w.r.t."""

    def rope(self, x: Operand, cos: Operand, sin: Operand, /, head_dim: int = ..., n_rot: int | None = ..., interleaved: bool = ..., name: str | None = None) -> Value:
        """Rotary position embedding of x [B, S, H*D] or [S, H*D] (heads packed)."""

    def rope_backward(self, dy: Operand, cos: Operand, sin: Operand, /, head_dim: int = ..., n_rot: int | None = ..., interleaved: bool = ..., name: str | None = None) -> Value:
        """Gradient of rope w.r.t."""

    def round(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='round'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def rsqrt(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='rsqrt'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def sample(self, logits: Operand, /, top_k: int = ..., top_p: float = ..., temperature: float = ..., seed: int = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Sample one token id (i64) per row of logits [..., vocab] -> [...] (upstream: float-encoded ids, rank <= 2; rlx: every leading axis is a row, C order)."""

    @overload
    def scan(self, /, *operands: Operand, body: Graph = ..., length: Dim = ..., save_trajectory: bool = ..., num_bcast: int = ..., num_xs: int = ..., num_checkpoints: int = ..., reverse: bool = ..., num_carries: Literal[1] = ..., name: str | None = None) -> Value: ...  # type: ignore[overload-overlap]  # int excludes 1 here
    @overload
    def scan(self, /, *operands: Operand, body: Graph = ..., length: Dim = ..., save_trajectory: bool = ..., num_bcast: int = ..., num_xs: int = ..., num_checkpoints: int = ..., reverse: bool = ..., num_carries: int, name: str | None = None) -> tuple[Value, ...]:
        """Loop over a leading axis: operands [*inits, *bcasts, *xs] (num_carries inits, default 1); c = inits; for t in range(length): c = body(*c, *bcasts, *[x[t] for x in xs])."""

    def scatter_add(self, updates: Operand, indices: Operand, /, num_rows: int = ..., batch_dims: int = ..., name: str | None = None) -> Value:
        """Row scatter-add into zeros: updates [U, *T], integer indices [U] -> [num_rows, *T], out[idx[i]] += updates[i] (duplicates accumulate, np.add.at)."""

    def scatter_elements(self, data: Operand, indices: Operand, updates: Operand, /, axis: int = ..., reduction: Literal['none', 'add', 'mul', 'max', 'min'] = ..., name: str | None = None) -> Value:
        """A copy of data with updates written at the positions indices names along `axis` (ONNX ScatterElements): out[idx[i][j]][j] = upd[i][j] for axis 0."""

    def selective_scan(self, x: Operand, delta: Operand, A: Operand, B: Operand, C: Operand, /, state_size: int = ..., name: str | None = None) -> Value:
        """Mamba selective scan (docs/semantics.md#sequence-models): x, delta [b, s, h], A [h, n], B, C [b, s, n] (n = state_size), all one float dtype → y [b, s, h]."""

    def shared_linear_pair(self, x: Operand, w_first: Operand, w_second: Operand, /, slot: Literal[0, 1] = ..., name: str | None = None) -> Value:
        """Two projections of one input (e.g."""

    def sigmoid(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='sigmoid'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def silu(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='silu'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def sin(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='sin'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def slogdet(self, a: Operand, /, name: str | None = None) -> tuple[Value, Value]:
        """(sign, log|det|) of each square matrix of A [..., N, N], both [...]: sign is -1, 0 or 1 (log|det| = -inf for a singular matrix)."""

    def softmax(self, x: Operand, /, axis: int = ..., name: str | None = None) -> Value:
        """Numerically stable softmax exp(x - max) / sum along `axis` (default -1; any axis, upstream's kernel is right only for the last one; stored non-negative)."""

    def softmax_cross_entropy(self, logits: Operand, labels: Operand, /, name: str | None = None) -> Value:
        """Per-row softmax cross-entropy: logits [N, C] (float), labels [N] (integer class ids in [0, C)) → [N], logsumexp(row) − row[label]."""

    def softmax_cross_entropy_backward(self, logits: Operand, labels: Operand, d_loss: Operand, /, name: str | None = None) -> Value:
        """Gradient of softmax_cross_entropy w.r.t."""

    def solve_triangular(self, a: Operand, b: Operand, /, upper: bool = ..., left: bool = ..., unitriangular: bool = ..., name: str | None = None) -> Value:
        """Solve A·X = B (left) or X·A = B for triangular A [..., N, N] (upper or lower triangle read, the other ignored; unitriangular assumes ones on the diagonal) by substitution (LAPACK trtrs)."""

    def special(self, x: Operand, y: Operand = ..., /, kind: Literal['bessel_j0', 'bessel_j1', 'bessel_y0', 'bessel_y1', 'i0', 'i1', 'i0e', 'i1e', 'modified_bessel_k0', 'modified_bessel_k1', 'scaled_modified_bessel_k0', 'scaled_modified_bessel_k1', 'spherical_bessel_j0', 'airy_ai', 'erfcx', 'log_ndtr', 'ndtri', 'lgamma', 'erfinv', 'frexp_mantissa', 'frexp_exponent', 'zeta', 'igamma', 'igammac', 'nextafter', 'gcd', 'lcm', 'chebyshev_polynomial_t', 'chebyshev_polynomial_u', 'chebyshev_polynomial_v', 'chebyshev_polynomial_w', 'shifted_chebyshev_polynomial_t', 'shifted_chebyshev_polynomial_u', 'shifted_chebyshev_polynomial_v', 'shifted_chebyshev_polynomial_w', 'hermite_polynomial_h', 'hermite_polynomial_he', 'laguerre_polynomial_l', 'legendre_polynomial_p'] = ..., name: str | None = None) -> Value:
        """Special functions with torch's semantics (rlx.ops.special)."""

    def split(self, x: Operand, /, axis: int = ..., sizes: Sequence[Dim] = ..., name: str | None = None) -> tuple[Value, ...]:
        """Cut x along `axis` into len(sizes) pieces of those lengths (they must add up to the axis size): one node with one result per piece (ONNX Split, torch.split with a list)."""

    def sqrt(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='sqrt'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def sub(self, lhs: Operand, rhs: Operand, /, name: str | None = None) -> Value:
        """binary(op='sub'): Broadcasting binary arithmetic in the promoted dtype."""

    def sum(self, x: Operand, /, axes: Sequence[int] | None = ..., keep_dim: bool = ..., name: str | None = None) -> Value:
        """reduce(op='sum'): Reduce x over `axes` with sum / mean / max / min / prod (builder methods g.sum, g.mean, g.max, g.min, g.prod)."""

    @overload
    def svd(self, a: Operand, /, full_matrices: bool = ..., *, output: Literal['both'], name: str | None = None) -> tuple[Value, Value, Value]: ...
    @overload
    def svd(self, a: Operand, /, full_matrices: bool = ..., *, output: Literal['values'] = ..., name: str | None = None) -> Value:
        """Singular value decomposition A = U·diag(S)·Vh of each matrix of A [..., M, N] (LAPACK gesdd): S [..., K] descending (K = min(M, N)); with output=both also U [..., M, K] and Vh [..., K, N] (M and N columns / rows with full_matrices)."""

    def swiglu(self, x: Operand, up_w: Operand, gate_w: Operand, down_w: Operand, /, name: str | None = None) -> Value:
        """SwiGLU feed-forward: ((x @ up_w) * silu(x @ gate_w)) @ down_w, up_w/gate_w [D, F], down_w [F, D']."""

    def tan(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='tan'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    def tanh(self, x: Operand, /, name: str | None = None) -> Value:
        """activation(kind='tanh'): Unary elementwise function (one row per kind: rlx.ops.kinds)."""

    @overload
    def top_k(self, x: Operand, /, k: int = ..., axis: int = ..., largest: bool = ..., *, output: Literal['both'], name: str | None = None) -> tuple[Value, Value]: ...
    @overload
    def top_k(self, x: Operand, /, k: int = ..., axis: int = ..., largest: bool = ..., *, output: Literal['indices', 'values'] = ..., name: str | None = None) -> Value:
        """The k largest (largest=False: smallest) entries along `axis` (any axis, default last), sorted by value, ties to the lower index (stable; torch.topk(sorted=True), ONNX TopK, which also accepts this order for sorted=0); NaN ranks as the largest value (first for largest, last for smallest)."""

    def topk_indices(self, x: Operand, /, k: int = ..., axis: int = ..., largest: bool = ..., name: str | None = None) -> Value:
        """top_k(output='indices'): The k largest (largest=False: smallest) entries along `axis` (any axis, default last), sorted by value, ties to the lower index (stable; torch.topk(sorted=True), ONNX TopK, which also accepts this order for sorted=0); NaN ranks as the largest value (first for largest, last for smallest)."""

    def transpose(self, x: Operand, /, perm: Sequence[int] | None = ..., name: str | None = None) -> Value:
        """np.transpose(x, perm)."""

    def unary_math(self, x: Operand, /, kind: Literal['erf', 'floor', 'ceil', 'sign', 'round_even', 'trunc', 'asin', 'acos', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh'] = ..., name: str | None = None) -> Value:
        """Unary elementwise function, NumPy semantics: erf, floor, ceil, sign (0 at 0, NaN stays NaN), round_even (half to even, np.round: ONNX Round; activation 'round' is half away from zero), trunc, asin, acos, sinh, cosh, asinh, acosh, atanh (NaN outside the domain)."""

    def view_as_complex(self, x: Operand, /, name: str | None = None) -> Value:
        """A real [..., 2] (real, imaginary) read as a complex tensor [...]: f32 gives c64, f64 c128 (torch.view_as_complex; a copy here)."""

    def view_as_real(self, z: Operand, /, name: str | None = None) -> Value:
        """The parts of a complex tensor [...] as a real [..., 2] (real, imaginary): c64 gives f32, c128 f64 (torch.view_as_real; a copy here, values only)."""

    def where(self, cond: Operand, on_true: Operand, on_false: Operand, /, name: str | None = None) -> Value:
        """np.where(cond != 0, on_true, on_false) with three-way broadcasting; the branches are promoted to a common dtype."""

    @overload
    def while_(self, carried: Sequence[Operand], /, cond: Graph = ..., body: Graph = ..., max_iterations: int | None = ..., *, output: None, name: str | None = None) -> tuple[Value, ...]: ...
    @overload
    def while_(self, carried: Sequence[Operand], /, cond: Graph = ..., body: Graph = ..., max_iterations: int | None = ..., *, output: int = ..., name: str | None = None) -> Value:
        """Structured loop: operands are the initial carried values (passed as one list); for _ in range(max_iterations or forever): if not all(cond(*c) != 0): break; c = body(*c)."""
