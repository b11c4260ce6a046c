"""One lowering table for every array backend (jax, torch): how each registered op runs there.

A table starts from the rows of :mod:`rlx.ops.rows` bound to the backend's array namespace (the
op's one formula), and a backend adds lowerings for everything else and *overrides* rows with
native library calls (``@table.lowering("softmax")``); ``tests/ops/test_rows.py`` proves the
overrides equal to the rows. Nothing else is listed by op name: what is decomposed, refused,
a graph leaf or run on the host is derived from each op's :class:`~rlx.ir.opdef.OpDef`
(``decompose``, ``family``, ``level``, ``kernel``), live, so ops registered later
(``rlx.custom_op``, tests) are classified too. :meth:`LoweringTable.decomposition` builds an
op's decomposition once for both backends, multi-result ops included; :meth:`coverage` says
how every op runs (a test walks the registry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import OpDef, all_ops, get_op, has_op
from rlx.ir.shape import Shape, TensorType
from rlx.ops.rows import ROWS, bind

Lowering = Callable[[list[Any], Mapping[str, Any], Any], Any]

HIR_REASON = ("HIR block: rlx.compile lowers a HIR module to MIR (FusionPolicy) before any backend sees it; "
              "an MIR graph never holds this op")
LEAF_REASON = "bound by the executable (inputs by name from run(inputs=...), params once, results with their producer)"


class _Derived(AbstractSet[str]):
    """The names of the registered ops satisfying ``test``, read from the registry on each use."""

    def __init__(self, test: Callable[[OpDef], bool]):
        self._test = test

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and has_op(name) and self._test(get_op(name))

    def __iter__(self) -> Iterator[str]:
        return iter([op.name for op in all_ops() if self._test(op)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"{{{', '.join(sorted(self))}}}"

    @classmethod
    def _from_iterable(cls, it: Any) -> frozenset[str]:  # set algebra (a | b, a - b) gives plain frozensets
        return frozenset(it)


class _Reasons(Mapping[str, str]):
    """op name -> why, for the registered ops in ``names``."""

    def __init__(self, names: _Derived, reason: Callable[[str], str]):
        self._names, self._reason = names, reason

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            raise KeyError(name)
        return self._reason(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class LoweringTable:
    """How one backend runs each op.

    ``xp``: the backend's array namespace (the rows' ``xp``). ``decompose_families``: the op families
    whose registry decomposition is the backend's device path when it has no lowering (fused ops
    everywhere; torch also decomposes the sequence ops). ``host_reasons``: family -> why an op of it
    without a lowering runs its NumPy kernel on the host; ``leaf_reasons``: op -> how the executable
    binds that leaf (documentation only: which ops are leaves comes from the registry).
    """

    def __init__(self, backend: str, xp: Any, *, decompose_families: frozenset[str],
                 host_reasons: Mapping[str, str] | None = None, default_host_reason: str | None = None,
                 leaf_reasons: Mapping[str, str] | None = None) -> None:
        self.backend, self.xp = backend, xp
        self.lowerings: dict[str, Lowering] = {name: bind(row, xp) for name, row in ROWS.items()}
        self.native_low_precision: set[str] = set()
        self.decompose_families = frozenset(decompose_families)
        self.host_reasons = dict(host_reasons or {})
        self.default_host_reason = default_host_reason
        self._leaf_reasons = dict(leaf_reasons or {})
        self.decomposed = _Derived(lambda op: op.decompose is not None and op.family in self.decompose_families
                                   and op.name not in self.lowerings)
        self.refused = _Reasons(_Derived(lambda op: op.level == "hir" and op.name not in self.lowerings), lambda _: HIR_REASON)
        self.leaves = _Reasons(_Derived(lambda op: op.level == "source" and op.kernel is None and op.name not in self.lowerings),
                               lambda name: self._leaf_reasons.get(name, LEAF_REASON))

    # ------------------------------------------------------------------ registration
    def lowering(self, *names: str, native_low_precision: bool = False) -> Callable[[Lowering], Lowering]:
        """Decorator: ``fn(args, attrs, out)`` lowers ``names`` (replacing a row: a native override).
        ``native_low_precision``: the executable feeds f16 / bf16 / fp8 operands as they are
        (otherwise it widens them to f32 first)."""
        def register(fn: Lowering) -> Lowering:
            for name in names:
                self.lowerings[name] = fn
                if native_low_precision:
                    self.native_low_precision.add(name)
                else:
                    self.native_low_precision.discard(name)
            return fn

        return register

    def row(self, name: str) -> Lowering:
        """The op's row bound to this backend's namespace (even where a native override replaced it)."""
        return bind(ROWS[name], self.xp)

    # ------------------------------------------------------------------ classification
    def host_reason(self, op: OpDef) -> str | None:
        """Why ``op`` runs its NumPy kernel on the host, or None when it has a device path (or no kernel)."""
        if op.name in self.lowerings or op.name in self.decomposed or op.name in self.leaves or op.name in self.refused:
            return None
        if op.kernel is None:
            return None
        return self.host_reasons.get(op.family, self.default_host_reason)

    def how(self, name: str) -> str | None:
        """'lowered', 'decomposed', 'leaf', 'refused: why', 'host: why', or None (no path at all)."""
        if name in self.leaves:
            return "leaf"
        if name in self.lowerings:
            return "lowered"
        if name in self.decomposed:
            return "decomposed"
        if name in self.refused:
            return "refused: " + self.refused[name]
        reason = self.host_reason(get_op(name))
        return None if reason is None else "host: " + reason

    def coverage(self, host: Mapping[str, str] | None = None) -> dict[str, str]:
        """op name -> how it runs (:meth:`how`); ``host`` (name -> why) marks lowerings that call the
        host themselves. An op missing from the result has no path (the registry-walk test fails on it)."""
        table: dict[str, str] = {}
        for op in all_ops():
            if host and op.name in host:
                table[op.name] = "host: " + host[op.name]
                continue
            how = self.how(op.name)
            if how is not None:
                table[op.name] = how
        return table

    # ------------------------------------------------------------------ decomposition
    def decomposition(self, node: Any, in_types: list[TensorType]) -> tuple[Graph, list[Value]]:
        """``node``'s registry decomposition as a graph with one input per operand (``in_types``; narrow floats
        are given as f32, the reference kernels' scratch) and one output per result of the node."""
        sub = Graph(f"{node.op}_decomposed")
        operands = [sub.input(f"a{i}", Shape(tuple(t.shape)), DType.F32 if t.dtype.is_low_precision_float else t.dtype)
                    for i, t in enumerate(in_types)]
        made = get_op(node.op).decompose(sub, operands, node.attrs)
        outs = list(made) if isinstance(made, (list, tuple)) else [made]
        if len(outs) != node.num_results:
            raise RlxError(f"{self.backend} backend: the decomposition of {node.op!r} (node %{node.id}) gives "
                           f"{len(outs)} results, the node has {node.num_results}")
        sub.set_outputs(outs)
        return sub, operands
