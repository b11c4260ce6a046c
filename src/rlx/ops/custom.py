"""Extension points (docs/semantics.md#extension-points): user custom ops (:func:`custom_op`) and ``custom_fn``.

**Custom ops.** :func:`custom_op` (``rlx.custom_op``) builds an :class:`~rlx.OpDef` and
registers it through :func:`rlx.register_op`, the door every built-in op goes through: the
new op gets a ``Graph`` builder method of its name, is verified, printed, parsed, saved,
loaded, run (reference interpreter and the numpy arena executor), differentiated and
vmapped by exactly the code that handles built-in ops, through the rules given here.
``jax=`` adds a JAX lowering, registered lazily: ``import rlx`` never imports jax; the
lowering is installed in the JAX backend's table when that backend is first imported (or at
once if it already is). :func:`unregister_custom_op` removes the op, its builder method and
its JAX lowering (tests register custom ops for one test only, so that registry walks never
see them). A file that names a custom op which is not registered fails to load with
:class:`rlx.FormatError` naming the op: files are data, they never import code.

**custom_fn** (``g.custom_fn([a, b, ...], body=f, vjp_body=None, jvp_body=None)``): a
function given as a subgraph, with optional custom derivative subgraphs.

* ``body``: a graph whose ``input`` nodes (no ``param`` nodes) are bound **positionally,
  in node order**, to the operands (same types); exactly one output, the node's value.
* ``vjp_body``: its ``input`` nodes are the n primal operands (the inputs with no special
  name, in node order, same types as the operands), an input named ``"d_output"`` (the
  output cotangent, the node's type, required) and optionally one named
  ``"primal_output"`` (the node's value, the node's type). It returns n outputs: the
  gradient of each operand, in operand order, each of its operand's shape (a float dtype;
  cast to the operand's). Gradients returned for int / bool operands are ignored.
* ``jvp_body``: the n primal inputs, inputs ``"tangent_0"`` … ``"tangent_{n-1}"`` (all
  required, each of its operand's type; a zero tangent is fed as zeros) and optionally
  ``"primal_output"``. It returns one output, the output tangent (the node's shape).

Autodiff inlines ``vjp_body`` / ``jvp_body`` (so second-order derivatives differentiate the
custom rule, as in JAX). Without ``vjp_body`` the VJP differentiates ``body``; without
``jvp_body`` the JVP differentiates ``body`` (even when a ``vjp_body`` is given: give both
for a custom rule in both modes). vmap builds a ``custom_fn`` of the vmapped bodies (the
vmapped ``vjp_body`` sums the gradient of an unbatched operand over the batch), so a custom
VJP still holds under ``rlx.grad(rlx.vmap(...))``. The kernel evaluates ``body`` with the
reference interpreter (the ``subgraphs`` flag, like control flow); the JAX backend traces it.
"""

from __future__ import annotations

import keyword
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rlx.ir.attrs import AttrSpec
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import VARIADIC, OpDef, defop, has_op, register_op, unregister_op
from rlx.ir.shape import TensorType
from rlx.ops.common import broadcasting_batch
from rlx.ops.control_flow import (
    SUBGRAPHS,
    Evaluate,
    Unroll,
    graph_inputs,
    inline,
    inline_args,
    via_graph_jvp,
    via_graph_vjp,
    vmap_graph,
)

# ------------------------------------------------------------------------------ custom ops
#: JAX lowerings given to :func:`custom_op` (``fn(args, attrs, out_type) -> jax array``); the
#: JAX backend installs them when it is imported (rlx.backends.jax.lowering_custom).
JAX_LOWERINGS: dict[str, Callable[..., Any]] = {}
_CUSTOM: set[str] = set()
_JAX_MODULE = "rlx.backends.jax.lowering_custom"


#: Named batching rules accepted by ``custom_op(batch=...)``.
BATCH_RULES: dict[str, Callable[..., Any]] = {"elementwise": broadcasting_batch}


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise RlxError(f"custom op name {name!r} must be a Python identifier not starting with '_' (it becomes a Graph method)")
    member = Graph.__dict__.get(name)
    if member is not None and "_make_builder" not in getattr(member, "__qualname__", ""):
        raise RlxError(f"custom op name {name!r} clashes with the Graph attribute of that name")


