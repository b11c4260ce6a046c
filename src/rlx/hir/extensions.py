"""User extensions of the HIR layer: new block ops, and named module hooks (docs/pipeline.md#hir-lowering).

* :func:`register_block` adds a HIR block op: a type rule and a ``lower(g, operands, attrs,
  policy)`` that appends its MIR ops. The block then has a builder method on every HIR graph
  (``h.<name>(...)``), is verified, printed, saved and loaded, runs (its reference kernel
  evaluates its lowering), and lowers under any :class:`~rlx.FusionPolicy`.
* :func:`register_hir_extension` names a hook ``fn(module) -> module | None`` that rewrites
  a HIR module (``None``: the module was fine as it is); :func:`apply_hir_extensions` runs
  every registered hook in registration order, :func:`apply_hir_extensions_named` the ones
  named, in the order named. Registering a name again replaces its hook, as upstream does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rlx.hir.module import GraphModule
from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import RlxError
from rlx.ir.graph import GraphStage
from rlx.ir.opdef import OpDef, has_op, register_op, unregister_op
from rlx.ir.verify import verify
from rlx.ops.hir_blocks import HIR_FAMILY, kernel_via_lowering

HirHook = Callable[[GraphModule], "GraphModule | None"]

_LOCK = threading.Lock()
_HOOKS: dict[str, HirHook] = {}
_BLOCKS: set[str] = set()


def register_block(
    name: str,
    *,
    infer: Callable[..., Any],
    lower: Callable[..., Any],
    operands: Sequence[str] = ("x",),
    attrs: Mapping[str, AttrSpec] | None = None,
    doc: str = "",
    replace: bool = False,
) -> OpDef:
    """Register a user HIR block op ``name``; ``replace=True`` overrides an earlier user block
    of that name (never a built-in op)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise RlxError(f"register_block: the name must be an identifier, got {name!r}")
    if not callable(infer) or not callable(lower):
        raise RlxError(f"register_block({name!r}): infer and lower must be functions")
    with _LOCK:
        if has_op(name) and (name not in _BLOCKS or not replace):
            why = "pass replace=True to override" if name in _BLOCKS else "a built-in op"
            raise RlxError(f"op {name!r} is already registered ({why})")
        opdef = OpDef(name=name, family=HIR_FAMILY, level="hir", arity=len(tuple(operands)), operands=tuple(operands),
                      attrs=dict(attrs or {}), infer=infer, lower=lower, kernel=kernel_via_lowering(name),
                      doc=doc or f"user HIR block {name!r} (registered with rlx.hir.register_block)")
        register_op(opdef, replace=replace)
        _BLOCKS.add(name)
    return opdef


def unregister_block(name: str) -> None:
    """Remove a block registered with :func:`register_block`."""
    with _LOCK:
        if name not in _BLOCKS:
            raise RlxError(f"{name!r} is not a user HIR block")
        _BLOCKS.discard(name)
        if has_op(name):
            unregister_op(name)


def user_blocks() -> list[str]:
    """Names of the user HIR blocks, sorted."""
    return sorted(_BLOCKS)


def register_hir_extension(name: str, fn: HirHook) -> None:
    """Register (or replace) the module hook ``name``."""
    if not isinstance(name, str) or not name:
        raise RlxError(f"register_hir_extension: the name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise RlxError(f"register_hir_extension({name!r}): the hook must be a function fn(module) -> module | None")
    with _LOCK:
        _HOOKS.pop(name, None)  # a replaced hook moves to the end of the order, as a new registration
        _HOOKS[name] = fn


def unregister_hir_extension(name: str) -> None:
    with _LOCK:
        if _HOOKS.pop(name, None) is None:
            raise RlxError(f"no HIR extension named {name!r}")


def hir_extensions() -> list[str]:
    """Registered hook names, in the order :func:`apply_hir_extensions` runs them."""
    with _LOCK:
        return list(_HOOKS)


def apply_hir_extensions(module: GraphModule) -> GraphModule:
    """Run every registered hook on ``module`` in registration order."""
    with _LOCK:
        hooks = list(_HOOKS.items())
    return _apply(module, hooks)


def apply_hir_extensions_named(module: GraphModule, names: Iterable[str]) -> GraphModule:
    """Run the hooks ``names`` in that order; an unknown name is an error before any runs."""
    names = list(names)
    with _LOCK:
        unknown = [n for n in names if n not in _HOOKS]
        if unknown:
            raise RlxError(f"no HIR extension named {unknown} (registered: {list(_HOOKS)})")
        hooks = [(n, _HOOKS[n]) for n in names]
    return _apply(module, hooks)


def _apply(module: GraphModule, hooks: list[tuple[str, HirHook]]) -> GraphModule:
    if not isinstance(module, GraphModule) or module.stage is not GraphStage.HIR:
        raise RlxError(f"HIR extensions apply to a HIR module, got {getattr(module, 'stage', type(module).__name__)}")
    for name, fn in hooks:
        out = fn(module)
        if out is None:
            continue
        if not isinstance(out, GraphModule) or out.stage is not GraphStage.HIR:
            raise RlxError(f"HIR extension {name!r} returned {type(out).__name__}, not a HIR module")
        try:
            verify(out.graph)
        except RlxError as exc:
            raise RlxError(f"HIR extension {name!r} produced an invalid module: {exc}") from exc
        module = out
    return module
