"""Fills :data:`rlx.ops.splat_backward_lower.RENDER_VJP`: the reverse-mode derivative of the forward
splat body, so ``gaussian_splat_render_backward`` has a primitive-only decomposition.

The ops layer may not import autodiff (docs/architecture.md, "Layering"), so this module, one
layer up, registers the builder there (dependency inversion); rlx's package init imports it.
The derivative is :func:`rlx.autodiff.grad` of a standalone graph holding
:func:`rlx.ops.splat_lower.render_body`, inlined into the graph being rewritten.
"""

from __future__ import annotations

from typing import Any

from rlx.autodiff.reverse import SEED, grad
from rlx.ir.graph import Graph, Value
from rlx.ops.splat import SCENE_OPERANDS
from rlx.ops.splat_backward_lower import RENDER_VJP
from rlx.ops.splat_lower import render_body
from rlx.opt.graph_edit import inline_into


def render_vjp(g: Graph, scene: list[Value], d_rgba: Value, attrs: dict[str, Any]) -> list[Value | None]:
    """Cotangents of the six scene operands of one render (batch_dims 0) for image cotangent ``d_rgba``, built in ``g``."""
    body = Graph("gaussian_splat_render_body")
    leaves = [body.input(name, v.shape, v.dtype) for name, v in zip(SCENE_OPERANDS, scene)]
    body.set_outputs([render_body(body, leaves, attrs)])
    n, sh_len = scene[3].shape[0], scene[5].shape[0]
    wrt = [i for i in range(6) if scene[i].shape[0] and (i != 5 or sh_len >= 3 * n)]
    bwd = grad(body, [SCENE_OPERANDS[i] for i in wrt], seed=SEED)
    outs = inline_into(g, bwd, {**dict(zip(SCENE_OPERANDS, scene)), SEED: d_rgba})
    grads: list[Value | None] = [None] * 6
    for i, v in zip(wrt, outs):
        grads[i] = v
    return grads


RENDER_VJP["render"] = render_vjp
