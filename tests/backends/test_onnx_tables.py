"""The ONNX mapping tables against the op registry: no MIR op is silently missing from export."""

from __future__ import annotations

import pytest

import rlx

pytest.importorskip("onnx")

from rlx.backends.onnx.exporter import EXPORTERS, REFUSED
from rlx.frontends.onnx.importer import CONVERTERS


def _exportable_ops():
    """Ops a MIR graph handed to export may contain (HIR blocks are lowered first; test ops skipped)."""
    return [op for op in rlx.all_ops() if op.level != "hir" and op.family not in ("test", "custom")]


def test_every_mir_op_is_exported_or_refused_with_a_reason():
    missing = []
    for op in _exportable_ops():
        if op.name in EXPORTERS:
            continue
        if op.level == "fused" and op.decompose is not None:
            continue  # unfused through its decompose hook before export
        if op.name in REFUSED and REFUSED[op.name].strip():
            continue
        missing.append(op.name)
    assert not missing, f"MIR ops neither exported nor in exporter.REFUSED (with a reason): {missing}"


def test_tables_name_registered_ops_only():
    names = {op.name for op in rlx.all_ops()}
    assert set(EXPORTERS) <= names, sorted(set(EXPORTERS) - names)
    assert set(REFUSED) <= names, sorted(set(REFUSED) - names)
    assert not set(EXPORTERS) & set(REFUSED), sorted(set(EXPORTERS) & set(REFUSED))


def test_importer_table_covers_the_core_onnx_ops():
    core = {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "Relu", "Reshape", "Transpose", "Concat", "Slice",
            "Gather", "Softmax", "LayerNormalization", "BatchNormalization", "MaxPool", "AveragePool", "Einsum", "Pad",
            "Tile", "Split", "Squeeze", "Unsqueeze", "Flatten", "Clip", "HardSigmoid", "LogSoftmax", "Shape",
            "ConstantOfShape", "Range", "GlobalAveragePool", "ReduceMean", "Where", "Cast"}
    assert core <= set(CONVERTERS), sorted(core - set(CONVERTERS))
