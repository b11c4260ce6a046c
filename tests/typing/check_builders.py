"""Type-checked by mypy in CI ([tool.mypy] in pyproject.toml), never run: the registry's builder
methods are visible to type checkers through src/rlx/ir/_builders.pyi, so a call with the wrong
operand count or an unknown attribute is an error before the code runs."""

import numpy as np

import rlx


def block() -> rlx.Graph:
    g = rlx.Graph("block")
    x = g.input("x", (2, 8))
    h = g.gelu(g.matmul(x, g.param("w", (8, 8))) + g.param("b", (8,)))
    s = g.narrow(h, 1, 0, 4)
    y = g.rms_norm(g.concat([s, s], axis=1), g.param("gamma", (8,)), g.param("beta", (8,)), axis=-1, eps=1e-6)
    g.set_outputs([g.attention(y, y, y, num_heads=2, head_dim=4, mask_kind="causal"), g.cast(y, to="f16")])
    return g


def multi() -> rlx.Value:
    g = rlx.Graph("multi")
    x = g.input("x", (4, 6))
    a, b = g.split(x, axis=1, sizes=[2, 4])               # tuple[Value, ...]
    values, indices = g.top_k(b, k=2, output="both")      # tuple[Value, Value]
    only: rlx.Value = g.top_k(b, k=2, output="values")    # one Value
    total, normed = g.fused_residual_layer_norm(a, a, g.param("g", (2,)), g.param("b", (2,)), with_sum=True)
    return g.add(values + only, g.cast(indices, to="f32")) + total + normed


def run() -> list[np.ndarray]:
    return rlx.run(block(), {"x": np.zeros((2, 8), np.float32)})


def groups(xs: list[rlx.Value], body: rlx.Graph) -> rlx.Value:
    """Operand groups sized by attributes (scan's carries / bcasts / xs) take any count; a scheme
    that needs fewer operands (GGUF dequant_matmul: no scale / zero point) may leave them out."""
    g = rlx.Graph("groups")
    init = g.input("c", (6,))
    last = g.scan(init, *xs, body=body, length=4, num_xs=len(xs))
    both = g.scan(init, init, *xs, body=body, length=4, num_carries=2, num_xs=len(xs))
    w = g.dequant_matmul(init, g.input("wq", (8, 144)), scheme="gguf_q4_k")
    return last + both[0] + w
