"""The window a pooling op needs, for every reader (torch, ONNX).

``ceil_mode`` lets a window run past the padded input, and a model may ask for a kernel far longer than
the axis it pools (transformers' EfficientNet pools a 7x7 map with a 1280x1280 average window). Lowered
as written, the input is extended to the window's end (zeros for a sum, -inf for a max): 1280x1280 planes,
7.8 GiB for one activation. Every window starts inside the padded axis, so no window reaches past
``start + (size + pads)``, and the part of a window beyond the padded axis reads only the extension,
which adds nothing to a sum or a max and is never counted in an average's divisor: cutting the kernel to
the padded length changes no value and bounds the extension by the strides.
"""

from __future__ import annotations

from typing import Any


def clipped_kernel(kernel: int, size: Any, pad_lo: Any, pad_hi: Any) -> int:
    """``kernel`` cut to the padded axis ``pad_lo + size + pad_hi`` (as is when a size is symbolic)."""
    padded = pad_lo + size + pad_hi
    return min(kernel, padded) if isinstance(padded, int) else kernel
