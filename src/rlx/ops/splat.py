"""3-D Gaussian splatting ops (docs/semantics.md#gaussian-splatting; contract and pixel algorithm in docs/splatting.md).

``gaussian_splat_render`` renders a scene of N Gaussians to ``[H·W·4]`` RGBA;
``gaussian_splat_prepare`` → ``gaussian_splat_rasterize`` is the same forward in two stages
(a packed buffer of upstream's length in between); ``gaussian_splat_render_backward`` gives the
packed scene gradients. Kernels: :mod:`rlx.ops.splat_kernel`. All four take ``batch_dims``
(leading axes mapped over, which is also their vmap rule).

Autodiff: render is differentiated in every scene operand, in reverse mode through
render_backward (exact gradients: its training options are switched off) and in forward mode
through ``gaussian_splat_render_jvp``; a derivative for ``meta`` (the camera) is refused.
``prepare_graph_for_ad`` fuses prepare → rasterize pairs back into render first. Second order
through the rasterizer is refused with AutodiffError, never silently zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import AutodiffError, ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops import splat_kernel as K
from rlx.ops.common import refuse_rule, require_float
from rlx.ops.quant import BATCH_DIMS, batch_lead, map_lead, split_lead, with_lead
from rlx.ops.splat_backward_lower import backward_decompose
from rlx.ops.splat_lower import render_decompose

#: every op of this module (the backends' host / refusal tables name them all)
SPLAT_OPS = ("gaussian_splat_render", "gaussian_splat_prepare", "gaussian_splat_rasterize", "gaussian_splat_render_backward",
             "gaussian_splat_render_jvp")
SCENE_OPERANDS = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs", "meta")
#: the largest list / splat count whose indices a float32 buffer holds exactly
MAX_EXACT_INDEX = 1 << 24

RASTER_ATTRS = {
    "width": AttrSpec("int", default=64, doc="framebuffer width W"),
    "height": AttrSpec("int", default=64, doc="framebuffer height H"),
    "tile_size": AttrSpec("int", default=16, doc="square tile edge in pixels"),
    "alpha_cutoff": AttrSpec("float", default=1 / 255, doc="alphas below it are skipped (and cull / bound splats)"),
    "max_splat_steps": AttrSpec("int", default=32, doc="most splats blended into one pixel"),
    "transmittance_threshold": AttrSpec("float", default=0.01, doc="a pixel stops once its transmittance falls below it"),
    "max_list_entries": AttrSpec("int", default=576, doc="capacity of the (tile, splat) list; extra entries are dropped"),
    "batch_dims": BATCH_DIMS,
}
RENDER_ATTRS = {**RASTER_ATTRS, "radius_scale": AttrSpec("float", default=1.6, doc="margin on a splat's binning radius")}
BACKWARD_ATTRS = {
    **RENDER_ATTRS,
    "loss_grad_clip": AttrSpec("float", default=1.0, doc="clip d_rgba elementwise to [-c, c]; <= 0: off"),
    "sh_band": AttrSpec("int", default=0, doc="highest SH band whose coefficients get gradients (3: all)"),
    "max_anisotropy": AttrSpec("float", default=10.0, doc="weight-1 penalty on max(σ)/min(σ) above it; <= 0: off"),
}


def _check_raster_attrs(attrs) -> None:
    for key in ("width", "height", "tile_size", "max_splat_steps", "max_list_entries"):
        if attrs[key] < 1:
            raise ShapeError(f"{key} must be >= 1, got {attrs[key]}")
    if attrs["max_list_entries"] > MAX_EXACT_INDEX:
        raise ShapeError(f"max_list_entries must be <= 2^24 (indices are stored as floats), got {attrs['max_list_entries']}")
    if not 0 < attrs["alpha_cutoff"] < 1:
        raise ShapeError(f"alpha_cutoff must lie in (0, 1), got {attrs['alpha_cutoff']}")
    if not 0 <= attrs["transmittance_threshold"] <= 1:
        raise ShapeError(f"transmittance_threshold must lie in [0, 1], got {attrs['transmittance_threshold']}")
    if "radius_scale" in attrs and not attrs["radius_scale"] > 0:
        raise ShapeError(f"radius_scale must be > 0, got {attrs['radius_scale']}")


def _flat_len(t: TensorType, what: str) -> int:
    require_float(t, what)
    if len(t.shape) != 1 or not isinstance(t.shape[0], int):
        raise ShapeError(f"{what} must be a flat vector of static length (after batch_dims), got {t}")
    return t.shape[0]


def scene_counts(ins: Sequence[TensorType]) -> tuple[int, int]:
    """(N splats, K SH coefficients) of the seven scene operands; ShapeError naming the bad one."""
    lengths = [_flat_len(t, name) for t, name in zip(ins, SCENE_OPERANDS)]
    n, rest = divmod(lengths[0], 3)
    if rest:
        raise ShapeError(f"positions must hold 3·N values, got {lengths[0]}")
    if n > MAX_EXACT_INDEX:
        raise ShapeError(f"at most 2^24 splats (indices are stored as floats), got {n}")
    for name, length, per in zip(SCENE_OPERANDS[1:5], lengths[1:5], (3, 4, 1, 3)):
        if length != per * n:
            raise ShapeError(f"{name} must hold {per}·N = {per * n} values (N = {n} from positions), got {length}")
    k = lengths[5] // (3 * n) if n else 0
    if lengths[5] != 3 * n * k or k not in K.SH_COUNTS:
        raise ShapeError(f"sh_coeffs must hold N·K·3 values with K in {K.SH_COUNTS} (N = {n}), got {lengths[5]}")
    if lengths[6] != K.META_FLOATS:
        raise ShapeError(f"meta must hold {K.META_FLOATS} values (camera, background, raster params), got {lengths[6]}")
    return n, k


def _scene_type(ins, attrs, length_of) -> TensorType:
    _check_raster_attrs(attrs)
    lead, core = split_lead(ins, attrs["batch_dims"])
    n, k = scene_counts(core[:7])
    return with_lead(lead, TensorType(Shape((length_of(n, k),)), core[0].dtype))


def _image_len(attrs) -> int:
    return attrs["width"] * attrs["height"] * 4


def _render_type(ins, attrs):
    return _scene_type(ins, attrs, lambda n, k: _image_len(attrs))


def _prepare_type(ins, attrs):
    return _scene_type(ins, attrs, lambda n, k: K.prep_length(n, attrs))


def _backward_type(ins, attrs):
    _, core = split_lead(ins, attrs["batch_dims"])
    if _flat_len(core[7], "d_rgba") != _image_len(attrs):
        raise ShapeError(f"d_rgba must hold H·W·4 = {_image_len(attrs)} values, got {core[7]}")
    return _scene_type(ins, attrs, K.grad_length)


def _rasterize_type(ins, attrs):
    _check_raster_attrs(attrs)
    lead, (prep, meta) = split_lead(ins, attrs["batch_dims"])
    length = _flat_len(prep, "prep")
    if _flat_len(meta, "meta") != K.META_FLOATS:
        raise ShapeError(f"meta must hold {K.META_FLOATS} values, got {meta}")
    n15 = length - K.prep_length(1, attrs) + 15
    if n15 < 15 or n15 % 15:
        raise ShapeError(f"prep holds {length} values: not a prepare buffer for these raster attributes "
                         f"(15·n + max_list + 2·tiles + 3·pixels + 11 with n >= 1)")
    return with_lead(lead, TensorType(Shape((_image_len(attrs),)), prep.dtype))


# ------------------------------------------------------------------------------ kernels
def _mapped(fn):
    """A kernel mapping ``fn(args, attrs)`` over batch_dims, in the output dtype."""
    def kernel(args, attrs, out):
        return map_lead(lambda a: fn(a, attrs), args, attrs["batch_dims"], out).astype(
            out.dtype.numpy if not out.dtype.is_low_precision_float else np.float32, copy=False)
    return kernel


def _prepare_one(args, attrs):
    scene, meta = K.scene_from(args)
    return K.pack(K.prepare(scene, meta, attrs), attrs)


def _rasterize_one(args, attrs):
    prep = K.unpack(args[0], attrs)
    meta = np.asarray(args[1], dtype=prep.rays.dtype)
    return K.composite(prep, meta[12:15], attrs)


# ------------------------------------------------------------------------------ autodiff
def _scene_cotangents(ctx, primals, ct, attrs, wants) -> list:
    """The six scene cotangents of render at ``primals`` for image cotangent ``ct`` (exact: the
    training options off), narrowed out of one render_backward; None where ``wants(i)`` is false."""
    nb = attrs["batch_dims"]
    exact = {**{k: attrs[k] for k in RENDER_ATTRS}, "loss_grad_clip": 0.0, "sh_band": 3, "max_anisotropy": 0.0}
    packed = ctx.graph.append("gaussian_splat_render_backward", [*primals, ct], exact)
    n, sh_len = primals[3].shape[nb], primals[5].shape[nb]
    lengths = [v.shape[nb] for v in primals[:5]] + [max(sh_len, 3 * n)]  # with no SH, an N·3 slot of zeros
    grads, start = [], 0
    for i, length in enumerate(lengths):
        used = sh_len if i == 5 else length
        grads.append(ctx.graph.narrow(packed, axis=nb, start=start, length=used) if wants(i) and used else None)
        start += length
    return grads


def _tangents_or_zeros(ctx, operands, tangents) -> list:
    return [ctx.zeros_like(v) if t is None else t for v, t in zip(operands, tangents)]


def _render_vjp(ctx, node, ct):
    if ctx.wants(node, 6):
        raise AutodiffError("gaussian_splat_render: no gradient with respect to meta (camera, background) is implemented")
    return [*_scene_cotangents(ctx, ctx.operands(node), ct, node.attrs, lambda i: ctx.wants(node, i)), None]


def _render_jvp(ctx, node, tangents):
    if tangents[6] is not None:
        raise AutodiffError("gaussian_splat_render: no tangent with respect to meta (camera, background) is implemented")
    ops = ctx.operands(node)
    return ctx.graph.append("gaussian_splat_render_jvp", [*ops, *_tangents_or_zeros(ctx, ops[:6], tangents[:6])], dict(node.attrs))


_STAGE_REFUSAL = refuse_rule("the packed prepare buffer is not differentiable; differentiate gaussian_splat_render "
                         "(prepare_graph_for_ad fuses a prepare → rasterize pair into it)")
_SECOND_ORDER = refuse_rule("second-order differentiation through the splat rasterizer is not implemented")


def _jvp_op_vjp(ctx, node, ct):
    """render_jvp is linear in its tangents: their cotangents are render's (render_backward); none for the primals."""
    if any(ctx.wants(node, i) for i in range(7)):
        return _SECOND_ORDER(ctx, node)
    ops = ctx.operands(node)
    return [None] * 7 + _scene_cotangents(ctx, ops[:7], ct, node.attrs, lambda i: ctx.wants(node, 7 + i))


