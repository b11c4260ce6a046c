"""torch converters for the FFT family (``torch.fft.*`` exports ``_fft_r2c`` / ``_fft_c2c`` / ``_fft_c2r``):
one rlx ``fft`` (c64, 1-D) per transformed dim. torch's ``normalization`` code scales the whole transform
(0 none, 1 by 1/sqrt(n), 2 by 1/n); per dim that is NumPy's norm name, which rlx's fft takes."""

from __future__ import annotations

import numpy as np

from rlx.frontends.torch.context import _axis, _conv, _Ctx
from rlx.ir.dtype import DType
from rlx.ir.graph import Value

_FORWARD = {0: "backward", 1: "ortho", 2: "forward"}  # unscaled forward = NumPy's "backward"
_INVERSE = {0: "forward", 1: "ortho", 2: "backward"}  # unscaled inverse = NumPy's "forward"


def _transform(cx: _Ctx, y: Value, dims: list[int], normalization: int, inverse: bool) -> Value:
    names = _INVERSE if inverse else _FORWARD
    for d in dims:
        y = cx.g.fft(y, inverse=inverse, norm=names[int(normalization)], axis=d)
    return y


def _dims(x: Value, dim) -> list[int]:
    return [_axis(d, len(x.shape)) for d in ([dim] if isinstance(dim, int) else dim)]


@_conv("aten._fft_r2c.default")
def _fft_r2c(cx, node, x, dim, normalization, onesided):
    dims = _dims(x, dim)
    y = _transform(cx, cx.cast(x, DType.C64), dims, normalization, inverse=False)
    if onesided and dims:
        n = cx.static(x.shape[dims[-1]], "fft size")
        y = cx.g.narrow(y, axis=dims[-1], start=0, length=n // 2 + 1)
    return y


@_conv("aten._fft_c2c.default")
def _fft_c2c(cx, node, x, dim, normalization, forward):
    return _transform(cx, x, _dims(x, dim), normalization, inverse=not forward)


@_conv("aten._fft_c2r.default")
def _fft_c2r(cx, node, x, dim, normalization, last_dim_size):
    """Inverse over the leading dims, then the Hermitian spectrum of the last dim rebuilt (X[n-k] conjugated
    for k past the half) and inverted; the real part is the signal (the imaginary parts of X[0] and of the
    Nyquist bin, which c2r ignores, only add an imaginary part)."""
    g = cx.g
    dims = _dims(x, dim)
    y = _transform(cx, x, dims[:-1], normalization, inverse=True)
    last, n = dims[-1], cx.static(last_dim_size, "c2r output size")
    m = cx.static(x.shape[last], "c2r input size")
    head = g.narrow(y, axis=last, start=0, length=min(m, n))
    if n > m:
        mirror = g.gather(g.conjugate(y), g.constant(np.array([n - k for k in range(m, n)], np.int64)), axis=last)
        head = g.concat([head, mirror], axis=last)
    full = _transform(cx, head, [last], normalization, inverse=True)
    return cx.cast(full, cx.out_dtype())


@_conv("aten._conj.default", "aten._conj_physical.default", "aten.conj_physical.default")
def _conj(cx, node, x):
    return cx.g.conjugate(x) if x.dtype.is_complex else x
