"""Import a ``torch.nn.Module`` into an rlx MIR graph through ``torch.export``.

Pipeline: ``torch.export.export(module, args, kwargs, dynamic_shapes=...)`` gives an
``ExportedProgram``; ``run_decompositions`` is then called with torch's default (core ATen)
table *minus every op this module converts itself*, so high-level ops such as ``linear``,
``layer_norm`` or ``scaled_dot_product_attention`` stay whole (and map onto single rlx ops),
while ops without a converter are decomposed into core ATen where torch knows how. Each
remaining FX node is converted by a small function (one ``convert_*`` module per family) looked up in
the registry ``context._CONVERTERS`` by its overload name (``"aten.add.Tensor"``) or packet name (``"aten.add"``).

Graph signature:

* user inputs become ``input`` nodes named like the placeholders (the ``forward`` argument
  names for top-level tensors);
* parameters **and buffers** (persistent or not) become ``param`` nodes named by their fully
  qualified name (``"encoder.0.norm1.weight"``, ``"bn.running_mean"``); their values are
  returned in the ``params`` dict under the same names, as NumPy arrays. Parameters and
  buffers the exported graph never reads (e.g. BatchNorm's ``num_batches_tracked`` in eval
  mode) are left out of both;
* lifted tensor constants (tensors created in ``forward``) become ``constant`` nodes;
* the graph outputs are the module's outputs, flattened in pytree order, named after the output
  structure (``"logits"``, ``"last_hidden_state"``, ``"1.0"`` for tuples) when there are several;
* every converted node's provenance label is the module path it ran in (the innermost entry of
  torch's ``nn_module_stack``, e.g. ``"model.layers.0.self_attn.q_proj"``): drawings cluster by it
  and ``rlx inspect`` prints it.

Symbolic dims: a ``torch.export.Dim("batch")`` in ``dynamic_shapes`` becomes the rlx symbol
``"batch"``, with the range torch records for it (``Dim("batch", min=2, max=64)`` -> the graph's
``symbol batch in [2, 64]``); other symbols keep torch's name (``"s0"``). A dim that is an expression of
symbols (``2*batch``, ``(seq + 1)//2``) becomes the same rlx dim expression; operations rlx
dims lack raise :class:`TorchImportError` naming the node. Creation ops (``arange``, ``full``, ``zeros`` …) must have static sizes.

Every converted node's rlx type is checked against torch's recorded meta (shape and dtype);
a dtype difference caused by promotion rules is fixed with a ``cast``.

Errors: every problem raises a :class:`TorchImportError` (an :class:`rlx.RlxError`); ops
without a converter are reported all at once, with counts, by :class:`UnsupportedOpError`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.frontends.torch import (  # each registers its converters on import
    convert_basic,
    convert_complex,  # noqa: F401  (complex / polar / view_as_real / view_as_complex)
    convert_conv3d,  # noqa: F401  (3-D conv / pool, adaptive max pool indices: gathers around the 2-D ops)
    convert_fft,  # noqa: F401  (torch.fft: r2c / c2c / c2r)
    convert_grid,  # noqa: F401  (grid_sampler 2-D / 3-D)
    convert_index,  # noqa: F401  (index / index_put / gather / slice_scatter / select_scatter / copy)
    convert_linalg,  # noqa: F401  (torch.linalg factorizations and solvers)
    convert_math,  # (log1p, atan2, round, any / all, sort, histc, empty)
    convert_moe,  # noqa: F401  (grouped expert matmuls, transformers' grouped_mm_fallback)
    convert_nn,  # noqa: F401  (linear algebra, normalization, conv / pool, attention)
    convert_pad,  # noqa: F401  (every pad mode, vector norms)
    convert_reduce,
    convert_resize,  # noqa: F401  (upsample_* / interpolate in every mode)
    convert_scatter,  # noqa: F401  (scatter / scatter_reduce / index_reduce / put / masked_scatter / mode ...)
    convert_shape,  # noqa: F401  (views, slices, concatenation, embedding)
    convert_special,  # noqa: F401  (torch.special: Bessel, erfinv, zeta, igamma, polynomials, gcd, frexp)
)
from rlx.frontends.torch.context import (
    _CONVERTERS,
    _IGNORED,
    TorchImportError,
    UnsupportedOpError,
    _Ctx,
    _lookup,
    _rlx_dtype,
    _target_name,
    _to_numpy,
    supported_ops,
)
from rlx.frontends.torch.tied import canonical_names
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Origin, Provenance, Value
from rlx.ops.kinds import UNARY_MATH_KINDS

__all__ = ["TorchImportError", "UnsupportedOpError", "import_module", "import_program", "supported_ops"]



# -------------------------------------------------------------------------------- import
def _decomposition_table() -> Any:
    """torch's default core-ATen table without the ops converted here (they stay whole)."""
    from torch.export import default_decompositions

    table = default_decompositions()
    for op in list(table.keys()):
        if _lookup(op) is not None:
            table.pop(op)
    return table


