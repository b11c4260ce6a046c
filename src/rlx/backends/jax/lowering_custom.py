"""JAX lowerings of the extension ops: ``custom_fn`` (its body traced inline; autodiff has already
replaced it by its derivative graphs where needed), and the user custom ops registered with
``rlx.custom_op(..., jax=fn)``, installed here when the JAX backend is first imported (``import rlx``
never imports jax) and kept in step with later ``custom_op`` / ``unregister_custom_op`` calls.
"""

from __future__ import annotations

from typing import Any

from rlx.backends.jax.table import LOWERINGS, lowering
from rlx.ops import custom


@lowering("custom_fn")
def custom_fn(args, attrs, out):
    from rlx.backends.jax.executable import evaluate  # executable imports the lowering tables

    body = attrs["body"]
    ids = [n.id for n in body.nodes if n.op == "input"]
    return evaluate(body, dict(zip(ids, args)))[0]


def install(name: str, fn: Any) -> None:
    """Called by ``rlx.custom_op(name, jax=fn)`` once this backend is loaded."""
    LOWERINGS[name] = fn


def uninstall(name: str, fn: Any) -> None:
    """Called by ``rlx.unregister_custom_op`` (or a replacing ``custom_op``): drop the op's lowering if it is ``fn``."""
    if LOWERINGS.get(name) is fn:
        del LOWERINGS[name]


for _name, _fn in custom.JAX_LOWERINGS.items():
    install(_name, _fn)
