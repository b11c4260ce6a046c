"""ONNX spellings of constant-index gathers that engines run as slicing or resizing, not as an index lookup.

rlx's importers write ``roll``, strided slices (``x[:, ::2]``), flips and the interpolations of
``F.interpolate`` as ``gather`` with a constant index (one gather per interpolation tap, the taps
weighted and summed). Exported as ONNX ``Gather``, OpenVINO runs each as a generic lookup (SwinV1 at the
zoo's size: 6 of them cost ~30 us a call); torch's own ONNX file has Slice / Concat / Resize there.

- a ``gather`` whose constant 1-D index is an arithmetic run (step != 0) is one ``Slice``; the identity
  run (0, 1, ..., n-1) is no node at all; a rotation (``(arange(n) + s) % n``, torch's ``roll``) is
  ``Concat`` of two ``Slice`` s.
- a sum of constant-weighted gathers of one tensor along one spatial axis (NCHW, axis 2 or 3) whose
  combined ``[n_out, n_in]`` interpolation matrix equals ONNX ``Resize``'s linear matrix for one coordinate
  transformation mode is that ``Resize`` (with ``sizes``); the two axes of a bilinear resize written one after
  the other become one ``Resize``. The check is on the matrix itself, so whatever wrote the taps, the
  Resize computes the same values (to float rounding). SegFormer (zoo size, 1 thread): OpenVINO 107 ->
  87 us a call, onnxruntime 150 -> 102 us.

The gathers and products a Resize reads past are left unread and swept by the exporter
(:func:`rlx.backends.onnx.export_fusable.drop_unread`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.backends.onnx.exporter import EXPORTERS, constant_of, exporter
from rlx.ir.dtype import DType
from rlx.ir.graph import Node

_PLAIN_GATHER = EXPORTERS["gather"]
_PLAIN_BINARY = EXPORTERS["binary"]
_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")  # tried in this order
_RESIZE_DTYPES = (DType.F32, DType.F16)  # onnxruntime's CPU Resize has no float64 kernel
_ATOL = 1e-6  # the taps are float32 numbers of the same formula: they agree to ~1e-7


def _static_index(ex: Any, node: Node) -> tuple[np.ndarray, int, int] | None:
    """(index wrapped into [0, n), axis, n) of a gather with a constant 1-D index, all in range; else None."""
    shape = ex.g.node(node.inputs[0]).shape
    axis = node.attrs["axis"] % len(shape)
    idx = constant_of(ex, node.inputs[1])
    n = shape[axis]
    if idx is None or idx.ndim != 1 or not idx.size or not isinstance(n, int) or idx.dtype.kind not in "iu":
        return None
    idx = idx.astype(np.int64)
    if idx.min() < -n or idx.max() >= n:  # out of range: the plain Gather keeps rlx's error path
        return None
    return np.where(idx < 0, idx + n, idx), axis, n


def _slice(ex: Any, x: str, axis: int, start: int, end: int, step: int = 1) -> str:
    return ex.node("Slice", [x, ex.ints([start]), ex.ints([end]), ex.ints([axis]), ex.ints([step])])


@exporter("gather")
def _gather(ex, node, ins):
    found = _static_index(ex, node)
    if found is None:
        return _PLAIN_GATHER(ex, node, ins)
    idx, axis, n = found
    steps = np.diff(idx)
    if len(idx) == 1 or (steps[0] != 0 and np.all(steps == steps[0])):
        step = int(steps[0]) if len(idx) > 1 else 1
        if step == 1 and len(idx) == n:  # the identity
            return ins[0]
        last = int(idx[-1]) + (1 if step > 0 else -1)
        return _slice(ex, ins[0], axis, int(idx[0]), last if last >= 0 else -n - 1, step)
    shift = int(idx[0])
    if len(idx) == n and np.array_equal(idx, (np.arange(n) + shift) % n):  # a roll
        return ex.node("Concat", [_slice(ex, ins[0], axis, shift, n), _slice(ex, ins[0], axis, 0, shift)], axis=axis)
    return _PLAIN_GATHER(ex, node, ins)


# ------------------------------------------------------------------ interpolation taps as Resize
def _tap(ex: Any, vid: int, dtype: DType) -> tuple[int, int, np.ndarray, np.ndarray] | None:
    """(source, axis, index, weight per output row) of ``gather(x, c)`` or ``gather(x, c) * w`` along a
    spatial axis of a rank-4 tensor, ``w`` a constant broadcasting along that axis only; else None."""
    node = ex.g.node(vid)
    weight: np.ndarray | None = None
    if node.op == "binary" and node.attrs["op"] == "mul" and node.dtype == dtype:
        for g_id, w_id in (node.inputs, node.inputs[::-1]):
            w = constant_of(ex, w_id)
            if w is not None and ex.g.node(g_id).op == "gather":
                node, weight = ex.g.node(g_id), w
                break
        else:
            return None
    if node.op != "gather" or node.dtype != dtype or len(ex.g.node(node.inputs[0]).shape) != 4:
        return None
    found = _static_index(ex, node)
    if found is None or found[1] not in (2, 3):
        return None
    idx, axis, _ = found
    rows = len(idx)
    if weight is None:
        return node.inputs[0], axis, idx, np.ones(rows)
    if weight.ndim > 4 or weight.size not in (1, rows):
        return None
    aligned = weight.reshape((1,) * (4 - weight.ndim) + weight.shape)
    if weight.size == rows and rows > 1 and aligned.shape[axis] != rows:
        return None
    return node.inputs[0], axis, idx, aligned.reshape(-1).astype(np.float64) * np.ones(rows)


def _taps(ex: Any, vid: int, dtype: DType, depth: int = 0) -> list[tuple[int, int, np.ndarray, np.ndarray]] | None:
    """The taps of a sum of weighted gathers (nested ``add`` nodes), or None."""
    node = ex.g.node(vid)
    if node.op == "binary" and node.attrs["op"] == "add" and node.dtype == dtype and depth < 8:
        a = _taps(ex, node.inputs[0], dtype, depth + 1)
        b = _taps(ex, node.inputs[1], dtype, depth + 1) if a is not None else None
        return a + b if a is not None and b is not None else None
    tap = _tap(ex, vid, dtype)
    return [tap] if tap is not None else None


def linear_matrix(n_in: int, n_out: int, mode: str) -> np.ndarray:
    """ONNX Resize's linear interpolation along one axis as a ``[n_out, n_in]`` matrix (``sizes`` given, so
    the scale is ``n_out / n_in``; source coordinates clamped to the axis, as the spec's edge padding)."""
    y = np.arange(n_out, dtype=np.float64)
    scale = n_out / n_in
    if mode == "align_corners":
        x = y * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "pytorch_half_pixel" and n_out == 1:
        x = np.zeros(n_out)
    else:
        x = (y + 0.5) / scale - 0.5
    x = np.clip(x, 0, n_in - 1)
    i0 = np.floor(x).astype(np.int64)
    lam = x - i0
    m = np.zeros((n_out, n_in))
    m[np.arange(n_out), i0] += 1 - lam
    m[np.arange(n_out), np.minimum(i0 + 1, n_in - 1)] += lam
    return m


