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


def run() -> list[np.ndarray]:
    return rlx.run(block(), {"x": np.zeros((2, 8), np.float32)})