def _jvp_op_jvp(ctx, node, tangents):
    if any(t is not None for t in tangents[:7]):
        return _SECOND_ORDER(ctx, node)
    ops = ctx.operands(node)
    return ctx.graph.append(node.op, [*ops[:7], *_tangents_or_zeros(ctx, ops[7:], tangents[7:])], dict(node.attrs))


def _jvp_type(ins, attrs):
    _, core = split_lead(ins, attrs["batch_dims"])
    for name, primal, tangent in zip(SCENE_OPERANDS, core[:6], core[7:]):
        require_float(tangent, f"t_{name}")
        if tuple(tangent.shape) != tuple(primal.shape):
            raise ShapeError(f"t_{name} must have the shape of {name} {primal.shape!r}, got {tangent}")
    return _render_type(ins[:7], attrs)


_SCENE_DOC = ("Operands (flat, float): positions [3N], log-scales [3N], rotations [4N] (xyzw, normalised here), opacity "
              "logits [N], linear RGB [3N], SH coefficients [N·K·3] (K in 0, 1, 4, 9, 16), meta [23] (camera position, "
              "target, up, fov_y°, near, far, background RGB, then the raster params as floats, which the attributes "
              "override). ")

defop(
    name="gaussian_splat_render", family="splat", arity=7, operands=SCENE_OPERANDS, attrs=RENDER_ATTRS,
    infer=_render_type, kernel=_mapped(K.render), vjp=_render_vjp, jvp=_render_jvp, batch=batch_lead, flags={"blas", "eager_unsafe"},
    decompose=render_decompose,
    doc="3-D Gaussian splat forward render (docs/semantics.md#gaussian-splatting; algorithm in docs/splatting.md) -> "
    "RGBA [H·W·4], row-major "
    "pixels. " + _SCENE_DOC + "Each pixel ray evaluates every splat listed in its tile (sorted by depth) at its "
    "closest Mahalanobis approach, α = min(sigmoid(logit)·exp(−ρ²/2), 0.99), and blends front to back until "
    "max_splat_steps splats or transmittance < transmittance_threshold; background behind. Differentiable in the "
    "six scene operands (exact; not in meta): reverse mode through gaussian_splat_render_backward, forward mode "
    "through gaussian_splat_render_jvp.",
)

