"""The op registry: every op is one :class:`OpDef`, defined once in its family module.

Graph builder methods, the verifier, the printer and parser, the serializer and the
reference runtime all read this registry; none keeps a per-op list of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.ir.attrs import CANONICAL_CLASS, AttrSpec, normalize_attr
from rlx.ir.errors import AttributeSchemaError, RlxError, UnknownOpError
from rlx.ir.shape import TensorType

LEVELS = ("source", "mir", "fused", "hir")
#: Mixed-precision classes (``OpDef.precision``); "boundary" is the graph leaves, "f32" never lowers.
PRECISION_CLASSES = ("compute", "reduction", "elementwise", "data_movement", "boundary", "f32")
#: Work classes (``OpDef.work``) of the cost model (``rlx.cli.summary``) for an op without a ``macs``
#: rule: "none" moves data without arithmetic, "input" does one FLOP per element of operand 0
#: (reductions, norms, pooling), "output" one per result element (the default).
WORK_CLASSES = ("none", "input", "output")

InferFn = Callable[[list[TensorType], Mapping[str, Any]], TensorType]
KernelFn = Callable[[list[np.ndarray], Mapping[str, Any], TensorType], np.ndarray]
KernelIntoFn = Callable[[list[np.ndarray], Mapping[str, Any], TensorType, np.ndarray], object]  # the result is written into out
#: ``ufunc(attrs, operand dtypes, out dtype) -> (f, constants) | None`` (see :class:`OpDef`)
UfuncFn = Callable[[Mapping[str, Any], list[np.dtype], np.dtype], "tuple[np.ufunc, tuple[Any, ...]] | None"]
CanonFn = Callable[[list[TensorType], dict[str, Any]], dict[str, Any]]
ArityFn = Callable[[Mapping[str, Any]], int]
#: ``identity(attrs, operand types, out type, constants) -> operand index | None`` (``constants[i]``
#: is operand i's value when it is a constant, else None)
IdentityFn = Callable[[Mapping[str, Any], list[TensorType], TensorType, list["np.ndarray | None"]], "int | None"]
#: ``keeps_grid(attrs, rank, protected axes, copies_only) -> bool`` (see :class:`OpDef`)
GridFn = Callable[[Mapping[str, Any], int, frozenset[int], bool], bool]
#: a shape as the summary reads it: ints, or str for a symbolic dimension
Dims = tuple[Any, ...]
#: ``macs(operand shapes, result shape, attrs) -> multiply-accumulates | None`` (None: a symbolic size)
MacsFn = Callable[[list[Dims], Dims, Mapping[str, Any]], "int | None"]
#: ``text(attrs) -> str``: a compact printed form replacing ``op[attr=...]`` (``linear+bias+gelu``)
TextFn = Callable[[Mapping[str, Any]], str]

VARIADIC = "variadic"


@dataclass(eq=False)
class OpDef:
    """Everything rlx knows about one op.

    ``arity`` is an int, :data:`VARIADIC` (operands passed as one list, at least
    ``min_arity``), or a function of the attributes (e.g. attention takes a 4th operand
    only for some mask kinds). ``infer`` maps operand types and attributes to the output
    type and raises :class:`rlx.ShapeError`; ``kernel`` is the NumPy reference.
    ``kernel_into(args, attrs, out_type, out)`` (optional) writes the same result into a
    preallocated C-contiguous ``out`` of out_type's shape and dtype (never a float narrower
    than f32; an elementwise op's ``out`` may be its same-shaped operand); it is the kernel
    itself, written with an ``out=None`` keyword, so each op keeps one formula. ``ufunc`` says
    when ``kernel_into`` is one NumPy ufunc call ``f(*operands, *constants, out=out)`` on operands
    of these dtypes (the kernel reads the same table): the arena then calls ``f`` straight from its
    step, without the kernel's Python frame and dtype tests (~0.25 us a node).
    ``canonicalize`` may fill input-dependent attribute defaults (e.g. ``axes=None`` →
    every axis) before inference, so stored attributes are always explicit.
    ``methods`` maps extra builder method names to preset attributes (``gelu`` →
    ``activation(kind="gelu")``). ``decompose(g, operands, attrs) -> Value`` rebuilds a
    fused op from primitive ops in ``g`` (unfuse); ``lower(g, operands, attrs, policy)``
    lowers a HIR block into MIR ops. ``vjp`` / ``jvp`` / ``batch`` are the autodiff and
    vmap rules. ``precision`` is the op's mixed-precision class (:data:`PRECISION_CLASSES`,
    read by ``rlx.opt.precision``): a policy may run ops of the first four classes in f16 /
    bf16; ``"f32"``, the default, marks an op not known to be float16-safe, which keeps its
    precision under every policy (an op opts in, it is never lowered by omission).

    Rewrite facts, read by the passes in ``rlx.opt`` instead of tables of their own (None: the
    op makes no such promise). ``identity`` says which operand the result equals for these
    attributes, types and constant operands (``simplify``: ``x + 0``, an identity transpose);
    ``commutes(attrs)`` that the operands may be swapped (``cse``); ``keeps_grid`` that the op
    maps values on a fake-quantize grid to the same grid (``propagate_fake_quant``): every result
    element is an operand element (or its image under relu / neg / abs) whose ``protected``
    coordinates (the ones choosing its scale) are unchanged, and with ``copies_only`` the op also
    keeps max|x| of every scale group (only moves, duplicates, negates or takes abs of elements);
    ``compose(inner attrs, outer attrs)`` the attributes of the one node equal to the op applied
    twice, None where no one node is (``simplify``: a transpose of a transpose, a reshape of a reshape).

    Cost facts, read by the summary's FLOP count (``rlx.cli.summary``): ``macs`` is a contraction's
    multiply-accumulate rule (``rlx.ops.cost`` holds the shared ones; the op then does 2 FLOPs per
    MAC); an op without one does the FLOPs of its ``work`` class (:data:`WORK_CLASSES`). ``text``
    is the op's compact printed form when ``op[attr=...]`` would hide what it is (an HIR block).
    ``native_on`` names the optimizer's backends (``rlx.opt.BACKENDS``: cpu, metal, cuda, tpu …)
    that run this fused or contraction op as one kernel: their claim sets are read from it, so
    their pipelines create or keep it where the others get it decomposed. ``unroll`` (an
    :class:`rlx.ops.control_flow.Unroll`) is how ``rlx.opt.lower`` replaces an op with subgraph
    bodies by straight-line ops (inlined branches, unrolled loops). ``region_key`` marks an op
    that may join an ``elementwise_region`` (``rlx.opt.regions``): the attribute a chain step
    records as its sub-kind (``"kind"``, ``"op"``, ``"to"``; ``""``: none), None: it never joins.
    ``shown_kind`` names the attribute whose value op histograms and printers show instead of the
    op's name (``binary(op="add")`` counts as ``add``; ``rlx.hir.inspect.op_kind``).
    """

    name: str
    family: str
    arity: int | str | ArityFn
    infer: InferFn
    kernel: KernelFn | None
    doc: str
    kernel_into: KernelIntoFn | None = None
    ufunc: UfuncFn | None = None
    level: str = "mir"
    operands: tuple[str, ...] = ()
    attrs: Mapping[str, AttrSpec] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    methods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    canonicalize: CanonFn | None = None
    min_arity: int = 1
    flags: frozenset[str] = frozenset()
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    batch: Callable[..., Any] | None = None
    decompose: Callable[..., Any] | None = None
    lower: Callable[..., Any] | None = None
    precision: str = "f32"
    identity: IdentityFn | None = None
    commutes: Callable[[Mapping[str, Any]], bool] | None = None
    keeps_grid: GridFn | None = None
    compose: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any] | None] | None = None
    work: str = "output"
    macs: MacsFn | None = None
    text: TextFn | None = None
    native_on: frozenset[str] = frozenset()
    unroll: Any = None
    region_key: str | None = None
    shown_kind: str | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise RlxError(f"op {self.name!r}: level must be one of {LEVELS}, got {self.level!r}")
        if self.precision not in PRECISION_CLASSES:
            raise RlxError(f"op {self.name!r}: precision must be one of {PRECISION_CLASSES}, got {self.precision!r}")
        if self.work not in WORK_CLASSES:
            raise RlxError(f"op {self.name!r}: work must be one of {WORK_CLASSES}, got {self.work!r}")
        self.flags = frozenset(self.flags)
        self.native_on = frozenset(self.native_on)
        self._attr_order = tuple(sorted(self.attrs))
        self._defaults: dict[str, Any] | None = None  # normalized defaults, filled on first use

    @property
    def is_variadic(self) -> bool:
        return self.arity == VARIADIC

    def expected_arity(self, attrs: Mapping[str, Any]) -> int | None:
        """Number of operands for these attributes; None for variadic ops."""
        if self.arity == VARIADIC:
            return None
        if callable(self.arity):
            return self.arity(attrs)
        return int(self.arity)  # type: ignore[arg-type]

    def check_attrs(self, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Validate given attributes, fill defaults; raise AttributeSchemaError naming the field.

        The result holds every schema attribute, keys sorted (the canonical stored form)."""
        out: dict[str, Any] = {}
        for key, value in given.items():
            key = self.aliases.get(key, key)
            spec = self.attrs.get(key)
            if spec is None:
                known = ", ".join(self.attrs) or "none"
                raise AttributeSchemaError(f"{where}: unknown attribute {key!r} (known: {known})")
            if value.__class__ is CANONICAL_CLASS.get(spec.kind) and (spec.choices is None or value in spec.choices):
                out[key] = value  # already canonical: skip building the error path string
            else:
                out[key] = normalize_attr(spec, value, f"{where}.{key}")
        defaults = self._defaults
        if defaults is None:
            defaults = self._defaults = {
                k: normalize_attr(spec, spec.default, f"{self.name}.{k}") for k, spec in self.attrs.items() if not spec.required
            }
        result: dict[str, Any] = {}
        for key in self._attr_order:
            if key in out:
                result[key] = out[key]
            elif key in defaults:
                result[key] = defaults[key]
            else:
                raise AttributeSchemaError(f"{where}: missing required attribute {key!r}")
        return result


