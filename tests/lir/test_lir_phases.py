"""derive_phases reads the ops' own flags: every compute-bound op (fused, dequant, grouped,
LoRA matmuls too) ends the steady phase, and top_k / sample start the epilogue."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.lir.plan import derive_phases


def _phases(build):
    g = rlx.Graph("phases")
    x = g.input("x", [4, 8], rlx.f32)
    tail_in = build(g, x)
    head = g.relu(tail_in)  # after the last compute op
    g.set_outputs([head])
    got = derive_phases(g, list(range(len(g.nodes))))
    return g, got, tail_in.id, head.id


def _w(g, *shape):
    return g.constant(np.ones(shape, np.float32))


@pytest.mark.parametrize("name, build", [
    ("matmul", lambda g, x: g.matmul(g.relu(x), _w(g, 8, 3))),
    ("fused_matmul_bias_act", lambda g, x: g.fused_matmul_bias_act(g.relu(x), _w(g, 8, 3), _w(g, 3))),
    ("lora_matmul", lambda g, x: g.lora_matmul(g.relu(x), _w(g, 8, 3), _w(g, 8, 2), _w(g, 2, 3))),
    ("grouped_matmul", lambda g, x: g.grouped_matmul(g.relu(x), _w(g, 2, 8, 3), g.constant(np.array([0, 1, 1, 0], np.int32)))),
    ("dequant_matmul", lambda g, x: g.dequant_matmul(g.relu(x), g.constant(np.ones((8, 3), np.int8)), _w(g, 1, 3),
                                                      _w(g, 1, 3), scheme="int8_block", block_size=8)),
])
def test_a_compute_bound_op_ends_the_steady_phase(name, build):
    g, phases, compute, tail = _phases(build)
    assert g.nodes[compute].op == name
    relu_before = next(n.id for n in g.nodes if n.op == "activation" and n.id < compute)
    assert phases[0] == "prologue"
    assert phases[relu_before] == "steady" and phases[compute] == "steady"
    assert phases[tail] == "epilogue"


def test_top_k_and_what_follows_are_epilogue():
    """top_k scheduled before the last matmul still opens the epilogue (it is output-side work)."""
    g = rlx.Graph("topk")
    x = g.input("x", [4, 8], rlx.f32)
    h = g.relu(x)
    idx = g.top_k(h, k=2)
    y = g.matmul(h, _w(g, 8, 8))
    g.set_outputs([g.cast(idx, to="f32"), y])
    phases = derive_phases(g, list(range(len(g.nodes))))
    assert phases[h.id] == "steady"
    assert phases[idx.id] == "epilogue" and phases[y.id] == "epilogue"