defop(
    name="gaussian_splat_prepare", family="splat", arity=7, operands=SCENE_OPERANDS, attrs=RENDER_ATTRS,
    infer=_prepare_type, kernel=_mapped(_prepare_one), vjp=_STAGE_REFUSAL, jvp=_STAGE_REFUSAL, batch=batch_lead,
    flags={"blas", "eager_unsafe"},
    doc="Stage 1 of gaussian_splat_render: culling, view-dependent colour, tile binning, depth sort and pixel rays, "
    "packed into one vector of upstream's length 15n + max_list + 2·tiles + 3·pixels + 11 (n = max(N, 1); layout "
    "in docs/splatting.md; it records how many list entries were generated, so overflow is detectable). "
    + _SCENE_DOC + "Not differentiable on its own (autodiff fuses prepare → rasterize into render).",
)

defop(
    name="gaussian_splat_rasterize", family="splat", arity=2, operands=("prep", "meta"), attrs=RASTER_ATTRS,
    infer=_rasterize_type, kernel=_mapped(_rasterize_one), vjp=_STAGE_REFUSAL, jvp=_STAGE_REFUSAL, batch=batch_lead,
    flags={"blas", "eager_unsafe"},
    doc="Stage 2 of gaussian_splat_render: composites a gaussian_splat_prepare buffer (plus the background from meta) "
    "into RGBA [H·W·4]; rasterize(prepare(x)) equals render(x) bit for bit. A buffer built for another framebuffer "
    "raises RlxError at run time.",
)