def _unconverted(ep: Any) -> set[Any]:
    return {n.target for n in ep.graph.nodes if n.op == "call_function" and not isinstance(n.target, str)
            and _target_name(n.target) not in _IGNORED and _lookup(n.target) is None}


def _fallback_decomposition(op: Any) -> Any:
    """A decomposition of an op with no converter: torch's full table (not only the core-ATen one), else
    the op's own CompositeImplicitAutograd kernel, else the Python function of a ``torch.library.custom_op``
    (transformers registers some); a function that cannot be traced leaves the op unsupported."""
    import torch
    from torch._decomp import decomposition_table

    fn = decomposition_table.get(op)
    if fn is not None:
        return fn
    if isinstance(op, torch._ops.OpOverload):
        key = torch._C.DispatchKey.CompositeImplicitAutograd
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key):
            return op.decompose
        from torch._library.custom_ops import OPDEFS

        opdef = OPDEFS.get(op._schema.name)  # torch.library.custom_op: its Python function, traced
        if opdef is not None and not opdef._is_inplace:
            return opdef._init_fn
    return None


def _decompose_unconverted(ep: Any) -> Any:
    """Ops left without a converter after the core-ATen pass, decomposed once more where torch knows
    how (``upsample_bilinear2d``, ``logaddexp`` ...). Ops it cannot decompose stay (and are reported)."""
    from rlx.frontends.torch.custom_decomp import custom_decomposition

    left = _unconverted(ep)
    for op in sorted(left, key=str):
        custom = custom_decomposition(op, ep)  # torch-level bodies: decomposed on to core ATen in the same pass
        fn = custom or _fallback_decomposition(op)
        if fn is None:
            continue
        try:
            tried = ep.run_decompositions({**_decomposition_table(), op: fn} if custom else {op: fn})
        except Exception:  # a decomposition that cannot trace (data-dependent): report the op itself
            continue
        now = _unconverted(tried)
        if op not in now and now <= left:  # kept only when it leaves nothing new unconverted (no prims)
            ep, left = tried, now
    return ep


def _symbol_names(module: Any, args: tuple, kwargs: dict, dynamic_shapes: Any, ep: Any) -> dict[str, str]:
    """torch symbol (``s0``) -> rlx name, from the ``Dim`` objects named in ``dynamic_shapes``."""
    import torch

    if dynamic_shapes is None:
        return {}
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    if isinstance(dynamic_shapes, Mapping):
        specs = dict(dynamic_shapes)
    else:
        names = params[: len(args)] + list(kwargs)
        specs = dict(zip(names, dynamic_shapes))
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    found: dict[str, str] = {}
    for arg_name, spec in specs.items():
        node = placeholders.get(arg_name)
        val = None if node is None else node.meta.get("val")
        if val is None or not hasattr(val, "shape") or spec is None:
            continue
        items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
        for axis, dim in items:
            name = getattr(dim, "__name__", None)
            if name is None or not isinstance(axis, int) or axis >= len(val.shape):
                continue
            size = val.shape[axis]
            if isinstance(size, torch.SymInt) and getattr(size.node.expr, "is_Symbol", False):
                found[str(size.node.expr)] = name
    return found


