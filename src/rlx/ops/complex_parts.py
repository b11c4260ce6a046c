"""Complex numbers from and to their real parts: ``complex`` (re, im -> z), ``view_as_real`` (z -> [..., 2])
and ``view_as_complex`` ([..., 2] -> z). f32 parts make c64, f64 parts c128.

Exact on every value (no arithmetic: ``re + 1j·im`` would turn an infinite part into NaN). Autodiff in
JAX's convention (:mod:`rlx.autodiff.rules`): a cotangent c of z pairs with dz as Re(c·dz), so z = x + iy
pulls c back to (Re c, -Im c).
"""

from __future__ import annotations

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType, broadcast_shapes
from rlx.ops.common import broadcasting_batch

_COMPLEX = {DType.F32: DType.C64, DType.F64: DType.C128}
_REAL = {c: r for r, c in _COMPLEX.items()}


def _parts_dtype(t: TensorType, what: str) -> DType:
    if t.dtype not in _COMPLEX:
        raise ShapeError(f"{what} must be f32 or f64, got {t.dtype}")
    return _COMPLEX[t.dtype]


def _complex_type(ins, attrs):
    re, im = ins
    if re.dtype != im.dtype:
        raise ShapeError(f"real and imaginary parts must share a dtype, got {re.dtype} and {im.dtype}")
    return TensorType(broadcast_shapes(re.shape, im.shape), _parts_dtype(re, "the real part"))


def _complex_kernel(args, attrs, out):
    re, im = np.broadcast_arrays(*args)
    z = np.empty(re.shape, out.dtype.numpy)
    z.real, z.imag = re, im
    return z


def _complex_vjp(ctx, node, ct):
    g = ctx.graph
    re, im = ctx.operands(node)
    parts = g.view_as_real(g.conjugate(ct))  # (Re c, -Im c)
    out = []
    for k, v in enumerate((re, im)):
        part = ctx.reshape(g.narrow(parts, axis=-1, start=k, length=1), list(ct.shape))
        out.append(ctx.unbroadcast(part, v) if ctx.wants(node, k) else None)
    return out


def _complex_jvp(ctx, node, tangents):
    re, im = ctx.operands(node)
    tr = tangents[0] if tangents[0] is not None else ctx.zeros_like(re)
    ti = tangents[1] if tangents[1] is not None else ctx.zeros_like(im)
    return ctx.graph.complex(tr, ti)


defop(
    name="complex", family="complex_parts", arity=2, operands=("re", "im"), infer=_complex_type, kernel=_complex_kernel,
    vjp=_complex_vjp, jvp=_complex_jvp, batch=broadcasting_batch, flags={"complex_ad"},
    doc="re + i·im elementwise (NumPy broadcasting) as a complex tensor: f32 parts give c64, f64 parts c128 "
    "(torch.complex). Each part is stored as given (an infinite part stays infinite, the other is untouched).",
)


def _view_as_real_type(ins, attrs):
    t = ins[0]
    if t.dtype not in _REAL:
        raise ShapeError(f"view_as_real needs a complex tensor, got {t.dtype}")
    return TensorType(Shape((*t.shape, 2)), _REAL[t.dtype])


def _view_as_real_vjp(ctx, node, ct):
    g = ctx.graph
    return [g.conjugate(g.view_as_complex(ct))]  # c = r̄0 - i·r̄1


defop(
    name="view_as_real", family="complex_parts", arity=1, operands=("z",), infer=_view_as_real_type,
    kernel=lambda args, attrs, out: np.stack([args[0].real, args[0].imag], axis=-1).astype(out.dtype.numpy),
    vjp=_view_as_real_vjp, jvp=lambda ctx, node, tangents: ctx.graph.view_as_real(tangents[0]),
    batch=lambda ctx, node, ops, batched: ctx.graph.view_as_real(ops[0]), flags={"complex_ad"},
    doc="The parts of a complex tensor [...] as a real [..., 2] (real, imaginary): c64 gives f32, c128 f64 "
    "(torch.view_as_real; a copy here, values only).",
)


def _view_as_complex_type(ins, attrs):
    t = ins[0]
    if not t.shape or t.shape[-1] != 2:
        raise ShapeError(f"view_as_complex needs a last axis of size 2, got {t.shape!r}")
    return TensorType(Shape(tuple(t.shape[:-1])), _parts_dtype(t, "view_as_complex's operand"))


def _view_as_complex_kernel(args, attrs, out):
    x = args[0]
    return _complex_kernel([x[..., 0], x[..., 1]], attrs, out)


defop(
    name="view_as_complex", family="complex_parts", arity=1, operands=("x",), infer=_view_as_complex_type,
    kernel=_view_as_complex_kernel,
    vjp=lambda ctx, node, ct: [ctx.graph.view_as_real(ctx.graph.conjugate(ct))],
    jvp=lambda ctx, node, tangents: ctx.graph.view_as_complex(tangents[0]),
    batch=lambda ctx, node, ops, batched: ctx.graph.view_as_complex(ops[0]), flags={"complex_ad"},
    doc="A real [..., 2] (real, imaginary) read as a complex tensor [...]: f32 gives c64, f64 c128 "
    "(torch.view_as_complex; a copy here).",
)