def resample(ex: Any, vid: int, dtype: DType) -> tuple[int, dict[int, int], str] | None:
    """(source, {axis: output size}, coordinate mode) when ``vid`` is a linear resize of a rank-4 tensor along
    one or (nested) two spatial axes, else None."""
    taps = _taps(ex, vid, dtype)
    if taps is None or len(taps) < 2 or len({(t[0], t[1]) for t in taps}) != 1:
        return None
    src, axis = taps[0][0], taps[0][1]
    n_in, n_out = ex.g.node(src).shape[axis], len(taps[0][2])
    if not isinstance(n_in, int) or any(len(t[2]) != n_out for t in taps):
        return None
    m = np.zeros((n_out, n_in))
    for _, _, idx, w in taps:
        np.add.at(m, (np.arange(n_out), idx), w)
    mode = next((md for md in _MODES if np.allclose(m, linear_matrix(n_in, n_out, md), rtol=0, atol=_ATOL)), None)
    if mode is None:
        return None
    inner = resample(ex, src, dtype)
    if inner is not None and axis not in inner[1] and inner[2] == mode:  # the other axis, same rule: one Resize
        return inner[0], {**inner[1], axis: n_out}, mode
    return src, {axis: n_out}, mode


@exporter("binary")
def _binary(ex, node, ins):
    found = None
    if node.attrs["op"] == "add" and node.dtype in _RESIZE_DTYPES and ex.opset >= 11 and node.shape.is_static:
        found = resample(ex, node.id, node.dtype)
    if found is None:
        return _PLAIN_BINARY(ex, node, ins)
    src, sizes, mode = found
    shape = list(ex.g.node(src).shape)
    for axis, n in sizes.items():
        shape[axis] = n
    return ex.node("Resize", [ex.names[src], "", "", ex.ints(shape)], mode="linear", coordinate_transformation_mode=mode)
