"""The contract between the autodiff / vmap drivers and the rules stored on each ``OpDef``.

Rules are ordinary functions kept in the op's registry entry (``OpDef.vjp``, ``OpDef.jvp``,
``OpDef.batch``), next to its kernel. They emit plain MIR ops through the builder methods
of ``ctx.graph`` (``g.mul``, ``g.where``, ``g.reduce`` …), so every derivative graph is an
ordinary graph: verifiable, printable, serializable, runnable by ``rlx.run``, and itself
differentiable (second order works because the rules of the emitted ops exist).

Signatures (``node`` is the *forward* node being transformed)::

    vjp(ctx: VjpContext, node, cotangent: Value) -> list[Value | None]   # one entry per operand
    jvp(ctx: JvpContext, node, tangents: list[Value | None]) -> Value | None
    batch(ctx: BatchContext, node, operands: list[Value], batched: list[bool]) -> Value

Rules for op families must follow these rules of the road:

* Read forward values with ``ctx.operand(node, i)`` / ``ctx.output(node)`` (the forward
  value recomputed in the new graph), never by node id arithmetic.
* ``vjp``: return the cotangent of each operand, or ``None`` for "no gradient" (index
  operands, conditions, operands the rule cannot reach). Return it in the operand's
  *shape*; ``ctx.unbroadcast(grad, operand)`` sums broadcast axes away and casts to the
  operand's dtype. The driver casts dtypes anyway, checks shapes, drops gradients for
  non-float operands and sums contributions to the same value. ``ctx.wants(node, i)``
  says whether operand ``i`` needs a gradient at all (a rule may skip work when not).
* ``jvp``: ``tangents[i]`` is ``None`` for a zero tangent; the rule is only called when
  at least one is not ``None``. Return the output tangent or ``None`` for zero; a tangent
  that broadcasts to the output shape, or has another float dtype, is broadcast / cast by
  the driver.
* ``batch``: operands marked ``batched`` carry a new leading batch axis of size
  ``ctx.batch_size``; the others are the per-example values unchanged. Return the batched
  result ``[batch, *node.shape]``. ``ctx.apply_broadcasting(node, operands, batched)`` is
  the whole rule for ops that broadcast like NumPy (elementwise ops, matmul):
  unbatched operands broadcast on their own, batched ones get 1-axes inserted after the
  batch axis. ``ctx.materialize(v)`` gives an unbatched value a batch axis where an op
  needs all operands batched; ``ctx.shift_axis(a)`` maps a per-example axis attribute.
* Helpers every context offers (methods, so op modules need not import autodiff):
  ``const``, ``cast``, ``unbroadcast``, ``where_zero``, ``safe``, ``zeros_like``,
  ``reshape`` (one symbolic dim allowed), ``broadcast_like`` (symbolic dims allowed),
  ``transpose_last2``, ``numel``, ``count`` (element count over axes, symbolic too), and
  the body transforms ``grad`` / ``jvp`` / ``vmap`` for rules that differentiate or batch a
  subgraph (op modules sit below autodiff and never import it);
  rule contexts add ``operand`` / ``operands`` / ``output`` / ``primal``, the vjp context
  ``wants``, the batch context ``batch_size``, ``align``, ``materialize``, ``shift_axis``,
  ``apply_broadcasting``.
* Real floats and ``c64`` are differentiated; int / bool values carry no gradient (rules
  are not called for them). Ops that are nowhere differentiable (compare, sources) carry
  the flag :data:`NO_GRAD` so that a missing rule is never silent: an op without a rule on
  a path from ``wrt`` to the outputs raises :class:`rlx.AutodiffError` naming it.
  ``no_grad`` ops with operands still need a ``batch`` rule. Ops that
  ``prepare_graph_for_ad`` removes (fused ops via ``decompose``, ``dot_general``) need no
  rules.
* Complex values follow JAX's convention. The cotangent ``c`` of a complex value ``z``
  pairs with a change ``dz`` as ``Re(c·dz)`` (no conjugate), so for a real loss ``L`` of
  ``z = x + iy`` the gradient is ``∂L/∂x − i·∂L/∂y`` (``jax.grad(lambda z: abs(z)**2)(3+4j)``
  is ``6-8j``; descend along its conjugate). Tangents are the plain pushforward. Then a
  holomorphic op's rules are its real rules unchanged (``ct·f'(z)``, ``f'(z)·t``); only
  non-holomorphic ops conjugate (``conjugate``, ``complex_norm_sq``), and a complex
  cotangent reaching a real value is cast to it, i.e. keeps its real part. Because real
  rules are silently wrong on complex values otherwise, an op whose rules are right for
  ``c64`` says so with the flag :data:`COMPLEX_AD`; any other op that meets a complex
  operand or result on a differentiable path raises :class:`rlx.AutodiffError` naming
  it. Losses (the output of ``grad``) must be real.
* Tests: every op case in ``tests/ops/cases_*.py`` with float64 feeds is gradient- and
  JVP-checked against finite differences and vmap-checked against a loop
  (``tests/autodiff``); ``OpCase.differentiable`` narrows the feeds checked.
* Use primitive ops in rules wherever that is cheap, so the derivative graph is again
  differentiable without rules on backward-kernel ops (elementwise activations are
  differentiated with elementwise primitives, not ``activation_backward``).
* Guard partial expressions so that unselected ``where`` branches stay finite (use
  ``ctx.safe(x, cond, fill)``): ``0 * inf`` in a second-order graph is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rlx.ir.dtype import DType
from rlx.ir.errors import AutodiffError
from rlx.ir.flags import NO_GRAD  # noqa: F401  (re-exported: rules and their tests read it here)
from rlx.ir.graph import Graph, Node, Value
from rlx.ir.shape import Dim, Shape
from rlx.ops.graph_helpers import (  # noqa: F401  (re-exported: the helpers rules use)
    broadcast_like,
    broadcast_to,
    cast,
    const,
    reshape,
    shape_attr,
    zeros_like,
)

#: OpDef flag: the op's vjp / jvp rules are right for ``c64`` operands and results (JAX's convention).
COMPLEX_AD = "complex_ad"


def is_diff_dtype(dtype: DType) -> bool:
    """Values of this dtype carry gradients and tangents: real floats and complex."""
    return dtype.is_float or dtype.is_complex


# ------------------------------------------------------------------------------ helpers
def unbroadcast(g: Graph, grad: Value, shape: Sequence[Dim], dtype: DType | None = None) -> Value:
    """Sum ``grad`` down to ``shape`` (the reverse of NumPy broadcasting), then cast to ``dtype``.

    Leading axes that broadcasting prepended are summed away; axes where ``shape`` has 1
    and ``grad`` does not are summed with ``keep_dim``. One ``reduce`` node per kind.
    """
    lead = len(grad.shape) - len(shape)
    if lead < 0:
        raise AutodiffError(f"unbroadcast: gradient {grad.shape!r} has lower rank than the target {Shape(shape)!r}")
    if lead:
        grad = g.reduce(grad, op="sum", axes=list(range(lead)), keep_dim=False)
    axes = [i for i, (a, b) in enumerate(zip(grad.shape, shape)) if b == 1 and a != 1]
    if axes:
        grad = g.reduce(grad, op="sum", axes=axes, keep_dim=True)
    if tuple(grad.shape) != tuple(shape):
        raise AutodiffError(f"unbroadcast: cannot reduce a gradient of shape {grad.shape!r} to {Shape(shape)!r}")
    return grad if dtype is None else cast(g, grad, dtype)


def where_zero(g: Graph, cond: Value, v: Value, *, keep_where: bool = True) -> Value:
    """``where(cond, v, 0)`` (``keep_where``) or ``where(cond, 0, v)``."""
    zero = const(g, 0.0, v.dtype)
    return g.where(cond, v, zero) if keep_where else g.where(cond, zero, v)


def safe(g: Graph, v: Value, cond: Value, fill: float) -> Value:
    """``where(cond, v, fill)``: keep ``v`` where ``cond``, a harmless constant elsewhere."""
    return g.where(cond, v, const(g, fill, v.dtype))


def numel(shape: Sequence[Dim], axes: Iterable[int], what: str) -> int:
    dims = [shape[a] for a in axes]
    if any(isinstance(d, str) for d in dims):
        raise AutodiffError(f"{what}: the reduced axes {Shape(dims)!r} must be static")
    return math.prod(dims)  # type: ignore[arg-type]


def transpose_last2(g: Graph, v: Value) -> Value:
    r = len(v.shape)
    return g.transpose(v, perm=[*range(r - 2), r - 1, r - 2])


# ------------------------------------------------------------------------------ contexts
class Helpers:
    """Graph-building helpers shared by every rule context (see the module functions)."""

    graph: Graph

    def const(self, value: float, dtype: DType) -> Value:
        return const(self.graph, value, dtype)

    def cast(self, v: Value, dtype: DType) -> Value:
        return cast(self.graph, v, dtype)

    def unbroadcast(self, grad: Value, like: Value | Sequence[Dim], dtype: DType | None = None) -> Value:
        """Sum ``grad`` to ``like``'s shape and cast to its dtype (a Value), or to a shape."""
        if isinstance(like, Value):
            return unbroadcast(self.graph, grad, like.shape, dtype or like.dtype)
        return unbroadcast(self.graph, grad, like, dtype)

    def where_zero(self, cond: Value, v: Value, keep_where: bool = True) -> Value:
        return where_zero(self.graph, cond, v, keep_where=keep_where)

    def safe(self, v: Value, cond: Value, fill: float) -> Value:
        return safe(self.graph, v, cond, fill)

    def zeros_like(self, like: Value, dtype: DType | None = None) -> Value:
        return zeros_like(self.graph, like, dtype)

    def reshape(self, v: Value, shape: Sequence[Dim]) -> Value:
        return reshape(self.graph, v, shape)

    def broadcast_like(self, v: Value, like: Value) -> Value:
        return broadcast_like(self.graph, v, like)

    def transpose_last2(self, v: Value) -> Value:
        return transpose_last2(self.graph, v)

    def numel(self, shape: Sequence[Dim], axes: Iterable[int], what: str = "rule") -> int:
        """Static element count of ``shape`` over ``axes`` (AutodiffError if symbolic)."""
        return numel(shape, axes, what)

    # body transforms: rules of ops with subgraphs (control flow, custom functions, composite
    # backward ops) get them here, so op modules never import rlx.autodiff (layering)
    def grad(self, sub: Graph, wrt: Sequence[str], seed: str) -> Graph:
        """``rlx.grad(sub, wrt, seed=seed)``: the reverse-mode graph of a one-output ``sub``."""
        from rlx.autodiff.reverse import grad

        return grad(sub, list(wrt), seed=seed)

    def jvp(self, sub: Graph, wrt: Sequence[str]) -> Graph:
        """``rlx.jvp(sub, wrt)``: outputs ``[primal outputs..., tangent outputs...]``."""
        from rlx.autodiff.forward import jvp

        return jvp(sub, list(wrt))

    def vmap(self, sub: Graph, in_axes: dict[str, int | None], batch_size: Dim) -> Graph:
        """``rlx.vmap(sub, in_axes, batch_size=batch_size)``."""
        from rlx.autodiff.vmap import vmap

        return vmap(sub, in_axes, batch_size=batch_size)

    def count(self, like: Value, axes: Sequence[int], dtype: DType | None = None) -> Value:
        """Element count of ``like`` over ``axes`` as a value of ``dtype``: a constant when
        static, else computed at run time (keep_dim form), so symbolic dims work."""
        dtype = dtype or like.dtype
        dims = [like.shape[a] for a in axes]
        if all(isinstance(d, int) for d in dims):
            return const(self.graph, float(math.prod(dims)), dtype)  # type: ignore[arg-type]
        ones = broadcast_like(self.graph, const(self.graph, 1.0, dtype), like)
        return self.graph.reduce(ones, op="sum", axes=list(axes), keep_dim=True)