def import_module(
    module: Any,
    example_args: Any = (),
    dynamic_shapes: Any = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    strict: bool = False,
    name: str | None = None,
) -> tuple[Graph, dict[str, np.ndarray]]:
    """Export ``module`` with ``torch.export`` and convert it: returns ``(graph, params)``.

    ``example_args`` is a tuple of example inputs (a single tensor is accepted too);
    ``kwargs`` holds example keyword inputs; ``dynamic_shapes`` is passed to
    ``torch.export.export`` as is (``Dim`` names become rlx symbol names). ``params`` maps
    each parameter and buffer FQN the graph reads to a NumPy array; a tied tensor is named in the graph as
    ``named_parameters()`` names it, and ``params`` answers its other names too (:mod:`.tied`).
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise TorchImportError("rlx.torch.import_module needs torch (pip install 'rlx[torch]')") from exc
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"import_module expects a torch.nn.Module, got {type(module).__name__}")
    args = (example_args,) if isinstance(example_args, torch.Tensor) else tuple(example_args)
    kw = dict(kwargs or {})
    try:
        ep = torch.export.export(module, args, kw or None, dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as exc:
        raise TorchImportError(f"torch.export failed for {type(module).__name__}: {type(exc).__name__}: {exc}") from exc
    symbols = _symbol_names(module, args, kw, dynamic_shapes, ep)
    g, params = import_program(ep, name=name or type(module).__name__, symbols=symbols, training=bool(module.training))
    return canonical_names(module, g, params)  # tied weights under every named_parameters() name


def import_program(ep: Any, *, name: str = "torch_module", symbols: Mapping[str, str] | None = None,
                   decompose: bool = True, training: bool = False) -> tuple[Graph, dict[str, np.ndarray]]:
    """Convert a ``torch.export.ExportedProgram`` (see :func:`import_module`); ``training``: the module
    was in training mode, so gradient-only rules apply (an embedding's ``padding_idx`` row gets no gradient)."""
    from torch.export.graph_signature import InputKind

    from rlx.frontends.torch.state import output_plan, remember_buffers

    if decompose:
        try:
            ep = ep.run_decompositions(_decomposition_table())
        except Exception as exc:
            raise TorchImportError(f"run_decompositions failed: {type(exc).__name__}: {exc}") from exc
        ep = _decompose_unconverted(ep)
    ep = _without_effect_tokens(ep)
    gm = ep.graph_module
    nodes = list(gm.graph.nodes)

    missing: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for node in nodes:
        if node.op == "call_function" and _target_name(node.target) not in _IGNORED and _lookup(node.target) is None:
            missing[_target_name(node.target)] += 1
        elif node.op in ("call_module", "call_method"):
            missing[f"{node.op}:{node.target}"] += 1
        else:
            continue
        path = _module_path(node)
        if path:
            where.setdefault(_target_name(node.target) if node.op == "call_function" else f"{node.op}:{node.target}", []).append(path)
    if missing:
        raise UnsupportedOpError(missing, where)

    out_plan = output_plan(ep, TorchImportError)  # buffer / input mutations become extra outputs (state.py)

    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    state = dict(ep.state_dict)
    constants = dict(getattr(ep, "constants", {}) or {})
    g = Graph(name, ranges=_symbol_ranges(ep, symbols or {}))
    cx = _Ctx(g, symbols or {})
    cx.training = training
    params: dict[str, np.ndarray] = {}
    modules: dict[int, str] = {}  # rlx node id -> module path of the FX node it came from
    import torch

    for node in nodes:
        cx.node = node
        if node.op == "placeholder":
            cx.env[node.name] = _placeholder(cx, node, specs.get(node.name), state, constants, params, InputKind)
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise cx.fail(f"get_attr of a {type(value).__name__} is not supported")
            cx.env[node.name] = g.constant(_to_numpy(value), name=node.target)
        elif node.op == "call_function":
            if _target_name(node.target) in _IGNORED:
                cx.env[node.name] = None
                continue
            first = len(g.nodes)
            cx.env[node.name] = _convert(cx, node)
            path = _module_path(node)
            g.stamp_origin(first, Origin("torch", _target_name(node.target), node.name, path))
            if path:
                modules.update(dict.fromkeys(range(first, len(g.nodes)), path))
        elif node.op == "output":
            outs = []
            for item in _flatten(node.args[0]):
                value = cx.env[item.name] if hasattr(item, "name") and item.name in cx.env else item
                if isinstance(value, Value):
                    outs.append(value)
                elif isinstance(value, (int, float, bool)):
                    outs.append(g.constant(np.asarray(value)))
                else:
                    raise cx.fail(f"graph output {item!r} is not a tensor")
            g.set_outputs(out_plan.reorder(outs))
    _drop_unused_params(g, params)
    return remember_buffers(out_plan.mark(_named(g, modules, _output_names(ep) + [None] * out_plan.extra)), ep), params


def _without_effect_tokens(ep: Any) -> Any:
    """torch.export threads ops with side effects (the error checks after linalg's ``_ex`` ops) through
    ``with_effects`` and token inputs / outputs, which carry no data: the program is read unwrapped."""
    if not any(n.op == "call_function" and _target_name(n.target) == "with_effects" for n in ep.graph.nodes):
        return ep
    from torch.export._remove_effect_tokens_pass import _remove_effect_tokens

    return _remove_effect_tokens(ep)


def _symbol_ranges(ep: Any, names: Mapping[str, str]) -> dict[str, tuple[int, int | None]]:
    """rlx name -> (lo, hi) of each symbol torch bounds (``Dim("batch", min=2, max=64)``): torch's
    lower bound 0 (its default) is rlx's default 1, and an unbounded top (``int_oo``) stays unbounded."""
    out: dict[str, tuple[int, int | None]] = {}
    for sym, vr in (getattr(ep, "range_constraints", None) or {}).items():
        if not getattr(sym, "is_Symbol", False):
            continue
        lo = max(int(vr.lower), 1) if getattr(vr.lower, "is_Integer", False) else 1
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else None
        if lo > 1 or hi is not None:
            out[names.get(str(sym), str(sym))] = (lo, hi)
    return out


def _module_path(node: Any) -> str | None:
    """The innermost module of an FX node's ``nn_module_stack`` (``"model.layers.0.self_attn"``)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()), ("",))[0] if stack else ""
    return path or None


def _output_names(ep: Any) -> list[str | None]:
    """A name per flattened output from the output pytree (``"logits"``, ``"past_key_values.0.1"``)."""
    spec = getattr(getattr(ep, "call_spec", None), "out_spec", None)
    names: list[str | None] = []

    def walk(node: Any, prefix: str) -> None:
        if node is None or node.is_leaf():
            names.append(prefix or None)
            return
        keys = node.context if isinstance(node.context, (list, tuple)) and len(node.context) == node.num_children else \
            range(node.num_children)
        for key, child in zip(keys, node.children_specs):
            walk(child, f"{prefix}.{key}" if prefix else str(key))

    walk(spec, "")
    return names if len(names) > 1 or names != [None] else []


def _named(g: Graph, modules: Mapping[int, str], out_names: Sequence[str | None]) -> Graph:
    """``g`` rebuilt (same ids) with each converted node's module path as its provenance label (drawings
    cluster by it, ``inspect`` shows it) and the outputs named after the module's output structure."""
    names: dict[int, str] = {}
    if len(out_names) == len(g.output_ids):
        for oid, name in zip(g.output_ids, out_names):
            if name and g.output_ids.count(oid) == 1 and g.node(oid).op not in ("input", "param"):
                names[oid] = name
    out = Graph(g.name, ranges=g.symbol_ranges)
    for node in g.nodes:
        prov = dataclasses.replace(node.prov or Provenance(), label=modules[node.id]) if node.id in modules else node.prov
        out.append(node.op, node.inputs, node.attrs, name=names.get(node.id, node.name), prov=prov, type=node.types, check=False)
    out.set_outputs(g.output_ids)
    return out


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    return [x]


