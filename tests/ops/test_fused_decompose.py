"""Every fused op decomposes into primitive MIR ops that compute the same values.

Parametrized over the registry, so a new fused op without a ``decompose`` hook, or without
an op case to exercise it, fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect

FUSED = [op.name for op in rlx.all_ops() if op.level == "fused"]
CASES = collect().cases


def unfuse(g: rlx.Graph) -> rlx.Graph:
    """Copy ``g`` into a fresh graph, replacing each fused node by its decomposition."""
    out = rlx.Graph(f"{g.name}_unfused")
    remap: dict[int, int] = {}
    for node in g.nodes:
        if node.id in remap:  # a result of a decomposed multi-result node
            continue
        opdef = rlx.get_op(node.op)
        operands = [out.value(remap[i]) for i in node.inputs]
        if opdef.level == "fused":
            made = opdef.decompose(out, operands, node.attrs)
            values = list(made) if node.extra_types else [made]  # one per result
            got = tuple(v.type for v in values)
            assert got == node.types, f"{node.op}: decomposition gives {got}, the op gives {node.types}"
        else:
            values = [out.append(node.op, operands, node.attrs, name=node.name)]
        for r, value in enumerate(values):
            remap[node.id + r] = value.id
    out.set_outputs([remap[i] for i in g.output_ids])
    return out


def _is_f64(case) -> bool:
    return all(a.dtype == np.float64 for a in case.feed.values() if a.dtype.kind == "f")


@pytest.mark.parametrize("op", FUSED)
def test_fused_op_decomposes_to_primitives(op):
    opdef = rlx.get_op(op)
    assert opdef.decompose is not None, f"fused op {op!r} has no decompose hook"
    cases = [c for c in CASES if c.op == op]
    assert cases, f"fused op {op!r} has no op case to check its decomposition on"
    assert any(_is_f64(c) for c in cases), f"fused op {op!r} needs an f64 case for the 1e-10 check"
    for case in cases:
        g, _ = case.graph()
        flat = unfuse(g)
        rlx.verify(flat)
        assert not [n.op for n in flat.nodes if rlx.get_op(n.op).level == "fused"], str(flat)
        inputs, params = case.split_feed()
        tol = 1e-10 if _is_f64(case) else 1e-5
        for fused, prim in zip(rlx.run(g, inputs, params), rlx.run(flat, inputs, params)):
            assert fused.dtype == prim.dtype
            np.testing.assert_allclose(prim.astype(np.float64), fused.astype(np.float64), rtol=tol, atol=tol, err_msg=case.id)