_REGISTRY: dict[str, OpDef] = {}
_METHODS: dict[str, tuple[str, Mapping[str, Any]]] = {}


def register_op(opdef: OpDef, *, replace: bool = False) -> OpDef:
    """Add an op (built-in or user custom) to the registry; the one door for every op."""
    if opdef.name in _REGISTRY and not replace:
        raise RlxError(f"op {opdef.name!r} is already registered (pass replace=True to override)")
    for method in [opdef.name, *opdef.methods]:
        owner = _METHODS.get(method)
        if owner is not None and owner[0] != opdef.name and not replace:
            raise RlxError(f"builder method {method!r} of op {opdef.name!r} is taken by op {owner[0]!r}")
    _REGISTRY[opdef.name] = opdef
    _METHODS[opdef.name] = (opdef.name, {})
    for method, preset in opdef.methods.items():
        _METHODS[method] = (opdef.name, dict(preset))
    return opdef


def unregister_op(name: str) -> None:
    """Remove an op and its builder methods (for user custom ops and tests)."""
    opdef = _REGISTRY.pop(name, None)
    if opdef is None:
        raise UnknownOpError(f"unknown op {name!r}")
    for method in [name, *opdef.methods]:
        if _METHODS.get(method, (None,))[0] == name:
            del _METHODS[method]


def defop(**fields: Any) -> OpDef:
    """Shorthand used by op family modules: ``defop(name=..., ...)`` builds and registers."""
    return register_op(OpDef(**fields))


def get_op(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownOpError(f"unknown op {name!r}") from None


def has_op(name: str) -> bool:
    return name in _REGISTRY


def all_ops() -> list[OpDef]:
    """Every registered op, sorted by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def builder_method(name: str) -> tuple[OpDef, Mapping[str, Any]] | None:
    """The op and preset attributes behind a ``Graph`` builder method name, if any."""
    entry = _METHODS.get(name)
    if entry is None:
        return None
    return _REGISTRY[entry[0]], entry[1]


def builder_methods() -> dict[str, tuple[str, Mapping[str, Any]]]:
    return dict(_METHODS)