def _placeholder(cx: _Ctx, node: Any, spec: Any, state: dict, constants: dict, params: dict, InputKind: Any) -> Any:
    import torch

    val = cx.meta(node)
    kind = None if spec is None else spec.kind
    if not isinstance(val, torch.Tensor):
        if kind in (None, InputKind.USER_INPUT):
            return cx.dim(val) if isinstance(val, (int, torch.SymInt)) else val
        raise cx.fail(f"non-tensor input of kind {kind}")
    shape, dtype = cx.shape(val), _rlx_dtype(val.dtype)
    if kind in (None, InputKind.USER_INPUT):
        return cx.g.input(node.name, shape, dtype)
    target = spec.target
    if kind in (InputKind.PARAMETER, InputKind.BUFFER):
        tensor = state.get(target, constants.get(target))
        if tensor is None:
            raise cx.fail(f"no value for {kind} {target!r}")
        params[target] = _to_numpy(tensor)
        if not node.users:
            return None
        return cx.g.param(target, shape, dtype)
    if kind == InputKind.CONSTANT_TENSOR:
        tensor = constants.get(target)
        if tensor is None:
            raise cx.fail(f"no value for lifted constant {target!r}")
        return cx.g.constant(_to_numpy(tensor), name=target)
    raise cx.fail(f"inputs of kind {kind} are not supported")


