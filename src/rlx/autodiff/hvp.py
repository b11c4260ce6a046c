"""Hessian-vector products, forward over reverse: ``jvp(grad_with_loss(g, wrt), wrt)``.

Works for every op whose rules emit differentiable ops; the elementwise rules use
primitive ops only, so activations (gelu, tanh …) need no rules on backward-kernel ops
(upstream's hvp fails on any activation, docs/pipeline.md#autodiff).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlx.autodiff.forward import build_jvp
from rlx.autodiff.prepare import label
from rlx.autodiff.reverse import _checked, build_backward
from rlx.ir.errors import AutodiffError
from rlx.ir.graph import Graph


def hvp(g: Any, wrt: Iterable[Any] | Any, *, name: str | None = None) -> Graph:
    """Hessian-vector product graph of a one-output forward.

    Inputs: the forward's inputs and params, ``d_output`` (the seed, normally 1) and one
    tangent ``t_<name>`` (the vector v) per ``wrt`` leaf. Outputs
    ``[loss, grads..., <grad, v>, H·v ...]`` (H·v in the order of ``wrt``).
    """
    fwd, ids, names = _checked(g, wrt, "hvp")
    for i, n in zip(ids, names):
        if n is None:
            raise AutodiffError(f"hvp: wrt {label(fwd, i)} is not an input or param")
    bwd = build_backward(fwd, ids, with_loss=True, name=f"{fwd.name}_grad")
    leaves = {**bwd.inputs(), **bwd.params()}
    return build_jvp(bwd, [leaves[n].id for n in names if n is not None], [n for n in names if n is not None],
                     name=name or f"{fwd.name}_hvp")
