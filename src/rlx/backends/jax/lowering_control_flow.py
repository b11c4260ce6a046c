"""JAX lowerings of the structured control-flow ops: ``if_`` → ``lax.cond``, ``while_`` →
``lax.while_loop``, ``scan`` → ``lax.scan``. Bodies are traced recursively with the same
evaluator as the enclosing graph, so only the taken branch does work at run time.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from rlx.backends.jax.table import lowering
from rlx.ir.graph import Graph
from rlx.ops.control_flow import checkpoint_steps
from rlx.ops.results import one_or_tuple


def _call(body: Graph, args: list[Any]) -> list[Any]:
    """Run a body on positional arguments bound to its input nodes in node order."""
    from rlx.backends.jax.executable import evaluate  # executable imports the lowering tables

    ids = [n.id for n in body.nodes if n.op == "input"]
    return evaluate(body, dict(zip(ids, args)))


@lowering("if_")
def if_(args, attrs, out):
    pred = jnp.reshape(args[0], ()) != 0
    return lax.cond(pred, lambda ops: _call(attrs["then_branch"], ops)[0], lambda ops: _call(attrs["else_branch"], ops)[0],
                    list(args[1:]))


@lowering("while_")
def while_(args, attrs, out):
    bound = attrs["max_iterations"]

    def cond(state):
        step, carried = state
        go = jnp.all(_call(attrs["cond"], carried)[0] != 0)
        return go if bound is None else jnp.logical_and(go, step < bound)

    def body(state):
        step, carried = state
        return step + 1, [v.astype(c.dtype) for v, c in zip(_call(attrs["body"], carried), carried)]

    _, carried = lax.while_loop(cond, body, (jnp.int32(0), list(args)))
    return one_or_tuple(carried) if attrs["output"] is None else carried[attrs["output"]]


@lowering("scan")
def scan(args, attrs, out):
    nc, nb, length = attrs["num_carries"], attrs["num_bcast"], attrs["length"]
    init, bcast, xs = list(args[:nc]), list(args[nc:nc + nb]), list(args[nc + nb:])

    def step(carry, x):
        new = [v.astype(c.dtype) for v, c in zip(_call(attrs["body"], [*carry, *bcast, *x]), carry)]
        return new, (new if attrs["save_trajectory"] else None)

    final, trajectory = lax.scan(step, init, xs, length=length, reverse=attrs["reverse"])
    if not attrs["save_trajectory"]:
        return one_or_tuple(final)
    keep = attrs["num_checkpoints"]
    if 0 < keep < length:
        trajectory = [t[jnp.asarray(checkpoint_steps(length, keep))] for t in trajectory]
    return one_or_tuple(trajectory)