def _drop_unused_params(g: Graph, params: dict[str, np.ndarray]) -> None:
    declared = g.params()
    for key in [k for k in params if k not in declared]:
        del params[key]


def _convert(cx: _Ctx, node: Any) -> Any:
    import torch
    from torch.fx.node import map_arg

    fn = _lookup(node.target)
    assert fn is not None
    args = map_arg(node.args, lambda n: cx.env[n.name])
    kwargs = map_arg(node.kwargs, lambda n: cx.env[n.name])
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory", "layout", "memory_format", "non_blocking")}
    try:
        result = fn(cx, node, *args, **kwargs)
    except TorchImportError:
        raise
    except RlxError as exc:
        raise cx.fail(f"{type(exc).__name__}: {exc}") from exc
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise cx.fail(f"cannot convert ({type(exc).__name__}: {exc})") from exc
    val = cx.meta()
    if isinstance(result, Value) and isinstance(val, torch.Tensor):
        return _check_type(cx, result, val)
    if isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
        checked = [_check_type(cx, r, v) if isinstance(r, Value) and isinstance(v, torch.Tensor) else r for r, v in zip(result, val)]
        return type(result)(checked) if isinstance(result, tuple) else checked
    return result


def _check_type(cx: _Ctx, v: Value, val: Any) -> Value:
    shape, dtype = cx.shape(val), _rlx_dtype(val.dtype)
    if tuple(v.shape) != shape:
        raise cx.fail(f"converted to shape {list(v.shape)} but torch recorded {list(shape)}")
    return cx.cast(v, dtype)



# The kind rows' aten names register last: a row names the aten op computing exactly its kind,
# so it wins over a hand converter above (rlx.ops.kinds; CONTRIBUTING.md).
for _name, _kind in convert_basic._UNARY.items():
    _CONVERTERS[f"{_name}.default"] = convert_basic._unary(_kind)
for _kind, _row in UNARY_MATH_KINDS.items():
    for _name in _row.torch:
        _CONVERTERS[f"{_name}.default"] = convert_reduce._unary_math(_kind)
_CONVERTERS["aten.sign.default"] = convert_math.sign_of(_CONVERTERS["aten.sign.default"])  # a bool is its own sign
