"""The ``rlx`` command line."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def demo(args: argparse.Namespace) -> int:
    """Build, verify, print and run a small MLP."""
    import rlx

    g = rlx.Graph("demo_mlp")
    x = g.input("x", (4, 16))
    w1, b1 = g.param("w1", (16, 32)), g.param("b1", (32,))
    w2, b2 = g.param("w2", (32, 8)), g.param("b2", (8,))
    h = g.gelu(g.matmul(x, w1) + b1)
    y = g.softmax(g.matmul(h, w2) + b2, axis=-1) if hasattr(g, "softmax") else g.matmul(h, w2) + b2
    g.set_outputs([y])
    rlx.verify(g)
    print(g)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    params = {k: (rng.standard_normal(v.shape) * 0.1).astype(np.float32) for k, v in g.params().items()}
    (out,) = rlx.run(g, feed, params)
    print(f"\nran {len(g)} nodes; output {out.shape} {out.dtype}, row sums {np.round(out.sum(-1), 4)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rlx", description="rlx tensor IR tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="build, lower, optimize, plan, run and train a small model").set_defaults(func=demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
