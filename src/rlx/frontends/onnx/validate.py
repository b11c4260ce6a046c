"""Structural checks of one ONNX node against its schema, done in Python before any converter runs.

onnx's own checker and shape inference are C++ and can crash the process on a malformed
node, so rlx checks what its converters rely on itself: every required input is given,
no more inputs / outputs than the schema has slots for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from rlx.frontends.onnx.loading import onnx_module
from rlx.ir.onnx_format import OnnxFormatError

_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2


@functools.lru_cache(maxsize=4096)
def _slots(op_type: str, opset: int) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
    """(input options, variadic input minimum, output options) of the schema, or None when onnx has none."""
    onnx = onnx_module()
    try:
        schema = onnx.defs.get_schema(op_type, max(int(opset), 1), "")
    except Exception:
        return None
    ins = tuple(int(f.option.value) for f in schema.inputs)
    outs = tuple(int(f.option.value) for f in schema.outputs)
    min_var = int(schema.min_input) - (len(ins) - 1) if ins and ins[-1] == _VARIADIC else 0
    return ins, max(min_var, 0), outs


def check_arity(node: Any, ins: Sequence[Any], opset: int) -> None:
    """Refuse a node that lacks a required input or has more inputs / outputs than its schema allows."""
    slots = _slots(node.op_type, opset) if node.domain in ("", "ai.onnx") else None
    if slots is None:
        return
    formal, min_var, outs = slots
    variadic = bool(formal) and formal[-1] == _VARIADIC
    if not variadic and len(ins) > len(formal):
        raise OnnxFormatError(f"{len(ins)} inputs, but {node.op_type}-{opset} takes at most {len(formal)}")
    for i, option in enumerate(formal):
        if option == _SINGLE and (i >= len(ins) or ins[i] is None):
            raise OnnxFormatError(f"input {i} of {node.op_type}-{opset} is required but not given")
        if option == _VARIADIC:
            given = [v for v in ins[i:] if v is not None]
            if len(given) < min_var or len(given) != len(ins[i:]):
                raise OnnxFormatError(f"{node.op_type}-{opset}: its variadic inputs from {i} are missing or empty")
    if outs and outs[-1] != _VARIADIC and len(node.output) > len(outs):
        raise OnnxFormatError(f"{len(node.output)} outputs, but {node.op_type}-{opset} has at most {len(outs)}")
