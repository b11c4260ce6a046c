"""The common-IR body of ``gaussian_splat_render_backward`` (upstream's logical kernel): primitives only.

The body is the reverse-mode derivative of the forward body (:func:`rlx.ops.splat_lower.render_body`)
in the six scene operands, seeded with ``d_rgba``, followed by the training options as the
reference kernel (:func:`rlx.ops.splat_kernel.backward`) applies them: loss_grad_clip clips
the seed first, sh_band zeroes the higher SH bands' gradients, max_anisotropy adds the
penalty's gradient to the log-scales, and the parts are packed in ``grad_segments`` order.

Why a hook table: deriving the body needs ``rlx.autodiff``, which sits above ``rlx.ops`` in
the layering (docs/architecture.md), so this module cannot import it. Instead the autodiff
layer registers the derivative builder in :data:`RENDER_VJP` (``rlx.autodiff.splat_body``,
imported by rlx's package init, so the table is filled whenever rlx is importable). The
discrete cuts (culling, binning, list capacity, step and transmittance limits, the α clamp)
are held fixed by construction: their compares carry no gradient, as in the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import InternalError
from rlx.ops import splat_kernel as K
from rlx.ops.splat_lower import map_scenes

#: ``"render"`` -> builder(g, scene values, d_rgba, attrs) -> six cotangents (None: no dependence), filled by the autodiff layer
RENDER_VJP: dict[str, Callable[[Any, list[Any], Any, dict[str, Any]], list[Any]]] = {}


def _first_onehot(g: Any, is_extreme: Any, dt: DType) -> Any:
    """[N, 3] 1 at the first True of each row (NumPy's argmax / argmin tie rule)."""
    f = g.cast(is_extreme, dt)
    return g.cast(g.where(is_extreme, g.eq(g.cumsum(f, axis=1), 1.0), is_extreme), dt)


def _anisotropy_grad(g: Any, log_scale: Any, limit: float, dt: DType) -> Any:
    """Gradient of Σ max(0, max(σ)/min(σ) − limit) in the log-scales [N, 3] (ratio at max, −ratio at min)."""
    hi, lo = g.max(log_scale, axes=[1], keep_dim=True), g.min(log_scale, axes=[1], keep_dim=True)
    ratio = g.exp(hi - lo)
    over = g.where(g.gt(ratio, limit), ratio, g.scalar(0.0, dt))
    return over * (_first_onehot(g, g.eq(log_scale, hi), dt) - _first_onehot(g, g.eq(log_scale, lo), dt))


def backward_body(g: Any, operands: list[Any], attrs: dict[str, Any]) -> Any:
    """Packed scene gradient [grad_length(N, K)] of one scene (see the module doc)."""
    if "render" not in RENDER_VJP:
        raise InternalError("gaussian_splat_render_backward: no derivative builder registered (import rlx, which fills it)")
    scene, d_rgba = list(operands[:7]), operands[7]
    out_dtype = scene[0].dtype
    dt = DType.F64 if out_dtype is DType.F64 else DType.F32
    n, sh_len = scene[3].shape[0], scene[5].shape[0]
    k = sh_len // (3 * n)
    seed = d_rgba if d_rgba.dtype is dt else g.cast(d_rgba, dt)
    clip = attrs["loss_grad_clip"]
    if clip > 0:
        seed = g.minimum(g.maximum(seed, g.scalar(-clip, dt)), g.scalar(clip, dt))
    grads = RENDER_VJP["render"](g, scene, seed if seed.dtype is out_dtype else g.cast(seed, out_dtype), attrs)
    parts = []
    for gr, per in zip(grads, (3, 3, 4, 1, 3, 3 * max(k, 1))):  # with no SH, an N·3 slot of zeros
        if gr is None:
            parts.append(g.constant(np.zeros(per * n, dt.numpy)))
        else:
            parts.append(g.reshape(gr if gr.dtype is dt else g.cast(gr, dt), (per * n,)))
    limit = attrs["max_anisotropy"]
    if limit > 0:
        log_s = g.reshape(scene[1] if scene[1].dtype is dt else g.cast(scene[1], dt), (n, 3))
        parts[1] = parts[1] + g.reshape(_anisotropy_grad(g, log_s, limit, dt), (3 * n,))
    dropped = [j for j in range(k) if K.sh_band(j) > attrs["sh_band"]]
    if dropped:
        keep = np.ones((1, k, 1), dt.numpy)
        keep[:, dropped] = 0
        parts[5] = g.reshape(g.reshape(parts[5], (n, k, 3)) * g.constant(keep), (3 * n * k,))
    packed = g.concat(parts, axis=0)
    return packed if out_dtype is dt else g.cast(packed, out_dtype)


def backward_decompose(g: Any, operands: list[Any], attrs: dict[str, Any]) -> Any:
    """The decompose hook of ``gaussian_splat_render_backward``: :func:`backward_body` per scene (static batch dims)."""
    def one(vals: list[Any], attrs1: dict[str, Any]) -> Any:
        if vals[3].shape[0]:
            return backward_body(g, vals, attrs1)
        return g.constant(np.zeros(0, vals[0].dtype.numpy if not vals[0].dtype.is_low_precision_float else np.float32))

    return map_scenes(g, [g.value(o) for o in operands], attrs, one)
