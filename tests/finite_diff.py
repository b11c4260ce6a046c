"""Central-difference gradients: the independent oracle the gradient tests compare against."""

from __future__ import annotations

import numpy as np

import rlx


def fd_gradient(g: rlx.Graph, feed: dict[str, np.ndarray], name: str, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar first output of ``g`` with respect to ``feed[name]``."""
    x = feed[name]
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        out[idx] = (rlx.run(g, {**feed, name: hi})[0] - rlx.run(g, {**feed, name: lo})[0]) / (2 * eps)
    return out
