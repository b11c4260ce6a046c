"""Planner speed and quality: planning time at ~2k / 20k / 100k nodes; arena vs no reuse vs lower bound.

Run: .venv/bin/python benchmarks/plan_speed.py [--sizes 2000,20000,100000] [--repeat 3] [--quick] [--svg DIR]

The yardstick of the plan is not another tool but the bound: "arena/LB" is the arena size over
the lower bound (the most bytes live at once over the schedule; no placement can use less),
target <= 1.05; "noreuse/LB" is what a planner without reuse would need. Plan time is the
median of --repeat interleaved runs (process CPU time).

Synthetic graphs mix widths (256 B .. 8 KiB rows), elementwise chains (in place), long
residual skips, concat / contiguous-narrow pairs (views) and matmuls; the model graphs
are the ones of tests/lir (12-layer transformer, ResNet, U-Net, MLP training step) plus a
BERT-base-sized transformer (planned only).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lir"))

from common import add_common_args, measure, parse_sizes, print_footer, print_header, print_table, verdict

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


def synthetic_nodes(target: int) -> rlx.Graph:
    """A synthetic graph of about ``target`` nodes (about 1.3 nodes per buffer step)."""
    per_step = len(synthetic(1000)) / 1000
    return synthetic(max(10, round((target - 8) / per_step)))


COLUMNS = ["graph", "nodes", "roots", "plan s (cpu)", "place s (wall)", "us/node", "arena B", "no reuse B", "lower bound B",
           "LB aligned B", "arena/LB", "noreuse/LB", "best"]


def row(name: str, g: rlx.Graph, repeat: int, **kw) -> list:
    p = plan(g, **kw).plan
    dt = measure({"plan": lambda: plan(g, **kw)}, max(1, repeat))["plan"].median_cpu
    return [name, len(g), len(p.lifetimes), dt, sum(p.timings.values()), 1e6 * dt / len(g), p.arena_size, p.total_unshared_bytes,
            p.lower_bound, p.lower_bound_aligned, f"{p.ratio:.4f}", p.total_unshared_bytes / p.lower_bound, p.heuristic]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "2000,20000,100000", 3)
    ap.add_argument("--svg", default=None, help="write a picture of each model plan into this folder")
    args = ap.parse_args()
    sizes, repeat = parse_sizes(args.sizes), args.repeat
    if args.quick:
        sizes, repeat = [2000, 20000], 1
    print_header("planner speed and arena / lower bound (plan_speed.py)", f"plan time: median of {repeat} runs, process CPU time")
    rows = [row(f"synthetic {n // 1000}k", synthetic_nodes(n), repeat) for n in sizes]
    from lir_models import MODELS, transformer

    for name, build in MODELS.items():
        g, _, _ = build()
        rows.append(row(name, g, repeat))
        rows.append(row(name + " (acts only)", g, repeat, inputs="outside", params="outside", constants="outside"))
        if args.svg:
            os.makedirs(args.svg, exist_ok=True)
            plan(g).draw(os.path.join(args.svg, f"{name}.svg"))
    g, _, _ = transformer(layers=12, batch=1, seq=128, d=768, heads=12, ffn=3072)
    rows.append(row("bert-base size", g, repeat))
    rows.append(row("bert-base (acts only)", g, repeat, inputs="outside", params="outside", constants="outside"))
    print_table(COLUMNS, rows)
    worst = max(float(r[10]) for r in rows)
    print(f"\nworst arena / lower bound: {worst:.4f} (target <= 1.05: {verdict(worst <= 1.05)})")
    synth = [r for r in rows if r[0].startswith("synthetic")]
    if len(synth) > 1:
        print(f"plan time per node, {synth[-1][0]} / {synth[0][0]}: {synth[-1][5] / synth[0][5]:.2f}x (no target set)")
    print_footer()


if __name__ == "__main__":
    main()
