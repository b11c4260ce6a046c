"""Planner speed and quality: planning time at ~1k / 10k / 50k buffers; arena vs no reuse vs lower bound.

Run: .venv/bin/python benchmarks/plan_speed.py [--sizes 1000,10000,50000] [--svg DIR]

Synthetic graphs mix widths (256 B .. 8 KiB rows), elementwise chains (in place), long
residual skips, concat / contiguous-narrow pairs (views) and matmuls; the model graphs
are the ones of tests/lir (12-layer transformer, ResNet, U-Net, MLP training step) plus a
BERT-base-sized transformer (planned only).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lir"))

import rlx
from rlx.lir import plan


def synthetic(n_buffers: int, seed: int = 0) -> rlx.Graph:
    rng = np.random.default_rng(seed)
    g = rlx.Graph(f"synthetic{n_buffers}")
    widths = [1, 2, 4, 8, 16, 32]
    pools = {w: [g.input(f"x{w}", (w, 64))] for w in widths}
    ws = g.param("w", (64, 64))
    scale = g.constant(np.float32(0.01), name="scale")  # one shared scalar (each fresh one would be a 64 B slot)
    count = 0
    while count < n_buffers:
        w = widths[int(rng.integers(0, len(widths)))]
        pool = pools[w]
        a = pool[-1]
        r = rng.random()
        if r < 0.35:
            v = g.tanh(a) if rng.random() < 0.5 else g.exp(a * scale)
        elif r < 0.6:
            back = min(len(pool), int(rng.integers(1, 64)))
            v = a + pool[-back]                       # residual skip, sometimes long
        elif r < 0.75 and w < 32:
            both = g.concat([a, pool[-min(len(pool), 2)]], axis=0)   # [2w, 64]
            pools[2 * w].append(both)
            v = g.narrow(both, 0, w, w)               # contiguous narrow: a view
        else:
            v = g.matmul(a, ws)
        pool.append(v)
        count += 1
    g.set_outputs([pools[w][-1] for w in widths])
    return g


def row(name: str, g: rlx.Graph, **kw) -> str:
    t0 = time.perf_counter()
    lir = plan(g, **kw)
    dt = time.perf_counter() - t0
    p = lir.plan
    n_buf = len(p.lifetimes)
    place = sum(p.timings.values())
    return (f"| {name:22.22s} | {len(g):6d} | {n_buf:6d} | {dt:7.2f} | {place:7.2f} | {p.arena_size:12d} | {p.total_unshared_bytes:12d} "
            f"| {p.lower_bound:12d} | {p.lower_bound_aligned:12d} | {p.ratio:8.4f} | {p.total_unshared_bytes / p.lower_bound:10.2f} "
            f"| {p.heuristic:7s} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--svg", default=None, help="write a picture of each model plan into this folder")
    args = ap.parse_args()
    head = ("| graph                  |  nodes | roots  | plan s  | place s | arena B      | no reuse B   | lower bound B"
            " | LB aligned B | arena/LB | noreuse/LB | best    |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for n in [int(s) for s in args.sizes.split(",") if s]:
        print(row(f"synthetic {n}", synthetic(n)), flush=True)
    from lir_models import MODELS, transformer

    for name, build in MODELS.items():
        g, _, _ = build()
        print(row(name, g), flush=True)
        print(row(name + " (acts only)", g, inputs="outside", params="outside", constants="outside"), flush=True)
        if args.svg:
            os.makedirs(args.svg, exist_ok=True)
            plan(g).draw(os.path.join(args.svg, f"{name}.svg"))
    g, _, _ = transformer(layers=12, batch=1, seq=128, d=768, heads=12, ffn=3072)
    print(row("bert-base size", g), flush=True)
    print(row("bert-base (acts only)", g, inputs="outside", params="outside", constants="outside"), flush=True)


if __name__ == "__main__":
    main()
