"""Shape tensors whose entries are symbolic sizes: ``Shape`` / ``Size`` of a tensor with symbolic dims
and the integer arithmetic ONNX exporters build on them (Gather, Slice, Concat, Cast, Unsqueeze,
Add, Mul, Div, Max …), kept at import time as arrays of rlx dims (ints and
:class:`~rlx.ir.symbolic.SymDim` expressions).

Why: exporters compute reshape targets, expand shapes and slice ends from ``Shape`` at run time.
When those values depend only on the inputs' *shapes*, the importer can fold them to dim
expressions and give the consumer (Reshape, Expand, ConstantOfShape, Slice, Range, Tile, Resize)
a symbolic size, so one graph serves every input size. The graph also keeps a runtime value for
each such tensor (``materialize``: a size is the sum of that many ones), read only where the
model uses a size as a number; dead-code elimination drops it otherwise.

:func:`propagate` runs after a node's converter: when the node's operands are known or symbolic
and it has a rule here, its result's dims are recorded in ``Importer.dims``; a result whose
entries are all ints becomes a known constant.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.ir.dim_fold import fold_dim
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Value
from rlx.ir.symbolic import dim_max, dim_min, floordiv, is_symbolic, known_ge, least_for_nonnegative, mod, ranges_in_effect, symbol

_INT_KINDS = "iub"


class _GiveUp(Exception):
    """A rule cannot express its result as dims (the value stays a plain runtime value)."""


def materialize(cx, dims: list[Any]) -> Value:
    """A rank-1 int64 runtime tensor of ``dims``: each symbol is the sum of that many ones (read once per
    import), an expression is integer arithmetic on those (so ``b*s*h`` costs b + s + h, not b*s*h)."""
    parts = [_dim_value(cx, d) for d in dims]
    if not parts:
        return cx.const(np.zeros(0, np.int64))
    return parts[0] if len(parts) == 1 else cx.g.concat(parts, axis=0)


_ATOM_KINDS = {"floordiv": "div", "mod": "mod", "max": "max", "min": "min"}  # sizes are >= 0: truncation is floor


def _dim_value(cx, d: Any) -> Value:
    """A [1] int64 runtime value of the dim ``d``."""
    return fold_dim(d, lambda k: cx.const(np.array([k], np.int64)), lambda name: _symbol_value(cx, name),
                    lambda op, a, b: cx.g.binary(a, b, op=_ATOM_KINDS[op]), lambda a, b: a * b, lambda a, b: a + b)


def _symbol_value(cx, name: str) -> Value:
    cache = cx.__dict__.setdefault("_symbol_values", {})
    if name not in cache:
        ones = cx.g.expand(cx.g.constant(np.ones(1, np.int64)), target_shape=[symbol(name)])
        cache[name] = cx.g.reduce(ones, op="sum", axes=[0], keep_dim=True)
    return cache[name]


def iota(cx, n: Any, dtype: DType = DType.I64) -> Value:
    """``0, 1, …, n-1`` for a size ``n`` that may be symbolic (a constant when it is an int)."""
    if not is_symbolic(n):
        return cx.const(np.arange(int(n), dtype=dtype.numpy))
    ones = cx.g.expand(cx.const(np.ones(1, dtype.numpy)), target_shape=[n])
    return cx.g.cumulative(ones, op="sum", axis=0, exclusive=True)


def shape_value(cx, dims: list[Any]) -> Value:
    """``dims`` as a shape tensor: a constant when every dim is an int, else a runtime value whose
    dims are recorded for the consumers."""
    if all(not is_symbolic(d) for d in dims):
        return cx.const(np.array([int(d) for d in dims], np.int64))
    v = materialize(cx, dims)
    cx.dims[v.id] = np.array(dims, dtype=object)
    return v


def operand(cx, v: Value | None) -> np.ndarray | None:
    """An operand as an object array of dims / numbers (known constant or symbolic), or None."""
    if v is None:
        return None
    got = cx.dims.get(v.id)
    if got is not None:
        return got
    arr = _known(cx, v)
    if arr is None:
        return None
    if arr.dtype.kind in _INT_KINDS:
        return arr.astype(object)
    if arr.dtype.kind == "f":
        return arr.astype(object)
    return None


def _known(cx, v: Value) -> np.ndarray | None:
    """An import-time value: a folded constant, or a small float initializer (a param: ``* 2.0`` on a size)."""
    arr = cx.known.get(v.id)
    if arr is None and v.node.op == "param" and v.shape.is_static and v.shape.numel <= 64:
        arr = cx.params.get(v.node.attrs["name"])
    return arr


def _int(d: Any) -> Any:
    """A dim (int or SymDim) from an entry; a float entry must be a whole number."""
    if is_symbolic(d):
        return d
    if isinstance(d, (bool, np.bool_)):
        return int(d)
    if isinstance(d, (float, np.floating)):
        if not math.isfinite(d) or d != int(d):
            raise _GiveUp
        return int(d)
    return int(d)


def _elementwise(fn: Callable[[Any, Any], Any]) -> Callable[..., np.ndarray]:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(a, b)
        out = np.empty(a.shape, dtype=object)
        for i in np.ndindex(a.shape):
            out[i] = fn(_int(a[i]), _int(b[i]))
        return out
    return apply


def _div(a: Any, b: Any) -> Any:
    """ONNX integer Div (truncation) on sizes: floor division where both are known non-negative."""
    if not is_symbolic(a) and not is_symbolic(b):
        if b == 0:
            raise _GiveUp
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if known_ge(a, 0) and known_ge(b, 1):
        return floordiv(a, b)
    raise _GiveUp


def _fmod(a: Any, b: Any) -> Any:
    """C fmod (the dividend's sign): Python's mod where both are known non-negative."""
    if known_ge(a, 0) and known_ge(b, 1):
        return mod(a, b)
    raise _GiveUp


def _exact_div(a: Any, b: Any) -> Any:
    """Float Div of sizes: kept only when the quotient is a whole dim."""
    if b == 0:
        raise _GiveUp
    q = _div(a, b)
    if q * b != a:
        raise _GiveUp
    return q


def _compare(op: Callable[[Any, Any], bool], swap: bool = False) -> Callable[[Any, Any], Any]:
    def decide(a: Any, b: Any) -> Any:
        if swap:
            a, b = b, a
        if not is_symbolic(a) and not is_symbolic(b):
            return bool(op(a, b))
        if op is operator.eq:
            ge, le = known_ge(a, b), known_ge(b, a)
            if ge is False or le is False:
                return False
            if a == b:
                return True
            raise _GiveUp
        try:
            return bool(op(a, b))
        except ShapeError:
            raise _GiveUp from None
    return decide


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "Mod": lambda a, b: mod(a, b),
    "Max": lambda a, b: dim_max(a, b), "Min": lambda a, b: dim_min(a, b),
    "Equal": _compare(operator.eq), "Less": _compare(operator.lt), "Greater": _compare(operator.gt),
    "LessOrEqual": _compare(operator.le), "GreaterOrEqual": _compare(operator.ge),
}


def _fold(fn: Callable[[Any, Any], Any], arr: np.ndarray, axes: list[int] | None, keep: bool) -> np.ndarray:
    axes = list(range(arr.ndim)) if axes is None else [a % max(arr.ndim, 1) for a in axes]
    out = arr
    for a in sorted(axes, reverse=True):
        out = np.apply_along_axis(lambda row: _reduce(fn, row), a, out) if out.shape[a] else None
        if out is None:
            raise _GiveUp
        if keep:
            out = np.expand_dims(out, a)
    return np.asarray(out, dtype=object)


def _reduce(fn: Callable[[Any, Any], Any], row: np.ndarray) -> Any:
    acc = _int(row[0])
    for x in row[1:]:
        acc = fn(acc, _int(x))
    return acc


def _rule(cx, node, ins: list[Value | None], attrs: dict, out: Value) -> np.ndarray:
    """The dims of ``node``'s (first) result, or raise :class:`_GiveUp`."""
    op = node.op_type
    vals = [operand(cx, v) for v in ins]
    if op in ("Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten"):
        return vals[0].reshape(tuple(out.shape))
    if op == "Expand":
        return np.broadcast_to(vals[0], tuple(out.shape)).copy()
    if op == "Cast":
        to = DType.of(out.dtype)
        if to.is_float or to.numpy.kind in "iu":
            return np.vectorize(_int, otypes=[object])(vals[0]) if vals[0].size else vals[0]
        if to == DType.BOOL:
            return np.vectorize(lambda d: bool(_compare(operator.ne)(_int(d), 0)), otypes=[object])(vals[0])
        raise _GiveUp
    if op == "Gather":
        idx = cx.known.get(ins[1].id) if ins[1] is not None else None
        if idx is None:
            raise _GiveUp
        axis = attrs.get("axis", 0)
        n = vals[0].shape[axis]
        return np.take(vals[0], np.where(idx < 0, idx + n, idx), axis=axis)
    if op == "Concat":
        return np.concatenate([v for v in vals if v is not None], axis=attrs["axis"])
    if op == "Slice":
        if cx.opset < 10:
            starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
        else:
            starts, ends = (_static_ints(cx, ins[i]) for i in (1, 2))
            axes = _static_ints(cx, ins[3]) if len(ins) > 3 else None
            steps = _static_ints(cx, ins[4]) if len(ins) > 4 else None
        data = vals[0]
        index = [slice(None)] * data.ndim
        axes = list(range(len(starts))) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        for a, s, e, st in zip(axes, starts, ends, steps):
            index[a % data.ndim] = slice(*slice(int(s), int(e), int(st)).indices(data.shape[a % data.ndim]))
        return data[tuple(index)]
    if op in _BINARY or op == "Div":
        fn = _BINARY.get(op)
        if op == "Div":
            fn = _exact_div if out.dtype.is_float else _div
        elif op == "Mod" and attrs.get("fmod", 0):
            fn = _fmod
        acc = vals[0]
        for v in vals[1:]:  # Max / Min are variadic
            acc = _elementwise(fn)(acc, v)
        return acc
    if op == "Neg":
        return np.vectorize(lambda d: -_int(d), otypes=[object])(vals[0])
    if op == "Abs":
        return np.vectorize(lambda d: d if known_ge(_int(d), 0) else _abs_static(d), otypes=[object])(vals[0])
    if op in ("Floor", "Ceil", "Round"):
        return vals[0]
    if op == "Where":
        if vals[0] is None:
            raise _GiveUp
        cond = np.vectorize(lambda c: bool(c) if not is_symbolic(c) else _giveup(), otypes=[object])(vals[0])
        return np.where(cond.astype(bool), *np.broadcast_arrays(vals[1], vals[2]))
    if op in ("ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"):
        axes = attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = _static_ints(cx, ins[1])
        fn = {"ReduceProd": operator.mul, "ReduceSum": operator.add, "ReduceMax": lambda a, b: dim_max(a, b),
              "ReduceMin": lambda a, b: dim_min(a, b)}[op]
        return _fold(fn, vals[0], axes, bool(attrs.get("keepdims", 1)))
    raise _GiveUp


def _as_array(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(object)
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def _abs_static(d: Any) -> Any:
    if is_symbolic(d):
        raise _GiveUp
    return abs(d)


def _giveup() -> Any:
    raise _GiveUp


def _static_ints(cx, v: Value | None) -> list[int] | None:
    if v is None:
        return None
    arr = cx.known.get(v.id)
    if arr is None:
        raise _GiveUp
    return [int(x) for x in np.asarray(arr).reshape(-1)]


RULE_OPS = frozenset({"Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Expand", "Cast", "Gather", "Concat",
                      "Slice", "Div", "Neg", "Abs", "Floor", "Ceil", "Round", "Where", "ReduceProd", "ReduceSum",
                      "ReduceMax", "ReduceMin", *_BINARY})


def propagate(cx, node, ins: list, attrs: dict, results: list) -> None:
    """Record the dims of ``node``'s first result when its operands are known or symbolic (see the module doc)."""
    if node.op_type not in RULE_OPS or not results or not isinstance(results[0], Value):
        return
    present = [v for v in ins if v is not None]
    if not any(v.id in cx.dims for v in present) or not all(v.id in cx.dims or _known(cx, v) is not None for v in present):
        return
    out = results[0]
    if not out.shape.is_static or out.dtype.numpy.kind not in "iubf" or out.shape.numel > 4096:
        return
    try:
        arr = _as_array(_rule(cx, node, ins, attrs, out))
    except (_GiveUp, ShapeError, ZeroDivisionError, ValueError, IndexError, TypeError):
        return
    if arr.shape != tuple(out.shape):
        return
    if all(not is_symbolic(d) for d in arr.reshape(-1)):
        try:
            cx.known[out.id] = np.array(arr.tolist(), dtype=out.dtype.numpy).reshape(arr.shape)
        except (TypeError, ValueError, OverflowError):
            return
        return
    cx.dims[out.id] = arr


def narrow_to_sizes(cx, results: list) -> None:
    """A result's sizes are >= 0 for every input the model runs on. Where one of them may be negative in its
    symbol's range (a conv stack's output length ``floordiv(floordiv(seq, 80) + 1, 2) - 1``), the symbol's range
    starts where it is not (:func:`~rlx.ir.symbolic.least_for_nonnegative`): a shorter feed is refused naming the
    range, and the clamps exporters put on sizes later (``max(0, n)`` of a ``[:-1]`` slice) fold away, so the
    shapes they meet are proven equal (wav2vec2's positional conv added to its input)."""
    for v in results:
        if not isinstance(v, Value) or v.shape.is_static:
            continue
        for d in v.shape:
            if not is_symbolic(d) or d in cx.sized:
                continue
            cx.sized.add(d)
            with ranges_in_effect(cx.g.symbol_ranges):
                found = least_for_nonnegative(d)
            if found is not None:
                name, lo = found
                hi = cx.g.symbol_ranges.get(name, (1, math.inf))[1]
                cx.g.set_range(name, lo, None if hi == math.inf else hi)
