"""The one lowering table (rlx.backends.lowering_table) behind the jax and torch backends.

Classification comes from the registry (no op-name lists): a test-only fused op is decomposed
by both backends as soon as it is registered, multi-result decompositions give every result
(torch used to keep only the first), rows are the default lowerings and overrides replace them.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.opdef import OpDef, all_ops
from rlx.ir.shape import TensorType
from rlx.ops.rows import ROWS


def _split_op() -> OpDef:
    """(2x, x + 1) of a float x: a multi-result fused op known only by its decomposition and kernel."""
    def infer(ins, attrs):
        return ins[0], TensorType(ins[0].shape, ins[0].dtype)

    def decompose(g, operands, attrs):
        x = g.value(operands[0])
        return x * g.scalar(2.0, x.dtype), x + g.scalar(1.0, x.dtype)

    return OpDef(name="test_split_pair", family="fused", arity=1, operands=("x",), infer=infer,
                 kernel=lambda args, attrs, out: (args[0] * 2, args[0] + 1), decompose=decompose, doc="test op")


def _graph():
    g = rlx.Graph("pair")
    x = g.input("x", (2, 3))
    a, b = g.results(g.append("test_split_pair", [x]))
    g.set_outputs([a - b, b])
    return g


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_multi_result_decomposition_gives_every_result(backend, temporary_op):
    pytest.importorskip(backend)
    temporary_op(_split_op())
    table = _table(backend)
    assert "test_split_pair" in table.decomposed and table.how("test_split_pair") == "decomposed"
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    got = rlx.compile(_graph(), backend=backend).run({"x": x})
    np.testing.assert_allclose(got[0], x - 1.0, rtol=1e-6)  # 2x - (x + 1), from both results
    np.testing.assert_allclose(got[1], x + 1.0, rtol=1e-6)


def _table(backend):
    if backend == "jax":
        from rlx.backends.jax.table import TABLE
    else:
        from rlx.backends.torch_backend.lowering import TABLE
    return TABLE


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_classification_is_derived_from_the_registry(backend):
    pytest.importorskip(backend)
    table = _table(backend)
    for op in all_ops():
        how = table.coverage().get(op.name)
        assert how is not None, f"{op.name} has no {backend} path"
        if op.level == "hir":
            assert how.startswith("refused")
        if op.level == "source" and op.kernel is None:
            assert how == "leaf"
        if how == "decomposed":
            assert op.decompose is not None and op.family in table.decompose_families
    for name in ROWS:  # every row is lowered (by the row itself or a native override)
        assert table.how(name) == "lowered"


def test_overrides_replace_rows_and_rows_stay_reachable():
    pytest.importorskip("torch")
    from rlx.backends.torch_backend.lowering import TABLE

    assert TABLE.lowerings["softmax"].__name__ == "_softmax"  # torch.softmax override
    assert TABLE.lowerings["rms_norm"].row is ROWS["rms_norm"]  # the row itself
    assert TABLE.row("softmax").row is ROWS["softmax"]