defop(
    name="gaussian_splat_render_backward", family="splat", arity=8, operands=(*SCENE_OPERANDS, "d_rgba"),
    attrs=BACKWARD_ATTRS, infer=_backward_type, kernel=_mapped(K.backward), vjp=_SECOND_ORDER, jvp=_SECOND_ORDER,
    batch=batch_lead, flags={"blas", "eager_unsafe"}, decompose=backward_decompose,
    doc="Packed scene gradient of Σ d_rgba·gaussian_splat_render: [positions 3N | log-scales 3N | rotations 4N | "
    "opacity logits N | colours 3N | SH N·max(K,1)·3] (docs/semantics.md#gaussian-splatting), exact through the quaternion normalisation, "
    "the SH view direction and the colour clamp (sorting, binning and early termination held fixed). Training "
    "options: loss_grad_clip clips d_rgba first (<= 0: off), sh_band zeroes the gradient of higher SH bands, "
    "max_anisotropy adds the gradient of Σ max(0, max(σ)/min(σ) − max_anisotropy) (<= 0: off).",
)


defop(
    name="gaussian_splat_render_jvp", family="splat", arity=13,
    operands=(*SCENE_OPERANDS, *(f"t_{name}" for name in SCENE_OPERANDS[:6])), attrs=RENDER_ATTRS,
    infer=_jvp_type, kernel=_mapped(K.jvp), vjp=_jvp_op_vjp, jvp=_jvp_op_jvp, batch=batch_lead, flags={"blas", "eager_unsafe"},
    doc="Forward-mode derivative of gaussian_splat_render: the image tangent [H·W·4] at the seven operands along "
    "tangents of the six scene operands (same shapes), exact under the same conventions as render_backward (whose "
    "transpose it is). Linear in the tangents, so differentiable in them (through render_backward); second order "
    "in the primals is refused.",
)


# ------------------------------------------------------------------------------ helpers
def render_meta(camera_position: Sequence[float], camera_target: Sequence[float], camera_up: Sequence[float] = (0.0, 1.0, 0.0),
                fov_y_degrees: float = 60.0, near: float = 0.1, far: float = 100.0,
                background: Sequence[float] = (0.0, 0.0, 0.0), *, width: int = 64, height: int = 64, tile_size: int = 16,
                radius_scale: float = 1.6, alpha_cutoff: float = 1 / 255, max_splat_steps: int = 32,
                transmittance_threshold: float = 0.01, max_list_entries: int = 576) -> np.ndarray:
    """The 23-float ``meta`` operand (upstream's ``gaussian_splat_render_meta``), as an f32 array."""
    values = [*camera_position, *camera_target, *camera_up, fov_y_degrees, near, far, *background, width, height, tile_size,
              radius_scale, alpha_cutoff, max_splat_steps, transmittance_threshold, max_list_entries]
    if len(values) != K.META_FLOATS:
        raise ShapeError("render_meta: camera position, target, up and background take 3 values each")
    return np.array(values, np.float32)


def grad_segments(n_splats: int, sh_count: int) -> dict[str, slice]:
    """Where each scene gradient lies in render_backward's packed output (upstream's unpack order)."""
    sizes = {"positions": 3, "scales": 3, "rotations": 4, "opacities": 1, "colors": 3, "sh_coeffs": max(sh_count, 1) * 3}
    out, start = {}, 0
    for name, per in sizes.items():
        out[name] = slice(start, start + per * n_splats)
        start += per * n_splats
    return out


__all__ = ["SPLAT_OPS", "grad_segments", "render_meta", "scene_counts"]