def custom_op(
    name: str,
    *,
    infer: Callable[[list[TensorType], Mapping[str, Any]], TensorType],
    kernel: Callable[..., Any],
    operands: Sequence[str] = ("x",),
    attrs: Mapping[str, AttrSpec] | None = None,
    vjp: Callable[..., Any] | None = None,
    jvp: Callable[..., Any] | None = None,
    batch: Callable[..., Any] | str | None = None,
    jax: Callable[..., Any] | None = None,
    doc: str = "",
    arity: int | str | None = None,
    no_grad: bool = False,
    family: str = "custom",
    replace: bool = False,
) -> OpDef:
    """Register a user op through the registry's one door and return its :class:`~rlx.OpDef`.

    ``infer(in_types, attrs) -> TensorType`` is the shape-and-dtype rule (raise
    :class:`rlx.ShapeError`); ``kernel(args, attrs, out_type) -> np.ndarray`` the NumPy
    reference. ``operands`` names the operands (their count is the arity, unless
    ``arity=rlx.ir.opdef.VARIADIC``: operands passed as one list). ``attrs`` maps attribute
    names to :class:`rlx.AttrSpec` (typed, with defaults). ``vjp`` / ``jvp`` / ``batch``
    follow the rule contract of :mod:`rlx.autodiff.rules`; ``batch="elementwise"`` is the
    rule of an op that broadcasts like NumPy. ``no_grad=True`` declares the op nowhere
    differentiable (instead of an AutodiffError for a missing VJP). ``jax(args, attrs,
    out_type)`` lowers the op for ``rlx.compile(..., backend="jax")`` with ``jax.numpy``
    (import jax inside the function; ``rlx`` never imports it eagerly). ``replace=True``
    overrides a custom op of the same name (never a built-in op).
    """
    _check_name(name)
    if has_op(name) and (name not in _CUSTOM or not replace):
        why = "pass replace=True to override" if name in _CUSTOM else "a built-in op"
        raise RlxError(f"op {name!r} is already registered ({why})")
    if not callable(infer) or not callable(kernel):
        raise RlxError(f"custom op {name!r}: infer and kernel must be functions")
    if jax is not None and not callable(jax):
        raise RlxError(f"custom op {name!r}: jax must be a function fn(args, attrs, out_type)")
    if isinstance(batch, str):
        if batch not in BATCH_RULES:
            raise RlxError(f"custom op {name!r}: unknown batch rule {batch!r} (known: {sorted(BATCH_RULES)})")
        batch = BATCH_RULES[batch]
    operands = tuple(operands)
    flags = {"no_grad"} if no_grad else set()
    opdef = OpDef(
        name=name, family=family, arity=len(operands) if arity is None else arity, operands=operands,
        attrs=dict(attrs or {}), infer=infer, kernel=kernel, vjp=vjp, jvp=jvp, batch=batch, flags=frozenset(flags),
        doc=doc or f"custom op {name!r} (registered with rlx.custom_op)",
    )
    register_op(opdef, replace=replace)
    _CUSTOM.add(name)
    _drop_jax(name)
    if jax is not None:
        JAX_LOWERINGS[name] = jax
        if _JAX_MODULE in sys.modules:  # the JAX backend is loaded: install now
            sys.modules[_JAX_MODULE].install(name, jax)
    return opdef


def _drop_jax(name: str) -> None:
    fn = JAX_LOWERINGS.pop(name, None)
    if fn is not None and _JAX_MODULE in sys.modules:
        sys.modules[_JAX_MODULE].uninstall(name, fn)


def unregister_custom_op(name: str) -> None:
    """Remove a custom op registered with :func:`custom_op`: its registry entry, builder method and JAX lowering."""
    if name not in _CUSTOM:
        raise RlxError(f"op {name!r} was not registered with rlx.custom_op" if has_op(name) else f"unknown custom op {name!r}")
    _CUSTOM.discard(name)
    _drop_jax(name)
    if has_op(name):
        unregister_op(name)


def custom_ops() -> list[str]:
    """Names of the ops registered with :func:`custom_op`, sorted."""
    return sorted(n for n in _CUSTOM if has_op(n))


# ------------------------------------------------------------------------------ custom_fn
VJP_SPECIAL = ("primal_output", "d_output")


def _tangent_name(k: int) -> str:
    return f"tangent_{k}"


