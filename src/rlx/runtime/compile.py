"""``rlx.compile(obj, backend="numpy")``: a runnable executable from a HIR/MIR graph or an LIR.

Backends register a factory ``(obj, **options) -> executable`` by name with
:func:`register_backend`: ``"numpy"`` here, and in :mod:`rlx.backends` (the runtime never imports
a backend) ``"jax"``, ``"torch"`` (:mod:`rlx.backends.torch_backend`), ``"onnxruntime"``
(:mod:`rlx.backends.ort_backend`) and ``"auto"`` (:mod:`rlx.backends.auto`: the fastest installed
one for the device, by the rule documented there). The built-in ``"numpy"`` backend plans the graph (unless given an LirModule) and runs it
inside one arena (:mod:`rlx.runtime.arena`). Planning options (``alignment``, ``inputs``,
``params`` policy …) pass through to :func:`rlx.plan`; ``params=`` given as a mapping binds
weights at compile time. Unless told otherwise the numpy backend plans the graph's inputs
and outputs outside the arena: each run reads the caller's input arrays where they are
(``inputs="arena"`` copies them into their slots instead) and writes the outputs into fresh
arrays it returns (``outputs="arena"``: copied out of their slots), so nothing is copied at
the boundary. ``adopt=True`` (the default) takes the fresh result of a kernel that cannot write
into its slot (an op without ``kernel_into``) as it is, instead of copying it into the slot: the
executor then never does more work than ``rlx.run``; ``adopt=False`` runs every node in its
planned slot (what proves a plan by running it). ``fold_weights=True`` (the default) computes
the nodes that depend only on params and constants (transposed or dequantised weights, folded
norms) when params are bound, not on every run; pass False when the params' memory is written
behind the executor's back (the trainer updates its arena's weight slots in place). ``kernels="jit"``
runs numba-compiled kernels (:mod:`rlx.runtime.jit_kernels`, the ``kernels`` extra) where one applies
instead of the ops' NumPy formulas: faster, equal to ``rlx.run`` within float rounding rather than bit
for bit. An LirModule is run with the plan it carries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, GraphStage
from rlx.lir.plan import BufferPlan, LirModule, plan
from rlx.lir.specialize import specialize

__all__ = ["BACKENDS", "BufferPlan", "LirModule", "compile", "plan", "register_backend", "specialize", "to_mir"]

BACKENDS: dict[str, Callable[..., Any]] = {}


def register_backend(name: str, factory: Callable[..., Any], *, replace: bool = False) -> None:
    if name in BACKENDS and not replace:
        raise RlxError(f"backend {name!r} is already registered")
    BACKENDS[name] = factory


def to_mir(obj: Any) -> Graph:
    """The MIR graph of a Graph, an LirModule or a HIR module (lowered with its own policy)."""
    if isinstance(obj, LirModule):
        return obj.graph
    if isinstance(obj, Graph) and obj.stage is GraphStage.MIR:
        return obj
    lower = getattr(obj, "lower_to_mir", None)
    if callable(lower):
        return lower()
    if isinstance(obj, Graph):
        raise RlxError(f"cannot compile graph {obj.name!r} at stage {obj.stage}: lower it to MIR first")
    raise RlxError(f"cannot compile a {type(obj).__name__}: expected a Graph, HIR module or LirModule")


_PLAN_KEYS = ("alignment", "inputs", "constants", "outputs", "inplace", "heuristics", "weight_layout", "schedule", "search")


def _numpy_backend(obj: Any, params: Any = None, adopt: bool = True, fold_weights: bool = True, kernels: str = "reference",
                   threads: int | None = None, **options: Any) -> Any:
    from rlx.runtime.arena import ArenaExecutor

    held = getattr(obj, "_lir", None)  # a GraphModule at the LIR stage holds its LirModule
    if isinstance(held, LirModule):
        obj = held

    unknown = sorted(set(options) - set(_PLAN_KEYS) - {"param_policy"})
    if unknown:
        known = sorted((*_PLAN_KEYS, "adopt", "fold_weights", "kernels", "param_policy", "params", "threads"))
        raise RlxError(f"numpy backend: unknown option(s) {unknown}; known: {known}")
    if isinstance(obj, LirModule) and not options:
        lir = obj
    else:
        kw = {"inputs": "outside", "outputs": "outside", **{k: v for k, v in options.items() if k in _PLAN_KEYS}}
        if "param_policy" in options:
            kw["params"] = options["param_policy"]
        lir = plan(to_mir(obj), **kw)
    return ArenaExecutor(lir, params=params, adopt=adopt, fold_weights=fold_weights, kernels=kernels, threads=threads)


register_backend("numpy", _numpy_backend)  # the others register by name from rlx.backends


def compile(obj: Any, backend: str = "numpy", **options: Any) -> Any:
    """Compile ``obj`` for ``backend``; ``exe.run(inputs=..., params=...)`` returns NumPy arrays."""
    factory = BACKENDS.get(backend)
    if factory is None:
        raise RlxError(f"unknown backend {backend!r}; available backends: {sorted(BACKENDS)}")
    return factory(obj, **options)
