"""ONNX shape-op converters: Reshape, Flatten, Transpose, (Un)Squeeze, Concat, Split, Slice, Expand, Tile, Pad, Depth/SpaceToDepth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.frontends.onnx.import_context import NeedsShapes, converter
from rlx.frontends.onnx.import_helpers import _axis, _broadcast_to, _ints, _reshape, _sizes, _static_shape
from rlx.ir.graph import Value
from rlx.ir.onnx_format import (
    OnnxError,
    OnnxFormatError,
    OnnxUnsupported,
)
from rlx.ir.shape import broadcast_shapes
from rlx.ir.symbolic import dim_max, dim_min, floordiv, is_symbolic, known_ge, ranges_in_effect


@converter("Reshape")
def _reshape_op(cx, node, ins, attrs):
    x = ins[0]
    shape = _ints(cx, node, 1, "shape", attrs) if cx.opset < 5 else _sizes(cx, node, 1, attrs)
    allowzero = attrs.get("allowzero", 0)
    src = list(x.shape)
    out = [src[i] if isinstance(d, int) and d == 0 and not allowzero else d for i, d in enumerate(shape)]
    if all(isinstance(d, int) for d in out) and -1 not in out:
        return _reshape(cx, x, out)
    if -1 in out and any(isinstance(d, str) for d in src):
        # the -1 of a symbolic source: solved here where the other target dims are known
        known = math.prod(d for d in out if d != -1)
        hole = floordiv(math.prod(src), known) if known != 0 else None
        if hole is not None and hole * known == math.prod(src):
            out = [hole if d == -1 else d for d in out]
    return cx.g.reshape(x, new_shape=out)


@converter("Flatten")
def _flatten(cx, node, ins, attrs):
    x = ins[0]
    shape = list(x.shape)
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise OnnxError(f"Flatten: axis {attrs.get('axis')} out of range for rank {len(shape)}")
    return _reshape(cx, x, [math.prod(shape[:axis]), math.prod(shape[axis:])])


@converter("Transpose")
def _transpose(cx, node, ins, attrs):
    perm = attrs.get("perm")
    return cx.g.transpose(ins[0], perm=list(perm) if perm is not None else None)


@converter("Squeeze")
def _squeeze(cx, node, ins, attrs):
    x = ins[0]
    axes = _ints(cx, node, 1, "axes" if cx.opset < 13 else None, attrs)
    shape = list(x.shape)
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = {_axis(a, len(shape)) for a in axes}
    return _reshape(cx, x, [d for i, d in enumerate(shape) if i not in axes])


@converter("Unsqueeze")
def _unsqueeze(cx, node, ins, attrs):
    x = ins[0]
    axes = _ints(cx, node, 1, "axes" if cx.opset < 13 else None, attrs)
    rank = len(x.shape) + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return _reshape(cx, x, shape)


@converter("Concat")
def _concat(cx, node, ins, attrs):
    parts = [v for v in ins if v is not None]
    return cx.g.concat(parts, axis=attrs["axis"])


@converter("Split")
def _split(cx, node, ins, attrs):
    """One multi-result ``split`` node; equal parts (``num_outputs``) of a symbolic axis have symbolic sizes."""
    x = ins[0]
    axis = _axis(attrs.get("axis", 0), len(x.shape))
    size = x.shape[axis]
    split = _ints(cx, node, 1, "split" if cx.opset < 13 else None, attrs)
    n = len(node.output)
    if split is None:
        parts = attrs.get("num_outputs", n)
        if parts != n or parts < 1:
            raise OnnxFormatError(f"Split num_outputs={parts} disagrees with its {n} outputs")
        chunk = (size + parts - 1) // parts  # the last part is smaller when size does not divide
        if isinstance(size, int):
            split = [max(min(chunk, size - i * chunk), 0) for i in range(parts)]
        else:  # symbolic: sizes that add up to the axis (a negative last part fails when the sizes are bound)
            split = [chunk] * (parts - 1) + [size - (parts - 1) * chunk]
    if len(split) == n and isinstance(size, str) and all(isinstance(s, int) and s >= 0 for s in split):
        raise NeedsShapes(f"Split sizes {split[:16]} of symbolic axis {axis} ({size})")  # right for one size only
    if len(split) != n or any(known_ge(s, 0) is False for s in split) or sum(split) != size:
        raise OnnxFormatError(f"Split sizes {split[:16]} must be {n} non-negative sizes summing to {size}")
    return cx.g.split(x, axis=axis, sizes=split)

def _index_along(cx, x: Value, axis: int, index: np.ndarray) -> Value:
    """x restricted to ``index`` (static positions) on ``axis``: narrow when contiguous, else gather."""
    n = x.shape[axis]
    if len(index) == n and (index == np.arange(n)).all():
        return x
    if len(index) and (np.diff(index) == 1).all():
        return cx.g.narrow(x, axis=axis, start=int(index[0]), length=len(index))
    return cx.g.gather(x, cx.const(index.astype(np.int64)), axis=axis)


def _bound(cx, n: Any, i: Any) -> Any:
    """A Slice bound (unit step) clamped to [0, n]; ``i`` an int or a symbolic size."""
    if isinstance(i, str):
        if known_ge(i, 0):
            return dim_min(i, n)
        if known_ge(-i, 1):
            return dim_max(n + i, 0)
        raise NeedsShapes(f"Slice bound {i} may be negative or not")
    if abs(i) >= cx.limits.max_dim:  # INT64_MAX / INT64_MIN style "to the end" / "from the start"
        return n if i > 0 else 0
    return dim_max(n + i, 0) if i < 0 else dim_min(i, n)


def _slice_symbolic(x: Value, cx, axis: int, start: Any, end: Any, step: int) -> Value:
    """A unit-step Slice of a symbolic axis or by symbolic bounds: one narrow whose bounds are clamped expressions."""
    if step != 1:
        raise NeedsShapes(f"Slice with step {step} on symbolic axis {axis}")
    n = x.shape[axis]
    lo, hi = _bound(cx, n, start), _bound(cx, n, end)
    if lo == 0 and hi == n:
        return x
    return cx.g.narrow(x, axis=axis, start=lo, length=dim_max(hi - lo, 0))


def _bounded_by(cx, end: Any, n: int) -> None:
    """A static buffer sliced to a symbolic length ``x[:, :seq]`` (position ids, cached masks): the model
    works only for lengths up to the buffer's, so that symbol's range is narrowed to it (a longer feed is
    refused naming the range) and the slice has the symbolic length, not ``min(seq, n)``."""
    if not (is_symbolic(end) and len(end.symbols) == 1 and str(end) in end.symbols):
        return
    lo, hi = cx.g.symbol_ranges.get(str(end), (1, math.inf))
    if hi > n >= lo:
        cx.g.set_range(str(end), lo, n)


@converter("Slice")
def _slice(cx, node, ins, attrs):
    x = ins[0]
    if cx.opset < 10:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends = _sizes(cx, node, 1, attrs), _sizes(cx, node, 2, attrs)
        axes, steps = _ints(cx, node, 3, None, attrs), _ints(cx, node, 4, None, attrs)
    rank = len(x.shape)
    axes = list(range(len(starts))) if axes is None else [_axis(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for a, s, e, st in zip(axes, starts, ends, steps):
        n = x.shape[a]
        if isinstance(n, int) and isinstance(e, str) and int(st) == 1:
            _bounded_by(cx, e, n)
        if not isinstance(n, int) or isinstance(s, str) or isinstance(e, str):
            with ranges_in_effect(cx.g.symbol_ranges):
                x = _slice_symbolic(x, cx, a, s, e, int(st))
            continue
        cx.check_elements(n, "the Slice index")
        if int(st) == 0:
            raise OnnxFormatError(f"Slice step 0 on axis {a}")
        idx = np.arange(*slice(int(s), int(e), int(st)).indices(n))  # (a stop of -1 means "past index 0" here)
        x = _index_along(cx, x, a, idx)
    return x


@converter("Expand")
def _expand_op(cx, node, ins, attrs):
    x = ins[0]
    shape = _sizes(cx, node, 1, attrs)
    out = broadcast_shapes(x.shape, tuple(shape))
    return _broadcast_to(cx, x, list(out))


@converter("Tile")
def _tile(cx, node, ins, attrs):
    x = ins[0]
    reps = _sizes(cx, node, 1, attrs)  # symbolic where the model repeats by a size (``probe.repeat(batch, 1, 1)``)
    shape = list(x.shape)
    if len(reps) != len(shape):
        raise OnnxFormatError(f"Tile: {len(reps)} repeats for a rank-{len(shape)} input")
    if any(not is_symbolic(r) and r < 0 for r in reps):
        raise OnnxFormatError(f"Tile: negative repeats {reps}")
    if all(r == 1 for r in reps):
        return x
    inter = []
    for d, r in zip(shape, reps):
        inter += [r, d]
    y = _reshape(cx, x, [s for pair in zip([1] * len(shape), shape) for s in pair])
    y = _broadcast_to(cx, y, inter)
    return _reshape(cx, y, [d * r for d, r in zip(shape, reps)])


@converter("Pad")
def _pad(cx, node, ins, attrs):
    x = ins[0]
    rank = len(x.shape)
    mode = attrs.get("mode", "constant")
    if cx.opset < 11:
        pads, value, axes = attrs["pads"], attrs.get("value", 0.0), None
    else:
        pads = _sizes(cx, node, 1, attrs)
        value = 0
        if len(node.input) > 2 and node.input[2]:
            value = cx.static(node.input[2], "constant_value").reshape(-1)[0] if ins[2].shape.numel else 0
        axes = _ints(cx, node, 3, None, attrs)
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    k = len(axes)
    return pad_value(cx, x, {a: (pads[i], pads[i + k]) for i, a in enumerate(axes)}, mode, value)


def _pad_symbolic(cx, x: Value, axis: int, before: int, after: int, mode: str) -> Value:
    """Edge / reflect / wrap padding of a symbolic axis by amounts smaller than it: narrows of x
    (reversed by a static gather for reflect) around it. An axis too short fails when its size is bound."""
    if before < 0 or after < 0:
        raise OnnxUnsupported(f"Pad: cropping symbolic axis {axis} with mode {mode!r}")
    n = x.shape[axis]

    def rows(start: Any, length: int, reverse: bool = False) -> Value:
        v = cx.g.narrow(x, axis=axis, start=start, length=length)
        return cx.g.gather(v, cx.const(np.arange(length - 1, -1, -1, dtype=np.int64)), axis=axis) if reverse else v

    if mode == "edge":
        def edge(start: Any, amount: int) -> Value:
            shape = list(x.shape)
            shape[axis] = amount
            return cx.g.expand(rows(start, 1), target_shape=shape)
        head, tail = (edge(0, before) if before else None), (edge(n - 1, after) if after else None)
    elif mode == "reflect":
        head = rows(1, before, reverse=True) if before else None
        tail = rows(n - 1 - after, after, reverse=True) if after else None
    elif mode == "wrap":
        head, tail = (rows(n - before, before) if before else None), (rows(0, after) if after else None)
    else:
        raise OnnxUnsupported(f"Pad mode {mode!r}")
    return cx.g.concat([p for p in (head, x, tail) if p is not None], axis=axis)


def pad_value(cx, x: Value, pads: dict[int, tuple[int, int]], mode: str = "constant", value: Any = 0) -> Value:
    """Pad (or crop, for negative amounts) x axis by axis, exactly: concat / gather of static indices."""
    for axis, (before, after) in sorted(pads.items()):
        n = x.shape[axis]
        if before == 0 and after == 0:
            continue
        if not isinstance(n, int) and mode != "constant":
            x = _pad_symbolic(cx, x, axis, before, after, mode)
            continue
        if not isinstance(before, int) or not isinstance(after, int):  # symbolic amounts (auto_pad, shape arithmetic)
            if mode != "constant" or known_ge(before, 0) is False or known_ge(after, 0) is False:
                raise NeedsShapes(f"Pad of axis {axis} by symbolic amounts ({before}, {after}) in mode {mode!r}")
        elif before < 0 or after < 0:
            x = cx.g.narrow(x, axis=axis, start=max(-before, 0), length=n + min(before, 0) + min(after, 0))
            before, after = max(before, 0), max(after, 0)
            n = x.shape[axis]
        if before == 0 and after == 0:
            continue
        if mode == "constant":
            parts = []
            fill = cx.const(np.array(value).astype(x.dtype.numpy))
            for amount in (before, after):
                shape = list(x.shape)
                shape[axis] = amount
                parts.append(cx.g.expand(fill, target_shape=shape) if amount else None)
            pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
            x = cx.g.concat(pieces, axis=axis)
            continue
        cx.check_elements(n + before + after, f"the {mode} padding index")
        pos = np.arange(-before, n + after)
        if mode == "edge":
            idx = np.clip(pos, 0, n - 1)
        elif mode == "reflect":
            if n == 1:
                idx = np.zeros_like(pos)
            else:
                period = 2 * (n - 1)
                m = np.mod(pos, period)
                idx = np.where(m < n, m, period - m)
        elif mode == "wrap":
            idx = np.mod(pos, n)
        else:
            raise OnnxUnsupported(f"Pad mode {mode!r}")
        x = cx.g.gather(x, cx.const(idx.astype(np.int64)), axis=axis)
    return x


@converter("DepthToSpace")
def _depth_to_space(cx, node, ins, attrs):
    x = ins[0]
    b = attrs["blocksize"]
    n, c, h, w = x.shape
    if attrs.get("mode", "DCR") == "DCR":
        y = _reshape(cx, x, [n, b, b, c // (b * b), h, w])
        y = cx.g.transpose(y, perm=[0, 3, 4, 1, 5, 2])
    else:
        y = _reshape(cx, x, [n, c // (b * b), b, b, h, w])
        y = cx.g.transpose(y, perm=[0, 1, 4, 2, 5, 3])
    return _reshape(cx, y, [n, c // (b * b), h * b, w * b])


@converter("SpaceToDepth")
def _space_to_depth(cx, node, ins, attrs):
    x = ins[0]
    b = attrs["blocksize"]
    n, c, h, w = _static_shape(x)
    y = _reshape(cx, x, [n, c, h // b, b, w // b, b])
    y = cx.g.transpose(y, perm=[0, 1, 3, 5, 2, 4] if attrs.get("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4])
    return _reshape(cx, y, [n, c * b * b, h // b, w // b])
