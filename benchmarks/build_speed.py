"""Build + verify + print speed of transformer-like MIR graphs, next to jax.make_jaxpr.

Run: python benchmarks/build_speed.py  (needs jax for the peer column; prints a table).
Target (issue 2): build + verify >= 50k nodes/s; time per node at 100k within 1.5x of 2k.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table  # noqa: E402

import rlx  # noqa: E402

B, S, H, D = 2, 16, 4, 8
E = H * D


def build_rlx(layers: int) -> rlx.Graph:
    g = rlx.Graph("transformer")
    x = g.input("x", (B, S, E))
    for i in range(layers):
        p = {n: g.param(f"l{i}.{n}", shape) for n, shape in (
            ("ln1_g", (E,)), ("ln1_b", (E,)), ("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)), ("wo", (E, E)),
            ("ln2_g", (E,)), ("ln2_b", (E,)), ("w1", (E, 4 * E)), ("b1", (4 * E,)), ("w2", (4 * E, E)))}
        h = g.layer_norm(x, p["ln1_g"], p["ln1_b"])

        def heads(t):
            return g.transpose(g.reshape(t, [B, S, H, D]), perm=[0, 2, 1, 3])

        q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
        scores = g.matmul(q, g.transpose(k, perm=[0, 1, 3, 2])) * (D**-0.5)
        att = g.matmul(g.softmax(scores, axis=-1), v)
        att = g.reshape(g.transpose(att, perm=[0, 2, 1, 3]), [B, S, E])
        x = x + att @ p["wo"]
        f = g.gelu(g.layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"]) @ p["w2"]
        x = x + f
    g.set_outputs([x])
    return g


def jax_equations(layers: int) -> tuple[int, float]:
    import jax
    import jax.numpy as jnp

    def layer_norm(t, gamma, beta):
        mu = t.mean(-1, keepdims=True)
        var = ((t - mu) ** 2).mean(-1, keepdims=True)
        return (t - mu) / jnp.sqrt(var + 1e-5) * gamma + beta

    def model(x, params):
        for p in params:
            h = layer_norm(x, p["ln1_g"], p["ln1_b"])

            def heads(t):
                return t.reshape(B, S, H, D).transpose(0, 2, 1, 3)

            q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
            att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * D**-0.5, axis=-1) @ v
            x = x + att.transpose(0, 2, 1, 3).reshape(B, S, E) @ p["wo"]
            x = x + jax.nn.gelu(layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"], approximate=False) @ p["w2"]
        return x

    shapes = {"ln1_g": (E,), "ln1_b": (E,), "wq": (E, E), "wk": (E, E), "wv": (E, E), "wo": (E, E),
              "ln2_g": (E,), "ln2_b": (E,), "w1": (E, 4 * E), "b1": (4 * E,), "w2": (4 * E, E)}
    params = [{k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in shapes.items()} for _ in range(layers)]
    x = jax.ShapeDtypeStruct((B, S, E), jnp.float32)
    t0 = time.perf_counter()
    jaxpr = jax.make_jaxpr(model)(x, params)
    elapsed = time.perf_counter() - t0
    return len(jaxpr.jaxpr.eqns), elapsed


def main() -> None:
    nodes_per_layer = len(build_rlx(1)) - 1
    rows = []
    per_node = {}
    for target in (2_000, 20_000, 100_000):
        layers = max(1, target // nodes_per_layer)
        t0 = time.perf_counter()
        g = build_rlx(layers)
        t1 = time.perf_counter()
        rlx.verify(g)
        t2 = time.perf_counter()
        str(g)
        t3 = time.perf_counter()
        n = len(g)
        rate = n / (t2 - t0)
        per_node[target] = (t2 - t0) / n
        try:
            eqns, jt = jax_equations(layers)
            jax_rate, ratio = eqns / jt, rate / (eqns / jt)
        except ImportError:
            jax_rate, ratio = float("nan"), float("nan")
        rows.append([n, n / (t1 - t0), n / (t2 - t1), n / (t3 - t2), rate, jax_rate, ratio])
    print_table(["nodes", "build/s", "verify/s", "print/s", "build+verify/s", "jax eqns/s", "rlx/jax"], rows)
    print(f"\ntime per node at 100k / at 2k: {per_node[100_000] / per_node[2_000]:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
