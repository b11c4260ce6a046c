"""Symbolic dims in the ONNX export: sizes computed at run time from the graph inputs' shapes.

A graph with symbolic dims (``batch``, ``2*seq + 1``) declares them as ONNX ``dim_param``s on its
inputs and outputs (:meth:`Exporter.value_info`). Where an op needs a size as a number — a
Reshape / Expand target, a Slice bound, Split sizes — and the size is symbolic, this module builds it
in the ONNX graph: each symbol is read from the first graph input with an axis of exactly that
size (``Shape(x, start=i, end=i+1)``), and an expression is evaluated with integer Add / Mul / Div /
Mod / Max / Min (sizes are non-negative, so ONNX's truncating Div is floor division).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.ir.dim_fold import fold_dim
from rlx.ir.onnx_format import OnnxUnsupported
from rlx.ir.symbolic import is_symbolic


def has_symbolic(dims: Any) -> bool:
    return any(is_symbolic(d) for d in dims)


def _symbol_sources(ex) -> dict[str, str]:
    """symbol -> an ONNX [1] int64 value of its size (built on first use, once per exporter)."""
    table = getattr(ex, "_symbol_sources", None)
    if table is None:
        table = {}
        ex._symbol_sources = table
    return table


def _symbol(ex, name: str) -> str:
    table = _symbol_sources(ex)
    if name in table:
        return table[name]
    for node in ex.g.nodes:
        if node.op not in ("input", "param"):
            continue
        for axis, d in enumerate(node.shape):
            if is_symbolic(d) and str(d) == name:
                src = ex.names[node.id]
                if ex.opset >= 15:
                    out = ex.node("Shape", [src], start=axis, end=axis + 1)
                else:
                    out = ex.node("Gather", [ex.node("Shape", [src]), ex.ints([axis])], axis=0)
                table[name] = out
                return out
    raise OnnxUnsupported(f"symbolic size {name!r} is not the size of any graph input's axis: it cannot be "
                          "computed in the exported model")


def dim_value(ex, d: Any) -> str:
    """An ONNX [1] int64 value holding the size ``d`` (an int, or a symbolic dim expression)."""
    return fold_dim(d, lambda k: ex.ints([k]), lambda name: _symbol(ex, name),
                    lambda op, a, b: ex.node(_ATOM_OPS[op], [a, b]),
                    lambda a, b: ex.node("Mul", [a, b]), lambda a, b: ex.node("Add", [a, b]))


_ATOM_OPS = {"floordiv": "Div", "mod": "Mod", "max": "Max", "min": "Min"}


def shape_value(ex, dims: Any) -> str:
    """An ONNX rank-1 int64 value of ``dims`` (runs of ints stay one constant)."""
    parts: list[str] = []
    run: list[int] = []
    for d in dims:
        if is_symbolic(d):
            if run:
                parts.append(ex.ints(run))
                run = []
            parts.append(dim_value(ex, d))
        else:
            run.append(int(d))
    if run:
        parts.append(ex.ints(run))
    if not parts:
        return ex.const(np.zeros(0, np.int64))
    return parts[0] if len(parts) == 1 else ex.node("Concat", parts, axis=0)


def reshape_target(ex, new_shape: list[Any], out_shape: Any) -> str:
    """A Reshape's shape operand: one unknown entry becomes ONNX's -1, several are computed."""
    unknown = [i for i, d in enumerate(new_shape) if is_symbolic(d) or d == -1]
    if len(unknown) <= 1:
        return ex.ints([-1 if i in unknown else int(d) for i, d in enumerate(new_shape)])
    return shape_value(ex, out_shape)


def scalar_dim(ex, d: Any) -> str:
    """A rank-0 int64 value holding the size ``d``."""
    return ex.node("Reshape", [dim_value(ex, d), ex.ints([])])


def position_keep(ex, kind: str, sq: Any, sk: Any, window: int | None) -> str | None:
    """:func:`rlx.ops.attention.position_keep` built in the ONNX graph for symbolic sequence lengths
    (the same rule: query row i sits at key i + (Sk - Sq), keeps keys j <= it, and j >= it - window
    for a sliding window); None for the other mask kinds."""
    if kind not in ("causal", "sliding_window"):
        return None
    zero, one = ex.const(np.array(0, np.int64)), ex.const(np.array(1, np.int64))
    rows = ex.node("Range", [zero, scalar_dim(ex, sq), one])
    cols = ex.node("Range", [zero, scalar_dim(ex, sk), one])
    i = ex.node("Add", [ex.node("Unsqueeze", [rows, ex.ints([1])]), dim_value(ex, sk - sq)])
    j = ex.node("Unsqueeze", [cols, ex.ints([0])])
    keep = ex.node("LessOrEqual", [j, i])
    if kind == "sliding_window":
        keep = ex.node("And", [keep, ex.node("GreaterOrEqual", [j, ex.node("Sub", [i, ex.ints([window])])])])
    return keep