class RuleContext(Helpers):
    """What every rule receives. ``graph`` is the graph being built.

    ``primal(fwd_id)`` is the forward value as a :class:`Value` of ``graph`` (forward
    nodes are recomputed in the new graph). Helpers are methods so op modules need not
    import :mod:`rlx.autodiff` (ops sit below autodiff in the layering).
    """

    def __init__(self, graph: Graph, primal_map: dict[int, int]):
        self.graph = graph
        self._primal = primal_map

    # forward values
    def primal(self, fwd_id: int) -> Value:
        return Value(self.graph, self._primal[fwd_id])

    def operand(self, node: Node, i: int) -> Value:
        return self.primal(node.inputs[i])

    def operands(self, node: Node) -> list[Value]:
        return [self.primal(i) for i in node.inputs]

    def output(self, node: Node) -> Value:
        return self.primal(node.id)

    def outputs(self, node: Node) -> list[Value]:
        """Every result of a (multi-result) forward node, result 0 first."""
        return [self.primal(node.id + r) for r in range(node.num_results)]


class VjpContext(RuleContext):
    """Reverse mode. ``wants(node, i)``: does operand ``i`` need a gradient?"""

    def __init__(self, graph: Graph, primal_map: dict[int, int], active: Callable[[int], bool]):
        super().__init__(graph, primal_map)
        self._active = active

    def wants(self, node: Node, i: int) -> bool:
        return self._active(node.inputs[i])


