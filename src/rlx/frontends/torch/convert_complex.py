"""torch converters for building complex tensors from real parts and back: ``complex``, ``polar``,
``view_as_real`` and ``view_as_complex`` (rlx.ops.complex_parts). The views are copies in rlx (a graph
has no aliasing), which is what a functional export needs."""

from __future__ import annotations

from rlx.frontends.torch.context import _conv


@_conv("aten.complex.default")
def _complex(cx, node, real, imag):
    return cx.g.complex(real, imag)


@_conv("aten.polar.default")
def _polar(cx, node, magnitude, angle):
    """abs·cos(angle) + i·abs·sin(angle), torch's definition."""
    g = cx.g
    return g.complex(magnitude * g.cos(angle), magnitude * g.sin(angle))


@_conv("aten.view_as_real.default")
def _view_as_real(cx, node, z):
    return cx.g.view_as_real(z)


@_conv("aten.view_as_complex.default")
def _view_as_complex(cx, node, x):
    return cx.g.view_as_complex(x)
