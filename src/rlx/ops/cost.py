"""Multiply-accumulate rules of the contraction ops (``OpDef.macs``), shared by the ops that
contract the same way; ``rlx.cli.summary`` counts 2 FLOPs per MAC.

Each rule is ``macs(operand shapes, result shape, attrs) -> int | None``; a symbolic size in a
shape the rule needs gives None (unknown), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlx.ir.opdef import Dims


def numel(shape: Dims) -> int | None:
    """Element count of ``shape``; None when a dimension is symbolic."""
    return None if any(isinstance(d, str) for d in shape) else math.prod(shape)


def last_dim_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """Result elements × operand 0's last dimension (matmul and its fused / quantised forms, linear)."""
    n, k = numel(out), ins[0][-1] if ins and len(ins[0]) else 1
    return None if n is None or isinstance(k, str) else n * k


def dot_general_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """Result elements × the product of the lhs contracting dimensions."""
    n, ks = numel(out), [ins[0][a] for a in attrs["lhs_contracting"]]
    return None if n is None or any(isinstance(k, str) for k in ks) else n * math.prod(ks)


def conv_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """Result elements × one filter's size (weight [O, I/groups, kh, kw]: I/groups·kh·kw)."""
    n, w = numel(out), numel(ins[1][1:])
    return None if n is None or w is None else n * w


def conv_transpose_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """Operand 0's elements × one filter's size (each input element scatters through a filter)."""
    x, w = numel(ins[0]), numel(ins[1][1:])
    return None if x is None or w is None else x * w


def conv_weight_grad_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """The weight gradient (x, dy) -> [O, I/groups, kh, kw]: dy's elements × one filter's size."""
    dy, w = numel(ins[1]), numel(out[1:])
    return None if dy is None or w is None else dy * w


def attention_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """q·kᵀ and p·v: 2 × q's elements × the key length."""
    q = numel(ins[0])
    seq_axis = -2 if attrs.get("layout", "bhsd") == "bhsd" else -3
    sk = ins[1][seq_axis] if len(ins[1]) >= 3 else ins[1][0]
    return None if q is None or isinstance(sk, str) else 2 * q * sk


def swiglu_macs(ins: list[Dims], out: Dims, attrs: Mapping[str, Any]) -> int | None:
    """Rows × (up + gate + down weight elements): operands (x, up_w, gate_w, down_w), gate_w as large as up_w."""
    rows, up, down = numel(ins[0][:-1]), numel(ins[1]), numel(ins[3])
    return None if rows is None or up is None or down is None else rows * (2 * up + down)
