"""Optimizer speed: rlx.optimize on transformer-like MIR graphs of about 2k, 20k and 100k nodes.

Run: python benchmarks/optimize_speed.py [--no-check] [--sizes 2000,20000,100000] [--repeat 3]
Target (optimizer issue): time per node at 100k within 1.5x of the time per node at 2k.
The comparison uses the best process CPU time of --repeat interleaved runs per size (on a
shared machine wall time mostly measures the neighbours); the median wall time is shown too.
The graphs are FUSABLE-style (primitive chains the fusion patterns recognise) with some
repeated subexpressions, constant subgraphs and dead branches, so every pass has work.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table

import rlx
from rlx.opt import optimize

B, S, H, D = 2, 8, 2, 8
E = H * D


def build(layers: int) -> rlx.Graph:
    g = rlx.Graph("fusable_transformer")
    x = g.input("x", (B * S, E))
    for i in range(layers):
        p = {n: g.param(f"l{i}.{n}", shape) for n, shape in (
            ("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)), ("wo", (E, E)), ("bo", (E,)),
            ("g1", (E,)), ("b1", (E,)), ("up", (E, 2 * E)), ("gate", (E, 2 * E)), ("down", (2 * E, E)),
            ("g2", (E,)), ("b2", (E,)), ("w3", (E, E)), ("b3", (E,)))}
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]  # shared-input matmuls (QKV)
        scores = g.softmax(g.matmul(q, g.transpose(k, perm=[1, 0])) * (D**-0.5), axis=-1)
        att = g.matmul(scores, v)
        att2 = g.matmul(scores, v)  # repeated subexpression (CSE)
        o = g.add(g.matmul(att, p["wo"]), p["bo"])  # matmul + bias
        h = g.layer_norm(g.add(o, x), p["g1"], p["b1"])  # residual + layer norm
        ff = g.matmul(g.mul(g.matmul(h, p["up"]), g.silu(g.matmul(h, p["gate"]))), p["down"])  # SwiGLU
        c = g.tanh(g.constant(np.full((E,), 0.5, np.float32)) * 2.0)  # constant subgraph (folding)
        x = g.rms_norm(g.add(ff, h), p["g2"], p["b2"])  # residual + rms norm
        x = g.gelu(g.add(g.matmul(x, p["w3"]), p["b3"])) + c + att2 * 0.0  # matmul + bias + gelu
        x = g.reshape(g.reshape(x, new_shape=[B, S, E]), new_shape=[B * S, E])  # reshape of reshape
        g.exp(att)  # dead branch
    g.set_outputs([x])
    return g


def per_layer() -> int:
    return len(build(2)) - len(build(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-check", action="store_true", help="skip the verifier after each pass")
    ap.add_argument("--sizes", default="2000,20000,100000")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the best (least disturbed) one is compared")
    args = ap.parse_args()
    step = per_layer()
    targets = [int(s) for s in args.sizes.split(",")]
    graphs = {t: build(max(1, t // step)) for t in targets}
    cpu: dict[int, list[float]] = {t: [] for t in targets}
    wall: dict[int, list[float]] = {t: [] for t in targets}
    out_nodes = {}
    for _ in range(args.repeat):  # sizes interleaved, so machine noise hits all of them alike
        for t in targets:
            gc.collect()
            w0, c0 = time.perf_counter(), time.process_time()
            opt, _report = optimize(graphs[t], check=not args.no_check)
            cpu[t].append(time.process_time() - c0)
            wall[t].append(time.perf_counter() - w0)
            out_nodes[t] = len(opt)
    rows = []
    per_node = {}
    for t in targets:
        n = len(graphs[t])
        best = min(cpu[t])
        per_node[t] = best / n
        rows.append([n, out_nodes[t], best, statistics.median(wall[t]), 1e6 * best / n])
    print_table(["nodes in", "nodes out", "cpu s (best)", "wall s (median)", "us/node (cpu, best)"], rows)
    sizes = sorted(per_node)
    ratio = per_node[sizes[-1]] / per_node[sizes[0]]
    print(f"time per node at {sizes[-1]} / at {sizes[0]}: {ratio:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