class JvpContext(RuleContext):
    """Forward mode. ``tangents`` passed to a rule are Values of ``graph`` or None (zero)."""


class BatchContext(Helpers):
    """vmap. ``batch_size`` is an int or a symbolic dim name; batched values carry it on axis 0."""

    def __init__(self, graph: Graph, batch_size: Dim, template: Callable[[], Value]):
        self.graph = graph
        self.batch_size = batch_size
        self._template = template

    @staticmethod
    def shift_axis(axis: int) -> int:
        """A non-negative per-example axis in the batched value (batch axis is 0)."""
        return axis + 1

    def align(self, v: Value, rank: int) -> Value:
        """A batched ``v`` ([B, *s]) reshaped to ``[B, 1.., *s]`` with per-example rank ``rank``."""
        per = list(v.shape[1:])
        if len(per) >= rank:
            return v
        return reshape(self.graph, v, [v.shape[0], *([1] * (rank - len(per))), *per])

    def materialize(self, v: Value) -> Value:
        """An unbatched ``v`` broadcast to ``[B, *v.shape]``."""
        shape = [self.batch_size, *v.shape]
        if isinstance(self.batch_size, int):
            try:
                return broadcast_to(self.graph, v, shape)
            except AutodiffError:
                pass
        t = self._template()  # bool [B]
        t = reshape(self.graph, t, [t.shape[0], *([1] * len(v.shape))])
        return self.graph.where(t, v, v)

    def apply_broadcasting(self, node: Node, operands: Sequence[Value], batched: Sequence[bool], **attrs: Any) -> Value:
        """Re-apply a NumPy-broadcasting op (elementwise, matmul) to batched operands."""
        rank = len(node.shape)
        ins = [self.align(v, rank) if b else v for v, b in zip(operands, batched)]
        return self.graph.append(node.op, ins, {**dict(node.attrs), **attrs})
