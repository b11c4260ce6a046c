"""torch converters: matmul / linear, normalization, convolution, pooling, attention."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.frontends.pool_window import clipped_kernel
from rlx.frontends.torch.context import (
    _conv,
    _Ctx,
    _reshape,
    _rlx_dtype,
    _target_name,
)
from rlx.ir.dtype import DType
from rlx.ir.graph import Value
from rlx.ops.rows import MASK_FILL


# ------------------------------------------------------------------------------ linalg
def _matmul_any(cx: _Ctx, a: Value, b: Value) -> Value:
    """np.matmul with torch's 1-D promotion (rlx matmul needs rank >= 2)."""
    a1, b1 = len(a.shape) == 1, len(b.shape) == 1
    if a1:
        a = _reshape(cx, a, (1, a.shape[0]))
    if b1:
        b = _reshape(cx, b, (b.shape[0], 1))
    out = cx.g.matmul(a, b)
    if a1 or b1:
        out = _reshape(cx, out, cx.out_shape())
    return out


@_conv("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def _matmul(cx, node, a, b):
    return _matmul_any(cx, a, b)


@_conv("aten.linear.default")
def _linear(cx, node, x, w, b=None):
    wt = cx.g.transpose(w, perm=[1, 0]) if len(w.shape) == 2 else w
    y = _matmul_any(cx, x, wt)
    return y if b is None else y + b


@_conv("aten._trilinear.default")
def _trilinear(cx, node, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """Each operand gets unit axes at its ``expand`` positions, the three broadcast-multiply and ``sumdim`` is
    summed away (``F.bilinear``: x1ᵀ W x2 per output feature)."""
    def spread(v: Value, dims: Any) -> Value:
        shape = list(v.shape)
        for d in sorted(dims):
            shape.insert(d, 1)
        return _reshape(cx, v, shape)

    y = spread(i1, expand1) * spread(i2, expand2) * spread(i3, expand3)
    return cx.g.reduce(y, op="sum", axes=sorted(sumdim), keep_dim=False) if sumdim else y


@_conv("aten.addmm.default")
def _addmm(cx, node, bias, a, b, beta=1, alpha=1):
    y = _matmul_any(cx, a, b)
    if alpha != 1:
        y = y * cx.scalar(alpha, y.dtype)
    if beta == 0:
        return y
    return y + (bias if beta == 1 else bias * cx.scalar(beta, bias.dtype))


# ------------------------------------------------------------------------ normalization
def _norm_affine(cx: _Ctx, value: Value | None, n: int, fill: float, dtype: DType) -> Value:
    return cx.g.constant(np.full((n,), fill, dtype=dtype.numpy)) if value is None else value


@_conv("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(cx, node, x, normalized_shape, weight=None, bias=None, eps=1e-5, *args):
    native = _target_name(node.target) == "aten.native_layer_norm.default"
    k = len(normalized_shape)
    dims = [cx.static(d, "normalized dim") for d in normalized_shape]
    n = math.prod(dims)
    w = _norm_affine(cx, weight, n, 1.0, x.dtype)
    b = _norm_affine(cx, bias, n, 0.0, x.dtype)
    if k == 1:
        y = cx.g.layer_norm(x, w, b, axis=-1, eps=float(eps))
    else:
        lead = list(x.shape[:-k])
        flat = _reshape(cx, x, [*lead, n])
        y = cx.g.layer_norm(flat, _reshape(cx, w, [n]), _reshape(cx, b, [n]), axis=-1, eps=float(eps))
        y = _reshape(cx, y, x.shape)
    return (y, *_moments(cx, node, x, len(x.shape) - k, float(eps))) if native else y


def _moments(cx: _Ctx, node: Any, x: Value, lead: int, eps: float, groups: int | None = None) -> tuple[Any, Any]:
    """Outputs 1 and 2 of native_layer_norm / native_group_norm: the mean and 1/sqrt(biased var + eps)
    over the trailing axes from ``lead`` (per group of channels), shaped as torch recorded; None when unused."""
    used = {u.args[1] for u in node.users if _target_name(u.target) == "operator.getitem"}
    if not used & {1, 2}:
        return None, None
    tail = math.prod(cx.static(d, "normalized dim") for d in x.shape[lead if groups is None else 1:])
    if groups is None:
        rows = _reshape(cx, x, [*x.shape[:lead], tail])
    else:
        rows = _reshape(cx, x, [x.shape[0], groups, tail // groups])
    mu = cx.g.mean(rows, axes=[len(rows.shape) - 1], keep_dim=True)
    centered = rows - mu
    var = cx.g.mean(centered * centered, axes=[len(rows.shape) - 1], keep_dim=True)
    rstd = cx.g.rsqrt(var + cx.scalar(eps, var.dtype))
    metas = cx.meta()[1:3]
    return tuple(_reshape(cx, v, cx.shape(m)) for v, m in zip((mu, rstd), metas))  # type: ignore[return-value]


def _channel(cx: _Ctx, v: Value, rank: int) -> Value:
    """A [C] vector laid along axis 1 of a rank-``rank`` tensor."""
    return _reshape(cx, v, [v.shape[0]] + [1] * (rank - 2))


def _batch_norm_eval(cx: _Ctx, x: Value, weight, bias, mean, var, eps: float) -> Value:
    """(x - mean) * (weight / sqrt(var + eps)) + bias per channel (axis 1), in elementwise ops."""
    rank = len(x.shape)
    if mean is None or var is None:
        raise cx.fail("batch norm without running statistics (track_running_stats=False) is not supported in eval import")
    scale = cx.g.rsqrt(var + cx.scalar(eps, var.dtype))
    if weight is not None:
        scale = scale * weight
    y = (x - _channel(cx, mean, rank)) * _channel(cx, scale, rank)
    return y if bias is None else y + _channel(cx, bias, rank)


def _saved_stats(cx: _Ctx) -> tuple[Value, Value]:
    """Outputs 1 and 2 (saved mean / inverse std) of an eval-mode batch norm: torch returns empty tensors."""
    metas = cx.meta()[1:3]
    return tuple(cx.g.constant(np.zeros(cx.shape(m), dtype=_rlx_dtype(m.dtype).numpy)) for m in metas)  # type: ignore[return-value]


@_conv("aten._native_batch_norm_legit_no_training.default")
def _bn_no_training(cx, node, x, weight, bias, mean, var, momentum, eps):
    return (_batch_norm_eval(cx, x, weight, bias, mean, var, float(eps)), *_saved_stats(cx))


@_conv("aten.batch_norm.default", "aten._native_batch_norm_legit.default", "aten.native_batch_norm.default",
       "aten._native_batch_norm_legit_functional.default")
def _batch_norm(cx, node, x, weight, bias, mean, var, training, momentum, eps, *args):
    target = _target_name(node.target)
    if training:
        if target == "aten._native_batch_norm_legit_functional.default" or (mean is None and var is None):
            from rlx.frontends.torch.state import batch_norm_train  # running stats become state updates

            out = batch_norm_train(cx, x, weight, bias, mean, var, momentum, float(eps))
            return out[0] if target == "aten.batch_norm.default" else out if "functional" in target else out[:3]
        raise cx.fail("batch norm in training mode that updates its running statistics in place is not supported "
                      "(torch.export functionalizes it; call module.eval() or import the exported program)")
    y = _batch_norm_eval(cx, x, weight, bias, mean, var, float(eps))
    if target == "aten.batch_norm.default":
        return y
    return (y, *_saved_stats(cx), mean, var) if "functional" in target else (y, *_saved_stats(cx))


@_conv("aten._native_batch_norm_legit.no_stats")
def _batch_norm_no_stats(cx, node, x, weight, bias, training, momentum, eps):
    return _batch_norm(cx, node, x, weight, bias, None, None, training, momentum, eps)


def _group_norm_values(cx: _Ctx, x: Value, num_groups: int, weight, bias, eps: float) -> Value:
    c = cx.static(x.shape[1], "channels")
    w = _norm_affine(cx, weight, c, 1.0, x.dtype)
    b = _norm_affine(cx, bias, c, 0.0, x.dtype)
    return cx.g.group_norm(x, w, b, num_groups=int(num_groups), eps=float(eps))


@_conv("aten.group_norm.default")
def _group_norm(cx, node, x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    if 0 in x.shape:  # an empty batch: an empty result (the group_norm kernel cannot view it in groups)
        return cx.g.constant(np.zeros(cx.static_out_shape(), dtype=cx.out_dtype().numpy))
    return _group_norm_values(cx, x, num_groups, weight, bias, eps)


@_conv("aten.native_group_norm.default")
def _native_group_norm(cx, node, x, weight, bias, n, c, hw, num_groups, eps):
    if 0 in x.shape:  # nothing to normalize: the (empty) results do not depend on any value
        return tuple(cx.g.constant(np.zeros(cx.shape(m), dtype=_rlx_dtype(m.dtype).numpy)) for m in cx.meta())
    y = _group_norm_values(cx, x, num_groups, weight, bias, eps)
    return (y, *_moments(cx, node, x, 2, float(eps), int(num_groups)))


@_conv("aten.rrelu_with_noise_functional.default")
def _rrelu_eval(cx, node, x, noise, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """rrelu in eval mode: a leaky relu with slope (lower + upper) / 2, the noise passed through. Training mode
    draws each slope from torch's generator: refused (nothing here reproduces torch's random stream)."""
    if training:
        raise cx.fail("rrelu in training mode draws random slopes (call module.eval() or pass training=False)")
    slope = cx.scalar((float(lower) + float(upper)) / 2, x.dtype)
    return cx.g.where(cx.g.compare(x, cx.scalar(0, x.dtype), op="ge"), x, x * slope), noise


# ------------------------------------------------------------------------------ conv
def _pair(v: Any, n: int = 2) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = [int(e) for e in v]
    return v * n if len(v) == 1 else v


def _unbatched(cx: _Ctx, x: Value, spatial: int) -> tuple[Value, bool]:
    """An unbatched input ([C, *spatial], as torch accepts) with a batch axis of 1 added."""
    if len(x.shape) == spatial + 1:
        return _reshape(cx, x, [1, *x.shape]), True
    return x, False


def _conv_nd(cx: _Ctx, x: Value, w: Value, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    if len(w.shape) == 5:
        from rlx.frontends.torch.convert_conv3d import conv_nd  # depth handled with gathers around 2-D ops

        return conv_nd(cx, x, w, b, stride, padding, dilation, groups, transposed, output_padding)
    if not x.dtype.is_float:  # integer convolution (torch has it): exact in f64 at these magnitudes
        b = None if b is None else cx.cast(b, DType.F64)
        y = _conv_nd(cx, cx.cast(x, DType.F64), cx.cast(w, DType.F64), b, stride, padding, dilation, groups, transposed,
                     output_padding)
        return cx.cast(y, x.dtype)
    x, added = _unbatched(cx, x, len(w.shape) - 2)
    if added:
        y = _conv_nd(cx, x, w, b, stride, padding, dilation, groups, transposed, output_padding)
        return _reshape(cx, y, cx.out_shape())
    rank = len(x.shape)
    if rank == 3:  # conv1d (and its transpose) as a conv2d over [N, C, 1, L]
        n, c, length = x.shape
        x = _reshape(cx, x, [n, c, 1, length])
        w = _reshape(cx, w, [w.shape[0], w.shape[1], 1, w.shape[2]])
        stride, dilation = [1, _pair(stride, 1)[0]], [1, _pair(dilation, 1)[0]]
        padding = padding if isinstance(padding, str) else [0, _pair(padding, 1)[0]]
        output_padding = [0, _pair(output_padding, 1)[0]]
    elif rank != 4:
        raise cx.fail(f"only 1-D and 2-D convolutions are supported, got input rank {rank}")
    kh, kw = w.shape[2], w.shape[3]
    stride, dilation = _pair(stride), _pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        else:  # "same", stride 1
            total = [d * (k - 1) for d, k in zip(dilation, (kh, kw))]
            if any(t % 2 for t in total):
                raise cx.fail("padding='same' with an even effective kernel needs asymmetric padding, which rlx conv2d lacks")
            padding = [t // 2 for t in total]
    padding = _pair(padding)
    if transposed:
        y = cx.g.conv_transpose2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=int(groups),
                                  output_padding=_pair(output_padding))
    else:
        y = cx.g.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=int(groups))
    if b is not None:
        y = y + _reshape(cx, b, [b.shape[0], 1, 1])
    return _reshape(cx, y, cx.out_shape()) if rank == 3 else y


@_conv("aten.conv2d.default", "aten.conv2d.padding", "aten.conv1d.default", "aten.conv1d.padding")
def _conv2d(cx, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups)


@_conv("aten.convolution.default", "aten._convolution.default")
def _convolution(cx, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups, *args):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups, bool(transposed), output_padding)


@_conv("aten.conv_transpose2d.input", "aten.conv_transpose1d.default")
def _conv_transpose2d(cx, node, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd(cx, x, w, b, stride, padding, dilation, groups, True, output_padding)


def _check_pool_shape(cx: _Ctx, y: Value, what: str) -> Value:
    if tuple(y.shape[-2:]) != cx.out_shape()[-2:]:
        raise cx.fail(f"{what}: rlx pool2d gives {list(y.shape)}, torch {list(cx.out_shape())} (ceil_mode is not supported)")
    return y


@_conv("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default")
def _max_pool2d(cx, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if _pair(dilation) != [1, 1]:
        raise cx.fail("max pooling with dilation is not supported")
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    with_indices = _target_name(node.target) == "aten.max_pool2d_with_indices.default"
    x, added = _unbatched(cx, x, 2)
    want = cx.shape(cx.meta()[0] if with_indices else cx.meta())
    extra = []
    if ceil_mode:
        k = [clipped_kernel(k[i], x.shape[2 + i], _pair(padding)[i], _pair(padding)[i]) for i in range(2)]
        extra = [(want[-2 + i] - 1) * s[i] + k[i] - (x.shape[2 + i] + 2 * _pair(padding)[i]) for i in range(2)]
    width = x.shape[3]
    x = _pad_end(cx, x, extra)  # ceil_mode: the last windows run past the end; -inf rows / columns make them exist
    if with_indices:  # torch's plane indices h * W + w (of the unpadded plane)
        y, indices = cx.g.max_pool2d_with_indices(x, kernel_size=k, stride=s, padding=_pair(padding))
        if x.shape[3] != width:
            wide = cx.scalar(x.shape[3], DType.I64)
            rows = cx.g.binary(indices, wide, op="div")
            indices = rows * cx.scalar(width, DType.I64) + (indices - rows * wide)
        if added:
            y, indices = _reshape(cx, y, want), _reshape(cx, indices, want)
        return y, indices
    y = cx.g.pool2d(x, kind="max", kernel_size=k, stride=s, padding=_pair(padding))
    if added:
        y = _reshape(cx, y, want)
    if tuple(y.shape) != tuple(want):
        raise cx.fail(f"max_pool2d: rlx pool2d gives {list(y.shape)}, torch {list(want)}")
    return y


def _pad_end(cx: _Ctx, x: Value, extra: list[Any]) -> Value:
    """x with ``extra[i]`` (when > 0) -inf rows / columns appended on spatial axis i (NCHW)."""
    for i, n in enumerate(extra):
        if not isinstance(n, int) or n <= 0:
            continue
        axis = 2 + i
        shape = list(x.shape)
        shape[axis] = n
        fill = cx.g.expand(cx.scalar(-np.inf if x.dtype.is_float else np.iinfo(x.dtype.numpy).min, x.dtype), target_shape=shape)
        x = cx.g.concat([x, fill], axis=axis)
    return x


@_conv("aten.avg_pool2d.default")
def _avg_pool2d(cx, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if not x.dtype.is_float:  # torch divides integer sums with truncation: exact in f64 for these sizes
        y = _avg_pool2d(cx, node, cx.cast(x, DType.F64), kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)
        return cx.cast(cx.g.unary_math(y, kind="trunc"), x.dtype)
    x, added = _unbatched(cx, x, 2)
    if added:
        y = _avg_pool2d(cx, node, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return _reshape(cx, y, cx.out_shape())
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    if ceil_mode and tuple(cx.out_shape()[-2:]) != _floor_pool_size(x, k, s, _pair(padding)):
        return _avg_pool_ceil(cx, x, k, s, _pair(padding), bool(count_include_pad), divisor_override)
    if divisor_override is not None:
        y = cx.g.pool2d(x, kind="sum", kernel_size=k, stride=s, padding=_pair(padding))
        return _check_pool_shape(cx, y * cx.scalar(1.0 / divisor_override, y.dtype), "avg_pool2d")
    y = cx.g.pool2d(x, kind="mean", kernel_size=k, stride=s, padding=_pair(padding), count_include_pad=bool(count_include_pad))
    return _check_pool_shape(cx, y, "avg_pool2d")


def _floor_pool_size(x: Value, k: list[int], s: list[int], p: list[int]) -> tuple[Any, ...]:
    return tuple((x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 if isinstance(x.shape[2 + i], int) else None for i in range(2))


def _avg_pool_ceil(cx: _Ctx, x: Value, k: list[int], s: list[int], p: list[int], include_pad: bool, divisor: Any) -> Value:
    """ceil_mode average pooling: window sums over x zero-extended at the end, divided by torch's count
    (the window clipped to the padded extent, or to the input without count_include_pad)."""
    out = cx.out_shape()[-2:]
    sizes = [cx.static(x.shape[2 + i], "pooled axis size") for i in range(2)]
    counts = []
    for i in range(2):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], sizes[i] + p[i])
        padded = end - start
        real = np.minimum(end, sizes[i]) - np.maximum(start, 0)
        counts.append(padded if include_pad else real)
    count = np.outer(*counts).astype(x.dtype.numpy) if divisor is None else np.full(out, divisor, x.dtype.numpy)
    k = [clipped_kernel(k[i], sizes[i], p[i], p[i]) for i in range(2)]
    extra = [(out[i] - 1) * s[i] + k[i] - (sizes[i] + 2 * p[i]) for i in range(2)]
    for i, n in enumerate(extra):
        if n > 0:
            shape = list(x.shape)
            shape[2 + i] = n
            x = cx.g.concat([x, cx.g.expand(cx.scalar(0, x.dtype), target_shape=shape)], axis=2 + i)
    total = cx.g.pool2d(x, kind="sum", kernel_size=k, stride=s, padding=p)
    return cx.g.binary(total, cx.g.constant(count), op="div")


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_pool(cx: _Ctx, x: Value, output_size: Any, op: str) -> Value:
    x, added = _unbatched(cx, x, 2)
    if added:
        return _reshape(cx, _adaptive_pool(cx, x, output_size, op), cx.out_shape() if op == "mean" else cx.shape(cx.meta()[0]))
    if len(x.shape) != 4:
        raise cx.fail(f"adaptive pooling needs an NCHW input, got rank {len(x.shape)}")
    h, w = (cx.static(d, "spatial dim") for d in x.shape[2:])
    oh, ow = (h if o is None else int(o) for o in ((output_size[0], output_size[-1]) if len(output_size) else (h, w)))
    if (oh, ow) == (1, 1):
        return cx.g.reduce(x, op=op, axes=[2, 3], keep_dim=True)
    if h % oh == 0 and w % ow == 0:
        k = [h // oh, w // ow]
        return cx.g.pool2d(x, kind=op, kernel_size=k, stride=k)
    y = x
    for axis, size, out in ((2, h, oh), (3, w, ow)):
        if size == out:
            continue
        parts = [cx.g.reduce(cx.g.narrow(y, axis, lo, hi - lo), op=op, axes=[axis], keep_dim=True)
                 for lo, hi in _adaptive_windows(size, out)]
        y = parts[0] if len(parts) == 1 else cx.g.concat(parts, axis=axis)
    return y


@_conv("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(cx, node, x, output_size):
    return _adaptive_pool(cx, x, output_size, "mean")


@_conv("aten.adaptive_max_pool2d.default")
def _adaptive_max_pool2d(cx, node, x, output_size):
    from rlx.frontends.torch.convert_conv3d import adaptive_max_with_indices, wants_indices

    if wants_indices(node):
        return adaptive_max_with_indices(cx, x, output_size, 2)
    return (_adaptive_pool(cx, x, output_size, "max"), None)


# --------------------------------------------------------------------------- attention
def _repeat_kv_heads(cx: _Ctx, t: Value, heads: int) -> Value:
    """Grouped-query attention (enable_gqa): query head h reads key/value head h // (heads / kv_heads)."""
    b, kv, s, d = t.shape
    kv = cx.static(kv, "number of key/value heads")
    if heads % kv:
        raise cx.fail(f"{heads} query heads are not a multiple of {kv} key/value heads")
    if kv == heads:
        return t
    grouped = cx.g.expand(_reshape(cx, t, [b, kv, 1, s, d]), target_shape=[-1, kv, heads // kv, -1, d])
    return _reshape(cx, grouped, [b, heads, s, d])


@_conv("aten.scaled_dot_product_attention.default")
def _sdpa(cx, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise cx.fail("attention dropout is not supported (dropout_p must be 0; call module.eval())")
    rank = len(q.shape)
    if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
        raise cx.fail(f"attention operands must all be rank 3 or 4, got {q.shape!r}, {k.shape!r}, {v.shape!r}")
    head_dim = cx.static(q.shape[-1], "head dim")
    if k.shape[-1] != head_dim or v.shape[-1] != head_dim:
        raise cx.fail("key / value head dims different from the query's are not supported")
    heads = cx.static(q.shape[1], "number of heads") if rank == 4 else 1
    if rank == 4 and (k.shape[1] != heads or v.shape[1] != heads):
        k, v = (_repeat_kv_heads(cx, t, heads) for t in (k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    dtype = q.dtype
    attrs: dict[str, Any] = {"num_heads": heads, "head_dim": head_dim, "score_scale": None if scale is None else float(scale)}
    if attn_mask is not None and is_causal:
        raise cx.fail("attn_mask together with is_causal is not supported (torch rejects it too)")
    if attn_mask is not None:
        bias = attn_mask
        if bias.dtype.is_bool:  # a dropped key's bias is finite (MASK_FILL, as the attention op's own masks): no
            # NaN on a fully masked row for an engine to spread past the Where below (OpenVINO did)
            fill = max(MASK_FILL, float(np.finfo(dtype.numpy).min))
            keep = cx.cast(bias, dtype)
            bias = cx.g.where(bias, cx.scalar(0.0, dtype), cx.scalar(fill, dtype))
            seen = cx.g.reduce(keep, op="max", axes=[len(keep.shape) - 1], keep_dim=True)
            blocked = cx.g.eq(seen, cx.scalar(0.0, dtype))
        else:
            bias = cx.cast(bias, dtype)
            blocked = cx.g.eq(cx.g.reduce(bias, op="max", axes=[len(bias.shape) - 1], keep_dim=True),
                              cx.scalar(-np.inf, dtype))
        if rank == 3 and len(bias.shape) == 3:  # [B, Sq, Sk] -> [B, 1, Sq, Sk] (one head)
            bias = _reshape(cx, bias, [bias.shape[0], 1, *bias.shape[1:]])
        out = cx.g.attention(q, k, v, bias, mask_kind="bias", **attrs)
        # torch (2.5+) gives 0, not NaN, for a query whose every key is masked (padding rows)
        if len(blocked.shape) > rank:
            blocked = _reshape(cx, blocked, [blocked.shape[0], *blocked.shape[2:]])
        return cx.g.where(blocked, cx.scalar(0.0, dtype), out)
    if is_causal:
        if sq == sk:
            return cx.g.attention(q, k, v, mask_kind="causal", **attrs)
        rows, cols = cx.static(sq, "query length"), cx.static(sk, "key length")
        keep = np.tril(np.ones((rows, cols), dtype=bool))  # torch aligns the causal mask top-left
        bias = cx.g.constant(np.where(keep, 0.0, -np.inf).astype(dtype.numpy))
        return cx.g.attention(q, k, v, bias, mask_kind="bias", **attrs)
    return cx.g.attention(q, k, v, mask_kind="none", **attrs)
