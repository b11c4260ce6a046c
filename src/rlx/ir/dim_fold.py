"""A symbolic dim rebuilt in another algebra (ONNX nodes, rlx ops): how the ONNX reader and exporter compute a
symbolic size at run time from the sizes of the graph's inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx.ir.symbolic import is_symbolic


def fold_dim(d: Any, const: Callable[[int], Any], leaf: Callable[[str], Any], atom: Callable[[str, Any, Any], Any],
             mul: Callable[[Any, Any], Any], add: Callable[[Any, Any], Any]) -> Any:
    """``d`` (an int or a symbolic dim) rebuilt in another algebra: ``const(k)`` for integers, ``leaf(name)`` for a
    symbol, ``atom(op, a, b)`` for floordiv / mod / max / min of two folded dims, ``mul`` / ``add`` for products
    and sums — how the ONNX reader and exporter compute a symbolic size at run time."""
    if not is_symbolic(d):
        return const(int(d))
    total = None
    for mono, coeff in d._terms:
        term = None
        for a, power in mono:
            if isinstance(a, str):
                base = leaf(a)
            else:
                op, x, y = a
                base = atom(op, fold_dim(x, const, leaf, atom, mul, add), fold_dim(y, const, leaf, atom, mul, add))
            for _ in range(power):
                term = base if term is None else mul(term, base)
        if term is None:
            term = const(coeff)
        elif coeff != 1:
            term = mul(term, const(coeff))
        total = term if total is None else add(total, term)
    return total if total is not None else const(0)