def _split_inputs(sub: Graph, special: Iterable[str]) -> tuple[list[Any], dict[str, Any]]:
    """A derivative body's inputs: primal input nodes (node order) and special ones by name."""
    special = set(special)
    primals, named = [], {}
    for node in graph_inputs(sub):
        if node.attrs["name"] in special:
            named[node.attrs["name"]] = node
        else:
            primals.append(node)
    return primals, named


def _no_params(sub: Graph, what: str) -> None:
    if any(n.op == "param" for n in sub.nodes):
        raise ShapeError(f"custom_fn: {what} must not declare params (pass weights as operands)")


def _outs(sub: Graph, what: str) -> list[TensorType]:
    if not all(0 <= i < len(sub.nodes) for i in sub.output_ids):
        raise ShapeError(f"custom_fn: an output of {what} does not exist")
    return [sub.nodes[i].type for i in sub.output_ids]


def _check_primals(nodes: list[Any], ins: Sequence[TensorType], what: str) -> None:
    if len(nodes) != len(ins):
        raise ShapeError(f"custom_fn: {what} takes {len(nodes)} primal inputs, but {len(ins)} operands are bound to it")
    for k, (node, t) in enumerate(zip(nodes, ins)):
        if node.type != t:
            raise ShapeError(f"custom_fn: {what} input {k} ({node.attrs['name']!r}) is {node.type}, but operand {k} is {t}")


def _custom_fn_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    body = attrs["body"]
    _no_params(body, "body")
    _check_primals(graph_inputs(body), ins, "body")
    outs = _outs(body, "body")
    if len(outs) != 1:
        raise ShapeError(f"custom_fn: body must have exactly 1 output, has {len(outs)}")
    out = outs[0]
    vjp_body = attrs["vjp_body"]
    if vjp_body is not None:
        _no_params(vjp_body, "vjp_body")
        primals, named = _split_inputs(vjp_body, VJP_SPECIAL)
        if "d_output" not in named:
            raise ShapeError("custom_fn: vjp_body needs an input named 'd_output' (the output cotangent)")
        _check_primals(primals, ins, "vjp_body")
        for key, node in named.items():
            if node.type != out:
                raise ShapeError(f"custom_fn: vjp_body input {key!r} is {node.type}, but the output is {out}")
        grads = _outs(vjp_body, "vjp_body")
        if len(grads) != len(ins):
            raise ShapeError(f"custom_fn: vjp_body must return one gradient per operand ({len(ins)}), returns {len(grads)}")
        for k, (gt, t) in enumerate(zip(grads, ins)):
            if gt.shape != t.shape or (t.dtype.is_float and not gt.dtype.is_float):
                raise ShapeError(f"custom_fn: vjp_body gradient {k} is {gt}, but operand {k} is {t}")
    jvp_body = attrs["jvp_body"]
    if jvp_body is not None:
        _no_params(jvp_body, "jvp_body")
        tnames = [_tangent_name(k) for k in range(len(ins))]
        primals, named = _split_inputs(jvp_body, ["primal_output", *tnames])
        _check_primals(primals, ins, "jvp_body")
        for k, key in enumerate(tnames):
            if key not in named:
                raise ShapeError(f"custom_fn: jvp_body needs an input named {key!r} (the tangent of operand {k})")
            if named[key].type != ins[k]:
                raise ShapeError(f"custom_fn: jvp_body input {key!r} is {named[key].type}, but operand {k} is {ins[k]}")
        if "primal_output" in named and named["primal_output"].type != out:
            raise ShapeError(f"custom_fn: jvp_body input 'primal_output' is {named['primal_output'].type}, but the output is {out}")
        touts = _outs(jvp_body, "jvp_body")
        if len(touts) != 1 or touts[0].shape != out.shape:
            raise ShapeError(f"custom_fn: jvp_body must return one output tangent of shape {out.shape!r}, returns {touts}")
    return out


def _custom_fn_kernel(args, attrs, out, *, evaluate: Evaluate):
    return evaluate(attrs["body"], args)[0]


def _feed(sub: Graph, special: Sequence[str], primals: Sequence[Value], named: Mapping[str, Value]) -> dict[str, Value]:
    nodes, present = _split_inputs(sub, special)
    feed = {n.attrs["name"]: v for n, v in zip(nodes, primals)}
    feed.update({k: v for k, v in named.items() if k in present})
    return feed


