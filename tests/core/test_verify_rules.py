"""verify rejects each broken rule with a message naming the node; it re-derives every type."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

import rlx
from rlx.ir.graph import Node
from rlx.ir.opdef import OpDef


def _mlp() -> rlx.Graph:
    g = rlx.Graph("mlp")
    x = g.input("x", (2, 3))
    y = g.tanh(x * 2.0, name="act")
    g.set_outputs([y])
    return g


def _tamper(g: rlx.Graph, node_id: int, **changes) -> rlx.Graph:
    """A copy of g with one node replaced (bypassing every builder check)."""
    bad = rlx.Graph(g.name, g.stage)
    for node in g.nodes:
        node = replace(node, **changes) if node.id == node_id else node
        bad.append(node.op, node.inputs, node.attrs, name=node.name, prov=node.prov, type=node.types, check=False)
    bad.set_outputs([o for o in g.output_ids if o < len(bad)])
    return bad


def _fails(g: rlx.Graph, *needles: str) -> str:
    with pytest.raises(rlx.VerifyError) as info:
        rlx.verify(g)
    text = str(info.value)
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text}"
    return text


def test_valid_graph_passes():
    assert rlx.verify(_mlp()) is not None


def test_wrong_arity():
    g = _mlp()
    _fails(_tamper(g, 3, inputs=(2, 0)), "node %3 (activation", "expects 1 operands")


def test_unknown_attribute():
    g = _mlp()
    attrs = MappingProxyType({**g.node(3).attrs, "alpha": 1.0})
    _fails(_tamper(g, 3, attrs=attrs), "node %3", "unknown attribute 'alpha'")


def test_wrongly_typed_attribute():
    g = _mlp()
    _fails(_tamper(g, 3, attrs=MappingProxyType({"kind": 7})), "node %3", "activation.kind: expected str")


def test_forward_reference():
    g = _mlp()
    _fails(_tamper(g, 2, inputs=(0, 3)), "node %2", "forward reference")


def test_shape_mismatch():
    g = _mlp()
    _fails(_tamper(g, 3, type=rlx.TensorType((3, 2), "f32")), "node %3 (activation 'act')", "[3, 2] f32", "[2, 3] f32")


def test_missing_operand_and_output():
    g = _mlp()
    bad = _tamper(g, 2, inputs=(0, 17))
    _fails(bad, "operand %17 does not exist")
    bad2 = rlx.Graph("o")
    bad2.append("input", (), {"name": "x", "shape": (1,), "dtype": rlx.f32}, type=rlx.TensorType((1,), "f32"), check=False)
    bad2._outputs = [4]
    _fails(bad2, "graph output %4 does not exist")


def test_hir_op_in_mir_graph(temporary_op):
    temporary_op(OpDef(name="test_hir_block", family="test", arity=1, level="hir", operands=("x",),
                      infer=lambda ins, attrs: ins[0], kernel=lambda a, at, o: a[0], doc="test-only HIR block"))
    h = rlx.Graph("h", stage="hir")
    x = h.input("x", (2,))
    h.set_outputs([h.test_hir_block(x)])
    rlx.verify(h)  # legal at HIR
    m = rlx.Graph("h", stage="mir")
    for node in h.nodes:
        m.append(node.op, node.inputs, node.attrs, name=node.name, type=node.types, check=False)
    _fails(m, "node %1 (test_hir_block)", "HIR op 'test_hir_block' is not allowed in a MIR graph")


def test_all_errors_collected_with_context():
    g = _mlp()
    bad = _tamper(_tamper(g, 3, attrs=MappingProxyType({"kind": "nope"})), 2, type=rlx.TensorType((9,), "f32"))
    with pytest.raises(rlx.VerifyError) as info:
        rlx.verify(bad)
    assert len(info.value.errors) >= 2
    assert ">> %2 = binary" in str(info.value)  # neighbouring text lines are shown


def test_unknown_op_is_reported():
    g = rlx.Graph("u")
    g.append("no_such_op", (), {}, type=rlx.TensorType((), "f32"), check=False)
    _fails(g, "unknown op 'no_such_op'")


def test_duplicate_leaf_names_rejected_at_build():
    g = rlx.Graph("d")
    g.input("x", (1,))
    with pytest.raises(rlx.RlxError, match="already has an input or param named 'x'"):
        g.param("x", (1,))


def test_node_is_immutable():
    g = _mlp()
    with pytest.raises(AttributeError):
        g.node(0).op = "param"  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.node(3).attrs["kind"] = "exp"  # type: ignore[index]
    assert isinstance(g.node(0), Node)
    assert np.asarray(g.nodes[1].attrs["value"].array).flags.writeable is False
