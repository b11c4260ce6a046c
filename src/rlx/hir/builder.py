"""The HIR graph builder ``h``: an :class:`rlx.Graph` at stage HIR with block conveniences.

Every registered op is a builder method (``h.swiglu``, ``h.residual_rms_norm``,
``h.attention`` …), as on any graph. On top of that:

* ``h.linear(x, w, bias=b, activation="gelu")`` maps ``bias=`` onto the optional third
  operand (``has_bias``);
* ``h.shared_linear_pair(x, w1, w2)`` appends both slots and returns both values;
* ``h.transformer_block(...)`` is ``llama_decoder_block`` labelled ``transformer_block``;
* ``h.mir(op, *operands, **attrs)`` is the explicit escape hatch for any MIR op (plain
  MIR builder methods such as ``h.matmul`` work too: a MIR op *is* the escape hatch);
* ``h.block("attn", build)`` (or ``with h.block("attn"):``) labels every node built inside,
  operators included; blocks nest (``"layer0/attn"``).

Labels live in the node's ``name``: a block built with no name and outside any named
block gets its default label (``linear``, ``swiglu_ffn``, ``shared_linear_pair[0]`` …);
``name=`` replaces it; inside ``h.block(path)`` the label is ``path`` (or ``path/name``).
Inputs, params and constants are never labelled. Shape and arity errors raise
:class:`rlx.hir.LowerError` naming the block and its label.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rlx.hir.errors import LowerError
from rlx.ir.errors import AttributeSchemaError, ShapeError
from rlx.ir.graph import Graph, GraphStage, Provenance, Value
from rlx.ir.opdef import OpDef, get_op
from rlx.ir.shape import TensorType
from rlx.ops.hir_blocks import LEAF_OPS, default_label


class HirGraph(Graph):
    """A graph at stage HIR whose builder methods label blocks. Equal to any Graph with the same nodes."""

    def __init__(self, name: str = "hir"):
        super().__init__(name, GraphStage.HIR)
        self._block_path: list[str] = []

    # ------------------------------------------------------------------ labels
    def label_for(self, op: str, attrs: Mapping[str, Any], name: str | None) -> str | None:
        """The label a node of ``op`` built now with ``name`` gets."""
        if op in LEAF_OPS:
            return name
        if self._block_path:
            return "/".join([*self._block_path, *([name] if name else [])])
        return name if name is not None else default_label(op, attrs)

    @contextlib.contextmanager
    def _labelled(self, label: str) -> Iterator[None]:
        if not label or not isinstance(label, str):
            raise AttributeSchemaError(f"block label must be a non-empty string, got {label!r}")
        self._block_path.append(label)
        try:
            yield
        finally:
            self._block_path.pop()

    def block(self, label: str, build: Callable[[HirGraph], Any] | None = None) -> Any:
        """Label everything built inside: ``h.block("attn", lambda h: ...)`` returns what ``build(h)``
        returns; without ``build`` it is a context manager (``with h.block("attn"): ...``)."""
        if build is None:
            return self._labelled(label)
        with self._labelled(label):
            return build(self)

    # ---------------------------------------------------------------- building
    def _append_checked(
        self, opdef: OpDef, ids: tuple[int, ...], attrs: Mapping[str, Any], name: str | None, prov: Provenance | None,
        declared: TensorType | None = None,
    ) -> Value:
        """Every checked append (builder methods and ``append``) gets the block label as its name."""
        name = self.label_for(opdef.name, attrs, name)
        try:
            return super()._append_checked(opdef, ids, attrs, name, prov, declared)
        except LowerError:
            raise
        except ShapeError as exc:
            raise LowerError(opdef.name, name, str(exc)) from None

    def _build(self, opdef: OpDef, preset: Mapping[str, Any], args: Sequence[Any], kwargs: dict[str, Any], name: str | None) -> Value:
        n = 0 if opdef.is_variadic else len(opdef.operands)
        operands = args[0] if opdef.is_variadic and args and isinstance(args[0], (list, tuple)) else args[:n]
        label = self.label_for(opdef.name, {**preset, **kwargs}, name)
        for i, arg in enumerate(operands):
            if arg is None:
                what = opdef.operands[min(i, len(opdef.operands) - 1)] if opdef.operands else f"#{i}"
                raise LowerError(opdef.name, label, f"missing operand {i} ({what})")
        try:
            return super()._build(opdef, preset, args, kwargs, name)
        except LowerError:
            raise
        except ShapeError as exc:
            raise LowerError(opdef.name, label, str(exc)) from None
        except AttributeSchemaError as exc:
            where = f"HIR block {opdef.name!r}" + (f" (label {label!r})" if label else "")
            raise AttributeSchemaError(f"{where}: {exc}") from None

    def linear(self, x: Any, w: Any, bias: Any = None, *, activation: str | None = None, name: str | None = None) -> Value:
        """``act(x @ w + bias)``; ``bias`` is optional (it becomes operand 3, ``has_bias=True``)."""
        operands = [x, w] if bias is None else [x, w, bias]
        return self.apply("linear", *operands, has_bias=bias is not None, activation=activation, name=name)

    def shared_linear_pair(self, x: Any, w_first: Any, w_second: Any, *, name: str | None = None) -> tuple[Value, Value]:
        """``(x @ w_first, x @ w_second)``: two HIR nodes (slots 0 and 1) with the same operands."""
        first = self.apply("shared_linear_pair", x, w_first, w_second, slot=0, name=None if name is None else f"{name}[0]")
        second = self.apply("shared_linear_pair", x, w_first, w_second, slot=1, name=None if name is None else f"{name}[1]")
        return first, second

    def transformer_block(self, *operands: Any, name: str | None = None, **attrs: Any) -> Value:
        """``llama_decoder_block`` under the label ``transformer_block`` (upstream's alias builder)."""
        return self.apply("llama_decoder_block", *operands, name=name or "transformer_block", **attrs)

    def mir(self, op: str, /, *operands: Any, name: str | None = None, **attrs: Any) -> Value:
        """Escape hatch: append MIR op ``op`` as is (it lowers verbatim)."""
        if get_op(op).level == "hir":
            raise LowerError(op, name, "h.mir() carries MIR ops; build HIR blocks with their own method")
        return self.apply(op, *operands, name=name, **attrs)