def _custom_fn_vjp(ctx, node, ct):
    ops = ctx.operands(node)
    want = [k for k in range(len(ops)) if ctx.wants(node, k) and ops[k].dtype.is_float]
    res: list[Any] = [None] * len(ops)
    if not want:
        return res
    g = ctx.graph
    vjp_body = node.attrs["vjp_body"]
    if vjp_body is not None:
        named = {"d_output": ct, "primal_output": ctx.output(node)}
        outs = inline(g, vjp_body, _feed(vjp_body, VJP_SPECIAL, ops, named))
        for k in want:
            res[k] = ctx.cast(outs[k], ops[k].dtype)
        return res
    return via_graph_vjp(ctx, node, ct, node.attrs["body"], want)


def _custom_fn_jvp(ctx, node, tangents):
    jvp_body = node.attrs["jvp_body"]
    if jvp_body is None:
        return via_graph_jvp(ctx, node, tangents, node.attrs["body"])
    if not node.dtype.is_float:
        return None
    ops = ctx.operands(node)
    active = [k for k, t in enumerate(tangents) if t is not None and ops[k].dtype.is_float]
    if not active:
        return None
    named: dict[str, Value] = {"primal_output": ctx.output(node)}
    for k, v in enumerate(ops):
        named[_tangent_name(k)] = ctx.cast(tangents[k], v.dtype) if k in active else ctx.zeros_like(v)
    specials = ["primal_output", *[_tangent_name(k) for k in range(len(ops))]]
    return ctx.cast(inline(ctx.graph, jvp_body, _feed(jvp_body, specials, ops, named))[0], node.dtype)


def _custom_fn_batch(ctx, node, operands, batched):
    size = ctx.batch_size
    a = node.attrs
    body_names = [n.attrs["name"] for n in graph_inputs(a["body"])]
    attrs: dict[str, Any] = {"body": vmap_graph(ctx, a["body"], {n for n, b in zip(body_names, batched) if b}, size)}
    if a["vjp_body"] is not None:
        primals, _ = _split_inputs(a["vjp_body"], VJP_SPECIAL)
        names = {n.attrs["name"] for n, b in zip(primals, batched) if b} | set(VJP_SPECIAL)
        attrs["vjp_body"] = vmap_graph(ctx, a["vjp_body"], names, size, reduce_outputs=[not b for b in batched])
    if a["jvp_body"] is not None:
        tnames = [_tangent_name(k) for k in range(len(operands))]
        primals, _ = _split_inputs(a["jvp_body"], ["primal_output", *tnames])
        names = {n.attrs["name"] for n, b in zip(primals, batched) if b} | {"primal_output"}
        names |= {t for t, b in zip(tnames, batched) if b}
        attrs["jvp_body"] = vmap_graph(ctx, a["jvp_body"], names, size)
    return ctx.graph.custom_fn(list(operands), **attrs)


defop(
    name="custom_fn", family="extension", arity=VARIADIC, min_arity=1, operands=("args",),
    attrs={"body": AttrSpec("graph", doc="args -> one output (inputs bound positionally in node order)"),
           "vjp_body": AttrSpec("graph", default=None,
                                doc="(args..., d_output[, primal_output]) -> one gradient per arg; None: differentiate body"),
           "jvp_body": AttrSpec("graph", default=None,
                                doc="(args..., tangent_0..tangent_{n-1}[, primal_output]) -> output tangent; None: differentiate body")},
    infer=_custom_fn_type, kernel=_custom_fn_kernel, flags={SUBGRAPHS},
    vjp=_custom_fn_vjp, jvp=_custom_fn_jvp, batch=_custom_fn_batch,
    unroll=Unroll(lambda dst, attrs, orig, bodies, ins, policy: ("inlined_custom_fn", inline_args(dst, bodies["body"], ins)[:1])),
    doc="A function given as a subgraph, with optional custom derivatives: operands (one list) are bound "
    "positionally to body's inputs (node order, same types); body has one output, the node's value. "
    "vjp_body takes the primals (inputs with other names, node order), 'd_output' (required) and optionally "
    "'primal_output', and returns one gradient per operand (operand shapes); jvp_body takes the primals, "
    "'tangent_0'..'tangent_{n-1}' (all required; zeros for zero tangents) and optionally 'primal_output', and "
    "returns the output tangent. Autodiff inlines the custom bodies; a missing body means body itself is "
    "differentiated (for the JVP too when only vjp_body is given). vmap: a custom_fn of the vmapped bodies.",
)

